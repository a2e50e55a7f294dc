"""The tasks fixtures on the official MCP SDK: an `MCPServer` with `TasksExtension`.

`python conformance/sdk_server.py --port N` serves the SDK's Streamable HTTP app under
uvicorn on http://127.0.0.1:N/mcp (`--port 0` picks a free port; the bound one is logged,
as conformance/server.py logs it). `--store URL` keeps the tasks in SQLite or Redis.

The tools are those the `tasks-*` scenarios call, written as SDK tools (plain `@mcp.tool()`
functions with the SDK's `Context`) and behaving as their twins in examples/jobs.py do:
greet, slow_compute (optional task), failing_job, protocol_error_job, confirm_delete
(asks with `ctx.elicit` inside its task), multi_input (two questions at once: an
`InputRequiredResult` inside its task), test_tool_with_task (an input round before its
task: `input_first` and `start_task()`).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
from pydantic import BaseModel

from mcp_tasks import TaskOptions
from mcp_tasks.integrations.mcp_sdk import TasksExtension, start_task
from mcp_tasks.store import STORE_URL_HELP, open_store

HOST = "127.0.0.1"  # loopback only
logger = logging.getLogger("conformance.sdk_server")


class Confirm(BaseModel):
    confirm: bool


def _ask(message: str, field: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return ElicitRequest(
        params=ElicitRequestFormParams(message=message, requested_schema=schema)  # type: ignore[arg-type]
    )


def _accepted(ctx: Context, key: str) -> dict[str, Any] | None:
    answer = (ctx.input_responses or {}).get(key)
    if getattr(answer, "action", None) != "accept":
        return None
    return dict(getattr(answer, "content", None) or {})


def build_server(store_url: str | None = None) -> MCPServer:
    store = None if store_url is None else open_store(store_url)
    tasks = TasksExtension(
        task_support={
            "slow_compute": "optional",
            "failing_job": "required",
            "protocol_error_job": "required",
            "confirm_delete": "required",
            "multi_input": "required",
            "test_tool_with_task": "required",
        },
        store=store,
        tasks=TaskOptions(ttl_ms=600_000, poll_interval_ms=1000),
        input_first={"test_tool_with_task"},
    )
    mcp = MCPServer("jobs-sdk", version="0.1.0", extensions=[tasks], lifespan=tasks.lifespan)

    @mcp.tool()
    async def greet(name: str = "world") -> str:
        """Say hello at once."""
        return f"Hello, {name}!"

    @mcp.tool()
    async def slow_compute(ctx: Context, seconds: float = 1.0, label: str = "") -> str:
        """Work for `seconds`, reporting progress; a task when the client can hold one."""
        steps = max(1, round(seconds * 10))
        for step in range(steps):
            await ctx.report_progress(step, steps, "computing")
            await anyio.sleep(seconds / steps)  # cancellation lands on this await
        return f"{label or 'job'} done after {seconds:g}s"

    @mcp.tool()
    async def failing_job() -> str:
        """A task whose tool fails: the task completes with isError."""
        await anyio.sleep(1)
        raise ToolError("the job failed: the input file is empty")

    @mcp.tool()
    async def protocol_error_job() -> str:
        """A task that fails with a JSON-RPC error."""
        await anyio.sleep(0.2)
        raise MCPError(-32603, "the upstream service crashed")

    @mcp.tool()
    async def confirm_delete(filename: str, ctx: Context) -> str:
        """Ask before deleting, waiting in place for the answer."""
        answer = await ctx.elicit(f"Delete {filename}?", Confirm)
        if answer.action == "accept" and answer.data.confirm:
            return f"Deleted {filename}"
        return f"Kept {filename}"

    @mcp.tool()
    async def multi_input(ctx: Context) -> str | InputRequiredResult:
        """Ask two questions at once; finish when both are answered."""
        first, second = _accepted(ctx, "first"), _accepted(ctx, "second")
        if first is None or second is None:
            return InputRequiredResult(
                input_requests={
                    "first": _ask("First question?", "answer"),
                    "second": _ask("Second question?", "answer"),
                }
            )
        return f"Answers: {first.get('answer')}, {second.get('answer')}"

    @mcp.tool()
    async def test_tool_with_task(ctx: Context) -> str | InputRequiredResult:
        """Ask a name first (no task yet), then go on as a task that greets with it."""
        answer = _accepted(ctx, "user_name")
        if answer is None:
            return InputRequiredResult(
                input_requests={"user_name": _ask("What is your name?", "name")}
            )
        start_task()
        await anyio.sleep(0.1)
        return f"Hello, {answer.get('name', 'stranger')}! (from inside the task)"

    return mcp


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free one)"
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    parser.add_argument("--store", metavar="URL", help=STORE_URL_HELP)
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        mcp = build_server(args.store)
    except (ValueError, OSError) as error:
        parser.error(f"--store: {error}")
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say so, and without
    # it every answer on a kept-alive connection waits ~40 ms for a delayed ACK.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((HOST, args.port))
    listener.listen(128)  # connections wait in the backlog until uvicorn serves
    port = listener.getsockname()[1]
    logger.info("conformance fixture server on http://%s:%d/mcp (the MCP SDK)", HOST, port)
    config = uvicorn.Config(
        mcp.streamable_http_app(),
        log_level=args.log_level.lower(),
        lifespan="on",
        access_log=False,
    )
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
