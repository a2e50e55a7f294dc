"""The server of `test_tool_threads_http.py`: plain-function tools that hold worker threads.

    mcp-tasks serve tests/asgi/served_threads.py --http 127.0.0.1:0    the built-in server (trio)
    uvicorn --app-dir tests/asgi served_threads:app                     the ASGI app (asyncio)

`block` sleeps, deaf to cancellation (what blocking code does); `patient` waits until its
call is cancelled and counts it; `stopped` says how many `patient` calls saw their
cancellation. Every thread ends within `seconds` (at most 60): nothing outlives a test long.
"""

from __future__ import annotations

import threading
import time

from mcp_tasks import Server, ToolContext
from mcp_tasks.asgi import asgi_app

server = Server("threads-tests", "1.0")
_lock = threading.Lock()
_stopped = [0]


@server.tool()
def block(ctx: ToolContext, seconds: float = 30.0) -> str:
    time.sleep(min(seconds, 60.0))
    return f"slept {seconds:g} s"


@server.tool()
def patient(ctx: ToolContext, seconds: float = 30.0) -> str:
    if ctx.wait_cancelled(min(seconds, 60.0)):
        with _lock:
            _stopped[0] += 1
    return f"waited {seconds:g} s"


@server.tool()
async def stopped(ctx: ToolContext) -> str:
    return str(_stopped[0])


app = asgi_app(server)
