"""Transports: thin drivers that carry messages between peers.

Server side (run inside `async with server.running():`, on anyio, so under asyncio or
trio, the loop the tools are written for):

* `serve_stdio`: newline-delimited JSON-RPC on stdin/stdout (what MCP clients spawn).
* `serve_http`: the Streamable HTTP endpoint (POST `/mcp`), on httptools and anyio sockets.

They serve a `MessageHandler`, the port (`Server` is one): transports import the core and
the port, never the runtime.

Client side (`ClientTransport`, used by `mcp_tasks.client.Client`; on anyio, so under
trio or asyncio):

* `HttpClientTransport(url)`: Streamable HTTP over httpx2, JSON and SSE responses.
* `open_stdio_transport(command)`: spawns a server command and talks over its pipes.

The names are loaded on first use (PEP 562): `import mcp_tasks.asgi`, which needs the
HTTP rules alone, loads neither the HTTP parser nor the HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._support.lazy import lazy_names

if TYPE_CHECKING:
    from ._client_base import (
        AuthorizationError,
        ClientTransport,
        HttpAuthorization,
        NotificationHandler,
        ServerRequestHandler,
        ServerUnreachable,
        SessionExpired,
        TransportError,
        UnexpectedAnswer,
        same_id,
    )
    from ._http_client import DEFAULT_MAX_MESSAGE_BYTES, HttpClientTransport
    from ._http_rules import AuthenticationUnavailable, Authenticator, HttpConfig, Unauthorized
    from ._http_server import serve_http
    from ._port import Connection, HostedHandler, MessageHandler, Notify, SendNotification
    from ._stdio import DEFAULT_MAX_LINE_BYTES, serve_stdio
    from ._stdio_client import (
        DEFAULT_MAX_CLIENT_LINE_BYTES,
        StdioClientTransport,
        open_stdio_transport,
    )
    from ._telemetry import NO_TELEMETRY, Telemetry

_EXPORTS: dict[str, tuple[str, ...]] = {
    "._client_base": (
        "AuthorizationError",
        "ClientTransport",
        "HttpAuthorization",
        "NotificationHandler",
        "ServerRequestHandler",
        "ServerUnreachable",
        "SessionExpired",
        "TransportError",
        "UnexpectedAnswer",
        "same_id",
    ),
    "._http_client": ("DEFAULT_MAX_MESSAGE_BYTES", "HttpClientTransport"),
    "._http_rules": ("AuthenticationUnavailable", "Authenticator", "HttpConfig", "Unauthorized"),
    "._http_server": ("serve_http",),
    "._port": ("Connection", "HostedHandler", "MessageHandler", "Notify", "SendNotification"),
    "._telemetry": ("NO_TELEMETRY", "Telemetry"),
    "._stdio": ("DEFAULT_MAX_LINE_BYTES", "serve_stdio"),
    "._stdio_client": (
        "DEFAULT_MAX_CLIENT_LINE_BYTES",
        "StdioClientTransport",
        "open_stdio_transport",
    ),
}
"""The module each exported name is loaded from, on first use."""

_ORIGIN = {name: module for module, names in _EXPORTS.items() for name in names}

if not TYPE_CHECKING:  # type checkers see the imports above, and a misspelt name is an error
    __getattr__, __dir__ = lazy_names(__name__, globals(), _ORIGIN, _ORIGIN)

__all__ = [
    "DEFAULT_MAX_CLIENT_LINE_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "NO_TELEMETRY",
    "AuthenticationUnavailable",
    "Authenticator",
    "AuthorizationError",
    "ClientTransport",
    "Connection",
    "HostedHandler",
    "HttpAuthorization",
    "HttpClientTransport",
    "HttpConfig",
    "MessageHandler",
    "NotificationHandler",
    "Notify",
    "SendNotification",
    "ServerRequestHandler",
    "ServerUnreachable",
    "SessionExpired",
    "StdioClientTransport",
    "Telemetry",
    "TransportError",
    "Unauthorized",
    "UnexpectedAnswer",
    "open_stdio_transport",
    "same_id",
    "serve_http",
    "serve_stdio",
]
