"""The 2025-11-25 tasks utility in front of the core's tasks, without I/O.

Theory of operation
-------------------
A 2025-11-25 client gets tasks on the same records, handlers and state table as a
2026-07-28 client of the tasks extension: nothing here keeps a task. The session's front
(`legacy.LegacyFront`) rewrites a `tools/call` that carries `params.task` as the modern
task-creating call (the tasks extension in its client capabilities, with `ERA_SETTING`
naming this era, so the record remembers it and only this era's requests see it), and a
`tasks/get|result|list|cancel` as a `TaskQuery` the runtime carries out with the core's
own `tasks/get`, `tasks/update` and `tasks/cancel` (`modern_params`). This module turns
each modern reply into the 2025-11-25 wire:

    created_reply     CreateTaskResult (flat, `resultType: "task"`) -> `{task: Task}`
    read_task         a `tasks/get` reply, read: the 2025 `Task`, its questions, its end
    task_reply        `tasks/get` and `tasks/cancel`: the `Task`, flat
    payload_reply     `tasks/result`: the tool's result, or its error, with related-task
    list_reply        `tasks/list`: a page of `Task`s and the next cursor
    status_notification   `notifications/tasks/status`: the full `Task`

The two eras differ in a few words, mapped here: `ttlMs`/`pollIntervalMs` are `ttl`/
`pollInterval`; a tool result with `isError: true` is a `completed` task in the extension
and a `failed` one here (its `tasks/result` is still that result); a task's questions are
`inputRequests` on `tasks/get` there, and requests of the server's own, tagged with the
related task, on the stream of `tasks/result` here.

`tasks/list` pages through the task ids the session itself created (`LegacySession.
task_ids`, the last `MAX_LISTED_TASKS`): the store cannot list, and a session lists only
its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from . import _wire as w
from ._effects import Reply
from ._errors import INTERNAL_ERROR, INVALID_PARAMS, RemoteProtocolError
from ._records import ERA_SETTING

__all__ = [
    "ERA",
    "LEGACY_TASK_METHODS",
    "MAX_LISTED_TASKS",
    "PAGE_SIZE",
    "RELATED_TASK",
    "SERVER_CAPABILITY",
    "LegacyTask",
    "ReadTask",
    "TaskQuery",
    "created_reply",
    "cursor_at",
    "error_reply",
    "list_reply",
    "listed_with_task_support",
    "modern_params",
    "payload_reply",
    "position_of",
    "read_task",
    "related_meta",
    "status_notification",
    "task_query",
    "task_reply",
    "task_settings",
    "terminal_refusal",
]

ERA: Final = "2025-11-25"
"""The one revision with the tasks utility, and the era its tasks are kept under."""
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
LEGACY_TASK_METHODS: Final = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
SERVER_CAPABILITY: Final[dict[str, Any]] = {
    "list": {},
    "cancel": {},
    "requests": {"tools": {"call": {}}},
}
"""What `initialize` declares as `capabilities.tasks` to a 2025-11-25 client."""
MAX_LISTED_TASKS: Final = 1024
"""Task ids a session remembers for `tasks/list` (the newest; older ones are not listed)."""
PAGE_SIZE: Final = 50
"""Tasks on one page of `tasks/list`."""
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
_STRIPPED: Final = ("resultType", "ttlMs", "cacheScope")


def task_settings() -> dict[str, Any]:
    """The tasks extension's settings in a translated request's client capabilities."""
    return {w.TASKS_EXTENSION: {ERA_SETTING: ERA}}


class TaskQuery(Struct, frozen=True, kw_only=True):
    """A legacy `tasks/get|result|list|cancel`, checked: the runtime carries it out."""

    request_id: w.RequestId
    method: str
    task_id: str | None = None
    """The task named (None for `tasks/list`)."""
    cursor: str | None = None
    """`tasks/list`'s cursor, as given."""


class _TaskIdParams(Struct):
    taskId: str  # noqa: N815 - the wire's name


class _ListParams(Struct):
    cursor: str | None = None


def task_query(request_id: w.RequestId, method: str, params: msgspec.Raw) -> TaskQuery:
    """The query `params` make, or -32602 naming what is wrong with them."""
    try:
        if method == "tasks/list":
            cursor = msgspec.json.decode(params, type=_ListParams).cursor
            return TaskQuery(request_id=request_id, method=method, cursor=cursor)
        task_id = msgspec.json.decode(params, type=_TaskIdParams).taskId
    except msgspec.ValidationError as error:
        raise RemoteProtocolError(INVALID_PARAMS, f"Invalid params: {error}") from None
    except msgspec.DecodeError:
        raise RemoteProtocolError(INVALID_PARAMS, "Invalid params: not a JSON object") from None
    return TaskQuery(request_id=request_id, method=method, task_id=task_id)


