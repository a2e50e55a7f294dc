"""Our server for the 2025-11-25 task clients: scenario.json's three tools written with our
own API, as examples/jobs.py writes tools.

    mcp-tasks serve tests/interop/legacy_tasks/ours.py --stdio   # or --http 127.0.0.1:0

| tool | written as |
| --- | --- |
| slow | `await anyio.sleep(seconds)`, then "<label> done" |
| ask | `await ctx.elicit(question, schema)` inside the task, then "answer: <the answer>" |
| fail | `raise ToolError(reason)`: for a 2025 client the task `failed`, its result `isError` |

All three `task_support="required"`, as the reference servers declare them; a 0.1 s poll
interval, as the TypeScript reference advises.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from mcp_tasks import Server, TaskOptions, ToolContext, ToolError

TOOLS = json.loads((Path(__file__).parent / "scenario.json").read_text())["tools"]
ANSWER_FORM = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}

server = Server("mcp-tasks-legacy-tasks", "1.0.0", tasks=TaskOptions(poll_interval_ms=100))


@server.tool(task_support="required", description=TOOLS["slow"]["description"])
async def slow(ctx: ToolContext, seconds: float, label: str) -> str:
    await anyio.sleep(seconds)
    return f"{label} done"


@server.tool(task_support="required", description=TOOLS["ask"]["description"])
async def ask(ctx: ToolContext, question: str) -> str:
    answer = await ctx.elicit(question, ANSWER_FORM)
    return f"answer: {(answer.content or {}).get('answer', answer.action)}"


@server.tool(task_support="required", description=TOOLS["fail"]["description"])
async def fail(ctx: ToolContext, reason: str) -> str:
    raise ToolError(reason)
