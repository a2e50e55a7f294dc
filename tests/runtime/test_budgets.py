"""The byte budget of stored task data (issue 15, point 11), on every store: a new task
whose arguments would take the stored task data past `TaskOptions.max_stored_bytes` is
refused like one past `max_tasks` (-32603, HTTP 503 with `Retry-After` until the next
stored task expires), and nothing of it is stored."""

from __future__ import annotations

import json
import time

import trio

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome
from mcp_tasks.server import Connection
from mcp_tasks.store import TaskStore

from .helpers import request

PAD = 40_000
"""The padding in each call's arguments: two fit in the budget below, three do not."""


async def test_task_data_past_the_budget_is_refused_like_too_many_tasks(
    any_store: TaskStore,
) -> None:
    options = TaskOptions(ttl_ms=600_000, max_stored_bytes=2 * PAD + 1_000)
    server = Server("budget", "1", tasks=options, store=any_store, shutdown_grace_seconds=0.1)

    @server.tool(task_support="required")
    async def keep(ctx: ToolContext) -> ToolOutcome:  # runs on: its arguments stay stored
        if not ctx.in_task:
            return START_TASK
        await trio.sleep_forever()
        return CallToolResult.text("unreachable")

    call = request("tools/call", {"name": "keep", "arguments": {"pad": "x" * PAD}})
    async with server.running():
        for _ in range(2):
            created = await server.handle(call, connection=Connection())
            assert created is not None and created.http_status == 200
        began = time.time()
        refused = await server.handle(call, connection=Connection())
    assert refused is not None and refused.http_status == 503
    error = json.loads(refused.body)["error"]
    assert error["code"] == -32603
    assert error["message"].startswith(
        f"Too many tasks: the server holds its limit of {2 * PAD + 1_000} bytes of task data; "
        "try again in "
    )
    assert refused.retry_after_seconds is not None
    assert 590 <= refused.retry_after_seconds <= 600  # the first task expires in 10 min
    assert 590_000 <= error["data"]["retryAfterMs"] <= 600_000 + 1000 * (time.time() - began)
    assert await any_store.count() == 2
