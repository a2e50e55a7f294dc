"""Wire types of MCP 2026-07-28 and the Tasks extension, as msgspec Structs.

Rules every type here follows:

* Decoding tolerates unknown fields (msgspec ignores them), so newer peers still parse.
* A field the wire requires never vanishes: `resultType`'s default is a factory, which
  `omit_defaults` always encodes; `ttlMs` is encoded as `null` when a task lives forever.
* An optional field a user reads is `None` when absent (`omit_defaults` leaves it out).
* A result from a peer that lacks `resultType` reads as `"complete"` (pre-2026 servers).
* Field names are the wire's own words in snake_case; `rename="camel"` maps them back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType, field

from ._state import TaskStatus

PROTOCOL_VERSION: Final = "2026-07-28"
SUPPORTED_VERSIONS: Final = (PROTOCOL_VERSION,)
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

RequestId = str | int
LoggingLevel = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
"""From least to most severe (RFC 5424 order)."""
TaskStatusName = Literal["working", "input_required", "completed", "failed", "cancelled"]
ResultT = TypeVar("ResultT")


class _Wire(Struct, rename="camel", kw_only=True, omit_defaults=True):
    """Base for wire objects: camelCase on the wire, keyword-only in Python."""


class _Frozen(Struct, rename="camel", kw_only=True, frozen=True, omit_defaults=True):
    """Base for wire objects that are also stored in task records."""


# --- identity and capabilities -------------------------------------------------------


class Implementation(_Frozen, frozen=True):
    name: str
    version: str
    title: str | None = None


class ClientCapabilities(_Frozen, frozen=True):
    """What the client declared on *this* request. `{}` declares nothing optional."""

    experimental: dict[str, dict[str, Any]] | UnsetType = UNSET
    roots: dict[str, Any] | UnsetType = UNSET
    sampling: dict[str, Any] | UnsetType = UNSET
    elicitation: dict[str, Any] | UnsetType = UNSET
    extensions: dict[str, dict[str, Any]] | UnsetType = UNSET

    def has_extension(self, extension_id: str) -> bool:
        return self.extensions is not UNSET and extension_id in self.extensions

    @property
    def has_tasks(self) -> bool:
        return self.has_extension(TASKS_EXTENSION)

    @property
    def has_sampling(self) -> bool:
        return self.sampling is not UNSET

    @property
    def has_roots(self) -> bool:
        return self.roots is not UNSET

    def has_elicitation(self, mode: str) -> bool:
        """Form mode is implied by `elicitation: {}`; URL mode must be named."""
        if self.elicitation is UNSET:
            return False
        if "form" not in self.elicitation and "url" not in self.elicitation:
            return mode == "form"
        return mode in self.elicitation


class RequestMeta(_Wire):
    """`params._meta` of a client request. The two required keys have no default."""

    protocol_version: str = field(name=META_PROTOCOL_VERSION)
    client_capabilities: ClientCapabilities = field(name=META_CLIENT_CAPABILITIES)
    client_info: Implementation | UnsetType = field(default=UNSET, name=META_CLIENT_INFO)
    log_level: LoggingLevel | UnsetType = field(default=UNSET, name=META_LOG_LEVEL)
    progress_token: str | int | UnsetType = field(default=UNSET, name="progressToken")
    traceparent: str | UnsetType = UNSET  # W3C trace context: kept with a task, run in it
    tracestate: str | UnsetType = UNSET


# --- JSON-RPC envelopes ---------------------------------------------------------------


class IncomingMessage(Struct, gc=False):
    """Any JSON-RPC message, `params` raw until its method is known (not GC-tracked)."""

    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: Raw | UnsetType = UNSET
    result: Any = UNSET
    error: Any = UNSET


class ErrorObject(_Frozen, frozen=True):
    code: int
    message: str
    data: Any = UNSET


class ResultResponse(Struct):
    id: RequestId
    result: Any
    jsonrpc: str = "2.0"


class ErrorResponse(Struct):
    error: ErrorObject
    id: RequestId | UnsetType = UNSET
    jsonrpc: str = "2.0"


class Notification(Struct):
    method: str
    params: Any = UNSET
    jsonrpc: str = "2.0"


# --- content ----------------------------------------------------------------------------


class TextContent(_Frozen, tag_field="type", tag="text", frozen=True):
    text: str
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class ImageContent(_Frozen, tag_field="type", tag="image", frozen=True):
    data: str
    mime_type: str
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class AudioContent(_Frozen, tag_field="type", tag="audio", frozen=True):
    data: str
    mime_type: str
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class ResourceContents(_Frozen, frozen=True):
    """Text contents carry `text`, binary contents carry base64 `blob`: exactly one of them."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class EmbeddedResource(_Frozen, tag_field="type", tag="resource", frozen=True):
    resource: ResourceContents
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class ResourceLink(_Frozen, tag_field="type", tag="resource_link", frozen=True):
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = field(default=None, name="_meta")


