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

# Kept for one release (issue 28): the names `mcp_tasks.core` exported before, which live on
# in its rooms `wire`, `commands` and `states` (each room's `__all__`), and two more.
# isort: off
from . import commands, states, wire
from ._catalog_calls import MAX_COMPLETION_VALUES as MAX_COMPLETION_VALUES
from ._outcomes import resource_not_found as resource_not_found
from .commands import *  # noqa: F403
from .states import *  # noqa: F403
from .wire import *  # noqa: F403
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

_NEW_IN_ROOMS = frozenset({"EndRun"})
"""Names the rooms gained after the split: the core never exported them, so none is kept."""

KEPT_FOR_ONE_RELEASE: frozenset[str] = (
    frozenset({*wire.__all__, *commands.__all__, *states.__all__})
    | {"MAX_COMPLETION_VALUES", "resource_not_found"}
) - {*__all__, *_NEW_IN_ROOMS}
"""Names `mcp_tasks.core` exported before its surface shrank (issue 28): still importable
from here for one release; each lives on in `wire`, `commands` or `states`."""
