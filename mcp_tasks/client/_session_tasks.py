"""Tasks in a 2025 session: the 2025-11-25 tasks utility, behind the same `call_tool`,
`call_tool_or_task` and `await_task` as 2026-07-28 tasks.

A tool call goes as a task (`params.task`) when the server runs tool calls as tasks
(`tasks.requests.tools.call`) and the tool allows it (`execution.taskSupport`, read from
`tools/list`); the answer is `{task: {...}}`. Waiting polls `tasks/get` at the task's
`pollInterval` (clamped by `PollPolicy`); once the task is `input_required` or has ended,
`tasks/result` is asked: it blocks until the end, the server's questions (elicitation,
sampling) coming on its stream to the client's handlers, and gives the tool's result (a
tool error, `failed` in 2025-11-25, is the result with `isError`, as in 2026-07-28) or the
task's JSON-RPC error (`TaskFailed`). A cancelled task is `TaskCancelled`; cancelling the
wait sends `tasks/cancel`, shielded, as in 2026-07-28.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Final

import anyio
import msgspec

from ..core import wire as w
from ..core._client import ClientCore, PollPolicy, RpcError, Task, TaskCancelled, TaskFailed
from ..core._client_era import LegacySession, augments, legacy_task
from ..core._state import TaskStatus
from ._callbacks import StatusCallback, maybe_await

_CANCEL_SECONDS: Final = 5.0


class SessionTasks:
    """The 2025-11-25 task half of `Client` (which sets these attributes)."""

    core: ClientCore
    session: LegacySession
    poll: PollPolicy
    cancel_on_exit: bool
    task_support: dict[str, str]
    """`execution.taskSupport` of each tool, as `tools/list` said (2025-11-25)."""
    request: Callable[..., Any]
    list_tools: Callable[..., Any]
    open_session: Callable[[], Any]
    _journal: Callable[[str, str, Any], None]

    async def call_in_session(
        self, name: str, arguments: dict[str, Any]
    ) -> w.CallToolResult | Task:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if self.session.version is None:
            await self.open_session()  # (a client made with era="legacy": not opened yet)
        capabilities = self.session.server_capabilities
        if augments(capabilities, "optional"):  # the server runs calls as tasks: may this tool?
            if name not in self.task_support:
                await self.list_tools()
            if augments(capabilities, self.task_support.get(name)):
                params["task"] = {}
        result = await self.request("tools/call", params)
        created = result.get("task")
        if "task" in params and isinstance(created, dict):
            task = legacy_task(created)
            self._journal("started", task.task_id, name)
            return task
        return self.core.call_result_of(result)

    async def await_in_session(
        self, current: Task, on_status: StatusCallback | None
    ) -> w.CallToolResult:
        task_id = current.task_id
        shown: tuple[Any, ...] | None = None
        try:
            while True:
                if on_status is not None and (current.status, current.status_message) != shown:
                    await maybe_await(on_status(current))
                shown = (current.status, current.status_message)
                if isinstance(current, w.CancelledTask):
                    self._journal("ended", task_id, "cancelled")
                    raise TaskCancelled(task_id)
                if current.status.is_terminal or isinstance(current, w.InputRequiredTask):
                    result = await self._result_of(task_id)
                    if on_status is not None and current.status is not TaskStatus.COMPLETED:
                        done = {**_fields(current), "status": "completed"}
                        await maybe_await(on_status(legacy_task(done, result=result)))
                    self._journal("ended", task_id, "completed")
                    return result
                await anyio.sleep(self.poll.delay(current))
                current = legacy_task(await self.request("tasks/get", {"taskId": task_id}))
        except anyio.get_cancelled_exc_class():
            if self.cancel_on_exit:
                # (a task that ended meanwhile: 2025-11-25 refuses to cancel it, -32602)
                shielded = anyio.move_on_after(_CANCEL_SECONDS, shield=True)
                with shielded, contextlib.suppress(RpcError):
                    await self.request("tasks/cancel", {"taskId": task_id})
            raise

    async def _result_of(self, task_id: str) -> w.CallToolResult:
        """`tasks/result`: blocks until the task ends, its questions answered meanwhile."""
        try:
            result = await self.request("tasks/result", {"taskId": task_id})
        except RpcError as error:
            raise TaskFailed(task_id, error.code, error.message, error.data) from None
        return self.core.call_result_of(result)


def _fields(task: Task) -> dict[str, Any]:
    """A task's wire fields, in 2025-11-25 names (for `legacy_task` to read again)."""
    fields: dict[str, Any] = msgspec.to_builtins(task)
    for modern, legacy in (("ttlMs", "ttl"), ("pollIntervalMs", "pollInterval")):
        if modern in fields:
            fields[legacy] = fields.pop(modern)
    for key in ("result", "error", "inputRequests"):
        fields.pop(key, None)
    return fields
