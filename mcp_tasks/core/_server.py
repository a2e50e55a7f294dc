"""The server side of the protocol, without I/O: `ServerCore.handle(input, now)`.

Theory of operation
-------------------
`ServerCore` holds configuration only: the catalog (every spec with its handler), the
options, the injected id factory, sealing key and poll policy. It keeps no per-request or
per-task state. Everything that happens reaches it as one input (`inputs`: a message
`Received`, a handler's outcome, a task's news, a timer `Due`, ...) with the time `now`
(seconds since the epoch) beside it; `handle` looks the input's kind up in one table and
returns a `Step` (commands, then the reply) or a `Need` (what the shell must fetch or run
before the core can go on: RunTool, GetPrompt, ReadResource, Complete, Listen, FetchTask),
which names the input that answers it.

Incoming requests are checked in the order the conformance suite expects (`_envelope`);
any `ProtocolError` raised on the way becomes the error reply in `_received`, the single
place where peer input is converted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final, overload

import msgspec
from msgspec import UNSET, Raw

from . import _wire as w
from ._catalog import Catalog
from ._catalog_calls import CatalogCalls
from ._compat import CompatibleNames
from ._effects import CancelRequest, Notify, Step
from ._encode import (
    Encoder,
    log_notification,
    progress_notification,
)
from ._envelope import (
    TASK_METHODS,
    TOO_DEEP,
    HttpHeaders,
    check_envelope,
    check_headers,
    check_version_and_method,
    decode_params,
    invalid_params,
    is_request_id,
    message_of,
    request_meta,
    supported_versions,
)
from ._errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ProtocolError,
    RemoteProtocolError,
)
from ._injected import Injected, ServerInjected
from ._internal_error import internal_error_for
from ._listen import Subscriptions
from ._needs import (
    Need,
)
from ._options import ServerOptions, TaskOptions, ToolSpec
from ._parts import Parts
from ._policy import MinPollInterval, PollPolicy
from ._rounds import Rounds
from ._sealing import HmacSealer
from ._tasks import Tasks, progress_text
from ._tools import ToolCalls
from .inputs import (
    INPUTS,
    AnswersArrived,
    CallRefused,
    CompletionReturned,
    Due,
    HandlerMissing,
    Input,
    LeaseLapsed,
    ListChanged,
    ListenEnded,
    ListenRefused,
    ListenStarted,
    LogEmitted,
    OutcomeLost,
    ProgressReported,
    PromptReturned,
    Received,
    ResourceReturned,
    ResourceUpdated,
    RoundReplayed,
    ServerFailed,
    StatusMessageSet,
    StepInput,
    StoreUnreachable,
    TaskAsked,
    TaskChanged,
    TaskFetched,
    TaskProgressed,
    TaskRefused,
    TaskReturned,
    ToolReturned,
)


class ServerCore(CompatibleNames):
    def __init__(
        self,
        *,
        info: w.Implementation,
        tools: Iterable[ToolSpec] = (),
        new_task_id: Callable[[], str],
        state_key: bytes,
        tasks: TaskOptions | None = None,
        options: ServerOptions | None = None,
        poll_policy: PollPolicy | None = None,
        injected: Injected | None = None,
    ) -> None:
        self.info = info
        self.task_options = tasks or TaskOptions()
        self.options = options or ServerOptions()
        fraction = self.task_options.min_poll_fraction
        if poll_policy is None and fraction is not None:
            poll_policy = MinPollInterval(fraction)
        self._own = ServerInjected(new_task_id, HmacSealer(state_key), poll_policy)
        self.injected: Injected = self._own
        """What the core draws from outside itself (`use_injected`)."""
        self._changes = 0
        self._encode = Encoder(info)
        self.catalog = Catalog(
            ttl_ms=self.options.discover_ttl_ms, cache_scope=self.options.cache_scope
        )
        """The one registry: tools, prompts, resources, templates, completions, and the
        handler of each (`Catalog.add_*`)."""
        parts = self._parts = Parts(
            self._encode, self.catalog, self.options, self.task_options, self._own
        )
        """What every part below reads (`use_*` change it there once)."""
        self._rounds = Rounds(parts)
        self._tasks = Tasks(parts)
        self._tools = ToolCalls(parts, self._rounds, self._tasks)
        self._calls = CatalogCalls(parts, self._rounds)
        self._subscriptions = Subscriptions(parts)
        if injected is not None:
            self.use_injected(injected)
        for tool in tools:
            self.add_tool(tool)

    # --- configuration ---------------------------------------------------------------

    def use_injected(self, injected: Injected) -> None:
        """Draw task ids, seals, argument and poll verdicts from `injected` from now on (a
        journal wraps what was there, to write down what each input drew)."""
        self.injected = self._parts.injected = injected
        self.catalog.argument_decoder = injected.decode_arguments

    def use_state_key(self, state_key: bytes) -> None:
        """Seal and open `requestState` with `state_key` (servers sharing tasks share it)."""
        self._own.sealer = HmacSealer(state_key)

    def use_info(self, info: w.Implementation) -> None:
        """Name `info` as the server in replies from now on (a server embedded in another)."""
        self.info = info
        self._encode.use_info(info)
        self._changes += 1

    def use_options(self, options: ServerOptions) -> None:
        """Answer under `options` from now on (cache hints, the `requestState` TTL, header
        leniency, listen limits)."""
        self.options = self._parts.options = options
        self.catalog.use_cache_hints(
            ttl_ms=options.discover_ttl_ms, cache_scope=options.cache_scope
        )
        self._changes += 1

    def use_task_options(self, options: TaskOptions) -> None:
        """Create tasks under `options` from now on (their TTL, poll interval, limits).
        A poll policy made from the old `min_poll_fraction` is made anew from the new one."""
        policy = self._own.poll_policy
        if policy is None or isinstance(policy, MinPollInterval):
            fraction = options.min_poll_fraction
            self._own.poll_policy = None if fraction is None else MinPollInterval(fraction)
        self.task_options = self._parts.task_options = options
        self._changes += 1

    @property
    def poll_policy(self) -> PollPolicy | None:
        return self._own.poll_policy

    @property
    def revision(self) -> int:
        """Grows with every change of configuration (options, info, a registration): a
        journal writes the configuration down again when it moved."""
        return self._changes + self.catalog.revision

    # --- the one entry ---------------------------------------------------------------------

    @overload
    def handle(self, input: Received | ToolReturned, now: float) -> Step | Need: ...
    @overload
    def handle(self, input: StepInput, now: float) -> Step: ...
    @overload
    def handle(self, input: Input, now: float) -> Step | Need: ...
    def handle(self, input: Input, now: float) -> Step | Need:
        """Decide what `input` leads to at `now` (seconds since the epoch): a `Step`
        (commands, then the reply), or a `Need` the shell fulfils and answers with the
        input the need names."""
        try:
            answer = _ANSWERS[type(input)]
        except KeyError:
            raise TypeError(f"the core takes no {type(input).__name__}: not an input") from None
        return answer(self, input, now)

    def completion_result(self, completion: w.Completion) -> w.CompleteResult:
        return self._calls.completion_result(completion)

    # --- a message came in -------------------------------------------------------------

    def _received(self, input: Received, now: float) -> Step | Need:
        """Check one incoming JSON-RPC message and say what happens next. Tasks and
        input rounds are bound to `input.principal`: another principal's requests see
        neither."""
        try:
            message = message_of(input.data)
        except ProtocolError as unreadable:
            return Step(reply=self._encode.error(None, unreadable))
        if (
            message.method is UNSET
            and message.id is not UNSET
            and (message.result is not UNSET or message.error is not UNSET)
        ):
            return Step()  # a response, whatever its id: this server sends no requests
        if message.id is not UNSET and not is_request_id(message.id):
            bad_id = RemoteProtocolError(
                INVALID_REQUEST, "Invalid request: id must be a string or an integer"
            )
            return Step(reply=self._encode.error(None, bad_id))
        is_notification = (
            message.id is UNSET and isinstance(message.method, str) and message.jsonrpc == "2.0"
        )
        try:
            method = check_envelope(message)
            if message.id is UNSET:
                return self._incoming_notification(method, message.params)
            return self._request(
                message.id,
                method,
                message.params,
                now=now,
                headers=input.headers,
                principal=input.principal,
                closing=input.closing,
            )
        except (ProtocolError, RecursionError) as failure:
            if is_notification:
                return Step()  # a notification never gets a reply, not even an error
            if isinstance(failure, RecursionError):
                failure = invalid_params(f"Invalid params: {TOO_DEEP}")
            return Step(
                reply=self._encode.error(None if message.id is UNSET else message.id, failure)
            )

    def _incoming_notification(self, method: str, params: Raw | Any) -> Step:
        if method != "notifications/cancelled" or params is UNSET:
            return Step()  # nothing else a client may notify this server of needs action
        try:
            cancelled = msgspec.json.decode(params, type=w.CancelledNotificationParams)
        except msgspec.ValidationError:
            return Step()
        reason = None if cancelled.reason is UNSET else cancelled.reason
        return Step(effects=(CancelRequest(request_id=cancelled.request_id, reason=reason),))

    def _request(
        self,
        request_id: w.RequestId,
        method: str,
        params: Raw | Any,
        *,
        now: float,
        headers: HttpHeaders | None,
        principal: str | None,
        closing: bool = False,
    ) -> Step | Need:
        raw_params = Raw(b"{}") if params is UNSET else params
        call = _call_params(raw_params) if method == "tools/call" else None
        head = (
            decode_params(raw_params, w.ParamsHead)
            if call is None
            else w.ParamsHead(meta=call.meta, name=call.name)
        )
        legacy = self.options.legacy_sessions
        meta = request_meta(head, method, raw_params, headers, legacy=legacy)
        if headers is not None:
            check_headers(
                headers,
                method,
                head,
                meta,
                accept_missing_task_name=self.options.accept_missing_task_name_header,
            )
        check_version_and_method(method, meta, self.catalog.capabilities, legacy=legacy)
        if method in TASK_METHODS:
            return self._tasks.request(
                request_id, method, raw_params, meta, principal, task_id=head.task_id
            )
        if method == "tools/call":
            return self._tools.call(
                request_id,
                raw_params if call is None else call,
                meta,
                now=now,
                headers=headers,
                principal=principal,
                closing=closing,
            )
        if method == "prompts/get":
            return self._calls.get_prompt(request_id, raw_params, meta, principal, now)
        if method == "resources/read":
            return self._calls.read_resource(request_id, raw_params, meta, principal, now)
        if method == "completion/complete":
            return self._calls.complete(request_id, raw_params, meta)
        if method == "subscriptions/listen":
            return self._subscriptions.listen(request_id, raw_params, meta, principal)
        if method == "server/discover":
            return self._result(request_id, self._discover_result())
        if method == "tools/list":
            decode_params(raw_params, w.ListToolsParams)
            return self._result(request_id, self.catalog.list_tools(self._encode.result_meta))
        decode_params(raw_params, w.PaginatedParams)
        meta_out = self._encode.result_meta
        if method == "prompts/list":
            return self._result(request_id, self.catalog.list_prompts(meta_out))
        if method == "resources/list":
            return self._result(request_id, self.catalog.list_resources(meta_out))
        return self._result(request_id, self.catalog.list_templates(meta_out))

    # --- what the handlers returned ----------------------------------------------------

    def _tool_returned(self, input: ToolReturned, now: float) -> Step | Need:
        return self._tools.returned(input.call, input.outcome, now)

    def _task_refused(self, input: TaskRefused, now: float) -> Step:
        return self._tasks.refused(input, now)

    def _round_replayed(self, input: RoundReplayed, now: float) -> Step:
        return self._tools.replayed(input.need)

    def _call_refused(self, input: CallRefused, now: float) -> Step:
        request_id = input.need.request_id
        assert request_id is not None
        return self._tools.refused_closing(request_id)

    def _prompt_returned(self, input: PromptReturned, now: float) -> Step:
        return self._calls.prompt_returned(input.call, input.outcome, now)

    def _resource_returned(self, input: ResourceReturned, now: float) -> Step:
        return self._calls.resource_returned(input.call, input.outcome, now)

    def _completion_returned(self, input: CompletionReturned, now: float) -> Step:
        return self._calls.completion_returned(input.call, input.outcome)

    # --- tasks -----------------------------------------------------------------------------

    def _task_fetched(self, input: TaskFetched, now: float) -> Step:
        return self._tasks.handle_request(input.request, input.record, now)

    def _task_returned(self, input: TaskReturned, now: float) -> Step:
        record = input.record
        return Step() if record is None else self._tasks.returned(record, input.outcome, now)

    def _task_asked(self, input: TaskAsked, now: float) -> Step:
        return self._tasks.asked(input.record, input.request, now)

    def _status_message_set(self, input: StatusMessageSet, now: float) -> Step:
        return self._tasks.set_status_message(input.record, input.message, now)

    def _task_progressed(self, input: TaskProgressed, now: float) -> Step:
        text = progress_text(input.progress, input.total, input.message)
        return self._tasks.set_status_message(input.record, text, now)

    def _lease_lapsed(self, input: LeaseLapsed, now: float) -> Step:
        return self._tasks.orphaned(input.record, now)

    def _outcome_lost(self, input: OutcomeLost, now: float) -> Step:
        return self._tasks.outcome_lost(input.record, input.waited, now)

    def _handler_missing(self, input: HandlerMissing, now: float) -> Step:
        return self._tasks.handler_missing(input.record, now)

    def _answers_arrived(self, input: AnswersArrived, now: float) -> Step:
        resume = self._tasks.resumed(input.record)
        return Step() if resume is None else Step(effects=(resume,))

    def _due(self, input: Due, now: float) -> Step:
        return self._tasks.expire(input.record, now)

    # --- notifications to the request's client ------------------------------------------

    def _progress_reported(self, input: ProgressReported, now: float) -> Step:
        message = progress_notification(input.meta, input.progress, input.total, input.message)
        return _notify(message)

    def _log_emitted(self, input: LogEmitted, now: float) -> Step:
        return _notify(log_notification(input.meta, input.level, input.data, input.logger))

    # --- subscriptions/listen -----------------------------------------------------------

    def _listen_started(self, input: ListenStarted, now: float) -> Step:
        return _notify(self._subscriptions.acknowledged(input.subscription))

    def _list_changed(self, input: ListChanged, now: float) -> Step:
        return _notify(self._subscriptions.list_changed(input.subscription, input.kind))

    def _resource_updated(self, input: ResourceUpdated, now: float) -> Step:
        return _notify(self._subscriptions.resource_updated(input.subscription, input.uri))

    def _task_changed(self, input: TaskChanged, now: float) -> Step:
        return _notify(self._subscriptions.task_changed(input.subscription, input.record))

    def _listen_ended(self, input: ListenEnded, now: float) -> Step:
        return Step(reply=self._subscriptions.ended(input.subscription))

    def _listen_refused(self, input: ListenRefused, now: float) -> Step:
        reply = self._subscriptions.refused(input.listen, per_principal=input.per_principal)
        return Step(reply=reply)

    # --- replies for the shell's own failures --------------------------------------------

    def _store_unreachable(self, input: StoreUnreachable, now: float) -> Step:
        """It names no store: a URL, a path or a password is for the server's log alone."""
        message = "The task store is unavailable; try again shortly"
        reply = self._encode.retryable(
            input.request_id, INTERNAL_ERROR, message, http_status=503, retry_after_ms=1000
        )
        return Step(reply=reply)

    def _server_failed(self, input: ServerFailed, now: float) -> Step:
        return Step(reply=internal_error_for(input.request_id))

    # --- results --------------------------------------------------------------------------

    def _result(self, request_id: w.RequestId, result: Any) -> Step:
        return Step(reply=self._encode.result(request_id, result))

    def _discover_result(self) -> w.DiscoverResult:
        return w.DiscoverResult(
            supported_versions=supported_versions(self.options.legacy_sessions),
            capabilities={
                "tools": {"listChanged": True},
                **self.catalog.capabilities(),
                "logging": {},
                "extensions": {w.TASKS_EXTENSION: {}},
            },
            ttl_ms=self.options.discover_ttl_ms,
            cache_scope=self.options.cache_scope,
            instructions=self.options.instructions,
            meta=self._encode.result_meta,
        )


