"""The server side of the protocol, without I/O.

Theory of operation
-------------------
`ServerCore` holds configuration only (tools, options, the injected id factory and sealing
key); it keeps no per-request or per-task state between calls. Each entry point takes what
happened, the time `now` (seconds since the epoch) and, where a task is involved, its
record, and returns a `Step`: the effects for the shell to perform in order, then the reply.

    receive(bytes, now, headers)          -> reply, or RunTool / GetPrompt / ReadResource /
                                             Complete / Listen / FetchTask / CancelRequest
    tool_returned(call, outcome, now)     -> reply (+ SaveTask, StartTask, WakeAt for a task)
    prompt_returned, resource_returned,
    completion_returned(call, outcome)    -> reply
    handle_task_request(req, record, now) -> reply (+ SaveTask, ResumeTask, CancelTask)
    task_returned(record, outcome, now)   -> SaveTask of the new status
    expire_task(record, now)              -> CancelTask / DeleteTask, or a later WakeAt

Incoming requests are checked in the order the conformance suite expects: JSON and
JSON-RPC shape, `_meta`, HTTP headers against the body, protocol version, method, the
capability gate, then params. Any `ProtocolError` raised on the way becomes the error reply
in `receive`, the single place where peer input is converted.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import math
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct

from . import _wire as w
from ._catalog import Catalog
from ._effects import (
    CancelRequest,
    CancelTask,
    Complete,
    CompletionCall,
    DeleteTask,
    Effect,
    FetchTask,
    GetPrompt,
    Listen,
    PromptCall,
    ReadResource,
    Reply,
    ResourceRead,
    ResumeTask,
    RunTool,
    SaveTask,
    StartTask,
    Step,
    Subscription,
    TaskRequest,
    ToolCall,
    WakeAt,
)
from ._errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    SERVER_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    http_status_for_code,
)
from ._options import ServerOptions, TaskOptions, ToolSpec
from ._outcomes import (
    CompletionOutcome,
    InputRequired,
    PromptOutcome,
    ResourceOutcome,
    StartTaskOutcome,
    ToolOutcome,
)
from ._records import TaskRecord
from ._sealing import RoundState, open_sealed, params_digest, seal
from ._state import INITIAL_STATUS, TaskEvent, TaskStatus, can_happen, next_status

RELATED_TASK_META: Final = "io.modelcontextprotocol/related-task"
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_KNOWN_METHODS: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "subscriptions/listen",
    }
    | TASK_METHODS
)
_CAPABILITY_OF: Final = {  # methods that exist only while the server offers the capability
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "completion/complete": "completions",
}
MAX_COMPLETION_VALUES: Final = 100
"""The most values one `completion/complete` result may carry (the schema's limit)."""
MAX_SUBSCRIBED_ITEMS: Final = 256
MAX_TRACKED_POLLS: Final = 100_000
"""Last-poll times kept for `min_poll_fraction`; past it the oldest are forgotten."""
"""Task ids, and resource uris, one `subscriptions/listen` may name."""
LIST_CHANGED_METHODS: Final = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"


class HttpHeaders(Struct, frozen=True, kw_only=True):
    """The MCP request headers of a Streamable HTTP POST, as received (None: absent)."""

    protocol_version: str | None = None
    method: str | None = None
    name: str | None = None
    params: dict[str, str] | None = None
    """`Mcp-Param-{Name}` headers by lower-cased Name (None: the request had none)."""


_SECOND_PREFIXES: dict[int, str] = {}
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def iso_utc(when: float) -> str:
    """ISO 8601 in UTC with milliseconds, e.g. `2026-08-01T12:00:00.000Z`.

    Every task poll formats two of these, so the date-and-time part of each second is
    memoised (a pure cache: the same input always gives the same text).
    """
    fraction, whole = math.modf(when)  # rounds to microseconds as datetime does
    seconds, micros = divmod(int(whole) * 1_000_000 + round(fraction * 1_000_000), 1_000_000)
    prefix = _SECOND_PREFIXES.get(seconds)
    if prefix is None:
        if len(_SECOND_PREFIXES) >= 4096:
            _SECOND_PREFIXES.clear()
        stamp = _EPOCH + datetime.timedelta(seconds=seconds)
        prefix = _SECOND_PREFIXES[seconds] = stamp.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{prefix}.{micros // 1000:03d}Z"


def _decode_header_value(value: str, name: str = "Mcp-Name") -> str:
    value = value.strip()
    start, end = w.BASE64_HEADER_PREFIX, w.BASE64_HEADER_SUFFIX
    if value.startswith(start) and value.endswith(end) and len(value) >= len(start) + len(end):
        try:
            return base64.b64decode(value[len(start) : -len(end)], validate=True).decode("utf-8")
        except ValueError:  # binascii.Error, UnicodeDecodeError, non-ASCII text
            raise RemoteProtocolError(
                HEADER_MISMATCH, f"{name} header holds invalid =?base64?...?= text"
            ) from None
    return value


def _path(error: msgspec.ValidationError, root: str) -> str:
    """msgspec's message with its `$` root renamed to what the reader knows, e.g. params."""
    message = str(error)
    if "`$" not in message:
        return f"{message} - at `{root}`"  # wrong at the root itself: msgspec names no path
    return message.replace("`$", f"`{root}")


def _invalid_params(message: str, data: Any = UNSET) -> RemoteProtocolError:
    return RemoteProtocolError(INVALID_PARAMS, message, data)


def _decode_params(raw: Raw, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as error:
        raise _invalid_params(f"Invalid params: {_path(error, 'params')}") from None


class ServerCore:
    def __init__(
        self,
        *,
        info: w.Implementation,
        tools: Iterable[ToolSpec] = (),
        new_task_id: Callable[[], str],
        state_key: bytes,
        tasks: TaskOptions | None = None,
        options: ServerOptions | None = None,
    ) -> None:
        if len(state_key) < 16:
            raise ValueError("state_key must hold at least 16 random bytes")
        self.info = info
        self.task_options = tasks or TaskOptions()
        self.options = options or ServerOptions()
        self._new_task_id = new_task_id
        self._state_key = state_key
        self._caller: str | None = None
        self._last_polls: dict[tuple[str | None, str], float] = {}
        """(principal, task id) -> when its last poll was answered (`min_poll_fraction`)."""
        self._result_meta = w.ResultMeta(server_info=info)
        self._meta_dict: dict[str, Any] = msgspec.to_builtins(self._result_meta)
        self._tools: dict[str, ToolSpec] = {}
        self._tools_result: w.ListToolsResult | None = None
        self._header_params: dict[str, dict[str, str]] = {}
        """Tool name -> argument -> its `Mcp-Param-*` header name (annotated tools only)."""
        self.catalog = Catalog(
            ttl_ms=self.options.discover_ttl_ms, cache_scope=self.options.cache_scope
        )
        """Prompts, resources, resource templates and completions (`Catalog.add_*`)."""
        for tool in tools:
            self.add_tool(tool)

    # --- configuration ---------------------------------------------------------------

    def use_state_key(self, state_key: bytes) -> None:
        """Seal and open `requestState` with `state_key` from now on (servers that share
        tasks share it, so a round sealed by one is opened by another)."""
        if len(state_key) < 16:
            raise ValueError("state_key must hold at least 16 random bytes")
        self._state_key = state_key

    def add_tool(self, tool: ToolSpec) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._tools_result = None
        header_params = tool.header_params()
        if header_params:
            self._header_params[tool.name] = header_params

    def remove_tool(self, name: str) -> None:
        del self._tools[name]
        self._header_params.pop(name, None)
        self._tools_result = None

    @property
    def tools(self) -> dict[str, ToolSpec]:
        return dict(self._tools)

    # --- receiving ---------------------------------------------------------------------

    def receive(
        self,
        data: bytes,
        now: float,
        headers: HttpHeaders | None = None,
        principal: str | None = None,
    ) -> Step:
        """Check one incoming JSON-RPC message and say what happens next.

        `principal` is who sent it, as the transport's authenticator established (None:
        nobody known). Tasks are bound to their creator's principal, and so are input
        rounds: another principal's requests see neither.
        """
        self._caller = principal  # read while this call lasts; calls carry it from here
        try:
            return self._receive(data, now, headers)
        finally:
            self._caller = None

    def _receive(self, data: bytes, now: float, headers: HttpHeaders | None) -> Step:
        try:
            message = _decode_message(data)
        except ProtocolError as error:
            return self._error_step(None, error)
        if (
            message.method is UNSET
            and message.id is not UNSET
            and (message.result is not UNSET or message.error is not UNSET)
        ):
            return Step()  # a response, whatever its id: this server sends no requests
        if message.id is not UNSET and not _is_request_id(message.id):
            return self._error_step(
                None,
                RemoteProtocolError(
                    INVALID_REQUEST, "Invalid request: id must be a string or an integer"
                ),
            )
        is_notification = (
            message.id is UNSET and isinstance(message.method, str) and message.jsonrpc == "2.0"
        )
        reply_id = None if message.id is UNSET else message.id
        try:
            return self._dispatch(message, now, headers)
        except (ProtocolError, RecursionError) as failure:
            if is_notification:
                return Step()  # a notification never gets a reply, not even an error
            if isinstance(failure, RecursionError):
                failure = _invalid_params(f"Invalid params: {_TOO_DEEP}")
            return self._error_step(reply_id, failure)

    def _dispatch(
        self, message: w.IncomingMessage, now: float, headers: HttpHeaders | None
    ) -> Step:
        if message.jsonrpc != "2.0":
            raise RemoteProtocolError(INVALID_REQUEST, 'Invalid request: jsonrpc must be "2.0"')
        if message.method is UNSET:
            raise RemoteProtocolError(INVALID_REQUEST, "Invalid request: method is missing")
        if not isinstance(message.method, str):
            raise RemoteProtocolError(INVALID_REQUEST, "Invalid request: method must be a string")
        if message.id is UNSET:
            return self._receive_notification(message.method, message.params)
        return self._receive_request(message.id, message.method, message.params, now, headers)

    def _receive_notification(self, method: str, params: Raw | Any) -> Step:
        if method != "notifications/cancelled" or params is UNSET:
            return Step()  # nothing else a client may notify this server of needs action
        try:
            cancelled = msgspec.json.decode(params, type=w.CancelledNotificationParams)
        except msgspec.ValidationError:
            return Step()
        reason = None if cancelled.reason is UNSET else cancelled.reason
        return Step(effects=(CancelRequest(request_id=cancelled.request_id, reason=reason),))

    def _receive_request(
        self,
        request_id: w.RequestId,
        method: str,
        params: Raw | Any,
        now: float,
        headers: HttpHeaders | None,
    ) -> Step:
        raw_params = Raw(b"{}") if params is UNSET else params
        head = _decode_params(raw_params, w.ParamsHead)
        if head.meta is UNSET:
            raise _invalid_params(
                "Invalid params: params._meta is required (protocol version and client "
                "capabilities travel in every request)"
            )
        meta = head.meta
        if headers is not None:
            self._check_headers(headers, method, head, meta)
        if meta.protocol_version not in w.SUPPORTED_VERSIONS:
            raise RemoteProtocolError(
                UNSUPPORTED_PROTOCOL_VERSION,
                f"Unsupported protocol version {meta.protocol_version!r}",
                {"supported": list(w.SUPPORTED_VERSIONS), "requested": meta.protocol_version},
            )
        if method not in _KNOWN_METHODS:
            raise RemoteProtocolError(METHOD_NOT_FOUND, f"Method not found: {_shown(method)}")
        needs = _CAPABILITY_OF.get(method)
        if needs is not None and needs not in self.catalog.capabilities():
            raise RemoteProtocolError(
                METHOD_NOT_FOUND, f"Method not found: {method} (this server offers no {needs})"
            )
        if method in TASK_METHODS:
            return self._receive_task_request(request_id, method, raw_params, meta)
        if method == "tools/call":
            return self._receive_call(request_id, raw_params, meta, now, headers)
        if method == "prompts/get":
            return self._receive_get_prompt(request_id, raw_params, meta, now)
        if method == "resources/read":
            return self._receive_read(request_id, raw_params, meta, now)
        if method == "completion/complete":
            return self._receive_complete(request_id, raw_params, meta)
        if method == "subscriptions/listen":
            return self._receive_listen(request_id, raw_params, meta)
        if method == "server/discover":
            return self._result_step(request_id, self._discover_result())
        if method == "tools/list":
            _decode_params(raw_params, w.ListToolsParams)
            return self._result_step(request_id, self._list_tools_result())
        _decode_params(raw_params, w.PaginatedParams)
        if method == "prompts/list":
            result: Any = self.catalog.list_prompts(self._result_meta)
        elif method == "resources/list":
            result = self.catalog.list_resources(self._result_meta)
        else:
            result = self.catalog.list_templates(self._result_meta)
        return self._result_step(request_id, result)

    def _check_headers(
        self, headers: HttpHeaders, method: str, head: w.ParamsHead, meta: w.RequestMeta
    ) -> None:
        if headers.protocol_version is None:
            raise RemoteProtocolError(HEADER_MISMATCH, "MCP-Protocol-Version header is missing")
        if headers.protocol_version.strip() != meta.protocol_version:
            raise RemoteProtocolError(
                HEADER_MISMATCH,
                "MCP-Protocol-Version header does not match "
                "params._meta[io.modelcontextprotocol/protocolVersion]",
            )
        if headers.method is None:
            raise RemoteProtocolError(HEADER_MISMATCH, "Mcp-Method header is missing")
        if headers.method.strip() != method:
            raise RemoteProtocolError(HEADER_MISMATCH, "Mcp-Method header does not match method")
        wire_name = w.MCP_NAME_PARAM.get(method)
        if wire_name is None:
            return
        body_value = getattr(head, "task_id" if wire_name == "taskId" else wire_name)
        if not isinstance(body_value, str):
            return  # absent or mistyped: the params check reports it
        if headers.name is None:
            if method in TASK_METHODS and self.options.accept_missing_task_name_header:
                return
            raise RemoteProtocolError(
                HEADER_MISMATCH, f"Mcp-Name header is missing (it must carry params.{wire_name})"
            )
        if _decode_header_value(headers.name) != body_value:
            raise RemoteProtocolError(
                HEADER_MISMATCH, f"Mcp-Name header does not match params.{wire_name}"
            )

    def _receive_task_request(
        self, request_id: w.RequestId, method: str, raw_params: Raw, meta: w.RequestMeta
    ) -> Step:
        if not meta.client_capabilities.has_tasks:
            raise _needs_tasks_extension(f"{method} needs")
        if method == "tasks/update":
            update = _decode_params(raw_params, w.UpdateTaskParams)
            task_id, responses = update.task_id, update.input_responses
        else:
            kind = w.GetTaskParams if method == "tasks/get" else w.CancelTaskParams
            task_id, responses = _decode_params(raw_params, kind).task_id, None
        request = TaskRequest(
            request_id=request_id,
            method=method,
            task_id=task_id,
            meta=meta,
            principal=self._caller,
            input_responses=responses,
        )
        return Step(effects=(FetchTask(request=request),))

    def _receive_call(
        self,
        request_id: w.RequestId,
        raw_params: Raw,
        meta: w.RequestMeta,
        now: float,
        headers: HttpHeaders | None,
    ) -> Step:
        params = _decode_params(raw_params, w.CallToolParams)
        tool = self._tools.get(params.name)
        if tool is None:
            raise _invalid_params(f"Unknown tool: {_shown(params.name)!r}")
        if tool.task_support == "required" and not meta.client_capabilities.has_tasks:
            raise _needs_tasks_extension(f"Tool {tool.name!r} runs only as a task; it needs")
        arguments = None if params.arguments is UNSET else params.arguments
        if arguments is not None and not bytes(arguments).lstrip().startswith(b"{"):
            raise _invalid_params("Invalid params: params.arguments must be an object")
        header_params = self._header_params.get(tool.name)
        if header_params is not None and headers is not None:
            _check_param_headers(header_params, headers.params or {}, arguments)
        responses, handler_state = self._open_round(
            "tools/call", tool.name, _raw_bytes(arguments), params, now
        )
        call = ToolCall(
            request_id=request_id,
            tool_name=tool.name,
            arguments=None if arguments is None else arguments.copy(),
            meta=meta,
            principal=self._caller,
            input_responses=responses,
            handler_state=handler_state,
        )
        return Step(effects=(RunTool(call=call),))

    # --- a tool handler's outcome, outside a task -----------------------------------------

    def tool_returned(
        self,
        call: ToolCall,
        outcome: ToolOutcome,
        now: float,
        *,
        stored_tasks: int = 0,
        active_for_principal: int = 0,
    ) -> Step:
        """The handler of `call` (run for `RunTool`) returned `outcome`.

        `active_for_principal` is how many unfinished tasks the caller has, for the
        `max_active_per_principal` limit (a store checks both limits as it creates a task;
        the shell passes the count it refused at, and the core answers why).

        `stored_tasks` is how many tasks the store holds now, for the `max_tasks` limit.
        """
        request_id = call.request_id
        if request_id is None or call.task_id is not None:
            raise LocalProtocolError(
                "tool_returned answers a tools/call request; a task's outcome goes to task_returned"
            )
        try:
            if isinstance(outcome, w.CallToolResult):
                return self._result_step(request_id, outcome)
            if isinstance(outcome, w.ErrorObject):
                return self._reply_error_object(request_id, outcome)
            if isinstance(outcome, InputRequired):
                return self._input_round(request_id, call, outcome, now)
            if isinstance(outcome, StartTaskOutcome):
                return self._start_task(request_id, call, now, stored_tasks, active_for_principal)
            raise ProtocolError(
                INTERNAL_ERROR, f"Tool {call.tool_name!r} returned an unknown outcome"
            )
        except ProtocolError as error:
            return self._error_step(request_id, error)

    def _open_round(
        self,
        method: str,
        name: str,
        arguments: bytes | None,
        params: w.CallToolParams | w.GetPromptParams | w.ReadResourceParams,
        now: float,
    ) -> tuple[dict[str, Raw], str | None]:
        """The answers and handler state an input round carries.

        With a `requestState` (a round this server asked), the answers are those to the
        keys it asked, each checked against its request. Without one, answers are taken as
        given (a client may answer before it is asked): the handler's typed reading
        (`ctx.elicit_response(key)`) still refuses an answer of the wrong shape."""
        if params.request_state is UNSET:
            given = {} if params.input_responses is UNSET else params.input_responses
            return {key: answer.copy() for key, answer in given.items()}, None
        digest = params_digest(method, name, arguments, self._caller)
        round_state = open_sealed(
            self._state_key, params.request_state, method=method, digest=digest, now=now
        )
        given = {} if params.input_responses is UNSET else params.input_responses
        return _checked_responses(given, round_state.asked), round_state.handler_state

    def _input_round(
        self, request_id: w.RequestId, call: ToolCall, outcome: InputRequired, now: float
    ) -> Step:
        arguments = _raw_bytes(call.arguments)
        digest = params_digest("tools/call", call.tool_name, arguments, call.principal)
        return self._ask_round(
            request_id,
            outcome,
            method="tools/call",
            digest=digest,
            what=f"Tool {call.tool_name!r}",
            capabilities=call.client_capabilities,
            now=now,
        )

    def _ask_round(
        self,
        request_id: w.RequestId,
        outcome: InputRequired,
        *,
        method: str,
        digest: str,
        what: str,
        capabilities: w.ClientCapabilities,
        now: float,
    ) -> Step:
        """The `InputRequiredResult` of an input round, its state sealed for the next."""
        _check_input_requests(what, outcome.requests, capabilities)
        state = RoundState(
            method=method,
            params_digest=digest,
            expires_at=now + self.options.request_state_ttl_ms / 1000,
            asked={key: _method_of(request) for key, request in outcome.requests.items()},
            handler_state=outcome.state,
        )
        result = w.InputRequiredResult(
            input_requests=outcome.requests,
            request_state=seal(self._state_key, state),
            meta=self._result_meta,
        )
        return self._result_step(request_id, result)

    def _start_task(
        self,
        request_id: w.RequestId,
        call: ToolCall,
        now: float,
        stored_tasks: int,
        active_for_principal: int,
    ) -> Step:
        tool = self._tools[call.tool_name]
        if call.in_task:
            raise ProtocolError(
                INTERNAL_ERROR, f"Tool {tool.name!r} asked to start a task while already running"
            )
        if tool.task_support == "none":
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Tool {tool.name!r} asked to start a task but is registered with "
                "task_support='none'",
            )
        if not call.client_capabilities.has_tasks:
            # An optional task tool, and this client cannot hold a task: work in place.
            in_place = msgspec.structs.replace(call, in_task=True)
            return Step(effects=(RunTool(call=in_place),))
        options = self.task_options
        if stored_tasks >= options.max_tasks:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Too many tasks: the server holds its limit of {options.max_tasks}; "
                "try again when some have finished or expired",
            )
        per_principal = options.max_active_per_principal
        if per_principal is not None and active_for_principal >= per_principal:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Too many unfinished tasks for this caller: at most {per_principal} at once; "
                "try again when one has finished (or cancel one)",
            )
        task_id = self._new_task_id()
        record = TaskRecord(
            task_id=task_id,
            version=1,
            tool_name=tool.name,
            status=INITIAL_STATUS,
            created_at=now,
            last_updated_at=now,
            ttl_ms=options.ttl_ms,
            poll_interval_ms=options.poll_interval_ms,
            arguments=call.arguments,
            request_meta=call.meta,
            prior_responses=call.input_responses or None,
            handler_state=call.handler_state,
            principal=call.principal,
        )
        inside = msgspec.structs.replace(call, in_task=True, task_id=task_id)
        effects: list[Effect] = [
            SaveTask(record=record, expected_version=None),
            StartTask(task_id=task_id, call=inside),
        ]
        if record.expires_at is not None:
            effects.append(WakeAt(task_id=task_id, deadline=record.expires_at))
        handle = w.CreateTaskResult(
            task_id=task_id,
            status=record.status.value,
            created_at=iso_utc(now),
            last_updated_at=iso_utc(now),
            ttl_ms=record.ttl_ms,
            poll_interval_ms=_unset_if_none(record.poll_interval_ms),
            meta=self._result_meta,
        )
        return self._result_step(request_id, handle, effects)

    # --- prompts/get, resources/read, completion/complete ----------------------------------

    def _receive_get_prompt(
        self, request_id: w.RequestId, raw_params: Raw, meta: w.RequestMeta, now: float
    ) -> Step:
        params = _decode_params(raw_params, w.GetPromptParams)
        prompt = self.catalog.prompts.get(params.name)
        if prompt is None:
            raise _invalid_params(f"Unknown prompt: {_shown(params.name)!r}")
        arguments = {} if params.arguments is UNSET else params.arguments
        missing = [
            argument.name
            for argument in prompt.arguments
            if argument.required is True and argument.name not in arguments
        ]
        if missing:
            raise _invalid_params(
                f"Prompt {prompt.name!r} needs the argument(s) {', '.join(map(repr, missing))}"
            )
        responses, handler_state = self._open_round(
            "prompts/get", prompt.name, _prompt_arguments_bytes(arguments), params, now
        )
        call = PromptCall(
            request_id=request_id,
            prompt_name=prompt.name,
            arguments=arguments,
            meta=meta,
            principal=self._caller,
            input_responses=responses,
            handler_state=handler_state,
        )
        return Step(effects=(GetPrompt(call=call),))

    def prompt_returned(self, call: PromptCall, outcome: PromptOutcome, now: float) -> Step:
        """The handler of `call` (run for `GetPrompt`) returned `outcome`."""
        if isinstance(outcome, w.GetPromptResult):
            if outcome.meta is UNSET:
                outcome = msgspec.structs.replace(outcome, meta=self._meta_dict)
            return self._result_step(call.request_id, outcome)
        arguments = _prompt_arguments_bytes(call.arguments)
        return self._error_or_round(
            call,
            outcome,
            method="prompts/get",
            digest=params_digest("prompts/get", call.prompt_name, arguments, call.principal),
            what=f"Prompt {call.prompt_name!r}",
            now=now,
        )

    def _error_or_round(
        self,
        call: PromptCall | ResourceRead,
        outcome: object,
        *,
        method: str,
        digest: str,
        what: str,
        now: float,
    ) -> Step:
        """The reply to a prompt or resource handler's error or `InputRequired`."""
        try:
            if isinstance(outcome, w.ErrorObject):
                return self._reply_error_object(call.request_id, outcome)
            if isinstance(outcome, InputRequired):
                return self._ask_round(
                    call.request_id,
                    outcome,
                    method=method,
                    digest=digest,
                    what=what,
                    capabilities=call.client_capabilities,
                    now=now,
                )
            raise ProtocolError(INTERNAL_ERROR, f"{what} returned an unknown outcome")
        except ProtocolError as error:
            return self._error_step(call.request_id, error)

    def _receive_read(
        self, request_id: w.RequestId, raw_params: Raw, meta: w.RequestMeta, now: float
    ) -> Step:
        params = _decode_params(raw_params, w.ReadResourceParams)
        found = self.catalog.find_resource(params.uri)
        if found is None:
            raise resource_not_found(params.uri)
        responses, handler_state = self._open_round("resources/read", params.uri, None, params, now)
        call = ResourceRead(
            request_id=request_id,
            uri=params.uri,
            template=found.template,
            variables=found.variables,
            meta=meta,
            principal=self._caller,
            input_responses=responses,
            handler_state=handler_state,
        )
        return Step(effects=(ReadResource(call=call),))

    def resource_returned(self, call: ResourceRead, outcome: ResourceOutcome, now: float) -> Step:
        """The handler of `call` (run for `ReadResource`) returned `outcome`."""
        if isinstance(outcome, list):
            found = self.catalog.find_resource(call.uri)
            ttl_ms = 0 if found is None else found.ttl_ms  # unregistered while it ran
            result = self.catalog.read_result(outcome, ttl_ms, self._result_meta)
            return self._result_step(call.request_id, result)
        return self._error_or_round(
            call,
            outcome,
            method="resources/read",
            digest=params_digest("resources/read", call.uri, None, call.principal),
            what=f"Resource {call.uri!r}",
            now=now,
        )

    def _receive_complete(
        self, request_id: w.RequestId, raw_params: Raw, meta: w.RequestMeta
    ) -> Step:
        params = _decode_params(raw_params, w.CompleteParams)
        ref = params.ref
        if isinstance(ref, w.PromptReference):
            if ref.name not in self.catalog.prompts:
                raise _invalid_params(f"Unknown prompt: {_shown(ref.name)!r}")
            target = ("ref/prompt", ref.name)
        else:
            if ref.uri not in self.catalog.templates:
                raise _invalid_params(f"Unknown uri template: {ref.uri!r}")
            target = ("ref/resource", ref.uri)
        if target not in self.catalog.completions:
            return self._result_step(request_id, self.completion_result(w.Completion(values=[])))
        context = UNSET if params.context is UNSET else params.context.arguments
        call = CompletionCall(
            request_id=request_id,
            ref=ref,
            argument=params.argument,
            context={} if context is UNSET else context,
            meta=meta,
        )
        return Step(effects=(Complete(call=call),))

    def completion_returned(self, call: CompletionCall, outcome: CompletionOutcome) -> Step:
        """The handler of `call` (run for `Complete`) returned `outcome`. More than
        `MAX_COMPLETION_VALUES` values are cut to that many, with `hasMore`."""
        if isinstance(outcome, w.ErrorObject):
            return self._reply_error_object(call.request_id, outcome)
        return self._result_step(call.request_id, self.completion_result(outcome))

    def completion_result(self, completion: w.Completion) -> w.CompleteResult:
        if len(completion.values) > MAX_COMPLETION_VALUES:
            total = len(completion.values) if completion.total is UNSET else completion.total
            completion = w.Completion(
                values=completion.values[:MAX_COMPLETION_VALUES], total=total, has_more=True
            )
        return w.CompleteResult(completion=completion, meta=self._result_meta)

    # --- subscriptions/listen ------------------------------------------------------------

    def _receive_listen(
        self, request_id: w.RequestId, raw_params: Raw, meta: w.RequestMeta
    ) -> Step:
        wanted = _decode_params(raw_params, w.ListenParams).notifications
        for name, items in (
            ("taskIds", wanted.task_ids),
            ("resourceSubscriptions", wanted.resource_subscriptions),
        ):
            if items is not UNSET and len(items) > MAX_SUBSCRIBED_ITEMS:
                raise _invalid_params(
                    f"Invalid params: params.notifications.{name} names {len(items)} items, "
                    f"at most {MAX_SUBSCRIBED_ITEMS}"
                )
        if wanted.task_ids is not UNSET and not meta.client_capabilities.has_tasks:
            raise _needs_tasks_extension("Listening for task status (taskIds) needs")
        offered = self.catalog.capabilities()
        agreed = w.SubscriptionFilter(
            tools_list_changed=True if wanted.tools_list_changed is True else UNSET,
            prompts_list_changed=(
                True if wanted.prompts_list_changed is True and "prompts" in offered else UNSET
            ),
            resources_list_changed=(
                True if wanted.resources_list_changed is True and "resources" in offered else UNSET
            ),
            resource_subscriptions=_unset_if_empty(
                _unique(
                    uri
                    for uri in wanted.resource_subscriptions or ()
                    if self.catalog.find_resource(uri) is not None
                )
            ),
            task_ids=_unset_if_empty(_unique(wanted.task_ids or ())),
        )
        subscription = Subscription(
            request_id=request_id, notifications=agreed, meta=meta, principal=self._caller
        )
        return Step(effects=(Listen(subscription=subscription),))

    def subscription_acknowledged(self, subscription: Subscription) -> bytes:
        """The stream's first message: which notifications it will carry."""
        params = {
            "_meta": {META_SUBSCRIPTION_ID: subscription.request_id},
            "notifications": subscription.notifications,
        }
        return _notification("notifications/subscriptions/acknowledged", params)

    def list_changed(self, subscription: Subscription, kind: str) -> bytes | None:
        """`notifications/<kind>/list_changed` for this stream, or None if it did not ask.
        `kind` is "tools", "prompts" or "resources"."""
        wanted = subscription.notifications
        asked = {
            "tools": wanted.tools_list_changed,
            "prompts": wanted.prompts_list_changed,
            "resources": wanted.resources_list_changed,
        }[kind]
        if asked is not True:
            return None
        params = {"_meta": {META_SUBSCRIPTION_ID: subscription.request_id}}
        return _notification(LIST_CHANGED_METHODS[kind], params)

    def resource_updated(self, subscription: Subscription, uri: str) -> bytes | None:
        """`notifications/resources/updated` for this stream, or None if it did not ask."""
        if uri not in (subscription.notifications.resource_subscriptions or ()):
            return None
        params = {"_meta": {META_SUBSCRIPTION_ID: subscription.request_id}, "uri": uri}
        return _notification("notifications/resources/updated", params)

    def task_changed(self, subscription: Subscription, record: TaskRecord) -> bytes | None:
        """`notifications/tasks` with the task's full state (as `tasks/get` shows it), or
        None if this stream did not ask about this task."""
        if record.task_id not in (subscription.notifications.task_ids or ()):
            return None
        if record.principal != subscription.principal:
            return None  # not theirs: they learn nothing of it
        # Through JSON, not to_builtins: a completed task's result is kept as raw JSON.
        params = msgspec.json.decode(w.json_encoder.encode(self._detailed_task(record)))
        params.pop("resultType", None)
        params["_meta"] = {META_SUBSCRIPTION_ID: subscription.request_id}
        return _notification("notifications/tasks", params)

    def subscription_ended(self, subscription: Subscription) -> Reply:
        """The response that ends a stream gracefully (the server is shutting down)."""
        meta = {**self._meta_dict, META_SUBSCRIPTION_ID: subscription.request_id}
        body = w.json_encoder.encode(
            w.ResultResponse(
                id=subscription.request_id, result={"resultType": "complete", "_meta": meta}
            )
        )
        return Reply(body=body, request_id=subscription.request_id)

    # --- tasks/get, tasks/update, tasks/cancel ------------------------------------------

    def handle_task_request(
        self, request: TaskRequest, record: TaskRecord | None, now: float
    ) -> Step:
        """Answer a `FetchTask`: `record` is what the store holds for the id, or None."""
        if (
            record is None
            or record.task_id != request.task_id
            or record.principal != request.principal
        ):
            # Another principal's task answers exactly as one that does not exist.
            return self._error_step(
                request.request_id,
                _invalid_params(f"Unknown task: {_shown(request.task_id)!r}"),
            )
        if record.is_expired(now):
            expiry = self.expire_task(record, now)
            error = _invalid_params(f"Task {request.task_id!r} has expired")
            return Step(reply=self._error_reply(request.request_id, error), effects=expiry.effects)
        if request.method == "tasks/get":
            too_soon = self._poll_too_soon(request, record, now)
            if too_soon is not None:
                return Step(reply=too_soon)
            return self._result_step(request.request_id, self._detailed_task(record))
        ack = w.EmptyResult(meta=self._result_meta)
        if request.method == "tasks/cancel":
            if not can_happen(record.status, TaskEvent.CANCEL):
                return self._result_step(request.request_id, ack)  # already over: still an ack
            cancelled = _finish(record, TaskEvent.CANCEL, now)
            effects: list[Effect] = [
                SaveTask(record=cancelled, expected_version=record.version),
                CancelTask(task_id=record.task_id),
            ]
            return self._result_step(request.request_id, ack, effects)
        try:
            effects = self._merge_answers(record, request.input_responses or {}, now)
        except ProtocolError as error:
            return self._error_step(request.request_id, error)
        return self._result_step(request.request_id, ack, effects)

    def _poll_too_soon(self, request: TaskRequest, record: TaskRecord, now: float) -> Reply | None:
        """A refusal if `min_poll_fraction` is set and this caller polled this task too
        recently; None to answer the poll (which is then remembered)."""
        fraction = self.task_options.min_poll_fraction
        interval_ms = record.poll_interval_ms
        if fraction is None or interval_ms is None or record.status.is_terminal:
            return None  # a finished task may be read as often as the client likes
        key = (request.principal, record.task_id)
        polls = self._last_polls
        earliest = polls.get(key, -math.inf) + fraction * interval_ms / 1000
        if now < earliest:
            wait_ms = math.ceil((earliest - now) * 1000)
            error = ProtocolError(
                SERVER_ERROR,
                f"Polling too fast: task {record.task_id!r} advises pollIntervalMs="
                f"{interval_ms}; poll again in {wait_ms} ms",
                {"retryAfterMs": wait_ms},
            )
            reply = self._error_reply(request.request_id, error)
            return msgspec.structs.replace(
                reply, http_status=429, retry_after_seconds=max(1, math.ceil(wait_ms / 1000))
            )
        polls.pop(key, None)  # most recent last: the oldest go first when over the bound
        polls[key] = now
        if len(polls) > MAX_TRACKED_POLLS:
            del polls[next(iter(polls))]
        return None

    def _merge_answers(self, record: TaskRecord, given: dict[str, Raw], now: float) -> list[Effect]:
        # Only a task in input_required has outstanding requests: the core clears them when
        # the task resumes or ends, so the status needs no second check here.
        outstanding = record.input_requests or {}
        asked = {key: _method_of(outstanding[key]) for key in given if key in outstanding}
        if not asked:
            return []  # nothing outstanding was answered: ignored, still an ack
        answers = _checked_responses(given, asked)
        responses = {**(record.input_responses or {}), **answers}
        still_open = {k: v for k, v in outstanding.items() if k not in answers}
        if still_open:
            updated = record.replace(
                input_requests=still_open, input_responses=responses, last_updated_at=now
            )
            return [SaveTask(record=updated, expected_version=record.version)]
        resumed = record.replace(
            status=next_status(record.status, TaskEvent.INPUT_ANSWERED),
            input_requests=None,
            input_responses=responses,
            status_message=None,
            last_updated_at=now,
        )
        return [
            SaveTask(record=resumed, expected_version=record.version),
            ResumeTask(task_id=record.task_id, call=_task_call(resumed)),
        ]

    def _detailed_task(self, record: TaskRecord) -> w.DetailedTask:
        common: dict[str, Any] = {
            "task_id": record.task_id,
            "created_at": iso_utc(record.created_at),
            "last_updated_at": iso_utc(record.last_updated_at),
            "ttl_ms": record.ttl_ms,
            "poll_interval_ms": _unset_if_none(record.poll_interval_ms),
            "status_message": _unset_if_none(record.status_message),
            "meta": self._result_meta,
        }
        status = record.status
        if status is TaskStatus.WORKING:
            return w.WorkingTask(**common)
        if status is TaskStatus.INPUT_REQUIRED:
            return w.InputRequiredTask(**common, input_requests=record.input_requests or {})
        if status is TaskStatus.COMPLETED:
            assert record.result is not None
            return w.CompletedTask(**common, result=record.result)
        if status is TaskStatus.FAILED:
            assert record.error is not None
            return w.FailedTask(**common, error=record.error)
        return w.CancelledTask(**common)

    # --- a tool handler's outcome, inside a task ------------------------------------------

    def task_returned(self, record: TaskRecord, outcome: ToolOutcome, now: float) -> Step:
        """The handler running task `record` returned `outcome` (`record` as stored now)."""
        if record.status.is_terminal:
            return Step()  # cancelled (or otherwise ended) meanwhile: the outcome is moot
        if record.is_expired(now):
            return self.expire_task(record, now)
        try:
            updated = self._apply_outcome(record, outcome, now)
        except ProtocolError as error:
            failure = w.ErrorObject(
                code=error.code,
                message=error.message,
                data=error.data if error.data is not None else UNSET,
            )
            updated = _finish(
                record, TaskEvent.FAIL, now, error=failure, status_message=error.message
            )
        return Step(effects=(SaveTask(record=updated, expected_version=record.version),))

    def _apply_outcome(self, record: TaskRecord, outcome: ToolOutcome, now: float) -> TaskRecord:
        if isinstance(outcome, w.CallToolResult):
            encoded = msgspec.json.encode(_without_related_task_meta(outcome))
            # The encoder's buffer keeps up to half again its length in spare room; a stored
            # result lives for the task's whole TTL, so keep an exact-size copy.
            result = Raw(bytes(memoryview(encoded)))
            return _finish(record, TaskEvent.COMPLETE, now, result=result)
        if isinstance(outcome, w.ErrorObject):
            return _finish(
                record, TaskEvent.FAIL, now, error=outcome, status_message=outcome.message
            )
        if isinstance(outcome, InputRequired):
            return self._ask(record, outcome, now)
        if isinstance(outcome, StartTaskOutcome):
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Tool {record.tool_name!r} asked to start a task while already inside one",
            )
        raise ProtocolError(
            INTERNAL_ERROR, f"Tool {record.tool_name!r} returned an unknown outcome"
        )

    def _ask(self, record: TaskRecord, outcome: InputRequired, now: float) -> TaskRecord:
        meta = record.request_meta
        capabilities = w.ClientCapabilities() if meta is None else meta.client_capabilities
        _check_input_requests(f"Tool {record.tool_name!r}", outcome.requests, capabilities)
        reused = sorted(key for key in outcome.requests if key in record.issued_keys)
        if reused:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Tool {record.tool_name!r} reused input key(s) {', '.join(reused)}; "
                "keys must be unique over a task's life",
            )
        return record.replace(
            status=next_status(record.status, TaskEvent.NEED_INPUT),
            input_requests={**(record.input_requests or {}), **outcome.requests},
            issued_keys=record.issued_keys.union(outcome.requests),
            status_message=outcome.status_message,
            last_updated_at=now,
        )

    def set_status_message(self, record: TaskRecord, message: str | None, now: float) -> Step:
        """Show `message` as the task's `statusMessage` (progress); no status change."""
        if record.status.is_terminal or record.status_message == message:
            return Step()
        updated = record.replace(status_message=message, last_updated_at=now)
        return Step(effects=(SaveTask(record=updated, expected_version=record.version),))

    def task_orphaned(self, record: TaskRecord, now: float) -> Step:
        """The process running `record`'s handler stopped before the task ended (a
        restart, a crash, a lease that lapsed). A resumable tool runs again from the start,
        keeping the answers it was given; any other task fails, saying why."""
        if record.status.is_terminal:
            return Step()
        if record.is_expired(now):
            return self.expire_task(record, now)
        tool = self._tools.get(record.tool_name)
        if tool is not None and tool.resumable and record.request_meta is not None:
            restarted = record.replace(
                status=next_status(record.status, TaskEvent.RESTART),
                input_requests=None,
                status_message=RESTARTED_MESSAGE,
                last_updated_at=now,
            )
            return Step(
                effects=(
                    SaveTask(record=restarted, expected_version=record.version),
                    StartTask(task_id=record.task_id, call=_task_call(restarted)),
                )
            )
        error = w.ErrorObject(code=INTERNAL_ERROR, message=ORPHANED_MESSAGE)
        failed = _finish(record, TaskEvent.ORPHAN, now, error=error, status_message=error.message)
        return Step(effects=(SaveTask(record=failed, expected_version=record.version),))

    def resume_call(self, record: TaskRecord) -> ToolCall | None:
        """The call that runs `record`'s handler again with every answer it has so far,
        or None if the task is not running (it ended)."""
        if record.status.is_terminal or record.request_meta is None:
            return None
        return _task_call(record)

    def expire_task(self, record: TaskRecord, now: float) -> Step:
        """A `WakeAt` came due: remove the record if its TTL has run out."""
        expires_at = record.expires_at
        if expires_at is None:
            return Step()
        if now < expires_at:
            return Step(effects=(WakeAt(task_id=record.task_id, deadline=expires_at),))
        delete = DeleteTask(task_id=record.task_id, expected_version=record.version)
        if can_happen(record.status, TaskEvent.EXPIRE):
            return Step(effects=(CancelTask(task_id=record.task_id), delete))
        return Step(effects=(delete,))

    # --- results, errors ------------------------------------------------------------------

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
            instructions=_unset_if_none(self.options.instructions),
            meta=self._result_meta,
        )

    def _list_tools_result(self) -> w.ListToolsResult:
        if self._tools_result is None:
            self._tools_result = w.ListToolsResult(
                tools=[tool.to_wire() for tool in self._tools.values()],
                ttl_ms=self.options.discover_ttl_ms,
                cache_scope=self.options.cache_scope,
                meta=self._result_meta,
            )
        return self._tools_result

    def _result_step(
        self, request_id: w.RequestId, result: Any, effects: Iterable[Effect] = ()
    ) -> Step:
        body = w.json_encoder.encode(w.ResultResponse(id=request_id, result=result))
        return Step(reply=Reply(body=body, request_id=request_id), effects=tuple(effects))

    def error_reply(
        self, request_id: w.RequestId | None, code: int, message: str, http_status: int
    ) -> Reply:
        """An error response the shell makes up itself (say, its store is unreachable)."""
        reply = self._error_reply(request_id, ProtocolError(code, message))
        return msgspec.structs.replace(reply, http_status=http_status)

    def _reply_error_object(self, request_id: w.RequestId, error: w.ErrorObject) -> Step:
        body = w.json_encoder.encode(w.ErrorResponse(id=request_id, error=error))
        reply = Reply(
            body=body,
            http_status=http_status_for_code(error.code),
            request_id=request_id,
            error_code=error.code,
        )
        return Step(reply=reply)

    def _error_reply(self, request_id: w.RequestId | None, error: ProtocolError) -> Reply:
        data = UNSET if error.data is None else error.data
        response = w.ErrorResponse(
            id=UNSET if request_id is None else request_id,
            error=w.ErrorObject(code=error.code, message=error.message, data=data),
        )
        return Reply(
            body=w.json_encoder.encode(response),
            http_status=error.http_status,
            request_id=request_id,
            error_code=error.code,
        )

    def _error_step(self, request_id: w.RequestId | None, error: ProtocolError) -> Step:
        return Step(reply=self._error_reply(request_id, error))


