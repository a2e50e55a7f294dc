"""mcp_tasks: the MCP Tasks extension (io.modelcontextprotocol/tasks) on MCP 2026-07-28.

The pure protocol core lives in `mcp_tasks.core`, task stores in `mcp_tasks.store`. The
names most programs need are re-exported here.
"""

from .core import (
    PROTOCOL_VERSION,
    START_TASK,
    TASKS_EXTENSION,
    CallToolResult,
    ClientCapabilities,
    ElicitParams,
    ElicitRequest,
    ErrorObject,
    Implementation,
    InputRequired,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    ServerCore,
    ServerOptions,
    TaskOptions,
    TaskRecord,
    TaskStatus,
    TextContent,
    ToolSpec,
)
from .store import MemoryTaskStore, TaskStore

__version__ = "0.1.0.dev0"

__all__ = [
    "PROTOCOL_VERSION",
    "START_TASK",
    "TASKS_EXTENSION",
    "CallToolResult",
    "ClientCapabilities",
    "ElicitParams",
    "ElicitRequest",
    "ErrorObject",
    "Implementation",
    "InputRequired",
    "LocalProtocolError",
    "MemoryTaskStore",
    "ProtocolError",
    "RemoteProtocolError",
    "ServerCore",
    "ServerOptions",
    "TaskOptions",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "TextContent",
    "ToolSpec",
    "__version__",
]
