"""Transports: thin drivers that carry messages between peers.

Server side (run inside `async with server.running():`, on trio; under asyncio they say
so instead of serving):

* `serve_stdio`: newline-delimited JSON-RPC on stdin/stdout (what MCP clients spawn).
* `serve_http`: the Streamable HTTP endpoint (POST `/mcp`), on h11 and trio sockets.

Client side (`ClientTransport`, used by `mcp_tasks.client.Client`; on anyio, so under
trio or asyncio):

* `HttpClientTransport(url)`: Streamable HTTP over httpx2, JSON and SSE responses.
* `open_stdio_transport(command)`: spawns a server command and talks over its pipes.
"""

from ._client_base import ClientTransport, NotificationHandler, TransportError
from ._http_client import DEFAULT_MAX_MESSAGE_BYTES, HttpClientTransport
from ._http_rules import Authenticator, HttpConfig, Unauthorized
from ._http_server import serve_http
from ._stdio import DEFAULT_MAX_LINE_BYTES, serve_stdio
from ._stdio_client import DEFAULT_MAX_CLIENT_LINE_BYTES, StdioClientTransport, open_stdio_transport

__all__ = [
    "DEFAULT_MAX_CLIENT_LINE_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "Authenticator",
    "ClientTransport",
    "HttpClientTransport",
    "HttpConfig",
    "NotificationHandler",
    "StdioClientTransport",
    "TransportError",
    "Unauthorized",
    "open_stdio_transport",
    "serve_http",
    "serve_stdio",
]
