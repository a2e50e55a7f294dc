"""The server (kept at this path: the runtime lives in `mcp_tasks.runtime`, on anyio).

`Server`, `Connection`, `ToolError` and `ResourceNotFound` are importable from here as
before.
"""

from .core import ResourceNotFound, ToolError
from .runtime import (
    MAX_CONFLICT_RETRIES,
    MAX_QUEUED_NOTIFICATIONS,
    STORE_RETRY_SECONDS,
    Connection,
    MessageHandler,
    Notify,
    Server,
)

__all__ = [
    "MAX_CONFLICT_RETRIES",
    "MAX_QUEUED_NOTIFICATIONS",
    "STORE_RETRY_SECONDS",
    "Connection",
    "MessageHandler",
    "Notify",
    "ResourceNotFound",
    "Server",
    "ToolError",
]