# --- helpers ------------------------------------------------------------------------------


_TOO_DEEP: Final = "JSON nested more deeply than this server accepts"


def _decode_message(data: bytes) -> w.IncomingMessage:
    try:
        # msgspec checks UTF-8 only in what it decodes; params stay raw until later, so the
        # whole body is checked here, once (a fast path for ASCII).
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RemoteProtocolError(
            PARSE_ERROR,
            f"Parse error: the body is not UTF-8 ({error.reason} at byte {error.start})",
        ) from None
    try:
        return msgspec.json.decode(data, type=w.IncomingMessage)
    except msgspec.ValidationError as error:
        if str(error).endswith("at `$.id`"):  # a number beyond a double
            raise RemoteProtocolError(
                INVALID_REQUEST, f"Invalid request: id must be a string or an integer ({error})"
            ) from None
        if data.lstrip(b" \t\r\n").startswith(b"{"):  # an object, with a value out of range
            raise RemoteProtocolError(INVALID_REQUEST, f"Invalid request: {error}") from None
        raise RemoteProtocolError(
            INVALID_REQUEST, "Invalid request: a JSON-RPC message must be a JSON object"
        ) from None
    except msgspec.DecodeError as error:
        raise RemoteProtocolError(
            PARSE_ERROR, f"Parse error: the body is not valid JSON ({error})"
        ) from None
    except RecursionError:
        raise RemoteProtocolError(INVALID_REQUEST, f"Invalid request: {_TOO_DEEP}") from None


