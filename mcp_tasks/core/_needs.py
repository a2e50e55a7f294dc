"""What the core needs before it can go on, and the calls that carry a request to a handler.

A `Need` is not a command: the shell fulfils it (runs a handler, loads a record, opens a
stream) and hands what it got back to the core, which answers with a `Step` or another
`Need`. The shell loops until it has a `Step`; it never recurses.

    RunTool(call, handler)       run the tool handler: `need.returned(outcome)`, a ToolReturned
    GetPrompt(call, handler)     run the prompt handler: `need.returned(outcome)`
    ReadResource(call, handler)  run the resource handler: `need.returned(outcome)`
    Complete(call, handler)      run the completion handler: `need.returned(outcome)`
    FetchTask(request)           load `request.task_id`: `need.fetched(record)`, a TaskFetched
    Listen(subscription, ...)    carry a `subscriptions/listen` stream until it ends, or
                                 `need.refused(per_principal)` if the server carries its limit

Each method named there makes the input (`inputs`) that answers the need.

`handler` is whatever was registered with the spec (`Catalog.add_*(spec, handler)`): the
core hands it back untouched, so the shell runs exactly what the core found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec import Raw, Struct

from ._wire import (
    ClientCapabilities,
    CompletionArgument,
    PromptReference,
    RequestId,
    RequestMeta,
    ResourceTemplateReference,
    SubscriptionFilter,
)
from .inputs import (
    CompletionReturned,
    ListenRefused,
    PromptReturned,
    ResourceReturned,
    TaskFetched,
    ToolReturned,
)

if TYPE_CHECKING:
    from ._outcomes import CompletionOutcome, PromptOutcome, ResourceOutcome, ToolOutcome
    from ._records import TaskRecord


class _HandlerCall(Struct, frozen=True, kw_only=True):
    """What every call that may run input rounds carries to its handler."""

    meta: RequestMeta
    principal: str | None = None
    """Who sent the request (the HTTP authenticator's answer), or None: nobody known."""
    input_responses: dict[str, Raw]
    """Answers by key, each checked against the request it answers: those of the input
    rounds before the task existed, then (inside a task) the task's own, which win."""
    handler_state: str | None = None
    """What the handler asked to carry to its next round, returned untouched."""

    @property
    def client_capabilities(self) -> ClientCapabilities:
        return self.meta.client_capabilities


class ToolCall(_HandlerCall, frozen=True, kw_only=True):
    """A `tools/call` the shell must run the tool handler for."""

    request_id: RequestId | None
    """The `tools/call` being answered; None for a run inside a task after its creation."""
    tool_name: str
    arguments: Raw | None
    in_task: bool = False
    """True when the handler should do the work: inside task `task_id`, or in place when
    the client cannot hold a task (task_id is then None)."""
    task_id: str | None = None


class PromptCall(_HandlerCall, frozen=True, kw_only=True):
    """A `prompts/get` the shell must run the prompt handler for."""

    request_id: RequestId
    prompt_name: str
    arguments: dict[str, str]


class ResourceRead(_HandlerCall, frozen=True, kw_only=True):
    """A `resources/read` of a registered resource, or of a uri one template fits."""

    request_id: RequestId
    uri: str
    template: str | None
    """The uri template that matched; None for a resource registered with its uri."""
    variables: dict[str, str]
    """The template's variables as read from `uri` (empty for a fixed resource)."""


class CompletionCall(Struct, frozen=True, kw_only=True):
    """A `completion/complete` for a prompt argument or a uri template variable."""

    request_id: RequestId
    ref: PromptReference | ResourceTemplateReference
    argument: CompletionArgument
    context: dict[str, str]
    """Arguments (or variables) the client has already resolved."""
    meta: RequestMeta


class Subscription(Struct, frozen=True, kw_only=True):
    """A `subscriptions/listen` stream and what it agreed to carry."""

    request_id: RequestId
    notifications: SubscriptionFilter
    meta: RequestMeta
    principal: str | None = None
    """Who sent the request (the HTTP authenticator's answer), or None: nobody known."""


class TaskRequest(Struct, frozen=True, kw_only=True):
    """A `tasks/get`, `tasks/update` or `tasks/cancel` that passed every check but the
    task lookup. The shell loads `task_id` and answers `FetchTask.fetched`."""

    request_id: RequestId
    method: str
    task_id: str
    meta: RequestMeta
    principal: str | None = None
    """Who sent the request (the HTTP authenticator's answer), or None: nobody known."""
    input_responses: dict[str, Raw] | None = None


# --- needs -------------------------------------------------------------------------------


class _HandlerNeed(Struct, frozen=True, kw_only=True):
    """Run `handler` (as registered with its spec) for `call`, in the request's own task."""

    call: Any
    handler: Any = None

    @property
    def request_id(self) -> RequestId | None:
        """The request this need serves."""
        request_id: RequestId | None = self.call.request_id
        return request_id


class UseOnce(Struct, frozen=True, kw_only=True):
    """A sealed `requestState` that may be accepted once: the shell asks the store to
    remember `key` until `until` first, and runs nothing if it was remembered already."""

    key: str
    until: float


class RunTool(_HandlerNeed, frozen=True, kw_only=True):
    """Run the tool handler for `call` now, then hand its outcome back: `returned(outcome)`.

    With `use_once`, first have the store remember it (`TaskStore.use_once`); if the store
    had it already, answer `RoundReplayed(need)` instead of running anything."""

    call: ToolCall
    arguments: Any = None
    """The arguments decoded with the tool's `arguments_type` (None without one)."""
    use_once: UseOnce | None = None
    starts_task: bool = False
    """No longer set by the core, which creates a `task_support="required"` tool's task
    at once (no `RunTool`). Kept for journals and code written before: a shell given one
    answers `returned(START_TASK)` without running the handler."""

    def returned(self, outcome: ToolOutcome) -> ToolReturned:
        """The input that answers this need: the handler returned `outcome`."""
        return ToolReturned(self.call, outcome)


class GetPrompt(_HandlerNeed, frozen=True, kw_only=True):
    """Run the prompt handler for `call`, then hand its outcome back: `returned(outcome)`."""

    call: PromptCall
    arguments: Any = None
    """The arguments decoded with the prompt's `arguments_type` (None without one)."""

    def returned(self, outcome: PromptOutcome) -> PromptReturned:
        """The input that answers this need: the handler returned `outcome`."""
        return PromptReturned(self.call, outcome)


class ReadResource(_HandlerNeed, frozen=True, kw_only=True):
    """Run the resource handler for `call`, then hand its outcome back: `returned(outcome)`."""

    call: ResourceRead

    def returned(self, outcome: ResourceOutcome) -> ResourceReturned:
        """The input that answers this need: the handler returned `outcome`."""
        return ResourceReturned(self.call, outcome)


class Complete(_HandlerNeed, frozen=True, kw_only=True):
    """Run the completion handler for `call`, then hand its values back: `returned(...)`."""

    call: CompletionCall

    def returned(self, outcome: CompletionOutcome) -> CompletionReturned:
        """The input that answers this need: the handler returned `outcome`."""
        return CompletionReturned(self.call, outcome)


class Listen(Struct, frozen=True, kw_only=True):
    """Open the stream: send what `ListenStarted` words first, then each notification the
    subscription wants, until the client closes it (or `ListenEnded` closes it). With
    `max_streams` streams open already, or `max_streams_per_principal` of this principal's,
    answer `refused(per_principal=...)` instead."""

    subscription: Subscription
    max_streams: int | None = None
    max_streams_per_principal: int | None = None

    @property
    def request_id(self) -> RequestId:
        return self.subscription.request_id

    def refused(self, *, per_principal: bool) -> ListenRefused:
        """The input that answers this need when there is no room for the stream."""
        return ListenRefused(self, per_principal)


class FetchTask(Struct, frozen=True, kw_only=True):
    """Load the record of `request.task_id` (None if absent): answer `fetched(record)`."""

    request: TaskRequest

    @property
    def request_id(self) -> RequestId:
        return self.request.request_id

    def fetched(self, record: TaskRecord | None) -> TaskFetched:
        """The input that answers this need: the store holds `record` (None: nothing)."""
        return TaskFetched(self.request, record)


Need = RunTool | GetPrompt | ReadResource | Complete | Listen | FetchTask
