"""A task's life in the log: one INFO line per status change on `mcp_tasks.tasks`, with the
task's fields; the task id on a crashing handler's line; peer refusals rate-limited."""

from __future__ import annotations

import inspect
import logging
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    Server,
    TaskOptions,
    TaskRecord,
    TaskStatus,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks._support.logs import RateLimitedLog
from mcp_tasks.runtime import _observe
from mcp_tasks.store import SQLiteTaskStore

from .helpers import Client, trio_clock


def build(ttl_ms: int | None = 600_000) -> Server:
    server = Server("t", "1", tasks=TaskOptions(ttl_ms=ttl_ms), clock=trio_clock)

    @server.tool(task_support="required")
    async def asks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        answer = await ctx.elicit("name?", {"type": "object", "properties": {}})
        await trio.sleep(2)
        return CallToolResult.text(f"hello {answer.action}")

    @server.tool(task_support="required")
    async def blocks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await trio.sleep_forever()
        raise AssertionError

    @server.tool(task_support="required")
    async def crash(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        raise RuntimeError("boom")

    return server


def task_lines(caplog: pytest.LogCaptureFixture, task_id: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "task_id", None) == task_id]


async def test_a_task_through_an_input_round_gives_one_line_per_change(
    caplog: pytest.LogCaptureFixture, autojump_clock: MockClock
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_tasks.tasks")
    server = build()
    async with server.running():
        client = Client(server)
        task_id = await client.start("asks")
        asking = await client.wait_status(task_id, "input_required")
        (key,) = asking["inputRequests"]
        answer = {key: {"action": "accept", "content": {}}}
        await client.send("tasks/update", {"taskId": task_id, "inputResponses": answer})
        await client.wait_status(task_id, "completed")
    lines = [r for r in task_lines(caplog, task_id) if r.name == "mcp_tasks.tasks"]
    assert [r.levelno for r in lines] == [logging.INFO] * 4
    assert [r.event for r in lines] == [  # type: ignore[attr-defined]
        "create",
        "need_input",
        "input_answered",
        "complete",
    ]
    assert [r.status for r in lines] == [  # type: ignore[attr-defined]
        "working",
        "input_required",
        "working",
        "completed",
    ]
    assert all(r.tool == "asks" and r.principal is None for r in lines)  # type: ignore[attr-defined]
    assert lines[0].getMessage().startswith(f"task {task_id} created: tool 'asks'")
    assert f"input requested ({key})" in lines[1].getMessage()
    # The handler slept 2 s after its answer: the age on the last line says so.
    assert lines[3].age_seconds >= 2.0  # type: ignore[attr-defined]
    assert lines[3].age_seconds >= lines[2].age_seconds + 2.0  # type: ignore[attr-defined]


async def test_cancelled_failed_and_expired_tasks_say_so(
    caplog: pytest.LogCaptureFixture, autojump_clock: MockClock
) -> None:
    caplog.set_level(logging.INFO)
    server = build(ttl_ms=10_000)
    async with server.running():
        client = Client(server)
        cancelled = await client.start("blocks")
        await client.send("tasks/cancel", {"taskId": cancelled})
        crashed = await client.start("crash")
        await client.wait_status(crashed, "failed")
        expiring = await client.start("blocks")
        await trio.sleep(11)  # its TTL (10 s) runs out while it works
    assert [r.event for r in task_lines(caplog, cancelled) if r.name == "mcp_tasks.tasks"] == [  # type: ignore[attr-defined]
        "create",
        "cancel",
    ]
    crash_lines = task_lines(caplog, crashed)
    handler_line = next(r for r in crash_lines if r.name == "mcp_tasks.server")
    assert handler_line.levelno == logging.ERROR
    assert handler_line.getMessage() == f"task {crashed}: Tool 'crash' raised"
    assert handler_line.exc_info is not None  # the traceback stays in the log
    failed = [r for r in crash_lines if getattr(r, "event", None) == "fail"]
    assert len(failed) == 1
    assert failed[0].error_code == -32603  # type: ignore[attr-defined]
    assert "failed with -32603" in failed[0].getMessage()
    expired = [r.event for r in task_lines(caplog, expiring) if r.name == "mcp_tasks.tasks"]  # type: ignore[attr-defined]
    assert expired == ["create", "expire"]


async def test_a_task_taken_over_from_a_stopped_process_is_logged_orphaned(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_tasks.tasks")
    path = tmp_path / "tasks.db"
    left = SQLiteTaskStore(path)  # a process that stopped with a task running
    now = time.time()
    record = TaskRecord(
        task_id="tsk_left",
        version=1,
        tool_name="blocks",
        status=TaskStatus.WORKING,
        created_at=now - 5,
        last_updated_at=now - 5,
        ttl_ms=600_000,
        poll_interval_ms=None,
        principal="alice",
    )
    await left.save(record, None, active=True)
    await left.claim("tsk_left", now - 1)  # its lease lapsed: nobody renews it
    await left.aclose()
    server = Server("t", "1", store=SQLiteTaskStore(path))
    async with server.running():
        pass
    (line,) = task_lines(caplog, "tsk_left")
    assert line.event == "orphan"  # type: ignore[attr-defined]
    assert line.principal == "alice"  # type: ignore[attr-defined]
    assert line.age_seconds >= 5  # type: ignore[attr-defined]


async def test_nothing_is_logged_below_info_and_nothing_for_a_status_message(
    caplog: pytest.LogCaptureFixture, autojump_clock: MockClock
) -> None:
    caplog.set_level(logging.WARNING)
    server = build()
    async with server.running():
        client = Client(server)
        task_id = await client.start("blocks")
        await client.send("tasks/cancel", {"taskId": task_id})
    assert task_lines(caplog, task_id) == []


async def test_peer_refusals_are_logged_a_few_a_window_then_counted(
    caplog: pytest.LogCaptureFixture, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_tasks.server")
    clock = [0.0]
    log = RateLimitedLog(
        logging.getLogger("mcp_tasks.server"), lines_per_window=3, clock=lambda: clock[0]
    )
    monkeypatch.setattr(_observe, "refusal_log", log)
    server = build()
    async with server.running():
        client = Client(server)
        for n in range(50):
            reply = await client.send("tasks/get", {"taskId": f"tsk_nope{n}"})
            assert reply["error"]["code"] == -32602
        clock[0] = 11.0  # the next window
        await client.send("tasks/get", {"taskId": "tsk_last"})
        await client.send("no/such/method")
    lines = [r for r in caplog.records if getattr(r, "reason", None) == "-32602"]
    assert len(lines) == 4
    assert all(r.levelno == logging.INFO for r in lines)
    assert "Unknown task: 'tsk_nope0'" in lines[0].getMessage()
    assert lines[3].getMessage().endswith("(and 47 more like it in the last 10 s)")
    other: list[Any] = [r for r in caplog.records if getattr(r, "reason", None) == "-32601"]
    assert len(other) == 1  # another kind of refusal is never held back by the flood


async def test_a_task_line_is_the_record_logger_log_makes(
    caplog: pytest.LogCaptureFixture, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lines are made without `Logger.log`'s walk up the stack: they still name the
    function that wrote them (or nothing, when `logging` is told not to look), and still go
    through the logger's filters."""
    caplog.set_level(logging.INFO, logger="mcp_tasks.tasks")
    dropped: list[str] = []

    def drop_cancelled(record: logging.LogRecord) -> bool:
        if getattr(record, "event", None) == "cancel":
            dropped.append(record.getMessage())
            return False
        return True

    task_logger = logging.getLogger("mcp_tasks.tasks")
    task_logger.addFilter(drop_cancelled)
    try:
        server = build()
        async with server.running():
            client = Client(server)
            named = await client.start("blocks")
            await client.send("tasks/cancel", {"taskId": named})
            monkeypatch.setattr(logging, "_srcfile", None)
            unnamed = await client.start("blocks")
    finally:
        task_logger.removeFilter(drop_cancelled)
    (created,) = task_lines(caplog, named)
    assert (created.funcName, created.filename, created.module) == (
        "saved",
        "_observe.py",
        "_observe",
    )
    assert created.pathname == _observe.__file__
    lines, first = inspect.getsourcelines(_observe.saved)
    assert first < created.lineno < first + len(lines)
    assert len(dropped) == 1 and dropped[0].startswith(f"task {named} cancelled")
    (not_looked_up,) = task_lines(caplog, unnamed)
    assert (not_looked_up.funcName, not_looked_up.lineno) == ("(unknown function)", 0)