def _check_param_headers(
    header_params: dict[str, str], given: dict[str, str], arguments: Raw | None
) -> None:
    """Each annotated argument in the body must be mirrored, exactly, by its header; a
    header without its argument is a mismatch too."""
    values = {} if arguments is None else msgspec.json.decode(arguments)
    for argument, header in header_params.items():
        value = values.get(argument)
        sent = given.get(header.lower())
        if value is None and sent is None:
            continue
        name = f"Mcp-Param-{header}"
        if sent is None:
            raise RemoteProtocolError(
                HEADER_MISMATCH, f"{name} header is missing (it must carry arguments.{argument})"
            )
        if value is None:
            raise RemoteProtocolError(
                HEADER_MISMATCH, f"{name} header is sent but arguments.{argument} is not"
            )
        if not _header_mirrors(_decode_header_value(sent, name), value):
            raise RemoteProtocolError(
                HEADER_MISMATCH, f"{name} header does not match arguments.{argument}"
            )


_NUMBER: Final = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _header_mirrors(text: str, value: Any) -> bool:
    """Whether header `text` carries argument `value`: strings exactly, booleans as
    `true`/`false`, numbers by value (`042`, `+42` and `42.0` all carry 42, as SEP-2243
    asks); objects, arrays and anything else never."""
    if isinstance(value, bool):
        return text == ("true" if value else "false")
    if isinstance(value, str):
        return text == value
    if isinstance(value, int | float) and _NUMBER.fullmatch(text):
        return decimal.Decimal(text) == value  # exact, also for integers beyond 2**53
    return False


