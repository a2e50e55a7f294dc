"""Effects: what the core asks its shell to do, and the `Step` that carries them.

Every core entry point returns a `Step`. The shell performs `step.effects` in order, then
sends `step.reply` (if any). That order is a promise the core relies on: a task's record is
saved before the `CreateTaskResult` that names it goes out.
"""

from __future__ import annotations

from msgspec import Raw, Struct

from ._records import TaskRecord
from ._wire import (
    ClientCapabilities,
    CompletionArgument,
    PromptReference,
    RequestId,
    RequestMeta,
    ResourceTemplateReference,
    SubscriptionFilter,
)


class Reply(Struct, frozen=True, kw_only=True):
    """One encoded JSON-RPC response, and the HTTP status that should carry it."""

    body: bytes
    http_status: int = 200
    request_id: RequestId | None = None
    error_code: int | None = None
    retry_after_seconds: int | None = None
    """Over HTTP, sent as `Retry-After` (a request refused for coming too soon)."""


class ToolCall(Struct, frozen=True, kw_only=True):
    """A `tools/call` the shell must run the tool handler for."""

    request_id: RequestId | None
    """The `tools/call` being answered; None for a run inside a task after its creation."""
    tool_name: str
    arguments: Raw | None
    meta: RequestMeta
    principal: str | None = None
    """Who sent the request (the HTTP authenticator's answer), or None: nobody known."""
    input_responses: dict[str, Raw]
    """Answers by key, each checked against the request it answers: those of the input
    rounds before the task existed, then (inside a task) the task's own, which win."""
    handler_state: str | None = None
    """What the handler asked to carry to its next round, returned untouched."""
    in_task: bool = False
    """True when the handler should do the work: inside task `task_id`, or in place when
    the client cannot hold a task (task_id is then None)."""
    task_id: str | None = None

    @property
    def client_capabilities(self) -> ClientCapabilities:
        return self.meta.client_capabilities


class PromptCall(Struct, frozen=True, kw_only=True):
    """A `prompts/get` the shell must run the prompt handler for."""

    request_id: RequestId
    prompt_name: str
    arguments: dict[str, str]
    meta: RequestMeta
    principal: str | None = None
    """Who sent the request (the HTTP authenticator's answer), or None: nobody known."""
    input_responses: dict[str, Raw]
    handler_state: str | None = None

    @property
    def client_capabilities(self) -> ClientCapabilities:
        return self.meta.client_capabilities


class ResourceRead(Struct, frozen=True, kw_only=True):
    """A `resources/read` of a registered resource, or of a uri one template fits."""

    request_id: RequestId
    uri: str
    template: str | None
    """The uri template that matched; None for a resource registered with its uri."""
    variables: dict[str, str]
    """The template's variables as read from `uri` (empty for a fixed resource)."""
    meta: RequestMeta
    principal: str | None = None
    """Who sent the request (the HTTP authenticator's answer), or None: nobody known."""
    input_responses: dict[str, Raw]
    handler_state: str | None = None

    @property
    def client_capabilities(self) -> ClientCapabilities:
        return self.meta.client_capabilities


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
    task lookup. The shell loads `task_id` and calls `handle_task_request`."""

    request_id: RequestId
    method: str
    task_id: str
    meta: RequestMeta
    principal: str | None = None
    """Who sent the request (the HTTP authenticator's answer), or None: nobody known."""
    input_responses: dict[str, Raw] | None = None


# --- effects -----------------------------------------------------------------------------


class RunTool(Struct, frozen=True, kw_only=True):
    """Run the tool handler for `call` now, then hand its outcome to `tool_returned`."""

    call: ToolCall


class GetPrompt(Struct, frozen=True, kw_only=True):
    """Run the prompt handler for `call`, then hand its outcome to `prompt_returned`."""

    call: PromptCall


class ReadResource(Struct, frozen=True, kw_only=True):
    """Run the resource handler for `call`, then hand its outcome to `resource_returned`."""

    call: ResourceRead


class Complete(Struct, frozen=True, kw_only=True):
    """Run the completion handler for `call`, then hand its values to `completion_returned`."""

    call: CompletionCall


class Listen(Struct, frozen=True, kw_only=True):
    """Open the stream: send `subscription_acknowledged` first, then each notification the
    subscription wants, until the client closes it (or `subscription_ended` closes it)."""

    subscription: Subscription


class FetchTask(Struct, frozen=True, kw_only=True):
    """Load the record of `request.task_id` (None if absent) and call `handle_task_request`."""

    request: TaskRequest


class SaveTask(Struct, frozen=True, kw_only=True):
    """Write `record` if the stored version is `expected_version` (None: must not exist)."""

    record: TaskRecord
    expected_version: int | None


class DeleteTask(Struct, frozen=True, kw_only=True):
    task_id: str
    expected_version: int


class StartTask(Struct, frozen=True, kw_only=True):
    """Run the handler inside the task; its outcome goes to `task_returned`."""

    task_id: str
    call: ToolCall


class ResumeTask(Struct, frozen=True, kw_only=True):
    """Every outstanding input request is answered: run the handler again with `call`
    (or wake the `elicit` it awaits); its outcome goes to `task_returned`."""

    task_id: str
    call: ToolCall


class CancelTask(Struct, frozen=True, kw_only=True):
    """Cancel the running handler of the task, if this process runs it."""

    task_id: str


class CancelRequest(Struct, frozen=True, kw_only=True):
    """Cancel the in-flight request with this id (stdio `notifications/cancelled`)."""

    request_id: RequestId
    reason: str | None = None


class WakeAt(Struct, frozen=True, kw_only=True):
    """Call `expire_task` for `task_id` at `deadline` (seconds since the epoch)."""

    task_id: str
    deadline: float


Effect = (
    RunTool
    | GetPrompt
    | ReadResource
    | Complete
    | Listen
    | FetchTask
    | SaveTask
    | DeleteTask
    | StartTask
    | ResumeTask
    | CancelTask
    | CancelRequest
    | WakeAt
)


class Step(Struct, frozen=True, kw_only=True):
    reply: Reply | None = None
    effects: tuple[Effect, ...] = ()
