"""The pure core of mcp_tasks: the server protocol, what a shell hands it and what it
answers.

Nothing here performs I/O, reads a clock or draws randomness: time comes in as `now`,
task ids and the sealing key are injected. It imports only the standard library, msgspec
and transitions (a test proves it). Its rooms: `wire` (the protocol's types), `inputs`
(what happens to a server), `commands` (what a `Step` asks of the shell), `states` (the
task status table).
"""

from ._catalog import Catalog
from ._effects import Reply, Step
from ._envelope import HttpHeaders
from ._errors import (
    IllegalTransition,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    VersionConflict,
)
from ._injected import Injected, ServerInjected
from ._internal_error import internal_error_reply
from ._needs import (
    Complete,
    CompletionCall,
    FetchTask,
    GetPrompt,
    Listen,
    Need,
    PromptCall,
    ReadResource,
    ResourceRead,
    RunTool,
    Subscription,
    TaskRequest,
    ToolCall,
    UseOnce,
)
from ._options import (
    PromptSpec,
    ResourceSpec,
    ResourceTemplateSpec,
    ServerOptions,
    TaskOptions,
    TaskSupport,
    ToolSpec,
)
from ._outcomes import (
    START_TASK,
    CompletionOutcome,
    InputRequired,
    PromptOutcome,
    ResourceNotFound,
    ResourceOutcome,
    StartTaskOutcome,
    ToolError,
    ToolOutcome,
    failure_outcome,
)
from ._policy import MinPollInterval, PollPolicy
from ._records import TaskRecord, decode_record, encode_record
from ._server import ServerCore
from ._state import TaskEvent, TaskStatus

# Kept for one release (issue 28): each lives on in `wire`, `commands` or `states`.
# isort: off
from .wire import AudioContent as AudioContent
from .commands import AwaitAnswer as AwaitAnswer
from .wire import CallToolResult as CallToolResult
from .commands import CancelRequest as CancelRequest
from .commands import CancelTask as CancelTask
from .wire import CancelledTask as CancelledTask
from .wire import ClientCapabilities as ClientCapabilities
from .wire import CompleteResult as CompleteResult
from .wire import CompletedTask as CompletedTask
from .wire import Completion as Completion
from .wire import CompletionArgument as CompletionArgument
from .wire import ContentBlock as ContentBlock
from .wire import CreateMessageParams as CreateMessageParams
from .wire import CreateMessageRequest as CreateMessageRequest
from .wire import CreateMessageResult as CreateMessageResult
from .wire import CreateTaskResult as CreateTaskResult
from .commands import DeleteTask as DeleteTask
from .wire import DetailedTask as DetailedTask
from .commands import Effect as Effect
from .wire import ElicitParams as ElicitParams
from .wire import ElicitRequest as ElicitRequest
from .wire import ElicitResult as ElicitResult
from .wire import EmbeddedResource as EmbeddedResource
from .wire import ErrorObject as ErrorObject
from .wire import FailedTask as FailedTask
from .wire import GetPromptResult as GetPromptResult
from .wire import HEADER_MISMATCH as HEADER_MISMATCH
from .states import INITIAL_STATUS as INITIAL_STATUS
from .wire import INTERNAL_ERROR as INTERNAL_ERROR
from .wire import INVALID_PARAMS as INVALID_PARAMS
from .wire import INVALID_REQUEST as INVALID_REQUEST
from .wire import ImageContent as ImageContent
from .wire import Implementation as Implementation
from .wire import InputRequest as InputRequest
from .wire import InputRequiredResult as InputRequiredResult
from .wire import InputRequiredTask as InputRequiredTask
from .wire import InputResponse as InputResponse
from .wire import LOG_LEVELS as LOG_LEVELS
from .wire import ListRootsRequest as ListRootsRequest
from .wire import ListRootsResult as ListRootsResult
from .wire import LoggingLevel as LoggingLevel
from ._catalog_calls import MAX_COMPLETION_VALUES as MAX_COMPLETION_VALUES
from .wire import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from .wire import MISSING_REQUIRED_CLIENT_CAPABILITY as MISSING_REQUIRED_CLIENT_CAPABILITY
from .commands import Notify as Notify
from .wire import PARSE_ERROR as PARSE_ERROR
from .wire import PROTOCOL_VERSION as PROTOCOL_VERSION
from .wire import Prompt as Prompt
from .wire import PromptArgument as PromptArgument
from .wire import PromptMessage as PromptMessage
from .wire import PromptReference as PromptReference
from .wire import ReadResourceResult as ReadResourceResult
from .commands import ReleaseLease as ReleaseLease
from .wire import RequestId as RequestId
from .wire import RequestMeta as RequestMeta
from .wire import Resource as Resource
from .wire import ResourceContents as ResourceContents
from .wire import ResourceLink as ResourceLink
from .wire import ResourceTemplate as ResourceTemplate
from .wire import ResourceTemplateReference as ResourceTemplateReference
from .commands import ResumeTask as ResumeTask
from .wire import Root as Root
from .wire import SERVER_ERROR as SERVER_ERROR
from .wire import SUPPORTED_VERSIONS as SUPPORTED_VERSIONS
from .wire import SamplingMessage as SamplingMessage
from .commands import SaveTask as SaveTask
from .commands import StartTask as StartTask
from .wire import SubscriptionFilter as SubscriptionFilter
from .wire import TASKS_EXTENSION as TASKS_EXTENSION
from .states import TRANSITIONS as TRANSITIONS
from .commands import TaskLimits as TaskLimits
from .wire import TextContent as TextContent
from .wire import Tool as Tool
from .wire import UNSUPPORTED_PROTOCOL_VERSION as UNSUPPORTED_PROTOCOL_VERSION
from .commands import WakeAt as WakeAt
from .wire import WorkingTask as WorkingTask
from .states import can_happen as can_happen
from .wire import decode_result_type as decode_result_type
from .wire import error_body as error_body
from .wire import http_status_for_code as http_status_for_code
from .wire import iso_utc as iso_utc
from .states import mermaid_diagram as mermaid_diagram
from .states import next_status as next_status
from .wire import notification as notification
from ._outcomes import resource_not_found as resource_not_found
from .wire import shown as shown
from .states import transition_table as transition_table
# isort: on

