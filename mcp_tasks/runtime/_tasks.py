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
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import anyio
import anyio.abc
import anyio.lowlevel
from msgspec import Raw

from .._support import backend as _backend
from .._support.backend import CancelScope, Event, Spawner, cancel_scope, event
from ..core import (
    Reply,
    Step,
    TaskRecord,
    ToolOutcome,
)
from ..core.commands import (
    AwaitAnswer,
    EndRun,
    ResumeTask,
    StartTask,
)
from ..core.inputs import (
    HandlerMissing,
    OutcomeLost,
    StatusMessageSet,
    TaskAsked,
    TaskProgressed,
    TaskReturned,
)
from ..core.wire import (
    ErrorObject,
    InputRequest,
)
from ..store import Signal, StoreUnavailable
from ._context import ToolContext
from ._handlers import ToolEntry, invoke_tool
from ._shared import Shared

logger = logging.getLogger("mcp_tasks.server")

STORE_RETRY_SECONDS: Final = 60.0
"""How long a finished handler's outcome waits for an unavailable store before it is
dropped (the task then fails, saying its outcome was lost)."""
FIRST_RETRY_SECONDS: Final = 0.05
LAST_RETRY_SECONDS: Final = 2.0
"""Waits between tries to save while the store is unavailable: doubling from the first to
the last, which is kept, so a store that is back is written to within about that long."""


class Transition(Protocol):
    """`Interpreter.transition`: read a record, let the core decide, perform, retry on a
    compare-and-set conflict."""

    async def __call__(
        self,
        task_id: str,
        decide: Callable[[TaskRecord | None], Step],
        known: TaskRecord | None = None,
    ) -> Reply | None: ...


@dataclass
class RunningTask:
    scope: CancelScope
    record: TaskRecord | None = None
    """The record as this process last saved it: the first guess of what is stored (a
    compare-and-set tells when another process changed it since)."""
    waiting: dict[str, Event] = field(default_factory=dict)
    answers: dict[str, Raw] = field(default_factory=dict)
    asking: Event | None = None
    """The event of the question being asked in place now (`AwaitAnswer` files it)."""
    asked: list[str] = field(default_factory=list)
    outcome: ToolOutcome | None = None
    """What the handler returned, until it is saved (or dropped, the store out of reach)."""
    early: ResumeTask | None = None
    """Answers that came while the question was being saved, before the handler waited."""
    ends: bool = False
    """The core answered the question being asked with `EndRun`: nothing will answer it."""
    handler_missing: bool = False
    """The run found no handler (its tool was removed): the core fails the task."""


