"""The server's background loops: expiry, and with a shared store leases and signals.

* Expiry sleeps until the store's next deadline (or an earlier one a `WakeAt` named), then
  hands each record that came due to the core (`Due`).
* Leases: this process renews the leases of the handlers it runs every third of
  `lease_seconds`, and takes over the tasks whose lease lapsed (`task_orphaned`).
* Signals: cancel or resume a handler running here, and `notifications/tasks` for records
  another process saved. Signals are not stored: each time the loop starts listening
  (again, after an outage), the handlers running here are looked up in the store: those
  whose task ended meanwhile (cancelled, taken over, expired) are cancelled, and those
  waiting in place whose answers came are resumed.

A loop that fails (the store was unreachable) starts again a moment later: a store's
hiccup must not end the server.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Final

import anyio
import anyio.abc

from .._support.backend import event
from ..core import Step, TaskRecord, VersionConflict
from ..core._compat import resume_of
from ..core.inputs import AnswersArrived, Due, LeaseLapsed
from ..store import Signal, StoreUnavailable
from ._interpreter import Interpreter
from ._listen_streams import ListenStreams
from ._shared import Shared
from ._tasks import TaskRunner

logger = logging.getLogger("mcp_tasks.server")

REAP_BATCH: Final = 100
"""Tasks whose lease lapsed, asked of the store at a time."""


class Background:
    def __init__(
        self,
        shared: Shared,
        *,
        interpreter: Interpreter,
        runner: TaskRunner,
        listeners: ListenStreams,
    ) -> None:
        self._shared = shared
        self._interpreter = interpreter
        self._runner = runner
        self._listen_streams = listeners
        self.on_session_signal: Callable[[Signal], None] | None = None
        """Takes a `session` signal (a 2025 client's message for the process awaiting it)."""

    def wake_at(self, deadline: float) -> None:
        """A record's expiry is due at `deadline`: wake the expiry loop if it sleeps past it."""
        self._shared.alarm.wake_at(deadline)

    async def serve(
        self,
        *,
        task_status: anyio.abc.TaskStatus[anyio.CancelScope] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Expiry, and with a shared store leases and signals, until its scope is cancelled."""
        coordination = self._shared.store.coordination
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(self._keep_going, self._expire_loop, "expiring tasks")
            if coordination.shared:
                nursery.start_soon(self._keep_going, self._lease_loop, "renewing task leases")
            if coordination.signals is not None:
                following = "following other processes' task changes"
                await nursery.start(self._keep_going, self._signal_loop, following)
            task_status.started(nursery.cancel_scope)

    async def _keep_going(
        self,
        loop: Callable[..., Awaitable[None]],
        what: str,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run `loop` again whenever it fails; its log lines say `what` it does (not the
        name of a private function)."""
        once = _StartedOnce(task_status)
        while True:
            try:
                await loop(task_status=once)
                return
            except StoreUnavailable as error:  # an outage: one line, not a traceback
                logger.warning("%s stopped: %s; starting again", what, error)
            except Exception:
                logger.exception("%s failed; starting again", what)
            once.started()  # serve on without it meanwhile
            await anyio.sleep(self._shared.poll_seconds)

    async def _expire_loop(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        shared, alarm = self._shared, self._shared.alarm
        # Another process may index an earlier deadline without waking this one: with a
        # shared store, look again at least every `poll_seconds`.
        most = shared.poll_seconds if shared.store.coordination.shared else math.inf
        wake = alarm.wake = event()
        task_status.started()
        try:
            while True:
                deadline = await shared.store.next_deadline()
                delay = math.inf if deadline is None else deadline - shared.now()
                if delay > 0:
                    alarm.sleeping_until = shared.now() + min(delay, most)
                    with anyio.move_on_after(min(delay, most)):
                        await wake.wait()
                    alarm.sleeping_until = math.inf  # awake: any WakeAt means look again
                    wake = alarm.wake = event()
                    if delay > most:
                        continue
                await self._expire_due()
        finally:
            alarm.wake = None
            alarm.sleeping_until = math.inf

    async def _expire_due(self) -> None:
        interpreter = self._interpreter
        for record in await self._shared.store.pop_due(self._shared.now()):
            try:
                await interpreter.perform(self._shared.decide(Due(record)))
            except VersionConflict:  # changed since it came due: decide on it anew
                await interpreter.transition(record.task_id, self._due)

    def _due(self, record: TaskRecord | None) -> Step:
        return self._shared.decide(Due(record))

    def _lease_lapsed(self, record: TaskRecord | None) -> Step:
        return self._shared.decide(LeaseLapsed(record))

    async def _lease_loop(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Renew this process's leases, and take over the tasks of processes that died."""
        shared = self._shared
        task_status.started()
        while True:
            await anyio.sleep(shared.lease_seconds / 3)
            try:
                held = self._runner.held
                if held:
                    await shared.store.coordination.renew(held, shared.lease_until())
                await self.reap_lapsed()
            except StoreUnavailable as error:  # the leases are renewed when it is back
                logger.warning("leases not renewed: %s", error)

    async def reap_lapsed(self) -> None:
        """Take over every task whose lease lapsed (its process stopped), in batches of
        `REAP_BATCH`, however many there are: the core fails each one, or runs it again."""
        shared, runner = self._shared, self._runner
        now = shared.now()
        seen: set[str] = set()
        while True:
            lapsed = await shared.store.coordination.lapsed(now, REAP_BATCH)
            fresh = [task_id for task_id in lapsed if task_id not in seen]
            held = set(runner.held)
            for task_id in fresh:
                if task_id in held:
                    # Its lease lapsed while this process could not reach the store: the
                    # handler (or its outcome's save) is still here, so keep it.
                    await shared.store.coordination.claim(task_id, shared.lease_until())
                    continue
                logger.debug(
                    "task %s: the process running it stopped; taking it over",
                    task_id,
                    extra={"task_id": task_id},
                )
                await self._interpreter.transition(task_id, self._lease_lapsed)
            seen.update(fresh)
            if len(lapsed) < REAP_BATCH or not fresh:
                break
        taken = seen - set(runner.held)
        if taken:
            logger.warning(
                "took over %d task(s) whose process stopped before they ended", len(taken)
            )

    async def _signal_loop(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        runner = self._runner
        coordination = self._shared.store.coordination
        signals, origin = coordination.signals, coordination.origin
        nursery = runner.nursery
        assert signals is not None and nursery is not None
        async with signals.listen() as stream:
            task_status.started()
            # Signals are not stored: a cancel or an answer that came while this loop was
            # not listening (Redis out of reach) is only in the record. Listening now, look.
            for task_id in list(runner.running):
                nursery.start_soon(self._catch_up, task_id)
            watch = self._shared.watch
            async for signal in stream:
                if signal.kind == "changed" and signal.origin != origin and watch.waiting:
                    watch.changed(signal.task_id)  # saved by another process
                if signal.kind == "cancel":
                    runner.cancel(signal.task_id)
                elif signal.kind == "resume":
                    if signal.to == origin:
                        nursery.start_soon(self._resume_from_signal, signal.task_id)
                elif signal.kind in ("session", "event"):
                    if signal.origin != origin and self.on_session_signal is not None:
                        self.on_session_signal(signal)
                elif signal.origin != origin and self._listen_streams.wants_task(signal.task_id):
                    nursery.start_soon(self._publish_stored_task, signal.task_id)

    async def _resume_from_signal(self, task_id: str) -> None:
        record = await self._stored(task_id, "answers not delivered")
        resume = resume_of(self._shared.decide(AnswersArrived(record)))
        if resume is not None:
            self._runner.resume(resume)

    async def _catch_up(self, task_id: str) -> None:
        """Do what the signals lost while this loop was not listening would have done to the
        handler running here: cancel it if its task ended or is gone, wake it if it waits in
        place and its record holds its answers (never a second run of a handler that moved
        on meanwhile)."""
        try:
            record = await self._shared.store.get(task_id)
        except StoreUnavailable as error:  # out of reach again: the next listen looks again
            logger.warning("task %s: signals not caught up: %s", task_id, error)
            return
        runner = self._runner
        running = runner.running.get(task_id)
        if running is None:
            return
        if record is None or record.status.is_terminal:
            runner.cancel(task_id)
            return
        resume = resume_of(self._shared.decide(AnswersArrived(record)))
        if resume is not None and running.waiting:
            runner.resume(resume)

    async def _publish_stored_task(self, task_id: str) -> None:
        record = await self._stored(task_id, "notifications/tasks not sent")
        if record is not None:
            self._listen_streams.task_changed(record)

    async def _stored(self, task_id: str, lost: str) -> TaskRecord | None:
        """The record, or None if it is gone or the store cannot be reached (`lost` says
        what that costs, in the log)."""
        try:
            return await self._shared.store.get(task_id)
        except StoreUnavailable as error:
            logger.warning("task %s: %s: %s", task_id, lost, error, extra={"task_id": task_id})
            return None


class _StartedOnce:
    """A task status that passes on only the first `started()`: a loop run again after
    a failure starts again without telling its nursery twice."""

    def __init__(self, status: anyio.abc.TaskStatus[None]) -> None:
        self._status = status
        self._told = False

    def started(self, value: None = None) -> None:
        if not self._told:
            self._told = True
            self._status.started(value)
