"""Everything that can happen to the server, as one kind of value: an input of the core.

The shell hands each input to `ServerCore.handle(input, now)` and gets a `Step` (commands,
then the reply) or a `Need` (run a handler, load a record, carry a stream). Every need names
the input that answers it (`RunTool.returned(outcome)` is a `ToolReturned`, ...), so a shell
is one loop: input in, need out, the need's answer in again, until a `Step`.

    Received(data, headers, principal)      a message came in          -> Step, or any Need
    ToolReturned(call, outcome)             answers `RunTool`          -> Step, or RunTool
    PromptReturned / ResourceReturned /
    CompletionReturned(call, outcome)       answer `GetPrompt`, ...    -> Step
    TaskFetched(request, record)            answers `FetchTask`        -> Step
    TaskRefused(call, per_principal, ...)   the store refused the task a `ToolReturned`
                                            created                    -> Step
    RoundReplayed(need)                     `RunTool.use_once` was used already -> Step
    CallRefused(need)                       shutting down: no new handler -> Step
    TaskReturned / TaskAsked /
    StatusMessageSet / TaskProgressed       from a task's running handler -> Step
    LeaseLapsed(record)                     the process running it stopped -> Step
    OutcomeLost(record, waited)             the store never took its outcome -> Step
    HandlerMissing(record)                  its tool was removed before it ran -> Step
    AnswersArrived(record)                  answers for a handler waiting here -> Step
    Due(record)                             a `WakeAt` came due        -> Step
    ProgressReported / LogEmitted           a request's handler reports -> Step (Notify)
    ListenStarted / ListChanged /
    ResourceUpdated / TaskChanged           a listen stream's news     -> Step (Notify)
    ListenEnded / ListenRefused             a listen stream's last word -> Step (reply)
    StoreUnreachable / ServerFailed         the shell's own failures   -> Step (reply)

Inputs are frozen and hold only what happened: the time comes beside them, as `now`. Their
field names are those of the journal's lines (`mcp_tasks.recording`), which record each
input as it came.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from msgspec import Struct

if TYPE_CHECKING:
    from ._envelope import HttpHeaders
    from ._needs import (
        CompletionCall,
        Listen,
        Need,
        PromptCall,
        ResourceRead,
        RunTool,
        Subscription,
        TaskRequest,
        ToolCall,
    )
    from ._outcomes import CompletionOutcome, PromptOutcome, ResourceOutcome, ToolOutcome
    from ._records import TaskRecord
    from ._wire import IncomingMessage, InputRequest, LoggingLevel, RequestId, RequestMeta


class Input(Struct, frozen=True):
    """Something that happened, for the core to decide on."""

    journal_name: ClassVar[str]
    """The entry point a journal line names for it (journals of format 1 name calls)."""


# --- requests and the handlers they run -----------------------------------------------------


class Received(Input, frozen=True):
    """One JSON-RPC message from a client: its bytes as they came, the HTTP headers that
    carried it (None over stdio) and its sender as the transport authenticated it.
    `closing`: it came while the server shuts down (a task it would create is refused).

    A host that has decoded the message already (a framework that parsed the request)
    hands it as an `IncomingMessage` instead of bytes, `params` as JSON (`msgspec.Raw`):
    the envelope is not encoded again to be decoded again."""

    journal_name: ClassVar[str] = "receive"
    data: bytes | IncomingMessage
    headers: HttpHeaders | None = None
    principal: str | None = None
    closing: bool = False


class ToolReturned(Input, frozen=True):
    """The tool handler run for `RunTool` returned `outcome`."""

    journal_name: ClassVar[str] = "tool_returned"
    call: ToolCall
    outcome: ToolOutcome


class TaskRefused(Input, frozen=True):
    """The store refused the task a `ToolReturned` created: it holds its limit of tasks, or
    `per_principal` of this caller's unfinished ones, or (`stored` too) of its stored ones,
    or (`data`) of bytes of task data. `next_expiry_at`: when there may be room again, as
    the store said (`StoreFull.retry_at`), passed on by the shell untouched."""

    journal_name: ClassVar[str] = "task_refused"
    call: ToolCall
    per_principal: bool
    stored: bool = False
    data: bool = False
    next_expiry_at: float | None = None


class RoundReplayed(Input, frozen=True):
    """The store remembered `need.use_once` already: this `requestState` was used."""

    journal_name: ClassVar[str] = "round_replayed"
    need: RunTool


class CallRefused(Input, frozen=True):
    """The server is shutting down and runs no new handler for `need`."""

    journal_name: ClassVar[str] = "call_refused"
    need: Need


class PromptReturned(Input, frozen=True):
    """The prompt handler run for `GetPrompt` returned `outcome`."""

    journal_name: ClassVar[str] = "prompt_returned"
    call: PromptCall
    outcome: PromptOutcome


class ResourceReturned(Input, frozen=True):
    """The resource handler run for `ReadResource` returned `outcome`."""

    journal_name: ClassVar[str] = "resource_returned"
    call: ResourceRead
    outcome: ResourceOutcome


class CompletionReturned(Input, frozen=True):
    """The completion handler run for `Complete` returned `outcome`."""

    journal_name: ClassVar[str] = "completion_returned"
    call: CompletionCall
    outcome: CompletionOutcome


# --- tasks ----------------------------------------------------------------------------------


class TaskFetched(Input, frozen=True):
    """The store holds `record` (None: nothing) for the task `FetchTask` asked about."""

    journal_name: ClassVar[str] = "handle_task_request"
    request: TaskRequest
    record: TaskRecord | None


class TaskReturned(Input, frozen=True):
    """The handler running task `record` (as stored now; None: gone) returned `outcome`."""

    journal_name: ClassVar[str] = "task_returned"
    record: TaskRecord | None
    outcome: ToolOutcome


class TaskAsked(Input, frozen=True):
    """The handler running task `record` asks `request` and waits in place for the answer."""

    journal_name: ClassVar[str] = "task_asked"
    record: TaskRecord | None
    request: InputRequest


class StatusMessageSet(Input, frozen=True):
    """The handler running task `record` shows `message` as its `statusMessage`."""

    journal_name: ClassVar[str] = "set_status_message"
    record: TaskRecord | None
    message: str | None


class TaskProgressed(Input, frozen=True):
    """The handler running task `record` reports progress (shown as its `statusMessage`)."""

    journal_name: ClassVar[str] = "task_progress"
    record: TaskRecord | None
    progress: float
    total: float | None
    message: str | None


class LeaseLapsed(Input, frozen=True):
    """The process running `record`'s handler stopped before the task ended (a restart, a
    crash, a lease that lapsed)."""

    journal_name: ClassVar[str] = "task_orphaned"
    record: TaskRecord | None


class OutcomeLost(Input, frozen=True):
    """The handler running `record` finished, but the store did not take its outcome for
    `waited` seconds."""

    journal_name: ClassVar[str] = "task_outcome_lost"
    record: TaskRecord | None
    waited: float


class HandlerMissing(Input, frozen=True):
    """A run of task `record` (as stored now; None: gone) found no handler to run: its tool
    was removed while the task waited for its answers or to be run again."""

    journal_name: ClassVar[str] = "task_handler_missing"
    record: TaskRecord | None


class AnswersArrived(Input, frozen=True):
    """`record` (as stored now) may hold answers for a handler waiting in this process."""

    journal_name: ClassVar[str] = "task_resumed"
    record: TaskRecord | None


class Due(Input, frozen=True):
    """A `WakeAt` for `record`'s task came due."""

    journal_name: ClassVar[str] = "expire_task"
    record: TaskRecord | None


