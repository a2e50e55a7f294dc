"""The client side of the protocol, without I/O: requests out, results read, polls planned.

`ClientCore` builds each request with the 2026-07-28 `_meta` and the HTTP headers that must
mirror it, reads responses (a JSON-RPC error becomes `RpcError`; a result is classified by
its `resultType`, absent meaning `"complete"`), and plans the waiting for a task:
`PollPolicy.delay` clamps the server's `pollIntervalMs`, `give_up_at` is the TTL backstop,
and `InputTracker` makes sure each input request key is answered once.

`Mcp-Param-{Name}` headers mirror the tool arguments a tool's `inputSchema` marks with
`x-mcp-header`. `ToolHeaders` holds those marks as the last `tools/list` gave them, fresh
for its `ttlMs` from `now`; the shell lists again when they are stale, when the server says
its tools changed, and once when a call is refused with -32020 naming an `Mcp-Param` header
(`names_param_header`). A cache lives in one client, with that client's credentials, which
`cacheScope` allows whether it is `public` or `private`.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import msgspec
from msgspec import Struct

from ._envelope import MCP_NAME_PARAM
from ._errors import HEADER_MISMATCH, INTERNAL_ERROR, LocalProtocolError, RemoteProtocolError
from ._header_values import encode_header_value, param_header_value
from ._state import TaskStatus
from ._wire import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    CallToolResult,
    CancelledTask,
    ClientCapabilities,
    CompletedTask,
    DetailedTask,
    FailedTask,
    Implementation,
    InputRequest,
    InputRequiredTask,
    RequestId,
    Tool,
    WorkingTask,
)

ResultKind = Literal["complete", "input_required", "task"]
_KINDS: Final = frozenset({"complete", "input_required", "task"})
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 token
X_MCP_HEADER: Final = "x-mcp-header"
_PRIMITIVE: Final = frozenset({"string", "integer", "boolean"})
"""The types an `x-mcp-header` may mark (SEP-2243: not `number`, whose text form is not
one value in every language)."""
_MAX_SCHEMA_NODES: Final = 10_000
_Result = TypeVar("_Result")

_TaskRead = (
    WorkingTask | InputRequiredTask | CompletedTask[CallToolResult] | FailedTask | CancelledTask
)
if TYPE_CHECKING:  # at run time a union of plain classes, which isinstance() accepts
    Task = _TaskRead
else:
    Task = WorkingTask | InputRequiredTask | CompletedTask | FailedTask | CancelledTask
"""A task as a client reads it (`tasks/get`, or the task `tools/call` made): each status is
its own class, `task.status` names it, and a completed task's `result` is decoded."""


class RpcError(RemoteProtocolError):
    """The server answered with a JSON-RPC error: `code`, `message` and `data` are its own."""

    @property
    def retry_after_ms(self) -> int | None:
        """The wait the server asked for before a retry (`data.retryAfterMs`: it was busy,
        or polled too fast), or None: retrying will not help."""
        data = self.data
        wait = data.get("retryAfterMs") if isinstance(data, dict) else None
        valid = isinstance(wait, int) and not isinstance(wait, bool) and wait >= 0
        return wait if valid else None


