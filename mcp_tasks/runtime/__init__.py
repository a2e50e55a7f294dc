"""The runtime: carries out what the core decides, under trio or asyncio (on anyio).

`Server` is the facade people use; `Registry` (its decorators), `Interpreter` (needs and
commands), `TaskRunner` (task handlers), `Background` (expiry, leases, signals),
`Listeners` (listen streams) and `ToolThreads` (plain-function tools' threads) are its
parts, each given its collaborators (none holds the `Server`). `Server` implements the
transports' port (`mcp_tasks.transports._port`: `MessageHandler`, `HostedHandler`);
`MessageHandler`, `Connection` and `Notify` are importable from here as before.
"""

from ..transports._port import Connection, MessageHandler, Notify
from ._handlers import CompletionEntry, PromptEntry, ResourceEntry, ToolEntry
from ._interpreter import MAX_CONFLICT_RETRIES, Interpreter
from ._listeners import MAX_QUEUED_NOTIFICATIONS, Listener, Listeners
from ._registry import Registry
from ._server import Server
from ._tasks import STORE_RETRY_SECONDS, TaskRunner
from ._threads import ToolThreads, ToolThreadsFull

__all__ = [
    "MAX_CONFLICT_RETRIES",
    "MAX_QUEUED_NOTIFICATIONS",
    "STORE_RETRY_SECONDS",
    "CompletionEntry",
    "Connection",
    "Interpreter",
    "Listener",
    "Listeners",
    "MessageHandler",
    "Notify",
    "PromptEntry",
    "Registry",
    "ResourceEntry",
    "Server",
    "TaskRunner",
    "ToolEntry",
    "ToolThreads",
    "ToolThreadsFull",
]
