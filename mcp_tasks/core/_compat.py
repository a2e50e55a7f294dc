"""Names `ServerCore` kept for shells written before the core took one input type (issue
28) or was split by concern (issue 14): each does what it did, in terms of what replaced
it. The entry points below each make their input and hand it to `handle`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from . import _needs as n
from . import _wire as w
from . import inputs as i
from ._catalog import Catalog
from ._effects import Notify, Reply, ResumeTask, SaveTask, Step
from ._encode import Encoder
from ._options import TaskOptions, ToolSpec
from ._outcomes import CompletionOutcome, PromptOutcome, ResourceOutcome, ToolOutcome
from ._records import TaskRecord
from ._tasks import task_call

if TYPE_CHECKING:
    from ._envelope import HttpHeaders
    from .inputs import StepInput


class CompatibleNames:
    catalog: Catalog
    task_options: TaskOptions
    _encode: Encoder

    if TYPE_CHECKING:

        def handle(
            self, input: i.Received | i.ToolReturned | StepInput, now: float
        ) -> Step | n.Need: ...

    def _step(self, input: StepInput, now: float) -> Step:
        step = self.handle(input, now)
        assert isinstance(step, Step)
        return step

    # --- the entry points before `handle` (one per input) ---------------------------------

    def receive(
        self,
        data: bytes,
        now: float,
        headers: HttpHeaders | None = None,
        principal: str | None = None,
    ) -> Step | n.Need:
        """Use `handle(Received(data, headers, principal), now)`."""
        return self.handle(i.Received(data, headers, principal), now)

    def tool_returned(
        self,
        call: n.ToolCall,
        outcome: ToolOutcome,
        now: float,
        *,
        stored_tasks: int | None = None,
        active_for_principal: int | None = None,
    ) -> Step | n.Need:
        """Use `handle(ToolReturned(call, outcome), now)`. `stored_tasks` and
        `active_for_principal` are the old way to check the limits here, for shells whose
        store cannot: a count at a limit refuses the task."""
        answer = self.handle(i.ToolReturned(call, outcome), now)
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
        call: n.ToolCall,
        *,
        per_principal: bool,
        stored: bool = False,
        data: bool = False,
        next_expiry_at: float | None = None,
        now: float | None = None,
    ) -> Step:
        """Use `handle(TaskRefused(...), now)`."""
        if now is None:  # no time given: no time to wait said
            next_expiry_at, now = None, 0.0
        refused = i.TaskRefused(call, per_principal, stored, data, next_expiry_at)
        return self._step(refused, now)

    def round_replayed(self, need: n.RunTool) -> Step:
        """Use `handle(RoundReplayed(need), now)`."""
        return self._step(i.RoundReplayed(need), 0.0)

    def call_refused(self, need: n.Need) -> Step:
        """Use `handle(CallRefused(need), now)`."""
        return self._step(i.CallRefused(need), 0.0)

    def prompt_returned(self, call: n.PromptCall, outcome: PromptOutcome, now: float) -> Step:
        """Use `handle(PromptReturned(call, outcome), now)`."""
        return self._step(i.PromptReturned(call, outcome), now)

    def resource_returned(self, call: n.ResourceRead, outcome: ResourceOutcome, now: float) -> Step:
        """Use `handle(ResourceReturned(call, outcome), now)`."""
        return self._step(i.ResourceReturned(call, outcome), now)

    def completion_returned(self, call: n.CompletionCall, outcome: CompletionOutcome) -> Step:
        """Use `handle(CompletionReturned(call, outcome), now)`."""
        return self._step(i.CompletionReturned(call, outcome), 0.0)

    def handle_task_request(
        self, request: n.TaskRequest, record: TaskRecord | None, now: float
    ) -> Step:
        """Use `handle(TaskFetched(request, record), now)`."""
        return self._step(i.TaskFetched(request, record), now)

    def task_returned(self, record: TaskRecord | None, outcome: ToolOutcome, now: float) -> Step:
        """Use `handle(TaskReturned(record, outcome), now)`."""
        return self._step(i.TaskReturned(record, outcome), now)

    def task_asked(self, record: TaskRecord | None, request: w.InputRequest, now: float) -> Step:
        """Use `handle(TaskAsked(record, request), now)`."""
        return self._step(i.TaskAsked(record, request), now)

    def set_status_message(
        self, record: TaskRecord | None, message: str | None, now: float
    ) -> Step:
        """Use `handle(StatusMessageSet(record, message), now)`."""
        return self._step(i.StatusMessageSet(record, message), now)

    def task_progress(
        self,
        record: TaskRecord | None,
        progress: float,
        total: float | None,
        message: str | None,
        now: float,
    ) -> Step:
        """Use `handle(TaskProgressed(record, progress, total, message), now)`."""
        return self._step(i.TaskProgressed(record, progress, total, message), now)

    def task_orphaned(self, record: TaskRecord | None, now: float) -> Step:
        """Use `handle(LeaseLapsed(record), now)`."""
        return self._step(i.LeaseLapsed(record), now)

    def task_outcome_lost(self, record: TaskRecord | None, waited: float, now: float) -> Step:
        """Use `handle(OutcomeLost(record, waited), now)`."""
        return self._step(i.OutcomeLost(record, waited), now)

    def task_resumed(self, record: TaskRecord | None) -> ResumeTask | None:
        """Use `handle(AnswersArrived(record), now)`: its `ResumeTask`, or None."""
        return resume_of(self._step(i.AnswersArrived(record), 0.0))

    def expire_task(self, record: TaskRecord | None, now: float) -> Step:
        """Use `handle(Due(record), now)`."""
        return self._step(i.Due(record), now)

    def progress(
        self, meta: w.RequestMeta, progress: float, total: float | None, message: str | None
    ) -> Step:
        """Use `handle(ProgressReported(meta, progress, total, message), now)`."""
        return self._step(i.ProgressReported(meta, progress, total, message), 0.0)

    def log(
        self, meta: w.RequestMeta, level: w.LoggingLevel, data: Any, logger: str | None
    ) -> Step:
        """Use `handle(LogEmitted(meta, level, data, logger), now)`."""
        return self._step(i.LogEmitted(meta, level, data, logger), 0.0)

    def subscription_acknowledged(self, subscription: n.Subscription) -> bytes:
        """Use `handle(ListenStarted(subscription), now)`: its `Notify`."""
        message = message_of(self._step(i.ListenStarted(subscription), 0.0))
        assert message is not None
        return message

    def list_changed(self, subscription: n.Subscription, kind: str) -> bytes | None:
        """Use `handle(ListChanged(subscription, kind), now)`: its `Notify`, if any."""
        return message_of(self._step(i.ListChanged(subscription, kind), 0.0))

    def resource_updated(self, subscription: n.Subscription, uri: str) -> bytes | None:
        """Use `handle(ResourceUpdated(subscription, uri), now)`: its `Notify`, if any."""
        return message_of(self._step(i.ResourceUpdated(subscription, uri), 0.0))

    def task_changed(self, subscription: n.Subscription, record: TaskRecord) -> bytes | None:
        """Use `handle(TaskChanged(subscription, record), now)`: its `Notify`, if any."""
        return message_of(self._step(i.TaskChanged(subscription, record), 0.0))

    def subscription_ended(self, subscription: n.Subscription) -> Reply:
        """Use `handle(ListenEnded(subscription), now)`: its reply."""
        return _reply_of(self._step(i.ListenEnded(subscription), 0.0))

    def listen_refused(self, listen: n.Listen, *, per_principal: bool) -> Reply:
        """Use `handle(ListenRefused(listen, per_principal), now)`: its reply."""
        return _reply_of(self._step(i.ListenRefused(listen, per_principal), 0.0))

    def store_unavailable(self, request_id: w.RequestId) -> Reply:
        """Use `handle(StoreUnreachable(request_id), now)`: its reply."""
        return _reply_of(self._step(i.StoreUnreachable(request_id), 0.0))

    def internal_failure(self, request_id: w.RequestId) -> Reply:
        """Use `handle(ServerFailed(request_id), now)`: its reply."""
        return _reply_of(self._step(i.ServerFailed(request_id), 0.0))

    # --- older names ------------------------------------------------------------------------

    def add_tool(self, tool: ToolSpec, handler: Any = None) -> None:
        """Use `catalog.add_tool`."""
        self.catalog.add_tool(tool, handler)

    def remove_tool(self, name: str) -> None:
        """Use `catalog.remove_tool`."""
        self.catalog.remove_tool(name)

    @property
    def tools(self) -> dict[str, ToolSpec]:
        """Use `catalog.tools`."""
        return dict(self.catalog.tools)

    def resume_call(self, record: TaskRecord) -> n.ToolCall | None:
        """The call that runs `record`'s handler again with every answer it has so far,
        or None if the task is not running (it ended). Use `task_resumed`."""
        if record.status.is_terminal or record.request_meta is None:
            return None
        return task_call(record)

    def error_reply(
        self, request_id: w.RequestId | None, code: int, message: str, http_status: int
    ) -> Reply:
        """An error response carried with `http_status`."""
        reply = self._encode.error_object(request_id, w.ErrorObject(code=code, message=message))
        return msgspec.structs.replace(reply, http_status=http_status)


def message_of(step: Step) -> bytes | None:
    """The message of `step`'s one `Notify` (what a listen stream carries), or None."""
    for effect in step.effects:
        if isinstance(effect, Notify):
            return effect.message
    return None


def resume_of(step: Step) -> ResumeTask | None:
    """`step`'s `ResumeTask` (the answer to `AnswersArrived`), or None."""
    for effect in step.effects:
        if isinstance(effect, ResumeTask):
            return effect
    return None


def _reply_of(step: Step) -> Reply:
    assert step.reply is not None
    return step.reply