class TaskFailed(RpcError):
    """The task ended `failed`; its JSON-RPC error is this exception's code, message, data."""

    def __init__(self, task_id: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.task_id = task_id


class TaskCancelled(Exception):
    """The task ended `cancelled`."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} was cancelled")
        self.task_id = task_id


class TaskExpired(Exception):
    """The task's TTL ran out (createdAt + ttlMs) before it finished."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} outlived its TTL without finishing")
        self.task_id = task_id


REPEATABLE_METHODS: Final = frozenset(
    {
        "server/discover",
        "ping",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/get",
        "completion/complete",
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
    }
)
"""Requests that change nothing when they arrive twice: reads, and the task requests
(`tasks/update` ignores keys already answered, `tasks/cancel` of an ended task is acked)."""


class RetryPolicy(Struct, frozen=True, kw_only=True):
    """When to send a request again.

    A request the server refused as busy (HTTP 503 or 429 with `data.retryAfterMs`): after
    the wait it asked for and up to `jitter` of it more (so that clients refused together do
    not come back together), at most `attempts` times, and never when it asks for longer
    than `max_wait_seconds` (then the error is raised).

    A server that cannot be reached (a restart: the connection refused, reset or cut before
    the answer): after `reconnect_first_wait` seconds, doubling up to `reconnect_max_wait`,
    until the waits add up to `reconnect_seconds` (0 turns this off). A request that never
    left (refused) is sent again whatever it is; one that may have arrived only when it is
    in `REPEATABLE_METHODS`."""

    attempts: int = 4
    max_wait_seconds: float = 30.0
    jitter: float = 0.2
    reconnect_seconds: float = 30.0
    reconnect_first_wait: float = 0.25
    reconnect_max_wait: float = 4.0

    def __post_init__(self) -> None:
        for name in ("max_wait_seconds", "reconnect_seconds", "jitter"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"RetryPolicy.{name} must be 0 or more")
        if not 0 < self.reconnect_first_wait <= self.reconnect_max_wait:
            raise ValueError("RetryPolicy needs 0 < reconnect_first_wait <= reconnect_max_wait")

    def delay(self, error: RpcError, retries_so_far: int, draw: float) -> float | None:
        """Seconds to wait before retrying after `error`, or None to give up. `draw` is a
        random number in [0, 1), injected."""
        wait_ms = error.retry_after_ms
        if wait_ms is None or retries_so_far >= self.attempts:
            return None
        seconds = wait_ms / 1000
        if seconds > self.max_wait_seconds:
            return None
        return seconds * (1 + self.jitter * draw)

    def reconnect_delay(
        self, method: str, *, may_have_arrived: bool, waited: float, draw: float
    ) -> float | None:
        """Seconds to wait before sending `method` again to a server that could not be
        reached, having waited `waited` seconds for it so far; None to give up."""
        if may_have_arrived and method not in REPEATABLE_METHODS:
            return None
        left = self.reconnect_seconds - waited
        if left <= 0:
            return None
        backoff = max(self.reconnect_first_wait, waited)  # doubles: the next wait = all so far
        wait = min(backoff, self.reconnect_max_wait) * (1 + self.jitter * draw)
        return min(wait, left)


class PollPolicy(Struct, frozen=True, kw_only=True):
    """How often to poll: the server's `pollIntervalMs`, clamped; a default when absent."""

    default_interval_ms: int = 1000
    min_interval_ms: int = 100
    max_interval_ms: int = 30_000

    def delay(self, task: DetailedTask | Task) -> float:
        """Seconds to wait before the next `tasks/get` of `task`."""
        advised = task.poll_interval_ms
        interval = self.default_interval_ms if advised is None else advised
        return min(max(interval, self.min_interval_ms), self.max_interval_ms) / 1000


def parse_timestamp(text: str) -> float | None:
    """Seconds since the epoch of an ISO 8601 stamp (`Z` or an offset); None if unreadable."""
    try:
        stamp = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return stamp.timestamp()


def give_up_at(task: DetailedTask | Task) -> float | None:
    """When waiting for `task` stops: `createdAt + ttlMs`; None for no limit (or no way to
    tell, when `createdAt` cannot be read)."""
    if task.ttl_ms is None:
        return None
    created = parse_timestamp(task.created_at)
    return None if created is None else created + task.ttl_ms / 1000


class InputTracker:
    """The keys of a task's input requests already answered: each question is asked once,
    however many polls still show it before the server has taken the answer."""

    def __init__(self, answered: frozenset[str] = frozenset()) -> None:
        self.answered: set[str] = set(answered)

    def unanswered(self, requests: dict[str, InputRequest]) -> dict[str, InputRequest]:
        return {key: request for key, request in requests.items() if key not in self.answered}

    def mark_answered(self, keys: Any) -> None:
        self.answered.update(keys)


class ToolRejected(LocalProtocolError):
    """The server describes the tool with invalid `x-mcp-header` marks: this client does
    not call it (SEP-2243), and `list_tools` leaves it out."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"tool {name!r} is not called: {why}")
        self.name = name
        self.why = why


class ToolHeaders:
    """The `x-mcp-header` marks of a server's tools, from its last `tools/list`: for each
    tool, argument name -> the Name of its `Mcp-Param-{Name}` header. Fresh until `ttlMs`
    after the list was read. A tool whose marks are invalid is `rejected` (why, by name)."""

    def __init__(self) -> None:
        self._by_tool: dict[str, dict[str, str]] = {}
        self.rejected: dict[str, str] = {}
        """Tools of the last list with invalid marks: name -> what is wrong (`ToolRejected`)."""
        self._fresh_until = -math.inf  # never listed

    def learn(self, tools: Iterable[Tool], *, ttl_ms: int, now: float) -> list[Tool]:
        """Replace what is known with `tools`, the whole list, fresh for `ttl_ms`; the
        tools a client may call (those with invalid marks left out, in `rejected`)."""
        by_tool: dict[str, dict[str, str]] = {}
        rejected: dict[str, str] = {}
        kept = []
        for tool in tools:
            marks = header_marks(tool)
            if isinstance(marks, str):
                rejected[tool.name] = marks
                continue
            kept.append(tool)
            if marks:
                by_tool[tool.name] = marks
        self._by_tool, self.rejected = by_tool, rejected
        self._fresh_until = now + max(ttl_ms, 0) / 1000
        return kept

    def forget(self) -> None:
        """The server's tools changed: list them again before the next call."""
        self._fresh_until = -math.inf

    def is_fresh(self, now: float) -> bool:
        return now < self._fresh_until

    def headers_for(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, str]:
        """The `Mcp-Param-*` headers of a call of `tool` with `arguments`."""
        headers: dict[str, str] = {}
        for argument, name in self._by_tool.get(tool, {}).items():
            value = param_header_value(arguments.get(argument))
            if value is not None:
                headers[f"Mcp-Param-{name}"] = value
        return headers


def header_marks(tool: Tool) -> dict[str, str] | str:
    """Argument name -> the Name of its `Mcp-Param-{Name}` header, from the `x-mcp-header`
    marks of the tool's top-level properties; or what makes them invalid (SEP-2243): a
    Name that is not an HTTP token (empty, a space, a colon, beyond ASCII, a control
    character), on a property not a string, integer or boolean, used twice in any case, or a mark
    below the top level."""
    properties = tool.input_schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    marks: dict[str, str] = {}
    seen: set[str] = set()
    for argument, schema in properties.items():
        if not isinstance(schema, dict):
            continue
        if _marked_below(schema):
            return f"argument {argument!r} has an x-mcp-header below the top level"
        if X_MCP_HEADER not in schema:
            continue
        name = schema[X_MCP_HEADER]
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            return f"argument {argument!r}: x-mcp-header {name!r} is not an HTTP token"
        kind = schema.get("type")
        if not isinstance(kind, str) or kind not in _PRIMITIVE:  # (a list is no one type)
            return (
                f"argument {argument!r}: x-mcp-header on type {kind!r}, not a string, "
                "integer or boolean"
            )
        if name.lower() in seen:
            return f"x-mcp-header {name!r} is used twice"
        seen.add(name.lower())
        marks[argument] = name
    return marks


def _marked_below(schema: dict[str, Any]) -> bool:
    """Whether a schema holds an `x-mcp-header` anywhere under its own level (looked at
    to `_MAX_SCHEMA_NODES` values: a server's schema is bounded here too)."""
    pending: list[Any] = [value for key, value in schema.items() if key != X_MCP_HEADER]
    for _ in range(_MAX_SCHEMA_NODES):
        if not pending:
            return False
        value = pending.pop()
        if isinstance(value, dict):
            if X_MCP_HEADER in value:
                return True
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return True  # too big to look through: not called


def names_param_header(error: RpcError) -> bool:
    """Whether the server refused a request for one of its `Mcp-Param-*` headers (-32020
    naming one): the tool's marks may have changed since they were listed."""
    return error.code == HEADER_MISMATCH and "Mcp-Param-" in error.message


_task_decoder: Final = msgspec.json.Decoder(_TaskRead)
_call_result_decoder: Final = msgspec.json.Decoder(CallToolResult)


class ClientCore:
    """Builds requests and reads responses for one client identity."""

    def __init__(self, *, info: Implementation, capabilities: ClientCapabilities) -> None:
        self.info = info
        self.capabilities = capabilities
        self._meta = {
            META_PROTOCOL_VERSION: PROTOCOL_VERSION,
            META_CLIENT_INFO: msgspec.to_builtins(info),
            META_CLIENT_CAPABILITIES: msgspec.to_builtins(capabilities),
        }
        self.tool_headers = ToolHeaders()

    def request(
        self,
        request_id: RequestId,
        method: str,
        params: dict[str, Any] | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> tuple[bytes, dict[str, str]]:
        """The encoded request, and the HTTP headers that mirror it (on `tools/call`, the
        `Mcp-Param-*` of the arguments `tool_headers` knows to be marked). `meta` adds
        keys to `_meta` (W3C `traceparent` and `tracestate`)."""
        full = {**(params or {}), "_meta": {**self._meta, **meta} if meta else self._meta}
        body = msgspec.json.encode(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": full}
        )
        headers = {"MCP-Protocol-Version": PROTOCOL_VERSION, "Mcp-Method": method}
        named = MCP_NAME_PARAM.get(method)
        if named is not None and isinstance(full.get(named), str):
            headers["Mcp-Name"] = encode_header_value(full[named])
        arguments = full.get("arguments")
        if method == "tools/call" and isinstance(arguments, dict):
            headers.update(self.tool_headers.headers_for(str(full.get("name")), arguments))
        return body, headers

    def result_of(self, response: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
        """The result of `response`; `RpcError` for an error response."""
        if response.get("id") != request_id and "error" not in response:
            raise RemoteProtocolError(INTERNAL_ERROR, "response id does not match the request")
        if "error" in response:
            error = response["error"]
            if not isinstance(error, dict):
                raise RemoteProtocolError(INTERNAL_ERROR, "malformed JSON-RPC error response")
            raise RpcError(
                int(error.get("code", INTERNAL_ERROR)),
                str(error.get("message", "")),
                error.get("data"),
            )
        result = response.get("result")
        if not isinstance(result, dict):
            raise RemoteProtocolError(INTERNAL_ERROR, "a JSON-RPC result must be an object")
        return result

    @staticmethod
    def kind_of(result: dict[str, Any]) -> ResultKind:
        """`resultType`, `"complete"` when absent; an unknown one is a protocol error."""
        kind = result.get("resultType", "complete")
        if kind not in _KINDS:
            raise RemoteProtocolError(INTERNAL_ERROR, f"unknown resultType {kind!r}")
        return kind  # type: ignore[no-any-return]

    @staticmethod
    def task_of(result: dict[str, Any]) -> Task:
        """A `tasks/get` result (or a `CreateTaskResult`) as a typed task."""
        return ClientCore.decode(result, _task_decoder, "task")

    @staticmethod
    def call_result_of(result: dict[str, Any]) -> CallToolResult:
        """A complete `tools/call` result; `is_error` is False when the server left it out."""
        return ClientCore.decode(result, _call_result_decoder, "CallToolResult")

    @staticmethod
    def decode(
        result: dict[str, Any], decoder: msgspec.json.Decoder[_Result], what: str
    ) -> _Result:
        """`result` read as `decoder`'s type; a result that does not fit is the server's
        error (`RemoteProtocolError`, -32603 naming what does not fit)."""
        try:
            return decoder.decode(msgspec.json.encode(result))
        except msgspec.ValidationError as error:
            raise RemoteProtocolError(INTERNAL_ERROR, f"malformed {what}: {error}") from None


def task_status(task: DetailedTask | Task) -> TaskStatus:
    """The status a task is in: `task.status`, kept for callers of older versions."""
    return task.status
