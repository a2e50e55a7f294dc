"""Transports: thin trio drivers that carry messages between peers and a `Server`.

* `serve_stdio`: newline-delimited JSON-RPC on stdin/stdout (what MCP clients spawn).
* `serve_http`: the Streamable HTTP endpoint (POST `/mcp`), on h11 and trio sockets.

Both run inside `async with server.running():`.
"""

from ._http_server import HttpConfig, serve_http
from ._stdio import DEFAULT_MAX_LINE_BYTES, serve_stdio

__all__ = ["DEFAULT_MAX_LINE_BYTES", "HttpConfig", "serve_http", "serve_stdio"]