ContentBlock = TextContent | ImageContent | AudioContent | EmbeddedResource | ResourceLink


# --- input requests (server asks) and input responses (client answers) -------------------


class ElicitParams(_Frozen, frozen=True):
    """`elicitation/create` params. Form mode has `requested_schema`; URL mode has `url`."""

    message: str
    mode: Literal["form", "url"] | None = None
    requested_schema: dict[str, Any] | None = None
    url: str | None = None

    @property
    def effective_mode(self) -> str:
        return "form" if self.mode is None else self.mode


class SamplingMessage(_Frozen, frozen=True):
    role: Literal["user", "assistant"]
    content: Any


class CreateMessageParams(_Frozen, frozen=True):
    messages: list[SamplingMessage]
    max_tokens: int
    system_prompt: str | None = None
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    model_preferences: dict[str, Any] | None = None
    include_context: str | None = None
    metadata: dict[str, Any] | None = None


class ElicitRequest(_Frozen, tag_field="method", tag="elicitation/create", frozen=True):
    params: ElicitParams


class CreateMessageRequest(_Frozen, tag_field="method", tag="sampling/createMessage", frozen=True):
    params: CreateMessageParams


class ListRootsRequest(_Frozen, tag_field="method", tag="roots/list", frozen=True):
    params: dict[str, Any] | UnsetType = UNSET


InputRequest = ElicitRequest | CreateMessageRequest | ListRootsRequest


class ElicitResult(_Frozen, frozen=True):
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, str | int | float | bool | list[str]] | None = None


class CreateMessageResult(_Frozen, frozen=True):
    role: Literal["user", "assistant"]
    content: Any
    model: str
    stop_reason: str | None = None


class Root(_Frozen, frozen=True):
    uri: str
    name: str | None = None


class ListRootsResult(_Frozen, frozen=True):
    roots: list[Root]


InputResponse = ElicitResult | CreateMessageResult | ListRootsResult

# The answer type a client must send for each kind of input request.
RESPONSE_TYPE_FOR_METHOD: Final[dict[str, type[InputResponse]]] = {
    "elicitation/create": ElicitResult,
    "sampling/createMessage": CreateMessageResult,
    "roots/list": ListRootsResult,
}


# --- request params ----------------------------------------------------------------------


class ParamsHead(_Wire):
    """First look at any request's params: `_meta` and the value `Mcp-Name` mirrors.

    The name/uri/taskId fields are untyped here on purpose: a wrong type there is a params
    error (-32602), which the validation order checks later than `_meta` and headers.
    """

    meta: RequestMeta | UnsetType = field(default=UNSET, name="_meta")
    name: Any = UNSET
    uri: Any = UNSET
    task_id: Any = UNSET


class DiscoverParams(_Wire):
    meta: RequestMeta = field(name="_meta")


class ListToolsParams(_Wire):
    meta: RequestMeta = field(name="_meta")
    cursor: str | UnsetType = UNSET


