"""The task runner: each task's handler in the server's nursery, in a cancel scope of its own.

`tasks/cancel` cancels that scope, so any `await` in the handler is where it stops. A
handler that awaits `ctx.elicit(...)` waits on an event the answers set (`AwaitAnswer`,
then `ResumeTask`); one that returns `InputRequired` ends, and is run again with the
answers. While a handler runs, this process holds the task's lease in the store; with a
store several processes share, `cancel` and `resume` for a handler running elsewhere
travel as `Signal`s.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import trio
from msgspec import Raw

from .._context import ToolContext
from ..core import (
    AwaitAnswer,
    ErrorObject,
    InputRequest,
    LocalProtocolError,
    ResumeTask,
    StartTask,
    TaskRecord,
    TaskStatus,
    ToolOutcome,
    failure_outcome,
)
from ..store import Signal, StoreUnavailable
from ._handlers import ToolEntry, invoke_tool

if TYPE_CHECKING:
    from ._server import Server

logger = logging.getLogger("mcp_tasks.server")

STORE_RETRY_SECONDS: Final = 60.0
"""How long a finished handler's outcome waits for an unavailable store before it is lost."""


@dataclass
class RunningTask:
    scope: trio.CancelScope
    record: TaskRecord | None = None
    """The record as this process last saved it: the first guess of what is stored (a
    compare-and-set tells when another process changed it since)."""
    waiting: dict[str, trio.Event] = field(default_factory=dict)
    answers: dict[str, Raw] = field(default_factory=dict)
    asking: trio.Event | None = None
    """The event of the question being asked in place now (`AwaitAnswer` files it)."""
    asked: list[str] = field(default_factory=list)