def modern_params(
    method: str, task_id: str, answers: dict[str, msgspec.Raw] | None = None
) -> dict[str, Any]:
    """The params (without `_meta`) of the modern `method` for a legacy task query."""
    params: dict[str, Any] = {"taskId": task_id}
    if method == "tasks/update":
        params["inputResponses"] = answers or {}
    return params


# --- replies -------------------------------------------------------------------------------


def result_reply(request_id: w.RequestId | None, result: Any) -> Reply:
    """A JSON-RPC result response."""
    body = _encode_response(_Response(id=request_id, result=result))
    return Reply(body=body, request_id=request_id)


class _Response(Struct, frozen=True):
    """A result response (a Struct encodes faster than a dict)."""

    id: Any
    result: Any
    jsonrpc: str = "2.0"


_encode_response = msgspec.json.Encoder().encode


def error_reply(
    request_id: w.RequestId | None, code: int, message: str, data: Any = UNSET
) -> Reply:
    """A JSON-RPC error response (HTTP 200, as the 2025 revisions answer errors)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not UNSET:
        error["data"] = data
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "error": error})
    return Reply(body=body, request_id=request_id, error_code=code)


def _as_legacy_error(request_id: w.RequestId, reply: Reply) -> Reply:
    """A modern error reply, re-addressed to the legacy request (HTTP 200, as 2025 says)."""
    error = msgspec.json.decode(reply.body).get("error") or {}
    code = error.get("code", INTERNAL_ERROR)
    return error_reply(request_id, code, str(error.get("message", "")), error.get("data", UNSET))


class LegacyTask(Struct, rename="camel", kw_only=True):
    """The 2025-11-25 `Task`: what `tasks/get`, `tasks/cancel`, `tasks/list` and
    `notifications/tasks/status` show. `ttl` is always on the wire (`null`: forever)."""

    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | UnsetType = UNSET
    status_message: str | UnsetType = UNSET


class _ModernTask(Struct, rename="camel", kw_only=True):
    """What a modern `tasks/get` (or `CreateTaskResult`) says, as far as 2025 needs it."""

    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | UnsetType = UNSET
    status_message: str | UnsetType = UNSET
    result_type: str = "complete"
    result: Raw = Raw(b"")
    """A completed task's `CallToolResult`, undecoded (empty: none)."""
    error: dict[str, Any] | None = None
    input_requests: dict[str, w.InputRequest] | None = None

    def legacy(self, status: str | None = None) -> LegacyTask:
        return LegacyTask(
            task_id=self.task_id,
            status=status or self.status,
            created_at=self.created_at,
            last_updated_at=self.last_updated_at,
            ttl=self.ttl_ms,
            poll_interval=self.poll_interval_ms,
            status_message=self.status_message,
        )


class _ModernReply(Struct):
    id: Any = None
    result: _ModernTask | None = None


class _IsError(Struct):
    isError: bool = False  # noqa: N815 - the wire's name


_modern_reply = msgspec.json.Decoder(_ModernReply)


def created_reply(reply: Reply) -> tuple[Reply, str | None]:
    """The modern reply to a task-creating `tools/call` as 2025-11-25 says it, and the id
    of the task it created (None: it created none, the reply is an error or a result)."""
    if reply.error_code is not None or b'"resultType":"task"' not in reply.body:
        return reply, None
    try:
        message = _modern_reply.decode(reply.body)
    except msgspec.ValidationError:  # a result that only mentions a task (structured content)
        return reply, None
    if message.result is None or message.result.result_type != "task":
        return reply, None
    task = message.result.legacy()
    return result_reply(message.id, {"task": task}), task.task_id


class ReadTask(Struct, frozen=True, kw_only=True):
    """A task as a modern `tasks/get` showed it, read for the 2025 wire."""

    task: LegacyTask
    """The 2025-11-25 `Task`."""
    modern_status: str
    input_requests: dict[str, w.InputRequest] | None = None
    result: Raw | None = None
    """A completed task's `CallToolResult`, undecoded."""
    error: dict[str, Any] | None = None

    @property
    def task_id(self) -> str:
        return self.task.task_id

    @property
    def status(self) -> str:
        return self.task.status

    @property
    def is_terminal(self) -> bool:
        return self.modern_status in TERMINAL


