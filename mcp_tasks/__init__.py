"""mcp_tasks: the MCP Tasks extension (io.modelcontextprotocol/tasks) on MCP 2026-07-28.

`Server` runs tools and their tasks on trio; the pure protocol core lives in
`mcp_tasks.core`, task stores in `mcp_tasks.store`. The names most programs need are
re-exported here.
"""

from ._context import ToolContext
from .core import (
    PROTOCOL_VERSION,
    START_TASK,
    TASKS_EXTENSION,
    CallToolResult,
    ClientCapabilities,
    CreateMessageParams,
    CreateMessageRequest,
    ElicitParams,
    ElicitRequest,
    ElicitResult,
    ErrorObject,
    HttpHeaders,
    Implementation,
    InputRequired,
    ListRootsRequest,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    Reply,
    SamplingMessage,
    ServerCore,
    ServerOptions,
    TaskOptions,
    TaskRecord,
    TaskStatus,
    TextContent,
    ToolOutcome,
    ToolSpec,
)
from .server import Connection, Server, ToolError
from .store import MemoryTaskStore, TaskStore

__version__ = "0.1.0.dev0"

__all__ = [
    "PROTOCOL_VERSION",
    "START_TASK",
    "TASKS_EXTENSION",
    "CallToolResult",
    "ClientCapabilities",
    "Connection",
    "CreateMessageParams",
    "CreateMessageRequest",
    "ElicitParams",
    "ElicitRequest",
    "ElicitResult",
    "ErrorObject",
    "HttpHeaders",
    "Implementation",
    "InputRequired",
    "ListRootsRequest",
    "LocalProtocolError",
    "MemoryTaskStore",
    "ProtocolError",
    "RemoteProtocolError",
    "Reply",
    "SamplingMessage",
    "Server",
    "ServerCore",
    "ServerOptions",
    "TaskOptions",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "TextContent",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "ToolSpec",
    "__version__",
]