def resource_not_found(uri: str) -> RemoteProtocolError:
    """The error for a `resources/read` of a uri nothing on the server names."""
    return RemoteProtocolError(INVALID_PARAMS, f"Resource not found: {_shown(uri)}", {"uri": uri})


SHOWN_CHARACTERS: Final = 100
"""How much of a peer's string an error message quotes back (a name may be megabytes)."""


def _shown(text: str) -> str:
    """`text`, cut to `SHOWN_CHARACTERS` with a note of how much was left out."""
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return f"{text[:SHOWN_CHARACTERS]}… ({len(text) - SHOWN_CHARACTERS} more characters)"


def _prompt_arguments_bytes(arguments: dict[str, str]) -> bytes:
    return msgspec.json.encode(arguments)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _unset_if_empty(items: list[str]) -> list[str] | Any:
    return items if items else UNSET


def _notification(method: str, params: dict[str, Any]) -> bytes:
    return w.json_encoder.encode({"jsonrpc": "2.0", "method": method, "params": params})


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _raw_bytes(raw: Raw | None) -> bytes | None:
    return None if raw is None else bytes(raw)


def _unset_if_none(value: Any) -> Any:
    return UNSET if value is None else value


def _method_of(request: w.InputRequest) -> str:
    return type(request).__struct_config__.tag  # type: ignore[return-value]


