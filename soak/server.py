"""The server that `soak/load.py` and `soak/soak.py` drive: two task tools, and a monitor.

Tools (both task-only):

* `work`: works `seconds` in 1 to 10 steps (one per 0.5 s), `ctx.report_progress` before
  each, then completes with `expected_text(label, n)`;
* `ask`: works `seconds / 2`, asks for a number in place (`await ctx.elicit(...)`), works
  the other half, then completes with `expected_text(label, n, answer)`.

Settings come from the environment (see `_common.py`): SOAK_MAX_TASKS (default 1024),
SOAK_TTL_MS (default 3,600,000), SOAK_POLL_MS (default 1000).

Serve it either way:

    mcp-tasks serve soak/server.py --http 127.0.0.1:0     # what soak/load.py runs
    python soak/server.py [--port 0]                       # the same, plus the monitor

Run as a script it serves on 127.0.0.1 (the port from `--port`, default 0: a free one),
says `mcp-tasks: serving soak 1.0.0 on http://127.0.0.1:PORT/mcp` on stderr as the command
does, and stops on SIGTERM or SIGINT (or by itself after an hour). With SOAK_SAMPLES set,
a monitor task appends one JSON line to that file every SOAK_SAMPLE_SECONDS (default 1):

    {"t": unix time, "trio_tasks": N, "tasks_living": N, "running_handlers": N,
     "stored": N, "names": {task name: count}}

`trio_tasks` counts the live trio tasks by walking the task tree from
`trio.lowlevel.current_root_task()` through `child_nurseries` and their `child_tasks`
(`tasks_living`, trio's own count, is there to check the walk); `names` is that count by
task name, to tell what leaks if something does; `running_handlers` is how many task
handlers the server is running, `stored` how many task records its store holds. The
monitor itself is one of the counted tasks.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import msgspec
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    MAX_TASKS_ENV,
    POLL_ENV,
    SAMPLE_EVERY_ENV,
    SAMPLES_ENV,
    SERVER_LIFETIME_SECONDS,
    TTL_ENV,
    expected_text,
)

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome
from mcp_tasks.transports import serve_http

PROGRESS_STEP_SECONDS = 0.5
MAX_PROGRESS_STEPS = 10

server = Server(
    "soak",
    "1.0.0",
    tasks=TaskOptions(
        max_tasks=int(os.environ.get(MAX_TASKS_ENV, "1024")),
        ttl_ms=int(os.environ.get(TTL_ENV, "3600000")),
        poll_interval_ms=int(os.environ.get(POLL_ENV, "1000")),
    ),
    shutdown_grace_seconds=0.5,
)


class WorkArgs(msgspec.Struct):
    label: str
    n: int
    seconds: float = 1.0


ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"value": {"type": "integer"}},
    "required": ["value"],
}


async def _work(ctx: ToolContext, seconds: float, done: float = 0.0, total: float = 1.0) -> None:
    """Sleep `seconds` in steps, reporting progress before each: one step per
    PROGRESS_STEP_SECONDS, between 1 and MAX_PROGRESS_STEPS of them."""
    steps = min(MAX_PROGRESS_STEPS, max(1, math.ceil(seconds / PROGRESS_STEP_SECONDS)))
    for step in range(steps):
        progress = done + (total - done) * step / steps
        await ctx.report_progress(progress, 1.0, f"working: {progress:.0%}")
        await anyio.sleep(seconds / steps)


@server.tool(task_support="required")
async def work(ctx: ToolContext, args: WorkArgs) -> ToolOutcome:
    """Work `seconds`, reporting progress; the result is a digest of the arguments."""
    if not ctx.in_task:
        return START_TASK
    await _work(ctx, args.seconds)
    return CallToolResult.text(expected_text(args.label, args.n))


@server.tool(task_support="required")
async def ask(ctx: ToolContext, args: WorkArgs) -> ToolOutcome:
    """Work, ask for a number in place, work on; the result is a digest of both."""
    if not ctx.in_task:
        return START_TASK
    await _work(ctx, args.seconds / 2, 0.0, 0.5)
    answer = await ctx.elicit(f"A number for {args.label}?", ANSWER_SCHEMA)
    given = (answer.content or {}).get("value") if answer.action == "accept" else None
    value = given if isinstance(given, int) else None
    await _work(ctx, args.seconds / 2, 0.5, 1.0)
    return CallToolResult.text(expected_text(args.label, args.n, value))


# --- the monitor ----------------------------------------------------------------------------


def live_trio_tasks() -> collections.Counter[str]:
    """The live trio tasks by name: the whole tree under the root task."""
    counts: collections.Counter[str] = collections.Counter()
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        if task is None:
            continue
        counts[task.name] += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return counts


async def monitor(path: Path, every: float) -> None:
    """Append a sample to `path` every `every` seconds, the first at once."""
    while True:
        names = live_trio_tasks()
        sample = {
            "t": time.time(),
            "trio_tasks": sum(names.values()),
            "tasks_living": trio.lowlevel.current_statistics().tasks_living,
            "running_handlers": len(server.runner.running),
            "stored": await server.store.count(),
            "names": dict(names.most_common()),
        }
        with path.open("a") as file:
            file.write(json.dumps(sample) + "\n")
        await trio.sleep(every)


# --- serving ------------------------------------------------------------------------------


async def serve(port: int) -> None:
    samples = os.environ.get(SAMPLES_ENV)
    every = float(os.environ.get(SAMPLE_EVERY_ENV, "1"))
    with (
        trio.move_on_after(SERVER_LIFETIME_SECONDS),
        trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals,
    ):
        async with server.running(), trio.open_nursery() as nursery:
            bound = await nursery.start(serve_http, server, "127.0.0.1", port)
            name = f"{server.info.name} {server.info.version}"
            print(f"mcp-tasks: serving {name} on http://127.0.0.1:{bound}/mcp", file=sys.stderr)
            sys.stderr.flush()
            if samples:
                nursery.start_soon(monitor, Path(samples), every)
            async for _ in signals:
                break
            nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description="The soak server (see its docstring).")
    parser.add_argument("--port", type=int, default=0, help="on 127.0.0.1 (0: a free one)")
    trio.run(serve, parser.parse_args().port)


if __name__ == "__main__":
    main()
