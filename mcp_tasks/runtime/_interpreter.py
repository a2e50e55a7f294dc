"""The one place the core's answers are carried out.

`drive` takes what the core returned for a message: while it is a `Need`, fulfil it (run
the handler the need names, load the task, carry the stream) and hand the result back to
the core; once it is a `Step`, `perform` its commands in order and return its reply. The
shell never recurses into the core, and never decides: every branch below is a command.

Store writes are compare-and-set: `transition` reads a task's record, lets the core
decide, performs the step, and when a write finds the record changed underneath it, reads
it again and asks the core anew.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Final

from .._support.backend import cancel_scope
from ..core import (
    START_TASK,
    Complete,
    FetchTask,
    GetPrompt,
    Listen,
    Need,
    ReadResource,
    Reply,
    RunTool,
    Step,
    TaskRecord,
    ToolCall,
    VersionConflict,
)
from ..core.commands import (
    AwaitAnswer,
    CancelRequest,
    CancelTask,
    DeleteTask,
    Notify,
    ReleaseLease,
    ResumeTask,
    SaveTask,
    StartTask,
    WakeAt,
)
from ..core.inputs import (
    CallRefused,
    LogEmitted,
    ProgressReported,
    RoundReplayed,
    TaskRefused,
)
from ..core.wire import (
    LoggingLevel,
    RequestMeta,
)
from ..store import StoreFull
from ..transports._port import Cancellable, Connection
from ..transports._port import Notify as SendNotification
from . import _observe
from ._context import RequestContext, ToolContext
from ._decide import Decide
from ._handlers import invoke_completion, invoke_prompt, invoke_resource, invoke_tool
from ._listen_streams import ListenStreams
from ._post_streams import PostStream
from ._shared import Shared
from ._tasks import TaskRunner
from ._threads import ToolThreadsFull

logger = logging.getLogger("mcp_tasks.server")

MAX_CONFLICT_RETRIES: Final = 50
"""How often one transition is decided anew after losing a compare-and-set race."""

DecideOnRecord = Callable[[TaskRecord | None], Step]
"""What `transition` asks: the core's step for the record as read (None: no record)."""