# --- what a request's handler sends its client ----------------------------------------------


class ProgressReported(Input, frozen=True):
    """The handler of the request `meta` came with reports progress."""

    journal_name: ClassVar[str] = "progress"
    meta: RequestMeta
    progress: float
    total: float | None
    message: str | None


class LogEmitted(Input, frozen=True):
    """The handler of the request `meta` came with logs `data` at `level`."""

    journal_name: ClassVar[str] = "log"
    meta: RequestMeta
    level: LoggingLevel
    data: Any
    logger: str | None


# --- subscriptions/listen -------------------------------------------------------------------


class ListenStarted(Input, frozen=True):
    """The stream of `subscription` is open: its first message is due."""

    journal_name: ClassVar[str] = "subscription_acknowledged"
    subscription: Subscription


class ListChanged(Input, frozen=True):
    """The list of `kind` (tools, prompts, resources) changed."""

    journal_name: ClassVar[str] = "list_changed"
    subscription: Subscription
    kind: str


class ResourceUpdated(Input, frozen=True):
    """The resource at `uri` changed."""

    journal_name: ClassVar[str] = "resource_updated"
    subscription: Subscription
    uri: str


class TaskChanged(Input, frozen=True):
    """Task `record` changed (as stored now)."""

    journal_name: ClassVar[str] = "task_changed"
    subscription: Subscription
    record: TaskRecord


class ListenEnded(Input, frozen=True):
    """The server ends the stream of `subscription` (it is shutting down)."""

    journal_name: ClassVar[str] = "subscription_ended"
    subscription: Subscription


class ListenRefused(Input, frozen=True):
    """No room for the stream `listen` asked for: the server carries its limit of streams
    (or, `per_principal`, of this principal's)."""

    journal_name: ClassVar[str] = "listen_refused"
    listen: Listen
    per_principal: bool


# --- the shell's own failures ---------------------------------------------------------------


class StoreUnreachable(Input, frozen=True):
    """The task store could not be reached while answering `request_id`."""

    journal_name: ClassVar[str] = "store_unavailable"
    request_id: RequestId


class ServerFailed(Input, frozen=True):
    """The server failed (a bug, a store fault) while answering `request_id`."""

    journal_name: ClassVar[str] = "internal_failure"
    request_id: RequestId


INPUTS: tuple[type[Input], ...] = (
    Received,
    ToolReturned,
    TaskRefused,
    RoundReplayed,
    CallRefused,
    PromptReturned,
    ResourceReturned,
    CompletionReturned,
    TaskFetched,
    TaskReturned,
    TaskAsked,
    StatusMessageSet,
    TaskProgressed,
    LeaseLapsed,
    OutcomeLost,
    HandlerMissing,
    AnswersArrived,
    Due,
    ProgressReported,
    LogEmitted,
    ListenStarted,
    ListChanged,
    ResourceUpdated,
    TaskChanged,
    ListenEnded,
    ListenRefused,
    StoreUnreachable,
    ServerFailed,
)
"""Every kind of input, in the order of this module."""

StepInput = (
    TaskRefused
    | RoundReplayed
    | CallRefused
    | PromptReturned
    | ResourceReturned
    | CompletionReturned
    | TaskFetched
    | TaskReturned
    | TaskAsked
    | StatusMessageSet
    | TaskProgressed
    | LeaseLapsed
    | OutcomeLost
    | HandlerMissing
    | AnswersArrived
    | Due
    | ProgressReported
    | LogEmitted
    | ListenStarted
    | ListChanged
    | ResourceUpdated
    | TaskChanged
    | ListenEnded
    | ListenRefused
    | StoreUnreachable
    | ServerFailed
)
"""Every input the core answers with a `Step` (never a `Need`): all but `Received` and
`ToolReturned`."""