class CallToolParams(_Wire):
    name: str
    meta: RequestMeta = field(name="_meta")
    arguments: Raw | UnsetType = UNSET
    input_responses: dict[str, Raw] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET


class PaginatedParams(_Wire):
    """prompts/list, resources/list, resources/templates/list (one page: no cursor needed)."""

    meta: RequestMeta = field(name="_meta")
    cursor: str | UnsetType = UNSET


class GetPromptParams(_Wire):
    name: str
    meta: RequestMeta = field(name="_meta")
    arguments: dict[str, str] | UnsetType = UNSET
    input_responses: dict[str, Raw] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET


class ReadResourceParams(_Wire):
    uri: str
    meta: RequestMeta = field(name="_meta")
    input_responses: dict[str, Raw] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET


class PromptReference(_Frozen, tag_field="type", tag="ref/prompt", frozen=True):
    name: str


class ResourceTemplateReference(_Frozen, tag_field="type", tag="ref/resource", frozen=True):
    uri: str


class CompletionArgument(_Frozen, frozen=True):
    name: str
    value: str


class CompletionContext(_Frozen, frozen=True):
    arguments: dict[str, str] | UnsetType = UNSET


class CompleteParams(_Wire):
    ref: PromptReference | ResourceTemplateReference
    argument: CompletionArgument
    meta: RequestMeta = field(name="_meta")
    context: CompletionContext | UnsetType = UNSET


class SubscriptionFilter(_Frozen, frozen=True):
    """What a `subscriptions/listen` stream carries; every kind is opt-in."""

    tools_list_changed: bool | UnsetType = UNSET
    prompts_list_changed: bool | UnsetType = UNSET
    resources_list_changed: bool | UnsetType = UNSET
    resource_subscriptions: list[str] | UnsetType = UNSET
    task_ids: list[str] | UnsetType = UNSET
    """Tasks extension: `notifications/tasks` for these tasks."""


class ListenParams(_Wire):
    notifications: SubscriptionFilter
    meta: RequestMeta = field(name="_meta")


class GetTaskParams(_Wire):
    task_id: str
    meta: RequestMeta = field(name="_meta")


class UpdateTaskParams(_Wire):
    task_id: str
    input_responses: dict[str, Raw]
    meta: RequestMeta = field(name="_meta")


class CancelTaskParams(_Wire):
    task_id: str
    meta: RequestMeta = field(name="_meta")


class CancelledNotificationParams(_Wire):
    request_id: RequestId
    reason: str | UnsetType = UNSET


# --- results -------------------------------------------------------------------------------


class ResultMeta(_Frozen, frozen=True):
    server_info: Implementation | None = field(default=None, name=META_SERVER_INFO)


class Tool(_Frozen, frozen=True):
    name: str
    input_schema: dict[str, Any]
    title: str | None = None
    description: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class _ListResult(_Wire):
    """A page of a list method: a cacheable result (`ttlMs`, `cacheScope` required)."""

    ttl_ms: int
    cache_scope: Literal["public", "private"]
    next_cursor: str | None = None
    result_type: str = field(default_factory="complete".__str__)
    meta: ResultMeta | None = field(default=None, name="_meta")


class DiscoverResult(_Wire):
    supported_versions: list[str]
    capabilities: dict[str, Any]
    ttl_ms: int
    cache_scope: Literal["public", "private"]
    instructions: str | None = None
    result_type: str = field(default_factory="complete".__str__)
    meta: ResultMeta | None = field(default=None, name="_meta")


class ListToolsResult(_ListResult, kw_only=True):
    tools: list[Tool]


class PromptArgument(_Frozen, frozen=True):
    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None


class Prompt(_Frozen, frozen=True):
    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgument] | None = None
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class PromptMessage(_Frozen, frozen=True):
    role: Literal["user", "assistant"]
    content: ContentBlock

    @classmethod
    def user(cls, text: str) -> PromptMessage:
        return cls(role="user", content=TextContent(text=text))


