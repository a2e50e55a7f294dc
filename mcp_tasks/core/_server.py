"""The server side of the protocol, without I/O: `ServerCore` dispatches to the modules
that decide.

Theory of operation
-------------------
`ServerCore` holds configuration only: the catalog (every spec with its handler), the
options, the injected id factory, sealing key and poll policy. It keeps no per-request or
per-task state. Each entry point takes what happened, the time `now` (seconds since the
epoch), the caller's `principal` where it matters and, where a task is involved, its
record; it returns a `Step` (commands, then the reply) or a `Need` (what the shell must
fetch or run before the core can go on):

    receive(bytes, now, headers, principal) -> Step, or a Need: RunTool, GetPrompt,
                                               ReadResource, Complete, Listen, FetchTask
    tool_returned(call, outcome, now)       -> Step (a reply; a new task), or RunTool
    task_refused(call, per_principal=...)   -> Step: the store refused to create the task
    listen_refused(listen, per_principal=...) -> Reply: no room for one more stream
    prompt_returned / resource_returned /
    completion_returned(call, outcome)      -> Step
    handle_task_request(req, record, now)   -> Step (reply + SaveTask, ResumeTask, CancelTask)
    task_returned(record, outcome, now)     -> Step (SaveTask, and ReleaseLease if it waits)
    task_asked(record, request, now)        -> Step (AwaitAnswer + SaveTask, or a failure)
    set_status_message / task_progress      -> Step (SaveTask)
    progress / log (meta, ...)              -> Step (Notify, if the request asked)
    task_orphaned(record, now)              -> Step (fail it, or run it again)
    task_outcome_lost(record, waited, now)  -> Step (fail it: the store lost its outcome)
    expire_task(record, now)                -> Step (CancelTask + DeleteTask, or WakeAt)

Incoming requests are checked in the order the conformance suite expects (`_envelope`);
any `ProtocolError` raised on the way becomes the error reply in `receive`, the single
place where peer input is converted.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from msgspec import UNSET, Raw

from . import _wire as w
from ._catalog import Catalog
from ._catalog_calls import CatalogCalls
from ._compat import CompatibleNames
from ._effects import CancelRequest, Notify, Reply, ResumeTask, SaveTask, Step
from ._encode import (
    Encoder,
    log_notification,
    progress_notification,
    unset_if_none,
)
from ._envelope import (
    TASK_METHODS,
    TOO_DEEP,
    HttpHeaders,
    check_envelope,
    check_headers,
    check_version_and_method,
    decode_message,
    decode_params,
    invalid_params,
    is_request_id,
    request_meta,
)
from ._errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ProtocolError,
    RemoteProtocolError,
)
from ._listen import Listening
from ._needs import (
    CompletionCall,
    Listen,
    Need,
    PromptCall,
    ResourceRead,
    RunTool,
    Subscription,
    TaskRequest,
    ToolCall,
)
from ._options import ServerOptions, TaskOptions, ToolSpec
from ._outcomes import (
    CompletionOutcome,
    PromptOutcome,
    ResourceOutcome,
    ToolOutcome,
)
from ._policy import MinPollInterval, PollPolicy
from ._records import TaskRecord
from ._rounds import Rounds
from ._sealing import HmacSealer
from ._tasks import Tasks, progress_text
from ._tools import ToolCalls

SHUTTING_DOWN_MESSAGE: typing.Final = "The server is shutting down; try again later"


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
    ) -> None:
        self.info = info
        self.task_options = tasks or TaskOptions()
        self.options = options or ServerOptions()
        fraction = self.task_options.min_poll_fraction
        if poll_policy is None and fraction is not None:
            poll_policy = MinPollInterval(fraction)
        self._encode = Encoder(info)
        self.catalog = Catalog(
            ttl_ms=self.options.discover_ttl_ms, cache_scope=self.options.cache_scope
        )
        """The one registry: tools, prompts, resources, templates, completions, and the
        handler of each (`Catalog.add_*`)."""
        self._rounds = Rounds(self._encode, state_key, self.options.request_state_ttl_ms)
        self._new_task_id = new_task_id
        self._tasks = Tasks(
            self._encode, self.catalog, self.task_options, self._next_task_id, poll_policy
        )
        self._tools = ToolCalls(self._encode, self.catalog, self._rounds, self._tasks)
        self._calls = CatalogCalls(self._encode, self.catalog, self._rounds)
        self._listening = Listening(self._encode, self.catalog, self.options)
        for tool in tools:
            self.add_tool(tool)

    # --- configuration ---------------------------------------------------------------

    def _next_task_id(self) -> str:
        return self._new_task_id()

    def use_state_key(self, state_key: bytes) -> None:
        """Seal and open `requestState` with `state_key` (servers sharing tasks share it)."""
        self._rounds.sealer = HmacSealer(state_key)

    def use_info(self, info: w.Implementation) -> None:
        """Name `info` as the server in replies from now on (a server embedded in another)."""
        self.info = info
        self._encode.use_info(info)

    def use_options(self, options: ServerOptions) -> None:
        """Answer under `options` from now on (cache hints, the `requestState` TTL, header
        leniency, listen limits)."""
        self.options = self._listening.options = options
        self.catalog.use_cache_hints(
            ttl_ms=options.discover_ttl_ms, cache_scope=options.cache_scope
        )
        self._rounds.state_ttl_ms = options.request_state_ttl_ms

    def use_task_options(self, options: TaskOptions) -> None:
        """Create tasks under `options` from now on (their TTL, poll interval, limits).
        A poll policy made from the old `min_poll_fraction` is made anew from the new one."""
        if self._tasks.poll_policy is None or isinstance(self._tasks.poll_policy, MinPollInterval):
            fraction = options.min_poll_fraction
            self._tasks.poll_policy = None if fraction is None else MinPollInterval(fraction)
        self.task_options = self._tasks.options = options

    @property
    def poll_policy(self) -> PollPolicy | None:
        return self._tasks.poll_policy

    # --- receiving ---------------------------------------------------------------------

    def receive(
        self,
        data: bytes,
        now: float,
        headers: HttpHeaders | None = None,
        principal: str | None = None,
    ) -> Step | Need:
        """Check one incoming JSON-RPC message and say what happens next.

        `principal` is who sent it, as the transport's authenticator established (None:
        nobody known). Tasks are bound to their creator's principal, and so are input
        rounds: another principal's requests see neither.
        """
        try:
            message = decode_message(data)
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
                message.id, method, message.params, now=now, headers=headers, principal=principal
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
    ) -> Step | Need:
        raw_params = Raw(b"{}") if params is UNSET else params
        head = decode_params(raw_params, w.ParamsHead)
        meta = request_meta(head, method, raw_params, headers)
        if headers is not None:
            check_headers(
                headers,
                method,
                head,
                meta,
                accept_missing_task_name=self.options.accept_missing_task_name_header,
            )
        check_version_and_method(method, meta, self.catalog.capabilities)
        if method in TASK_METHODS:
            return self._tasks.request(request_id, method, raw_params, meta, principal)
        if method == "tools/call":
            return self._tools.call(
                request_id, raw_params, meta, now=now, headers=headers, principal=principal
            )
        if method == "prompts/get":
            return self._calls.get_prompt(request_id, raw_params, meta, principal, now)
        if method == "resources/read":
            return self._calls.read_resource(request_id, raw_params, meta, principal, now)
        if method == "completion/complete":
            return self._calls.complete(request_id, raw_params, meta)
        if method == "subscriptions/listen":
            return self._listening.listen(request_id, raw_params, meta, principal)
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

    # --- tools/call ---------------------------------------------------------------------

    def tool_returned(
        self,
        call: ToolCall,
        outcome: ToolOutcome,
        now: float,
        *,
        stored_tasks: int | None = None,
        active_for_principal: int | None = None,
    ) -> Step | Need:
        """The handler of `call` (run for `RunTool`) returned `outcome`: the reply, a new
        task (the store checks the task limits as it saves it), or, for a client that
        cannot hold a task, the handler run again in place.

        `stored_tasks` and `active_for_principal` are the old way to check the limits
        here, for shells whose store cannot: a count at a limit refuses the task."""
        answer = self._tools.returned(call, outcome, now)
        if stored_tasks is None and active_for_principal is None:
            return answer
        if isinstance(answer, Step) and any(
            isinstance(effect, SaveTask) and effect.limits is not None for effect in answer.effects
        ):
            options = self.task_options
            most = options.max_active_per_principal
            if stored_tasks is not None and stored_tasks >= options.max_tasks:
                return self.task_refused(call, per_principal=False)
            if (
                most is not None
                and active_for_principal is not None
                and active_for_principal >= most
            ):
                return self.task_refused(call, per_principal=True)
        return answer

    def task_refused(
        self,
        call: ToolCall,
        *,
        per_principal: bool,
        stored: bool = False,
        data: bool = False,
        next_expiry_at: float | None = None,
        now: float | None = None,
    ) -> Step:
        """The store refused the task `tool_returned` created: it holds its limit of tasks
        (retryable: the reply says to come back when the next stored task expires, at
        `next_expiry_at`) or, `per_principal`, of this caller's unfinished tasks, or
        (`stored` too) of its stored tasks (retryable, `next_expiry_at` its first's expiry),
        or (`data`) of bytes of task data (retryable like the task limit)."""
        assert call.request_id is not None
        return self._tasks.refused(
            call.request_id,
            per_principal=per_principal,
            stored=stored,
            data=data,
            next_expiry_at=next_expiry_at,
            now=now,
        )

    def round_replayed(self, need: RunTool) -> Step:
        """The store already had `need.use_once`: the `requestState` of this call was
        accepted once before, and its tool accepts each only once (-32602)."""
        return self._tools.replayed(need)

    def call_refused(self, need: Need) -> Step:
        """The server is shutting down: it runs no new handler."""
        error = w.ErrorObject(code=INTERNAL_ERROR, message=SHUTTING_DOWN_MESSAGE)
        return Step(reply=self._encode.error_object(need.request_id, error))

    # --- prompts, resources, completion -------------------------------------------------

    def prompt_returned(self, call: PromptCall, outcome: PromptOutcome, now: float) -> Step:
        """The handler of `call` (run for `GetPrompt`) returned `outcome`."""
        return self._calls.prompt_returned(call, outcome, now)

    def resource_returned(self, call: ResourceRead, outcome: ResourceOutcome, now: float) -> Step:
        """The handler of `call` (run for `ReadResource`) returned `outcome`."""
        return self._calls.resource_returned(call, outcome, now)

    def completion_returned(self, call: CompletionCall, outcome: CompletionOutcome) -> Step:
        """The handler of `call` (run for `Complete`) returned `outcome`. More than
        `MAX_COMPLETION_VALUES` values are cut to that many, with `hasMore`."""
        return self._calls.completion_returned(call, outcome)

    def completion_result(self, completion: w.Completion) -> w.CompleteResult:
        return self._calls.completion_result(completion)

    # --- tasks -----------------------------------------------------------------------------

    def handle_task_request(
        self, request: TaskRequest, record: TaskRecord | None, now: float
    ) -> Step:
        """Answer a `FetchTask`: `record` is what the store holds for the id, or None."""
        return self._tasks.handle_request(request, record, now)

    def task_returned(self, record: TaskRecord | None, outcome: ToolOutcome, now: float) -> Step:
        """The handler running task `record` returned `outcome` (`record` as stored now;
        None: it is gone)."""
        return Step() if record is None else self._tasks.returned(record, outcome, now)

    def task_asked(self, record: TaskRecord | None, request: w.InputRequest, now: float) -> Step:
        """The handler running task `record` asks `request` and waits for the answer in
        place (`ctx.elicit`): `AwaitAnswer` names the key it waits on."""
        return self._tasks.asked(record, request, now)

    def set_status_message(
        self, record: TaskRecord | None, message: str | None, now: float
    ) -> Step:
        """Show `message` as the task's `statusMessage`; no status change."""
        return self._tasks.set_status_message(record, message, now)

    def task_progress(
        self,
        record: TaskRecord | None,
        progress: float,
        total: float | None,
        message: str | None,
        now: float,
    ) -> Step:
        """Progress inside a task shows as its `statusMessage` (tasks carry no progress
        notifications)."""
        return self._tasks.set_status_message(record, progress_text(progress, total, message), now)

    def task_orphaned(self, record: TaskRecord | None, now: float) -> Step:
        """The process running `record`'s handler stopped before the task ended (a
        restart, a crash, a lease that lapsed). A resumable tool runs again from the start,
        keeping the answers it was given; any other task fails, saying why."""
        return self._tasks.orphaned(record, now)

    def task_outcome_lost(self, record: TaskRecord | None, waited: float, now: float) -> Step:
        """The handler running `record` finished, but the store could not take its outcome
        for `waited` seconds: the task fails with an error that says so."""
        return self._tasks.outcome_lost(record, waited, now)

    def task_resumed(self, record: TaskRecord | None) -> ResumeTask | None:
        """What resumes `record`'s handler with every answer it has (its answers came in
        on another process), or None if it is not working."""
        return self._tasks.resumed(record)

    def expire_task(self, record: TaskRecord | None, now: float) -> Step:
        """A `WakeAt` came due: remove the record if its TTL has run out."""
        return self._tasks.expire(record, now)

    # --- notifications to the request's client ------------------------------------------

    def progress(
        self, meta: w.RequestMeta, progress: float, total: float | None, message: str | None
    ) -> Step:
        """`notifications/progress` if the request asked for it (a `progressToken`)."""
        return _notify(progress_notification(meta, progress, total, message))

    def log(
        self, meta: w.RequestMeta, level: w.LoggingLevel, data: Any, logger: str | None
    ) -> Step:
        """`notifications/message` if the request asked for log messages at `level` or a
        lower one (`_meta` `io.modelcontextprotocol/logLevel`)."""
        return _notify(log_notification(meta, level, data, logger))

    # --- subscriptions/listen -----------------------------------------------------------

    def subscription_acknowledged(self, subscription: Subscription) -> bytes:
        """The stream's first message: which notifications it will carry."""
        return self._listening.acknowledged(subscription)

    def list_changed(self, subscription: Subscription, kind: str) -> bytes | None:
        """`notifications/<kind>/list_changed` for this stream, or None if it did not ask."""
        return self._listening.list_changed(subscription, kind)

    def resource_updated(self, subscription: Subscription, uri: str) -> bytes | None:
        """`notifications/resources/updated` for this stream, or None if it did not ask."""
        return self._listening.resource_updated(subscription, uri)

    def task_changed(self, subscription: Subscription, record: TaskRecord) -> bytes | None:
        """`notifications/tasks` for this stream, or None if it did not ask (or may not
        know of the task)."""
        return self._listening.task_changed(subscription, record)

    def subscription_ended(self, subscription: Subscription) -> Reply:
        """The response that ends a stream gracefully (the server is shutting down)."""
        return self._listening.ended(subscription)

    def listen_refused(self, listen: Listen, *, per_principal: bool) -> Reply:
        """No room for one more stream (`Listening.refused`): -32603, retryable."""
        return self._listening.refused(listen, per_principal=per_principal)

    # --- replies for the shell's own failures --------------------------------------------

    def store_unavailable(self, request_id: w.RequestId) -> Reply:
        """The reply when the task store could not be reached for this request (503). It
        names no store: a URL, a path or a password is for the server's log alone."""
        message = "The task store is unavailable; try again shortly"
        return self._encode.retryable(
            request_id, INTERNAL_ERROR, message, http_status=503, retry_after_ms=1000
        )

    def internal_failure(self, request_id: w.RequestId) -> Reply:
        """The reply when the server failed on this request (a bug or a store fault)."""
        message = "Internal error: the server failed on this request"
        return self.error_reply(request_id, INTERNAL_ERROR, message, http_status=500)

    # --- results --------------------------------------------------------------------------

    def _result(self, request_id: w.RequestId, result: Any) -> Step:
        return Step(reply=self._encode.result(request_id, result))

    def _discover_result(self) -> w.DiscoverResult:
        return w.DiscoverResult(
            supported_versions=list(w.SUPPORTED_VERSIONS),
            capabilities={
                "tools": {"listChanged": True},
                **self.catalog.capabilities(),
                "logging": {},
                "extensions": {w.TASKS_EXTENSION: {}},
            },
            ttl_ms=self.options.discover_ttl_ms,
            cache_scope=self.options.cache_scope,
            instructions=unset_if_none(self.options.instructions),
            meta=self._encode.result_meta,
        )


def _notify(message: bytes | None) -> Step:
    return Step() if message is None else Step(effects=(Notify(message=message),))
