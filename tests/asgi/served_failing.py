"""A server whose `handle` fails (a bug behind it, on purpose) on any message naming "boom",
served each way a client can reach it:

    python tests/asgi/served_failing.py http        the built-in HTTP server (trio)
    uvicorn --app-dir tests/asgi served_failing:app   the ASGI app (asyncio)
    python tests/asgi/served_failing.py stdio       stdio: one reply line per request line

The built-in one prints "serving on URL" to stderr.
"""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

import trio

from mcp_tasks import Reply, Server, ToolContext
from mcp_tasks.asgi import asgi_app
from mcp_tasks.transports import serve_http, serve_stdio


class FailingServer(Server):
    async def handle(self, data: bytes, **options: Any) -> Reply | None:
        if b"boom" in data:
            raise RuntimeError("a bug, on purpose")
        return await super().handle(data, **options)


server = FailingServer("failing-tests", "1.0")


@server.tool()
async def greet(ctx: ToolContext, name: str = "world") -> str:
    return f"Hello, {name}!"


app = asgi_app(server)


async def _serve(kind: str) -> None:
    async with server.running():
        if kind == "stdio":
            await serve_stdio(server)
            return
        async with trio.open_nursery() as nursery:
            port = await nursery.start(partial(serve_http, server, "127.0.0.1", 0))
            print(f"serving on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)


if __name__ == "__main__":
    trio.run(_serve, sys.argv[1])
