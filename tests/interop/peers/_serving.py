"""Serve an ASGI app on a free loopback port, and say where once connections are queued.

The socket is bound and listening before `{"ready": URL}` is printed, so a client started on
that line is never refused: the kernel holds its connection until uvicorn accepts it.
"""

from __future__ import annotations

import socket
from typing import Any

import anyio
import uvicorn
from _lines import emit


def serve_http(app: Any, path: str = "/mcp") -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    emit(ready=f"http://127.0.0.1:{port}{path}")
    anyio.run(lambda: server.serve(sockets=[sock]))