def read_task(reply: Reply) -> ReadTask | Reply:
    """The task a modern `tasks/get` reply shows, or that reply if it is an error."""
    if reply.error_code is not None:
        return reply
    modern = _modern_reply.decode(reply.body).result
    assert modern is not None, "a tasks/get result is a task"
    result = modern.result if len(modern.result) else None
    status = modern.status
    if status == "completed" and result is not None and _is_error(result):
        status = "failed"  # a tool error: failed in 2025-11-25, completed in 2026-07-28
    return ReadTask(
        task=modern.legacy(status),
        modern_status=modern.status,
        input_requests=modern.input_requests,
        result=result,
        error=modern.error,
    )


def _is_error(result: Raw) -> bool:
    """A `CallToolResult`'s `isError` (a look for the key first: most have none)."""
    found = bytes(result).find(b'"isError"') >= 0  # (`find`: see `legacy.has_claim`)
    return found and msgspec.json.decode(result, type=_IsError).isError


def task_reply(request_id: w.RequestId, read: ReadTask | Reply) -> Reply:
    """`tasks/get` (and `tasks/cancel`) answered: the `Task`, or the modern error."""
    if isinstance(read, Reply):
        return _as_legacy_error(request_id, read)
    return result_reply(request_id, read.task)


def terminal_refusal(request_id: w.RequestId, read: ReadTask) -> Reply:
    """`tasks/cancel` of a task that has ended: -32602, as 2025-11-25 requires."""
    task_id, status = read.task_id, read.status
    return error_reply(
        request_id, INVALID_PARAMS, f"Task {task_id!r} is {status} already: it cannot be cancelled"
    )


def related_meta(task_id: str) -> dict[str, Any]:
    return {RELATED_TASK: {"taskId": task_id}}


def payload_reply(request_id: w.RequestId, read: ReadTask | Reply) -> Reply:
    """`tasks/result` of an ended task: exactly what the `tools/call` would have returned
    (its result, or its JSON-RPC error), tagged with the related task."""
    if isinstance(read, Reply):
        return _as_legacy_error(request_id, read)
    task_id = read.task_id
    related = {"_meta": related_meta(task_id)}
    if read.modern_status == "completed" and read.result is not None:
        result = msgspec.json.decode(read.result)
        for key in _STRIPPED:
            result.pop(key, None)
        meta = result.get("_meta")
        result["_meta"] = {**(meta if isinstance(meta, dict) else {}), **related["_meta"]}
        return result_reply(request_id, result)
    if read.modern_status == "failed" and read.error is not None:
        error = read.error
        code = error.get("code", INTERNAL_ERROR)
        data = error.get("data", UNSET)
        return error_reply(request_id, code, str(error.get("message", "")), data)
    return error_reply(
        request_id, INTERNAL_ERROR, f"Task {task_id!r} was cancelled: it has no result"
    )


def list_reply(request_id: w.RequestId, tasks: list[LegacyTask], next_cursor: str | None) -> Reply:
    result: dict[str, Any] = {"tasks": tasks}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result_reply(request_id, result)


def status_notification(read: ReadTask) -> bytes:
    """`notifications/tasks/status` with the full task (no related-task `_meta`)."""
    message = {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": read.task}
    return msgspec.json.encode(message)


# --- tasks/list cursors ------------------------------------------------------------------


def cursor_at(position: int) -> str:
    """The opaque cursor of the `position`-th task a session created (0 first)."""
    return f"t{position}"


def position_of(cursor: str | None) -> int:
    """The position a cursor names (0 for none), or -32602 for one this server never gave."""
    if cursor is None:
        return 0
    digits = cursor[1:]
    if cursor[:1] != "t" or not digits.isdigit() or len(digits) > 12:
        raise RemoteProtocolError(INVALID_PARAMS, "Invalid params: unknown tasks/list cursor")
    return int(digits)


# --- tools/list --------------------------------------------------------------------------


def listed_with_task_support(reply: Reply, support_of: Callable[[str], str | None]) -> Reply:
    """A legacy `tools/list` reply with each task tool's `execution.taskSupport`
    ("optional" or "required"; a tool without one is "forbidden", the default)."""
    if reply.error_code is not None:
        return reply
    message = msgspec.json.decode(reply.body)
    changed = False
    for tool in message.get("result", {}).get("tools", ()):
        support = support_of(tool.get("name"))
        if support in ("optional", "required"):
            tool["execution"] = {"taskSupport": support}
            changed = True
    if not changed:
        return reply
    return msgspec.structs.replace(reply, body=msgspec.json.encode(message))
