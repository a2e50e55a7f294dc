"""Commands: what the core tells its shell to do, and the `Step` that carries them.

A `Step` is final: the shell performs `step.effects` in order, then sends `step.reply`
(if any). That order is a promise the core relies on: a task's record is saved before
the `CreateTaskResult` that names it goes out, and a handler waiting in place for an
answer is registered (`AwaitAnswer`) before the question is saved.

    SaveTask      write the record (compare-and-set on its version)
    DeleteTask    remove the record (its TTL ran out)
    StartTask     run the task's handler here, in the background
    ResumeTask    the answers are in: wake the waiting handler, or run it again
    AwaitAnswer   the running handler waits in place for the answer under `key`
    EndRun        the running handler asked what nobody will answer: end its run
    CancelTask    stop the task's handler, wherever it runs
    CancelRequest stop the in-flight request with this id (`notifications/cancelled`)
    ReleaseLease  no handler runs for the task any more (it waits for answers)
    Notify        send this notification to the request's client (progress, log)
    WakeAt        call `expire_task` for the task at `deadline`
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from ._needs import ToolCall
from ._records import TaskRecord
from ._state import TaskEvent
from ._wire import ErrorObject, RequestId


class Reply(Struct, frozen=True, kw_only=True):
    """One encoded JSON-RPC response, and the HTTP status that should carry it."""

    body: bytes
    http_status: int = 200
    request_id: RequestId | None = None
    error_code: int | None = None
    retry_after_seconds: int | None = None
    """Over HTTP, sent as `Retry-After` (a request refused for coming too soon)."""


class TaskLimits(Struct, frozen=True, kw_only=True):
    """The limits a new record is created under, checked by the store as it creates it."""

    max_tasks: int
    """Records the store may hold at once; one more raises `StoreFull`."""
    max_bytes: int | None = None
    """Bytes of task data (`TaskRecord.data_bytes`) the records may hold (None: no limit)."""
    max_active_per_principal: int | None = None
    """Active records one principal may have at once (None: no such limit)."""
    max_stored_per_principal: int | None = None
    """Records, finished ones too, one principal may have stored (None: no such limit)."""


class SaveTask(Struct, frozen=True, kw_only=True):
    """Write `record` if the stored version is `expected_version` (None: must not exist).

    `active` says whether the task is unfinished (it counts toward its principal's limit,
    and keeps its lease); a save with `active=False` drops the lease. A new record carries
    the `limits` it is created under, and `take_lease` when its handler starts here.
    `event` is the status change the save records (None: a new record, or no change of
    status: a status message, some of the answers), for logs and metrics."""

    record: TaskRecord
    expected_version: int | None
    active: bool = True
    limits: TaskLimits | None = None
    take_lease: bool = False
    event: TaskEvent | None = None

    @property
    def created(self) -> bool:
        return self.expected_version is None


class DeleteTask(Struct, frozen=True, kw_only=True):
    """Remove the record: its TTL ran out. `record` is what is removed (for logs), and
    `expired` says it was still active (its handler is cancelled)."""

    task_id: str
    expected_version: int
    record: TaskRecord | None = None
    expired: bool = False


class StartTask(Struct, frozen=True, kw_only=True):
    """Run the handler inside the task; its outcome goes to `task_returned`.

    `arguments`: `call.arguments` decoded with the tool's `arguments_type` as registered
    now (None for a tool without one). `arguments_refused`: they no longer fit it (the
    tool was registered again with other arguments since the call): the run ends at once
    with this error as its outcome, the handler never called.
    `claim_lease`: take the task's lease first (False when the save creating it took it)."""

    task_id: str
    call: ToolCall
    handler: Any = None
    claim_lease: bool = True
    arguments: Any = None
    arguments_refused: ErrorObject | None = None


class ResumeTask(Struct, frozen=True, kw_only=True):
    """Every outstanding input request is answered: hand the answers to the handler
    waiting in place for them (`AwaitAnswer`), or, if none waits, run the handler again
    with `call` and `arguments` (decoded as for `StartTask`, which says what
    `arguments_refused` means); its outcome goes to `task_returned`."""

    task_id: str
    call: ToolCall
    handler: Any = None
    arguments: Any = None
    arguments_refused: ErrorObject | None = None


class AwaitAnswer(Struct, frozen=True, kw_only=True):
    """The handler running task `task_id` waits in place for the answer under `key`."""

    task_id: str
    key: str


class EndRun(Struct, frozen=True, kw_only=True):
    """The handler running task `task_id` asked a question nobody will answer (the task
    ended or is gone, or the question was refused and the task failed): end its run where
    it asks. The run that asked carries it out (`TaskAsked` answers it instead of an
    `AwaitAnswer`); `task_id` is None when the task is gone."""

    task_id: str | None


class CancelTask(Struct, frozen=True, kw_only=True):
    """Cancel the running handler of the task, wherever it runs."""

    task_id: str


class CancelRequest(Struct, frozen=True, kw_only=True):
    """Cancel the in-flight request with this id (stdio `notifications/cancelled`)."""

    request_id: RequestId
    reason: str | None = None


class ReleaseLease(Struct, frozen=True, kw_only=True):
    """This process no longer runs the task's handler: let go of its lease."""

    task_id: str


class Notify(Struct, frozen=True, kw_only=True):
    """Send `message` (an encoded notification) to the client of the request it is for."""

    message: bytes


class WakeAt(Struct, frozen=True, kw_only=True):
    """Call `expire_task` for `task_id` at `deadline` (seconds since the epoch)."""

    task_id: str
    deadline: float


Effect = (
    SaveTask
    | DeleteTask
    | StartTask
    | ResumeTask
    | AwaitAnswer
    | EndRun
    | CancelTask
    | CancelRequest
    | ReleaseLease
    | Notify
    | WakeAt
)
"""A command of a `Step`."""


class Step(Struct, frozen=True, kw_only=True):
    reply: Reply | None = None
    effects: tuple[Effect, ...] = ()