class Interpreter:
    """Carries out the core's answers: fulfils needs, performs commands. `shared.alarm`
    tells the expiry loop of a deadline (`WakeAt`)."""

    def __init__(self, shared: Shared, *, runner: TaskRunner, listeners: ListenStreams) -> None:
        self._shared = shared
        self._runner = runner
        self._listen_streams = listeners

    # --- needs ------------------------------------------------------------------------------

    async def drive(
        self,
        answer: Step | Need,
        notify: SendNotification | None = None,
        connection: Connection | None = None,
    ) -> Reply | None:
        """Fulfil needs until the core answers with a `Step`; perform it; its reply."""
        tool_call: ToolCall | None = None
        while True:
            if isinstance(answer, Step):
                try:
                    return await self.perform(answer, notify, connection)
                except StoreFull as full:  # the task a tools/call created: over a limit
                    created_by = tool_call or _created_by(answer)
                    if created_by is None:
                        raise
                    refused = TaskRefused(
                        created_by, full.per_principal, full.stored, full.data, full.retry_at
                    )
                    answer = self._shared.decide(refused)
                    tool_call = None
                    continue
            if isinstance(answer, FetchTask):
                fetched = functools.partial(_fetched, self._shared.decide, answer)
                return await self.transition(answer.request.task_id, fetched)
            if isinstance(answer, Listen):
                return await self._listen_streams.carry(
                    answer, notify, connection, closing=self._shared.closing
                )
            if isinstance(answer, RunTool):
                if self._shared.closing:
                    answer = self._shared.decide(CallRefused(answer))
                    continue
                once = answer.use_once
                shared = self._shared
                if once is not None and not await shared.store.coordination.use_once(
                    once.key, once.until, shared.now()
                ):
                    answer = self._shared.decide(RoundReplayed(answer))
                    continue
                tool_call = answer.call
            fulfilled = await self._in_request(answer, notify, connection)
            if fulfilled is None:
                return None  # the client cancelled the request: it wants no reply
            answer = fulfilled

    async def _in_request(
        self,
        need: RunTool | GetPrompt | ReadResource | Complete,
        notify: SendNotification | None,
        connection: Connection | None,
    ) -> Step | Need | None:
        """Run the handler where the client may cancel it: in the request's own task
        (an HTTP POST's, or a task a stdio request keeps), or else in a scope of its own."""
        request_id = need.call.request_id
        if connection is None or request_id is None:  # nothing can cancel it but its caller
            return await self._run_handler(need, notify)
        cancels: Cancellable | None
        if type(notify) is PostStream:  # it runs in its POST's task: the transport cancels it
            cancels = notify.post
        else:  # a task the request keeps: its scope cancels it (no scope to make here)
            task_scope = connection.task_scope
            cancels = None if task_scope is None else task_scope()
        if cancels is not None:
            connection.in_flight[request_id] = cancels
            try:
                return await self._run_handler(need, notify)
            finally:
                connection.in_flight.pop(request_id, None)
        with cancel_scope() as scope:
            connection.in_flight[request_id] = scope
            try:
                answer = await self._run_handler(need, notify)
            finally:
                connection.in_flight.pop(request_id, None)
        return None if scope.cancelled_caught else answer

    async def _run_handler(
        self, need: RunTool | GetPrompt | ReadResource | Complete, notify: SendNotification | None
    ) -> Step | Need:
        decide = self._shared.decide
        if isinstance(need, Complete):
            completion = await invoke_completion(need.handler, need.call)
            return decide(need.returned(completion))
        if isinstance(need, RunTool) and need.starts_task:
            return decide(need.returned(START_TASK))
        to_client = _ToClient(self, need.call.meta, notify)
        if isinstance(need, RunTool):
            context = ToolContext(
                need.call,
                set_status=_no_status,
                ask=None,
                notify_progress=to_client.progress,
                notify_log=to_client.log,
                close_stream=to_client.close_stream,
            )
            threads = self._shared.tool_threads
            try:
                outcome = await invoke_tool(
                    need.handler, need.call, context, need.arguments, threads=threads
                )
            except ToolThreadsFull as full:  # no thread for a plain function: retryable
                return Step(reply=full.reply(need.request_id))
            return decide(need.returned(outcome))
        request_context = RequestContext(
            need.call, notify_progress=to_client.progress, notify_log=to_client.log
        )
        if isinstance(need, GetPrompt):
            prompt = await invoke_prompt(need.handler, need.call, request_context, need.arguments)
            return decide(need.returned(prompt))
        read = await invoke_resource(need.handler, need.call, request_context)
        return decide(need.returned(read))

    # --- commands ---------------------------------------------------------------------------

    async def perform(
        self,
        step: Step,
        notify: SendNotification | None = None,
        connection: Connection | None = None,
    ) -> Reply | None:
        """Carry out `step.effects` in order; then `step.reply` is the answer."""
        if not step.effects:
            return step.reply
        shared = self._shared
        store = shared.store
        runner = self._runner
        listeners = self._listen_streams
        saved: dict[str, TaskRecord] = {}
        for effect in step.effects:
            if isinstance(effect, SaveTask):
                record = effect.record
                await store.save(
                    record,
                    effect.expected_version,
                    active=effect.active,
                    limits=effect.limits,
                    lease_until=shared.lease_until() if effect.take_lease else None,
                )
                saved[record.task_id] = record
                runner.saved(record)
                if shared.watch.waiting:
                    shared.watch.changed(record.task_id, record)
                _observe.saved(shared.telemetry, effect, record.last_updated_at)
                if len(listeners):
                    listeners.task_changed(record)
            elif isinstance(effect, DeleteTask):
                if await store.delete(effect.task_id, effect.expected_version):
                    _observe.removed(shared.telemetry, effect, shared.now())
                if shared.watch.waiting:
                    shared.watch.changed(effect.task_id)
            elif isinstance(effect, StartTask):
                runner.start(effect, saved.get(effect.task_id))
            elif isinstance(effect, ResumeTask):
                await runner.route_resume(effect)
            elif isinstance(effect, AwaitAnswer):
                runner.await_answer(effect)
            elif isinstance(effect, CancelTask):
                await runner.route_cancel(effect.task_id)
            elif isinstance(effect, ReleaseLease):
                await runner.release(effect.task_id)
            elif isinstance(effect, Notify):
                if notify is not None:
                    await notify(effect.message)
            elif isinstance(effect, CancelRequest):
                if connection is not None:
                    connection.cancel(effect.request_id)
            elif isinstance(effect, WakeAt):
                shared.alarm.wake_at(effect.deadline)
        return step.reply

    async def transition(
        self, task_id: str, decide: DecideOnRecord, known: TaskRecord | None = None
    ) -> Reply | None:
        """Read the record (or take `known`, as this process last wrote it), let `decide`
        (the core) say what happens, perform it; when a write finds the record changed
        underneath it, read it again and decide anew."""
        record = known
        for _ in range(MAX_CONFLICT_RETRIES):
            if record is None:
                record = await self._shared.store.get(task_id)
            step = decide(record)
            if not step.effects:  # a read (a poll): nothing to perform
                return step.reply
            try:
                return await self.perform(step)
            except VersionConflict:
                record = None
        raise RuntimeError(
            f"task {task_id!r} kept changing underneath {MAX_CONFLICT_RETRIES} writes"
        )


def _created_by(step: Step) -> ToolCall | None:
    """The `tools/call` whose task `step` creates at once (a tool that runs only as a
    task): its `StartTask` carries it, request id and all."""
    for effect in step.effects:
        if isinstance(effect, StartTask) and effect.call.request_id is not None:
            return effect.call
    return None


def _fetched(decide: Decide, need: FetchTask, record: TaskRecord | None) -> Step:
    return decide(need.fetched(record))


class _ToClient:
    """Progress and log messages of one request: worded by the core (which knows whether
    the request asked for them), sent to its client."""

    __slots__ = ("_interpreter", "_meta", "_notify")

    def __init__(
        self, interpreter: Interpreter, meta: RequestMeta, notify: SendNotification | None
    ) -> None:
        self._interpreter = interpreter
        self._meta = meta
        self._notify = notify

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        step = self._interpreter._shared.decide(
            ProgressReported(self._meta, progress, total, message)
        )
        await self._interpreter.perform(step, self._notify)

    async def log(self, level: LoggingLevel, data: Any, logger_name: str | None) -> None:
        step = self._interpreter._shared.decide(LogEmitted(self._meta, level, data, logger_name))
        await self._interpreter.perform(step, self._notify)

    async def close_stream(self) -> bool:
        """End the request's HTTP stream if it is a resumable one (a 2025-11-25 session's
        POST stream: its notify has `close_stream`); False elsewhere."""
        close = getattr(self._notify, "close_stream", None)
        return False if close is None else bool(await close())


async def _no_status(message: str | None) -> None:
    """Outside a task there is no status to show."""
