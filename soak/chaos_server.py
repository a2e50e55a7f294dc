"""The server that `soak/chaos.py` runs, killed and restarts: three task tools.

* `work`: works `seconds` (0.2-2 s in the harness) in steps of at most 0.25 s, then
  completes with `expected_text(label, n)`; a process killed under it fails the task;
* `redo`: the same, registered `resumable=True`: a killed process's task runs again from
  the start elsewhere (Redis) or when the process comes back (SQLite), and completes;
* `ask`: works half of `seconds`, asks for a number in place (`await ctx.elicit(...)`),
  works the other half, then completes with `expected_text(label, n, answer)`.

Settings from the environment (see `_common.py`): SOAK_TTL_MS (the harness sets a few
seconds, so that a round ends with every record expired), SOAK_POLL_MS, SOAK_MAX_TASKS.

    mcp-tasks serve soak/chaos_server.py --http 127.0.0.1:PORT --store URL --lease-seconds 2
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MAX_TASKS_ENV, POLL_ENV, TTL_ENV, expected_text

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome

STEP_SECONDS = 0.25

server = Server(
    "chaos",
    "1.0.0",
    tasks=TaskOptions(
        max_tasks=int(os.environ.get(MAX_TASKS_ENV, "1024")),
        ttl_ms=int(os.environ.get(TTL_ENV, "8000")),
        poll_interval_ms=int(os.environ.get(POLL_ENV, "100")),
    ),
    shutdown_grace_seconds=0.5,
)

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"value": {"type": "integer"}},
    "required": ["value"],
}


class WorkArgs(msgspec.Struct):
    label: str
    n: int
    seconds: float = 1.0


async def _work(seconds: float) -> None:
    steps = max(1, math.ceil(seconds / STEP_SECONDS))
    for _ in range(steps):
        await anyio.sleep(seconds / steps)


@server.tool(task_support="required")
async def work(ctx: ToolContext, args: WorkArgs) -> ToolOutcome:
    """Work `seconds`; the result is a digest of the arguments."""
    if not ctx.in_task:
        return START_TASK
    await _work(args.seconds)
    return CallToolResult.text(expected_text(args.label, args.n))


@server.tool(task_support="required", resumable=True)
async def redo(ctx: ToolContext, args: WorkArgs) -> ToolOutcome:
    """`work`, run again from the start if its process stops (it is harmless to)."""
    if not ctx.in_task:
        return START_TASK
    await _work(args.seconds)
    return CallToolResult.text(expected_text(args.label, args.n))


@server.tool(task_support="required")
async def ask(ctx: ToolContext, args: WorkArgs) -> ToolOutcome:
    """Work, ask for a number in place, work on; the result is a digest of both."""
    if not ctx.in_task:
        return START_TASK
    await _work(args.seconds / 2)
    answer = await ctx.elicit(f"A number for {args.label}?", ANSWER_SCHEMA)
    given = (answer.content or {}).get("value") if answer.action == "accept" else None
    value = given if isinstance(given, int) else None
    await _work(args.seconds / 2)
    return CallToolResult.text(expected_text(args.label, args.n, value))
