"""Faults inside the server: a handler that holds the CPU (and the thread escape from it),
one that shields itself from cancellation, a store that fails on write. The task's record
always says what happened, and the server answers the next request."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import trio

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome
from mcp_tasks.core import TaskRecord
from mcp_tasks.server import Connection
from mcp_tasks.store import MemoryTaskStore

from .helpers import Client, check_message, request


async def test_blocking_work_in_a_thread_is_cancelled_at_once() -> None:
    """Code that never awaits would hold the whole server; run it in a thread with
    `abandon_on_cancel=True` and tasks/cancel ends the task at once (the thread is left
    to finish its step: make it check a flag)."""
    stop = threading.Event()
    server = Server("faults", "1", tasks=TaskOptions())

    def crunch() -> str:
        while not stop.wait(0.001):  # CPU-bound work, checking a flag between steps
            pass
        return "stopped"

    @server.tool(task_support="required")
    async def heavy(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        try:
            await trio.to_thread.run_sync(crunch, abandon_on_cancel=True)
        finally:
            stop.set()  # the thread's next check ends it
        return CallToolResult.text("done")

    client = Client(server)
    async with server.running():
        task_id = await client.start("heavy")
        await client.wait_status(task_id, "working")
        assert "result" in await client.send("tools/list")  # the server answers meanwhile
        await client.send("tasks/cancel", {"taskId": task_id})
        with trio.fail_after(5):
            while task_id in server.runner.running:
                await trio.sleep(0.01)
        assert (await client.get(task_id))["status"] == "cancelled"
    assert stop.is_set()


async def test_a_handler_that_shields_itself_still_ends_cancelled() -> None:
    release = trio.Event()
    finished: list[str] = []
    server = Server("faults", "1", tasks=TaskOptions())

    @server.tool(task_support="required")
    async def stubborn(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        with trio.CancelScope(shield=True):
            await release.wait()  # ignores tasks/cancel until released
        finished.append("returned")
        return CallToolResult.text("too late")

    client = Client(server)
    async with server.running():
        task_id = await client.start("stubborn")
        await client.wait_status(task_id, "working")
        ack = await client.send("tasks/cancel", {"taskId": task_id})
        assert ack["result"]["resultType"] == "complete"
        assert (await client.get(task_id))["status"] == "cancelled"  # at once, running or not
        release.set()
        with trio.fail_after(5):
            while task_id in server.runner.running:
                await trio.sleep(0.01)
        task = await client.get(task_id)
        assert finished == ["returned"]
        assert task["status"] == "cancelled" and "result" not in task  # its result is dropped


class FailingStore(MemoryTaskStore):
    def __init__(self) -> None:
        super().__init__()
        self.fail_saves = False

    async def save(self, record: TaskRecord, expected_version: int | None, **kw: Any) -> None:
        if self.fail_saves:
            raise OSError(28, "No space left on device")
        await super().save(record, expected_version, **kw)


async def test_a_store_that_fails_on_write_costs_that_request_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FailingStore()
    server = Server("faults", "1", tasks=TaskOptions(), store=store)

    @server.tool(task_support="required")
    async def job(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        return CallToolResult.text("ok")

    async with server.running():
        store.fail_saves = True
        data = request("tools/call", {"name": "job", "arguments": {}})
        reply = await server.handle(data, connection=Connection())
        assert reply is not None and reply.http_status == 500
        check_message(None, reply.body)
        answer = json.loads(reply.body)
        assert answer["id"] == json.loads(data)["id"]
        assert answer["error"]["code"] == -32603
        assert await store.count() == 0 and server.runner.running == {}  # nothing half-made
        store.fail_saves = False
        client = Client(server)
        task_id = await client.start("job")
        assert (await client.wait_status(task_id, "completed"))["status"] == "completed"
    assert "No space left on device" in caplog.text  # the cause is logged, not told
