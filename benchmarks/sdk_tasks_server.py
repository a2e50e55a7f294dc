"""The official SDK's server with this library's `TasksExtension`: `mcp` 2.3.0's `MCPServer`
with the two tools of every server of the comparison, `greet` (synchronous) and
`slow_compute` (a task when the client holds tasks; `seconds=0` is a task with no work).
Runs in the project's environment (the `bench` extra has the SDK).

    python benchmarks/sdk_tasks_server.py PORT    # http://127.0.0.1:PORT/mcp

Served as the extension serves it (`TasksExtension.streamable_http_app`: task requests
answered before the SDK's stack) with the SDK's cheapest options (`json_response`,
`stateless_http`), under uvicorn with asyncio's loop and h11, as the SDK and fastmcp-tasks
peers are: the figures compare the frameworks, not the HTTP parsers.
"""

# ruff: noqa: E402  (the imports must follow the sys.path fix below)
from __future__ import annotations

import os
import sys

# Run as a script, this file's folder comes first on sys.path, and the benchmark `http.py`
# next to it would stand in for the standard library's `http`: take the folder off first.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]

import socket

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TaskOptions
from mcp_tasks.integrations.mcp_sdk import TasksExtension

STORED_TASKS_ROOM = 250_000

tasks = TasksExtension(
    task_support={"slow_compute": "optional"},
    tasks=TaskOptions(ttl_ms=900_000, poll_interval_ms=1000, max_tasks=STORED_TASKS_ROOM),
)
mcp = MCPServer("bench-sdk-tasks", log_level="WARNING", extensions=[tasks], lifespan=tasks.lifespan)


@mcp.tool()
def greet(name: str) -> str:
    return f"Hello, {name}!"


@mcp.tool()
async def slow_compute(seconds: float = 1.0, label: str = "") -> str:
    if seconds > 0:
        await anyio.sleep(seconds)
    return f"{label or 'job'} done after {seconds:g}s"


if __name__ == "__main__":
    # IPPROTO_TCP named, or asyncio leaves Nagle on (a ~40 ms stall per kept-alive answer).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(sys.argv[1])))
    app = tasks.streamable_http_app(mcp, json_response=True, stateless_http=True)
    config = uvicorn.Config(
        app, loop="asyncio", http="h11", log_level="warning", access_log=False, lifespan="on"
    )
    uvicorn.Server(config).run(sockets=[listener])