def _needs_tasks_extension(what: str) -> RemoteProtocolError:
    return RemoteProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} the {w.TASKS_EXTENSION} extension in this request's client capabilities",
        {"requiredCapabilities": {"extensions": {w.TASKS_EXTENSION: {}}}},
    )


def _check_input_requests(
    what: str, requests: dict[str, w.InputRequest], capabilities: w.ClientCapabilities
) -> None:
    """A server may only ask what this request's client declared it can answer.

    `what` names the asker, e.g. "Tool 'deploy'" or "Prompt 'review'"."""
    if not requests:
        raise ProtocolError(INTERNAL_ERROR, f"{what} asked for input with no request")
    for request in requests.values():
        if isinstance(request, w.ElicitRequest):
            mode = request.params.effective_mode
            needs = "url" if mode == "url" else "requested_schema"
            if getattr(request.params, needs) is UNSET:
                raise ProtocolError(
                    INTERNAL_ERROR,
                    f"{what} asked a {mode}-mode elicitation without {needs}",
                )
            if not capabilities.has_elicitation(mode):
                needed: dict[str, Any] = {"elicitation": {} if mode == "form" else {mode: {}}}
                raise _missing_capability(what, f"elicitation ({mode} mode)", needed)
        elif isinstance(request, w.CreateMessageRequest):
            if not capabilities.has_sampling:
                raise _missing_capability(what, "sampling", {"sampling": {}})
        elif not capabilities.has_roots:
            raise _missing_capability(what, "roots", {"roots": {}})


