"""mcp_tasks: the MCP Tasks extension (io.modelcontextprotocol/tasks) on MCP 2026-07-28.

`Server` runs tools and their tasks on asyncio or trio (through anyio), and so do the
built-in HTTP and stdio servers. The pure protocol core lives in `mcp_tasks.core`, task
stores in `mcp_tasks.store`. The names most programs need are
re-exported here.

They are loaded on first use (PEP 562): `import mcp_tasks.core` stays free of trio and the
transports, and `from mcp_tasks import Server` brings in only what the server needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .core import (
        START_TASK,
        HttpHeaders,
        InputRequired,
        LocalProtocolError,
        ProtocolError,
        RemoteProtocolError,
        Reply,
        ServerCore,
        ServerOptions,
        TaskOptions,
        TaskRecord,
        TaskStatus,
        ToolOutcome,
        ToolSpec,
    )
    from .core.wire import (
        INVALID_PARAMS,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        PROTOCOL_VERSION,
        TASKS_EXTENSION,
        AudioContent,
        CallToolResult,
        ClientCapabilities,
        Completion,
        CompletionArgument,
        CreateMessageParams,
        CreateMessageRequest,
        CreateMessageResult,
        ElicitParams,
        ElicitRequest,
        ElicitResult,
        EmbeddedResource,
        ErrorObject,
        GetPromptResult,
        ImageContent,
        Implementation,
        InputRequest,
        ListRootsRequest,
        ListRootsResult,
        PromptMessage,
        ResourceContents,
        ResourceLink,
        Root,
        SamplingMessage,
        TextContent,
    )
    from .runtime._answers import Accepted, Answer, Cancelled, Declined
    from .runtime._context import RequestContext, ToolContext, sampled_text
    from .runtime._results import audio_content, image_content, resource_content
    from .server import Connection, ResourceNotFound, Server, ToolError
    from .store import MemoryTaskStore, TaskStore

__version__ = "0.1.0.dev0"  # the one place: pyproject.toml reads it from here

_EXPORTS: dict[str, tuple[str, ...]] = {
    ".runtime._answers": ("Accepted", "Answer", "Cancelled", "Declined"),
    ".runtime._context": ("RequestContext", "ToolContext", "sampled_text"),
    ".runtime._results": ("audio_content", "image_content", "resource_content"),
    ".server": ("Connection", "ResourceNotFound", "Server", "ToolError"),
    ".store": ("MemoryTaskStore", "TaskStore"),
}
"""The module each re-exported name is loaded from, on first use, but the core's: every
other name of `__all__` (but `__version__`) comes from `.core`, as the imports above say."""

_ORIGIN = {name: module for module, names in _EXPORTS.items() for name in names}
_MODULES = frozenset({".core", *_EXPORTS})
"""The modules the names come from, each an attribute of the package too."""


if not TYPE_CHECKING:  # type checkers see the imports above, and a misspelt name is an error

    def __getattr__(name: str) -> object:
        module = _ORIGIN.get(name, ".core" if name in __all__ else None)
        if module is not None:
            value = getattr(importlib.import_module(module, __name__), name)
        elif "." + name in _MODULES:  # `mcp_tasks.core` etc. without importing them first
            value = importlib.import_module("." + name, __name__)
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value  # the next use is a plain lookup
        return value


def __dir__() -> list[str]:
    """The public names are `__all__` and the modules they come from, loaded or not."""
    private = (name for name in globals() if name.startswith("_"))
    return sorted({*private, *__all__, *(module[1:] for module in _MODULES)})


__all__ = [
    "INVALID_PARAMS",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "PROTOCOL_VERSION",
    "START_TASK",
    "TASKS_EXTENSION",
    "Accepted",
    "Answer",
    "AudioContent",
    "CallToolResult",
    "Cancelled",
    "ClientCapabilities",
    "Completion",
    "CompletionArgument",
    "Connection",
    "CreateMessageParams",
    "CreateMessageRequest",
    "CreateMessageResult",
    "Declined",
    "ElicitParams",
    "ElicitRequest",
    "ElicitResult",
    "EmbeddedResource",
    "ErrorObject",
    "GetPromptResult",
    "HttpHeaders",
    "ImageContent",
    "Implementation",
    "InputRequest",
    "InputRequired",
    "ListRootsRequest",
    "ListRootsResult",
    "LocalProtocolError",
    "MemoryTaskStore",
    "PromptMessage",
    "ProtocolError",
    "RemoteProtocolError",
    "Reply",
    "RequestContext",
    "ResourceContents",
    "ResourceLink",
    "ResourceNotFound",
    "Root",
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
    "audio_content",
    "image_content",
    "resource_content",
    "sampled_text",
]