class GetPromptResult(_Frozen, frozen=True):
    messages: list[PromptMessage]
    description: str | None = None
    result_type: str = field(default_factory="complete".__str__)
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class ListPromptsResult(_ListResult, kw_only=True):
    prompts: list[Prompt]


class Resource(_Frozen, frozen=True):
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class ResourceTemplate(_Frozen, frozen=True):
    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class ListResourcesResult(_ListResult, kw_only=True):
    resources: list[Resource]


class ListResourceTemplatesResult(_ListResult, kw_only=True):
    resource_templates: list[ResourceTemplate]


class ReadResourceResult(_Wire):
    contents: list[ResourceContents]
    ttl_ms: int
    cache_scope: Literal["public", "private"]
    result_type: str = field(default_factory="complete".__str__)
    meta: ResultMeta | None = field(default=None, name="_meta")


class Completion(_Frozen, frozen=True):
    values: list[str]
    total: int | None = None
    has_more: bool | None = None


class CompleteResult(_Wire):
    completion: Completion
    result_type: str = field(default_factory="complete".__str__)
    meta: ResultMeta | None = field(default=None, name="_meta")


class CallToolResult(_Frozen, frozen=True):
    """A tool's answer. `is_error=True` is a tool-level failure: its task still `completed`."""

    content: list[ContentBlock]
    structured_content: Any = None
    is_error: bool = False  # absent on the wire when false, as the schema defaults it
    result_type: str = field(default_factory="complete".__str__)
    meta: dict[str, Any] | None = field(default=None, name="_meta")

    @classmethod
    def text(cls, text: str, *, is_error: bool = False) -> CallToolResult:
        return cls(content=[TextContent(text=text)], is_error=is_error)


class InputRequiredResult(_Wire):
    input_requests: dict[str, InputRequest] | None = None
    request_state: str | None = None
    result_type: str = field(default_factory="input_required".__str__)
    meta: ResultMeta | None = field(default=None, name="_meta")


class EmptyResult(_Wire):
    """The ack of `tasks/update` and `tasks/cancel`."""

    result_type: str = field(default_factory="complete".__str__)
    meta: ResultMeta | None = field(default=None, name="_meta")


class CreateTaskResult(_Wire):
    """The flat task handle answering `tools/call`: `resultType` is `"task"`."""

    task_id: str
    status: TaskStatusName
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    result_type: str = field(default_factory="task".__str__)
    meta: ResultMeta | None = field(default=None, name="_meta")


class _DetailedTaskBase(_Wire, tag_field="status"):
    task_id: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    result_type: str = field(default_factory="complete".__str__)
    meta: ResultMeta | None = field(default=None, name="_meta")

    @property
    def status(self) -> TaskStatus:  # the wire's `status`: it tags each class of task
        return TaskStatus(str(type(self).__struct_config__.tag))


class WorkingTask(_DetailedTaskBase, tag="working", kw_only=True): ...


class InputRequiredTask(_DetailedTaskBase, tag="input_required", kw_only=True):
    input_requests: dict[str, InputRequest]


class CompletedTask(_DetailedTaskBase, Generic[ResultT], tag="completed", kw_only=True):
    result: ResultT  # `CallToolResult` as a client reads it; `Raw` as a server passes it on


class FailedTask(_DetailedTaskBase, tag="failed", kw_only=True):
    error: ErrorObject


class CancelledTask(_DetailedTaskBase, tag="cancelled", kw_only=True): ...


if TYPE_CHECKING:  # at run time a union of plain classes, which isinstance() accepts
    DetailedTask = WorkingTask | InputRequiredTask | CompletedTask[Raw] | FailedTask | CancelledTask
else:
    DetailedTask = WorkingTask | InputRequiredTask | CompletedTask | FailedTask | CancelledTask


def decode_result_type(result: dict[str, Any]) -> str:
    """The `resultType` of a peer's result; an absent one means `"complete"`."""
    value = result.get("resultType", "complete")
    return value if isinstance(value, str) else ""


json_encoder: Final = msgspec.json.Encoder()