class TaskRunner:
    """Runs each task's handler. Its outcome, question and progress are saved through
    `transition` (the interpreter's, which in turn starts handlers here: `saves_through`
    closes that one circle, once, when the server puts its parts together)."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._transition: Transition | None = None
        self.running: dict[str, RunningTask] = {}
        self.finishing: set[str] = set()
        """Tasks whose handler ended here and whose outcome is being saved: this process
        still holds their lease (renewed, never taken over by itself) until it is."""
        self.outcome_retry_seconds = STORE_RETRY_SECONDS
        self.nursery: anyio.abc.TaskGroup | None = None
        self.spawner: Spawner | None = None
        """Where handlers run (the loop's own tasks: cheaper than the nursery's)."""
        self.all_ended: Event | None = None

    def saves_through(self, transition: Transition) -> None:
        """Save what handlers report with `transition` (`Interpreter.transition`)."""
        self._transition = transition

    async def transition(
        self,
        task_id: str,
        decide: Callable[[TaskRecord | None], Step],
        known: TaskRecord | None = None,
    ) -> None:
        assert self._transition is not None, "saves_through() was not called"
        await self._transition(task_id, decide, known)

    # --- commands ---------------------------------------------------------------------------

    def start(self, start: StartTask, created: TaskRecord | None = None) -> None:
        """Run the handler of the task in a task of its own (`spawner`); `created` is the
        record if this process just saved it."""
        assert self.spawner is not None
        # Shielded: a task ends by its own scope only (tasks/cancel, expiry, the end of the
        # shutdown grace), never because whoever runs the server was cancelled.
        running = RunningTask(scope=cancel_scope(shield=True), record=created)
        self.running[start.task_id] = running
        self.spawner.spawn(self._run, start, running, name=f"task {start.task_id}")

    @property
    def held(self) -> list[str]:
        """The tasks whose lease this process holds: handlers running, outcomes saving."""
        return [*self.running, *self.finishing]

    @property
    def idle(self) -> bool:
        return not self.running and not self.finishing

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
        """Hand the answers to the handler running here (never a second run of it: a late
        or repeated signal finds it running, and is done); with none, run it again."""
        running = self.running.get(effect.task_id)
        if running is None:
            start = StartTask(
                task_id=effect.task_id,
                call=effect.call,
                handler=effect.handler,
                arguments=effect.arguments,
                arguments_refused=effect.arguments_refused,
            )
            self.start(start)  # a handler that returned InputRequired runs again
        elif running.waiting:  # a handler awaits its answers in place
            for key, answered in list(running.waiting.items()):
                answer = effect.call.input_responses.get(key)
                if answer is not None:
                    running.answers[key] = answer
                    del running.waiting[key]
                    answered.set()
        elif running.asking is not None:  # its question is being saved: kept until it waits
            running.early = effect

    async def route_resume(self, effect: ResumeTask) -> None:
        """Answers are in: wake the handler where it waits, here or in the process holding
        the task's lease; with no live handler anywhere, run it again here."""
        coordination = self._shared.store.coordination
        signals = coordination.signals
        if effect.task_id in self.running or signals is None:
            self.resume(effect)
            return
        holder = await coordination.lease_holder(effect.task_id, self._shared.now())
        if holder is None or holder == coordination.origin:
            self.resume(effect)
        else:
            await signals.publish(Signal("resume", effect.task_id, coordination.origin, to=holder))

    def cancel(self, task_id: str) -> None:
        running = self.running.get(task_id)
        if running is not None:
            running.scope.cancel()

    async def route_cancel(self, task_id: str) -> None:
        coordination = self._shared.store.coordination
        signals = coordination.signals
        if task_id in self.running:
            self.cancel(task_id)
        elif signals is not None:
            await signals.publish(Signal("cancel", task_id, coordination.origin))

    async def release(self, task_id: str) -> None:
        if task_id not in self.running:  # not run again meanwhile
            await self._shared.store.coordination.release(task_id)

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
        threads = self._shared.tool_threads
        shared = self._shared
        try:
            with running.scope:
                if start.claim_lease:
                    await shared.store.coordination.claim(task_id, shared.lease_until())
                entry: ToolEntry | None = start.handler
                arguments = start.arguments
                if entry is None:  # removed while the task waited: the core says what now
                    running.handler_missing = True
                elif start.arguments_refused is not None:  # they fit the tool no more
                    running.outcome = start.arguments_refused
                elif not shared.telemetry.enabled:
                    running.outcome = await invoke_tool(
                        entry, call, context, arguments, threads=threads
                    )
                else:
                    with shared.telemetry.task_context(task_id, call.tool_name, call.meta):
                        running.outcome = await invoke_tool(
                            entry, call, context, arguments, threads=threads
                        )
            # Cancelled, failed or expired: the record says so already (a terminal save
            # drops the lease), or is gone with its lease. Shut down: the lease stays, so
            # the task is taken over (or failed) as one left unfinished.
            ended = running.outcome is not None or running.handler_missing
            if ended and not running.scope.cancelled_caught:
                self.finishing.add(task_id)
        finally:
            if self.running.get(task_id) is running:
                del self.running[task_id]
            self._note_ended()
        if task_id not in self.finishing:
            return
        try:
            await self._save_outcome(task_id, running)
        finally:
            self.finishing.discard(task_id)
            self._note_ended()

    def _note_ended(self) -> None:
        if self.idle and self.all_ended is not None:
            self.all_ended.set()

    async def _save_outcome(self, task_id: str, running: RunningTask) -> None:
        """Save what the handler returned, through a store outage of up to
        `outcome_retry_seconds`; past that the outcome is dropped and the task fails with an
        error that says so (saved as soon as the store is back)."""
        transition = self.transition

        def returned(record: TaskRecord | None) -> Step:
            if running.handler_missing:
                return self._shared.decide(HandlerMissing(record))
            assert running.outcome is not None  # held by `running` alone: it may be dropped
            return self._shared.decide(TaskReturned(record, running.outcome))

        saved = await self._keep_trying(
            f"task {task_id!r}: saving its outcome",
            lambda: transition(task_id, returned, running.record),
            self.outcome_retry_seconds,
        )
        if saved:
            return
        waited = self.outcome_retry_seconds
        logger.error(
            "task %s: the store stayed unavailable for %g s; its outcome is dropped and the "
            "task fails saying so once the store is back",
            task_id,
            waited,
            extra={"task_id": task_id},
        )
        running.outcome = None  # what may be large goes; the failure to save is small
        await self._keep_trying(
            f"task {task_id!r}: saving that its outcome was lost",
            lambda: transition(
                task_id,
                lambda record: self._shared.decide(OutcomeLost(record, waited)),
                running.record,
            ),
            None,
        )

    async def _keep_trying(
        self, what: str, attempt: Callable[[], Awaitable[Any]], seconds: float | None
    ) -> bool:
        """`attempt()` until the store takes it (True), waiting longer each time it is
        unavailable, for up to `seconds` from now (None: as long as this process runs).
        The first try runs outside the deadline's scope (nearly every one succeeds, and a
        scope with a deadline costs a task about 6% of its life); a store's own timeouts
        bound it, and the retries keep to the deadline set before it."""
        deadline = math.inf if seconds is None else _backend.clock()() + seconds
        wait = FIRST_RETRY_SECONDS
        try:
            await attempt()
            return True
        except StoreUnavailable as error:
            logger.warning("%s: %s; trying again in %.2g s", what, error, wait)
        with cancel_scope(deadline=deadline):
            while True:
                await anyio.sleep(wait * random.uniform(0.8, 1.0))  # apart, not in step
                wait = min(wait * 2, LAST_RETRY_SECONDS)
                try:
                    await attempt()
                    return True
                except StoreUnavailable as error:
                    logger.warning("%s: %s; trying again in %.2g s", what, error, wait)
        return False

    async def _set_status(self, task_id: str, message: str | None) -> None:
        await self._save_progress(
            task_id, lambda record: self._shared.decide(StatusMessageSet(record, message))
        )

    async def _progress(
        self, task_id: str, progress: float, total: float | None, message: str | None
    ) -> None:
        await self._save_progress(
            task_id,
            lambda record: self._shared.decide(TaskProgressed(record, progress, total, message)),
        )

    async def _save_progress(self, task_id: str, decide: Any) -> None:
        running = self.running.get(task_id)
        try:
            await self.transition(task_id, decide, None if running is None else running.record)
        except StoreUnavailable as error:  # progress is worth no more than a warning
            logger.warning(
                "task %s: status message not saved: %s", task_id, error, extra={"task_id": task_id}
            )

    async def _ask(self, task_id: str, running: RunningTask, request: InputRequest) -> Raw:
        answered = running.asking = event()
        running.asked.clear()

        def decide(record: TaskRecord | None) -> Step:
            for key in running.asked:  # decided before, on a record that has changed since
                running.waiting.pop(key, None)
            running.asked.clear()
            step = self._shared.decide(TaskAsked(record, request))
            running.ends = any(isinstance(effect, EndRun) for effect in step.effects)
            return step

        try:  # through a store outage, as an outcome is: asking is not failing
            saved = await self._keep_trying(
                f"task {task_id!r}: saving its question",
                lambda: self.transition(task_id, decide, running.record),
                self.outcome_retry_seconds,
            )
        finally:
            running.asking = None
        if not saved:
            raise StoreUnavailable(
                f"the question could not be saved: the task store stayed unavailable for "
                f"{self.outcome_retry_seconds:g} s"
            )
        asked = list(running.asked)
        if running.ends:  # the core says nothing will answer (`EndRun`): the run ends
            for key in asked:
                running.waiting.pop(key, None)
            if not answered.is_set():
                await _stop_run(running)
        early, running.early = running.early, None
        if early is not None:
            self.resume(early)
        await answered.wait()
        return running.answers.pop(asked[0])


async def _stop_run(running: RunningTask) -> None:
    """End a task's run from inside it: its own cancel scope catches the cancellation."""
    running.scope.cancel()
    await anyio.lowlevel.checkpoint()
    raise AssertionError("unreachable: the checkpoint raised Cancelled")


__all__ = ["STORE_RETRY_SECONDS", "ErrorObject", "RunningTask", "TaskRunner"]