def _notify(message: bytes | None) -> Step:
    return Step() if message is None else Step(effects=(Notify(message=message),))


_ANSWERS: Final[dict[type[Input], Callable[[ServerCore, Any, float], Step | Need]]] = {
    Received: ServerCore._received,
    ToolReturned: ServerCore._tool_returned,
    TaskRefused: ServerCore._task_refused,
    RoundReplayed: ServerCore._round_replayed,
    CallRefused: ServerCore._call_refused,
    PromptReturned: ServerCore._prompt_returned,
    ResourceReturned: ServerCore._resource_returned,
    CompletionReturned: ServerCore._completion_returned,
    TaskFetched: ServerCore._task_fetched,
    TaskReturned: ServerCore._task_returned,
    TaskAsked: ServerCore._task_asked,
    StatusMessageSet: ServerCore._status_message_set,
    TaskProgressed: ServerCore._task_progressed,
    LeaseLapsed: ServerCore._lease_lapsed,
    OutcomeLost: ServerCore._outcome_lost,
    HandlerMissing: ServerCore._handler_missing,
    AnswersArrived: ServerCore._answers_arrived,
    Due: ServerCore._due,
    ProgressReported: ServerCore._progress_reported,
    LogEmitted: ServerCore._log_emitted,
    ListenStarted: ServerCore._listen_started,
    ListChanged: ServerCore._list_changed,
    ResourceUpdated: ServerCore._resource_updated,
    TaskChanged: ServerCore._task_changed,
    ListenEnded: ServerCore._listen_ended,
    ListenRefused: ServerCore._listen_refused,
    StoreUnreachable: ServerCore._store_unreachable,
    ServerFailed: ServerCore._server_failed,
}
"""How the core answers each kind of input: one table, read once per input."""
assert set(_ANSWERS) == set(INPUTS), "every input has its answer"


def _call_params(raw_params: Raw) -> w.CallToolParams | None:
    """A `tools/call`'s params decoded at once, as most are sound: their head is theirs
    (one decoding, not two: 0.5 us a call). None: something does not fit, and the checks
    in their order say what (`ParamsHead` first)."""
    try:
        return msgspec.json.decode(raw_params, type=w.CallToolParams)
    except msgspec.ValidationError:
        return None
