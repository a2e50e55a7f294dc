"""The runtime: carries out what the core decides, under trio or asyncio (on anyio).

`Server` is the facade people use; `Registry` (its decorators), `Interpreter` (needs and
commands), `TaskRunner` (task handlers), `Background` (expiry, leases, signals),
`ListenStreams` (listen streams), `HttpSessions` (2025 clients' HTTP sessions) and
`ToolThreads` (plain-function tools' threads) are its
parts, each given its collaborators (none holds the `Server`). `Server` implements the
transports' port (`mcp_tasks.transports._port`: `MessageHandler`, `HostedHandler`);
`MessageHandler`, `Connection` and `Notify` are importable from here as before.
"""

from ..transports._port import Connection, MessageHandler, Notify
from ._handlers import CompletionEntry, PromptEntry, ResourceEntry, ToolEntry
from ._http_sessions import HttpSessionLimits, HttpSessions
from ._interpreter import MAX_CONFLICT_RETRIES, Interpreter
from ._listen_streams import MAX_QUEUED_NOTIFICATIONS, ListenStream, ListenStreams
from ._registry import Registry
from ._server import Server
from ._tasks import STORE_RETRY_SECONDS, TaskRunner
from ._threads import ToolThreads, ToolThreadsFull

Listener = ListenStream
"""`ListenStream`'s name before issue 28 (kept one release)."""
Listeners = ListenStreams
"""`ListenStreams`' name before issue 28 (kept one release)."""

__all__ = [
    "MAX_CONFLICT_RETRIES",
    "MAX_QUEUED_NOTIFICATIONS",
    "STORE_RETRY_SECONDS",
    "CompletionEntry",
    "Connection",
    "HttpSessionLimits",
    "HttpSessions",
    "Interpreter",
    "ListenStream",
    "ListenStreams",
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