def _missing_capability(asker: str, what: str, needed: dict[str, Any]) -> ProtocolError:
    return ProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{asker} needs the client capability {what}, which this request lacks",
        {"requiredCapabilities": needed},
    )


def _checked_responses(given: dict[str, Raw], asked: dict[str, str]) -> dict[str, Raw]:
    """The answers to the keys in `asked`, each checked against its request's answer type.

    Keys not asked are ignored without a look at their values. A malformed answer to an
    asked key refuses the whole set (-32602), so nothing is half-applied.
    """
    checked: dict[str, Raw] = {}
    for key, method in asked.items():
        answer = given.get(key)
        if answer is None:
            continue
        try:
            msgspec.json.decode(answer, type=w.RESPONSE_TYPE_FOR_METHOD[method])
        except msgspec.ValidationError as error:
            raise _invalid_params(
                f"Invalid params: {_path(error, f'params.inputResponses[{key!r}]')}"
            ) from None
        checked[key] = answer.copy()
    return checked


def _without_related_task_meta(result: w.CallToolResult) -> w.CallToolResult:
    if result.meta is UNSET or RELATED_TASK_META not in result.meta:
        return result
    meta = {k: v for k, v in result.meta.items() if k != RELATED_TASK_META}
    return msgspec.structs.replace(result, meta=meta or UNSET)


ORPHANED_MESSAGE = (
    "The server restarted before the task finished: the process running it stopped, "
    "and its work is lost"
)
RESTARTED_MESSAGE = "Running again from the start: the server restarted before it finished"


def _task_call(record: TaskRecord) -> ToolCall:
    """The call that runs `record`'s handler again, with every answer it has so far."""
    assert record.request_meta is not None, "only a running task is run again"
    return ToolCall(
        request_id=None,
        tool_name=record.tool_name,
        arguments=record.arguments,
        meta=record.request_meta,
        input_responses={**(record.prior_responses or {}), **(record.input_responses or {})},
        handler_state=record.handler_state,
        in_task=True,
        task_id=record.task_id,
        principal=record.principal,
    )


def _finish(record: TaskRecord, event: TaskEvent, now: float, **changes: Any) -> TaskRecord:
    """The record after a terminal event, without what only a running task needs."""
    changes.setdefault("status_message", None)  # a waiting or progress message is over too
    return record.replace(
        status=next_status(record.status, event),
        last_updated_at=now,
        arguments=None,
        request_meta=None,
        prior_responses=None,
        handler_state=None,
        input_requests=None,
        input_responses=None,
        **changes,
    )