__all__ = [
    "START_TASK",
    "Catalog",
    "Complete",
    "CompletionCall",
    "CompletionOutcome",
    "FetchTask",
    "GetPrompt",
    "HttpHeaders",
    "IllegalTransition",
    "Injected",
    "InputRequired",
    "Listen",
    "LocalProtocolError",
    "MinPollInterval",
    "Need",
    "PollPolicy",
    "PromptCall",
    "PromptOutcome",
    "PromptSpec",
    "ProtocolError",
    "ReadResource",
    "RemoteProtocolError",
    "Reply",
    "ResourceNotFound",
    "ResourceOutcome",
    "ResourceRead",
    "ResourceSpec",
    "ResourceTemplateSpec",
    "RunTool",
    "ServerCore",
    "ServerInjected",
    "ServerOptions",
    "StartTaskOutcome",
    "Step",
    "Subscription",
    "TaskEvent",
    "TaskOptions",
    "TaskRecord",
    "TaskRequest",
    "TaskStatus",
    "TaskSupport",
    "ToolCall",
    "ToolError",
    "ToolOutcome",
    "ToolSpec",
    "UseOnce",
    "VersionConflict",
    "decode_record",
    "encode_record",
    "failure_outcome",
    "internal_error_reply",
]
"""What `mcp_tasks.core` offers a shell. The wire types are in `mcp_tasks.core.wire`, the
inputs in `mcp_tasks.core.inputs`, the commands in `mcp_tasks.core.commands`, the status
table in `mcp_tasks.core.states`."""

KEPT_FOR_ONE_RELEASE: frozenset[str] = frozenset(
    {
        "AudioContent",
        "AwaitAnswer",
        "CallToolResult",
        "CancelRequest",
        "CancelTask",
        "CancelledTask",
        "ClientCapabilities",
        "CompleteResult",
        "CompletedTask",
        "Completion",
        "CompletionArgument",
        "ContentBlock",
        "CreateMessageParams",
        "CreateMessageRequest",
        "CreateMessageResult",
        "CreateTaskResult",
        "DeleteTask",
        "DetailedTask",
        "Effect",
        "ElicitParams",
        "ElicitRequest",
        "ElicitResult",
        "EmbeddedResource",
        "ErrorObject",
        "FailedTask",
        "GetPromptResult",
        "HEADER_MISMATCH",
        "INITIAL_STATUS",
        "INTERNAL_ERROR",
        "INVALID_PARAMS",
        "INVALID_REQUEST",
        "ImageContent",
        "Implementation",
        "InputRequest",
        "InputRequiredResult",
        "InputRequiredTask",
        "InputResponse",
        "LOG_LEVELS",
        "ListRootsRequest",
        "ListRootsResult",
        "LoggingLevel",
        "MAX_COMPLETION_VALUES",
        "METHOD_NOT_FOUND",
        "MISSING_REQUIRED_CLIENT_CAPABILITY",
        "Notify",
        "PARSE_ERROR",
        "PROTOCOL_VERSION",
        "Prompt",
        "PromptArgument",
        "PromptMessage",
        "PromptReference",
        "ReadResourceResult",
        "ReleaseLease",
        "RequestId",
        "RequestMeta",
        "Resource",
        "ResourceContents",
        "ResourceLink",
        "ResourceTemplate",
        "ResourceTemplateReference",
        "ResumeTask",
        "Root",
        "SERVER_ERROR",
        "SUPPORTED_VERSIONS",
        "SamplingMessage",
        "SaveTask",
        "StartTask",
        "SubscriptionFilter",
        "TASKS_EXTENSION",
        "TRANSITIONS",
        "TaskLimits",
        "TextContent",
        "Tool",
        "UNSUPPORTED_PROTOCOL_VERSION",
        "WakeAt",
        "WorkingTask",
        "can_happen",
        "decode_result_type",
        "error_body",
        "http_status_for_code",
        "iso_utc",
        "mermaid_diagram",
        "next_status",
        "notification",
        "resource_not_found",
        "shown",
        "transition_table",
    }
)
"""Names `mcp_tasks.core` exported before its surface shrank (issue 28): still importable
from here for one release; each lives on in `wire`, `commands` or `states`."""
