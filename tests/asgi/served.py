"""The server the ASGI tests serve, one `Server` and one `HttpConfig` for every way of serving:

    uvicorn --app-dir tests/asgi served:app                     the ASGI app (asyncio)
    hypercorn --worker-class trio served:app                    the ASGI app (trio)
    uvicorn --app-dir tests/asgi served:mounted                 mounted at /api in Starlette
    python tests/asgi/served.py                                 the built-in server (trio)

The built-in one prints "serving on URL" to stderr. `ASGI_TEST_STORE` names the task store
(a URL for `open_store`; memory without it). Tools run on anyio: the same code under either
loop.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from functools import partial
from typing import Any

import anyio
import msgspec
import trio
from starlette.applications import Starlette
from starlette.routing import Mount

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    InputRequired,
    Server,
    TaskOptions,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.asgi import asgi_app
from mcp_tasks.store import open_store
from mcp_tasks.transports import HttpConfig, Unauthorized, serve_http

TOKENS = {"alice-token": "alice", "bob-token": "bob"}


def authenticate(headers: Mapping[str, str]) -> str:
    """Bearer tokens name alice or bob; no Authorization at all is "anyone"."""
    authorization = headers.get("authorization")
    if authorization is None:
        return "anyone"
    principal = TOKENS.get(authorization.removeprefix("Bearer "))
    if principal is None:
        raise Unauthorized("unknown token")
    return principal


TIGHT_BODIES: dict[str, Any] = {
    "max_body_bytes_in_flight": 1024 * 1024,  # 16 bodies of the most, declared
    "body_wait_seconds": 0.5,
    "min_body_bytes_per_second": 1000.0,
    "body_grace_seconds": 1.0,
}
"""With `ASGI_TEST_TIGHT_BODIES=1`: a small budget, a short wait for room, a short grace."""
config = HttpConfig(
    max_body_bytes=64 * 1024,
    keep_alive_comment_seconds=0.3,
    drain_timeout_seconds=2.0,
    authenticate=authenticate,
    **(TIGHT_BODIES if os.environ.get("ASGI_TEST_TIGHT_BODIES") == "1" else {}),
)
server = Server(
    "asgi-tests",
    "1.0",
    tasks=TaskOptions(ttl_ms=600_000, poll_interval_ms=100),
    store=open_store(os.environ.get("ASGI_TEST_STORE")),
    shutdown_grace_seconds=5.0,
)
cancelled: list[str] = []  # a line per cancelled `hold`


class Name(msgspec.Struct):
    name: str = "world"


class Steps(msgspec.Struct):
    count: int = 3
    seconds: float = 0.05


class Job(msgspec.Struct):
    seconds: float = 0.1


@server.tool()
async def greet(ctx: ToolContext, args: Name) -> ToolOutcome:
    return CallToolResult.text(f"Hello, {args.name}!")


@server.tool()
async def steps(ctx: ToolContext, args: Steps) -> ToolOutcome:
    """In place, with a progress notification per step (an SSE answer)."""
    for step in range(args.count):
        await ctx.report_progress(step + 1, args.count, "stepping")
        await anyio.sleep(args.seconds)
    return CallToolResult.text(f"{args.count} steps")


@server.tool(task_support="required")
async def job(ctx: ToolContext, args: Job) -> ToolOutcome:
    if not ctx.in_task:
        return START_TASK
    await anyio.sleep(args.seconds)
    return CallToolResult.text(f"done after {args.seconds:g}s")


@server.tool(task_support="required")
async def interview(ctx: ToolContext) -> ToolOutcome:
    """A task that waits in place for the client's answer (`tasks/update`)."""
    if not ctx.in_task:
        return START_TASK
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    answer = await ctx.elicit("Your name?", schema)
    return CallToolResult.text(f"Hello, {(answer.content or {}).get('name')}!")


@server.tool()
async def ask_name(ctx: ToolContext) -> ToolOutcome:
    """In place, an input round: the name the user gives (a 2025 client is asked it as a
    request of the server's own)."""
    answer = ctx.elicit_response("name")
    if answer is None:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        params = ElicitParams(message="Your name?", mode="form", requested_schema=schema)
        return InputRequired(requests={"name": ElicitRequest(params=params)})
    return CallToolResult.text(f"Hello, {(answer.content or {}).get('name')}!")


@server.tool()
async def hold(ctx: ToolContext) -> ToolOutcome:
    """In place until cancelled (a progress notification says it has begun): counts its
    cancellations."""
    await ctx.report_progress(0, 1, "holding")
    try:
        await anyio.sleep_forever()
    finally:
        cancelled.append("cancelled")
    return "never"


@server.tool()
async def closes_stream(ctx: ToolContext) -> ToolOutcome:
    """In place: a progress notification, then its POST's stream closed (a 2025-11-25
    client resumes it with GET and Last-Event-ID), then the answer."""
    await ctx.report_progress(1, 2, "closing")
    closed = await ctx.close_stream()
    await anyio.sleep(0.2)
    return CallToolResult.text(f"closed: {closed}")


@server.tool()
async def cancellations(ctx: ToolContext) -> ToolOutcome:
    return CallToolResult.text(str(len(cancelled)))


app = asgi_app(server, config)
mounted = Starlette(routes=[Mount("/api", app=app)], lifespan=app.lifespan)


async def _serve_built_in() -> None:
    async with server.running(), trio.open_nursery() as nursery:
        port = await nursery.start(partial(serve_http, server, "127.0.0.1", 0, config=config))
        print(f"serving on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)


if __name__ == "__main__":
    trio.run(_serve_built_in)
