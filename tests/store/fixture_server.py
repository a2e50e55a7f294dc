"""The server the store's process tests serve (`mcp-tasks serve tests/store/fixture_server.py`).

| tool | what it does |
| --- | --- |
| quick | completes at once, inside a task: its result must survive restarts |
| broken | fails with a JSON-RPC error, inside a task |
| blocks | a task that works until cancelled (or its process dies) |
| asks_in_place | `await ctx.elicit(...)`: the answer must reach the process running it |
| asks_by_returning | returns `InputRequired`; runs again (anywhere) when answered |
| resumable_counter | resumable: appends a line to `path` per run; blocks on the first run |
| | and completes on any later one ("ran N times") |
| asks_first | asks a name in an MRTR round before the task exists, then greets in a task |
| greets_in_place | no task: asks a name in an input round, then greets (for 2025 sessions) |

Every tool but the last is a task (`task_support="required"`). TTL 10 minutes unless
`TASK_TTL_MS` says.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import msgspec

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    ErrorObject,
    InputRequired,
    Server,
    TaskOptions,
    ToolContext,
    ToolOutcome,
)

server = Server(
    "store-fixture",
    "1.0.0",
    tasks=TaskOptions(ttl_ms=int(os.environ.get("TASK_TTL_MS", "600000")), poll_interval_ms=100),
    shutdown_grace_seconds=1.0,
)

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class Text(msgspec.Struct):
    text: str = ""


class CounterArgs(msgspec.Struct):
    path: str


@server.tool(task_support="required")
async def quick(ctx: ToolContext, args: Text) -> ToolOutcome:
    """Shout the text back, as a task."""
    if not ctx.in_task:
        return START_TASK
    return CallToolResult.text(args.text.upper())


@server.tool(task_support="required")
async def broken(ctx: ToolContext) -> ToolOutcome:
    """Fail with a JSON-RPC error, as a task."""
    if not ctx.in_task:
        return START_TASK
    return ErrorObject(code=-32603, message="broken on purpose")


@server.tool(task_support="required")
async def blocks(ctx: ToolContext) -> ToolOutcome:
    """Work until cancelled."""
    if not ctx.in_task:
        return START_TASK
    await ctx.set_status_message(f"blocking in process {os.getpid()}")
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


@server.tool(task_support="required")
async def asks_in_place(ctx: ToolContext) -> ToolOutcome:
    """Ask a name and wait for it in place."""
    if not ctx.in_task:
        return START_TASK
    answer = await ctx.elicit("Your name?", NAME_SCHEMA)
    name = (answer.content or {}).get("name", "nobody")
    return CallToolResult.text(f"hello {name} from process {os.getpid()}")


@server.tool(task_support="required")
async def asks_by_returning(ctx: ToolContext) -> ToolOutcome:
    """Ask a name by returning InputRequired; run again with the answer."""
    if not ctx.in_task:
        return START_TASK
    answer = ctx.elicit_response("name")
    if answer is None:
        ask = ElicitRequest(params=ElicitParams(message="Your name?", requested_schema=NAME_SCHEMA))
        return InputRequired(requests={"name": ask}, status_message="waiting for a name")
    name = (answer.content or {}).get("name", "nobody")
    return CallToolResult.text(f"hello {name} from process {os.getpid()}")


@server.tool(task_support="required", resumable=True)
async def resumable_counter(ctx: ToolContext, args: CounterArgs) -> ToolOutcome:
    """Count runs in a file; block on the first, complete on any later one."""
    if not ctx.in_task:
        return START_TASK
    path = Path(args.path)
    with path.open("a") as runs:
        runs.write(f"{os.getpid()}\n")
    count = len(path.read_text().splitlines())
    if count == 1:
        await ctx.set_status_message("first run: blocking")
        await anyio.sleep_forever()
    return CallToolResult.text(f"ran {count} times")


@server.tool(task_support="required")
async def asks_first(ctx: ToolContext) -> ToolOutcome:
    """Ask a name before the task exists (an MRTR round, sealed in requestState), then
    start a task that greets with it."""
    answer = ctx.elicit_response("name")
    if answer is None:
        ask = ElicitRequest(params=ElicitParams(message="Your name?", requested_schema=NAME_SCHEMA))
        return InputRequired(requests={"name": ask})
    if not ctx.in_task:
        return START_TASK
    return CallToolResult.text(f"hello {(answer.content or {}).get('name', 'nobody')}")


@server.tool()
async def greets_in_place(ctx: ToolContext) -> ToolOutcome:
    answer = ctx.elicit_response("name")
    if answer is None:
        params = ElicitParams(message="Your name?", mode="form", requested_schema=NAME_SCHEMA)
        return InputRequired(requests={"name": ElicitRequest(params=params)})
    return CallToolResult.text(f"Hello, {(answer.content or {}).get('name')}!")