class TaskRunner:
    def __init__(self, server: Server) -> None:
        self._server = server
        self._core = server.core
        self.running: dict[str, RunningTask] = {}
        self.nursery: trio.Nursery | None = None
        self.all_ended: trio.Event | None = None

    # --- commands ---------------------------------------------------------------------------

    def start(self, start: StartTask, created: TaskRecord | None = None) -> None:
        """Run the handler of the task in the server's nursery; `created` is the record if
        this process just saved it."""
        assert self.nursery is not None
        # Shielded: a task ends by its own scope only (tasks/cancel, expiry, the end of the
        # shutdown grace), never because whoever runs the server was cancelled.
        running = RunningTask(scope=trio.CancelScope(shield=True), record=created)
        self.running[start.task_id] = running
        self.nursery.start_soon(self._run, start, running)

    def saved(self, record: TaskRecord) -> None:
        running = self.running.get(record.task_id)
        if running is not None:
            running.record = record

    def await_answer(self, effect: AwaitAnswer) -> None:
        running = self.running.get(effect.task_id)
        if running is not None and running.asking is not None:
            running.waiting[effect.key] = running.asking
            running.asked.append(effect.key)

    def resume(self, effect: ResumeTask) -> None:
        running = self.running.get(effect.task_id)
        if running is not None and running.waiting:  # a handler awaits its answers in place
            for key, event in list(running.waiting.items()):
                answer = effect.call.input_responses.get(key)
                if answer is not None:
                    running.answers[key] = answer
                    del running.waiting[key]
                    event.set()
            return
        start = StartTask(task_id=effect.task_id, call=effect.call, handler=effect.handler)
        self.start(start)  # a handler that returned InputRequired runs again

    async def route_resume(self, effect: ResumeTask) -> None:
        """Answers are in: wake the handler where it waits, here or in the process holding
        the task's lease; with no live handler anywhere, run it again here."""
        store = self._server.store
        signals = store.signals
        if effect.task_id in self.running or signals is None:
            self.resume(effect)
            return
        holder = await store.lease_holder(effect.task_id, self._server.now())
        if holder is None or holder == store.origin:
            self.resume(effect)
        else:
            await signals.publish(Signal("resume", effect.task_id, store.origin, to=holder))

    def cancel(self, task_id: str) -> None:
        running = self.running.get(task_id)
        if running is not None:
            running.scope.cancel()

    async def route_cancel(self, task_id: str) -> None:
        signals = self._server.store.signals
        if task_id in self.running:
            self.cancel(task_id)
        elif signals is not None:
            await signals.publish(Signal("cancel", task_id, self._server.store.origin))

    async def release(self, task_id: str) -> None:
        if task_id not in self.running:  # not run again meanwhile
            await self._server.store.release(task_id)

    # --- one run of a handler -------------------------------------------------------------

    async def _run(self, start: StartTask, running: RunningTask) -> None:
        task_id, call = start.task_id, start.call
        context = ToolContext(
            call,
            set_status=lambda message: self._set_status(task_id, message),
            ask=lambda request: self._ask(task_id, running, request),
            notify_progress=lambda progress, total, message: self._progress(
                task_id, progress, total, message
            ),
        )
        try:
            with running.scope:
                if start.claim_lease:
                    await self._server.store.claim(task_id, self._server.lease_until())
                entry: ToolEntry | None = start.handler
                if entry is None:  # removed while the task waited
                    gone = LocalProtocolError(f"Tool {call.tool_name!r} is no longer registered")
                    outcome: ToolOutcome = failure_outcome(gone, f"Tool {call.tool_name!r}")
                else:
                    outcome = await invoke_tool(entry, call, context)
        finally:
            if self.running.get(task_id) is running:
                del self.running[task_id]
            if not self.running and self.all_ended is not None:
                self.all_ended.set()
        if running.scope.cancelled_caught:
            # Cancelled, failed or expired: the record says so already (a terminal save drops
            # the lease), or is gone with its lease. Shut down: the lease stays, so the task
            # is taken over (or failed) as one left unfinished.
            return
        now = self._server.now()
        interpreter = self._server.interpreter
        await self._keep_trying(
            f"saving the outcome of task {task_id!r}",
            lambda: interpreter.transition(
                task_id,
                lambda record: self._core.task_returned(record, outcome, now),
                running.record,
            ),
        )

    async def _keep_trying(self, what: str, attempt: Callable[[], Awaitable[Any]]) -> None:
        """`attempt()` until the store takes it, for up to `STORE_RETRY_SECONDS`: a handler's
        outcome must not be lost to a store's blip. Past that it is (the task is then taken
        over as one whose process stopped, once its lease lapses)."""
        with trio.move_on_after(STORE_RETRY_SECONDS):
            while True:
                try:
                    await attempt()
                    return
                except StoreUnavailable as error:
                    logger.warning("%s: %s; trying again", what, error)
                await trio.sleep(self._server.poll_seconds)
        logger.error("%s: the store stayed unavailable; giving up", what)

    async def _set_status(self, task_id: str, message: str | None) -> None:
        now = self._server.now()
        await self._save_progress(
            task_id, lambda record: self._core.set_status_message(record, message, now)
        )

    async def _progress(
        self, task_id: str, progress: float, total: float | None, message: str | None
    ) -> None:
        now = self._server.now()
        await self._save_progress(
            task_id,
            lambda record: self._core.task_progress(record, progress, total, message, now),
        )

    async def _save_progress(self, task_id: str, decide: Any) -> None:
        running = self.running.get(task_id)
        try:
            await self._server.interpreter.transition(
                task_id, decide, None if running is None else running.record
            )
        except StoreUnavailable as error:  # progress is worth no more than a warning
            logger.warning("task %r: status message not saved: %s", task_id, error)

    async def _ask(self, task_id: str, running: RunningTask, request: InputRequest) -> Raw:
        event = running.asking = trio.Event()
        running.asked.clear()

        def decide(record: TaskRecord | None) -> Any:
            for key in running.asked:  # decided before, on a record that has changed since
                running.waiting.pop(key, None)
            running.asked.clear()
            return self._core.task_asked(record, request, self._server.now())

        try:
            await self._server.interpreter.transition(task_id, decide, running.record)
        finally:
            running.asking = None
        asked = list(running.asked)
        after = running.record  # as the transition saved it
        if not asked or after is None or after.status is not TaskStatus.INPUT_REQUIRED:
            # The task is gone (expired), or the core refused the question (the client
            # cannot answer it) and failed the task: nothing will answer, so the run ends.
            for key in asked:
                running.waiting.pop(key, None)
            if not event.is_set():
                await _stop_run(running)
        await event.wait()
        return running.answers.pop(asked[0])


async def _stop_run(running: RunningTask) -> None:
    """End a task's run from inside it: its own cancel scope catches the cancellation."""
    running.scope.cancel()
    await trio.lowlevel.checkpoint()
    raise AssertionError("unreachable: the checkpoint raised Cancelled")


__all__ = ["STORE_RETRY_SECONDS", "ErrorObject", "RunningTask", "TaskRunner"]
