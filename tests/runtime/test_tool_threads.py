"""Plain-function tools and their worker threads, under trio and under asyncio: the threads
of cancelled calls count against `max_tool_threads` until their functions return; past it a
call is refused at once, retryable; a task's run waits for a thread; a function that checks
`ctx.cancelled` ends early; the stores' threads are never starved; each cause is logged,
rate-limited.

Each test drives `Server.handle` in this process, cancelling calls as a transport does (a
cancel scope around the request). Blocking functions wait on a `threading.Event` the test
sets at its end (bounded), so no thread outlives the test. Waits are for events, bounded;
nothing is asserted on time.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
import trio.testing
from on_asyncio import run_asyncio, wait_until

from mcp_tasks import START_TASK, Server, ServerOptions, ToolContext
from mcp_tasks.core import Reply
from mcp_tasks.runtime import ToolThreads
from mcp_tasks.server import Connection
from mcp_tasks.store import SQLiteTaskStore, TaskStore

from .helpers import request

DEADLINE_SECONDS = 30.0
THREAD_SECONDS = 30.0
"""The most a test's blocking function blocks (it is released sooner, at the test's end)."""


def on_trio(main: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with trio.fail_after(DEADLINE_SECONDS):
            await main()

    trio.run(bounded)


Run = Callable[[Callable[[], Awaitable[None]]], None]
LOOPS = pytest.mark.parametrize("run", [on_trio, run_asyncio], ids=["trio", "asyncio"])


class Tools:
    """A server's plain-function tools, and what the test sees of their threads."""

    def __init__(self, server: Server) -> None:
        self.release = threading.Event()
        self.entered = 0
        self.saw_cancelled: list[bool] = []
        self._lock = threading.Lock()

        @server.tool()
        def stuck(ctx: ToolContext) -> str:
            """Blocks, deaf to cancellation, until the test releases it."""
            with self._lock:
                self.entered += 1
            self.release.wait(THREAD_SECONDS)
            return "released"

        @server.tool()
        def patient(ctx: ToolContext) -> str:
            """Blocks until its call is cancelled (or the test releases it)."""
            with self._lock:
                self.entered += 1
            ctx.wait_cancelled(THREAD_SECONDS)
            self.saw_cancelled.append(ctx.cancelled)
            return "done waiting"

        @server.tool()
        def quick(ctx: ToolContext) -> str:
            return "quick"

        @server.tool(task_support="required")
        def vigil(ctx: ToolContext) -> str:
            """A task's function that waits until its task is cancelled."""
            with self._lock:
                self.entered += 1
            ctx.wait_cancelled(THREAD_SECONDS)
            self.saw_cancelled.append(ctx.cancelled)
            return "vigil over"

        @server.tool(task_support="required")
        def chore(ctx: ToolContext) -> Any:
            if not ctx.in_task:
                return START_TASK
            with self._lock:
                self.entered += 1
            return "chore done"


def build(max_tool_threads: int = 3, store: TaskStore | None = None) -> tuple[Server, Tools]:
    server = Server(
        "threads",
        "1",
        options=ServerOptions(max_tool_threads=max_tool_threads),
        store=store,
        shutdown_grace_seconds=0.2,
    )
    return server, Tools(server)


async def call(server: Server, tool: str, connection: Connection | None = None) -> Reply:
    reply = await server.handle(
        request("tools/call", {"name": tool, "arguments": {}}), connection=connection
    )
    assert reply is not None
    return reply


async def abandon(server: Server, tools: Tools, tool: str) -> Reply | None:
    """Call `tool` and cancel the call once its function has started (as a client that
    hangs up does); the reply instead, if it was refused before it started."""
    entered = tools.entered
    replies: list[Reply] = []
    async with anyio.create_task_group() as group:

        async def calling() -> None:
            replies.append(await call(server, tool))

        group.start_soon(calling)
        await wait_until(lambda: tools.entered > entered or bool(replies))
        group.cancel_scope.cancel()
    return replies[0] if replies else None


def refused(reply: Reply) -> dict[str, Any]:
    """The refusal's JSON-RPC error, checked to be retryable."""
    assert reply.http_status == 503, reply
    assert reply.retry_after_seconds == 1
    error: dict[str, Any] = json.loads(reply.body)["error"]
    assert error["code"] == -32603
    assert error["data"] == {"retryAfterMs": 1000}
    return error


def threads_now() -> int:
    return threading.active_count()


@LOOPS
def test_abandoned_threads_count_against_the_bound(
    run: Run, caplog: pytest.LogCaptureFixture
) -> None:
    """Ten calls cut off while their functions run: three threads held (the bound), the
    rest refused at once; a fresh call is refused, retryable; once the functions return,
    their threads are free again."""
    caplog.set_level(logging.INFO, "mcp_tasks.server")
    server, tools = build(max_tool_threads=3)
    server.tool_threads.wait_seconds = 0.01  # refuse at once: this test calls often
    before = threads_now()

    async def main() -> None:
        async with server.running():
            try:
                answers = [await abandon(server, tools, "stuck") for _ in range(10)]
                assert answers[:3] == [None, None, None]  # cancelled while they ran
                for answer in answers[3:]:
                    assert answer is not None
                    assert "No worker thread is free for tool 'stuck'" in refused(answer)["message"]
                assert tools.entered == 3
                assert server.tool_threads.held == 3
                assert server.tool_threads.abandoned == 3
                assert threads_now() - before <= 3
                refused(await call(server, "quick"))
            finally:
                tools.release.set()
            await wait_until(lambda: server.tool_threads.held == 0)
            assert server.tool_threads.abandoned == 0
            reply = await call(server, "quick")
            assert json.loads(reply.body)["result"]["content"][0]["text"] == "quick"

    run(main)
    reasons = [getattr(record, "reason", None) for record in caplog.records]
    assert reasons.count("tool_thread_abandoned") == 3
    assert reasons.count("tool_thread_ended") == 3
    assert 1 <= reasons.count("tool_threads_full") <= 5  # eight refusals, a few lines
    abandoned = caplog.records[reasons.index("tool_thread_abandoned")]
    assert abandoned.levelno == logging.WARNING
    assert "runs on until the function returns" in abandoned.getMessage()


@LOOPS
def test_a_cancelled_function_sees_ctx_cancelled_and_frees_its_thread(
    run: Run,
) -> None:
    server, tools = build(max_tool_threads=1)

    async def main() -> None:
        async with server.running():
            try:
                for _ in range(3):  # one thread: each must have been given back
                    assert await abandon(server, tools, "patient") is None
                    await wait_until(lambda: server.tool_threads.held == 0)
            finally:
                tools.release.set()

    run(main)
    assert tools.saw_cancelled == [True, True, True]


def test_notifications_cancelled_reaches_the_function() -> None:
    """A call cancelled by its client's `notifications/cancelled` (not a hang-up)."""
    server, tools = build(max_tool_threads=1)
    connection = Connection()

    async def main() -> None:
        async with server.running(), anyio.create_task_group() as group:
            replies: list[Reply] = []

            async def calling() -> None:
                data = request("tools/call", {"name": "patient", "arguments": {}}, request_id=9)
                reply = await server.handle(data, connection=connection)
                if reply is not None:
                    replies.append(reply)

            group.start_soon(calling)
            await wait_until(lambda: tools.entered == 1)
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 9},
            }
            await server.handle(json.dumps(cancel).encode(), connection=connection)
            await wait_until(lambda: bool(tools.saw_cancelled))
            assert replies == []  # a cancelled request gets no reply

    run_asyncio(main)
    assert tools.saw_cancelled == [True]


async def test_a_task_waits_for_a_thread_instead_of_being_refused() -> None:
    server, tools = build(max_tool_threads=1)
    server.tool_threads.wait_seconds = 0.0
    async with server.running():
        try:
            assert await abandon(server, tools, "stuck") is None
            created = json.loads((await call(server, "chore")).body)["result"]
            task_id = created["taskId"]
            await trio.testing.wait_all_tasks_blocked()
            assert tools.entered == 1  # the chore waits: the one thread is held
            fetched = await server.handle(request("tasks/get", {"taskId": task_id}))
            assert fetched is not None
            assert json.loads(fetched.body)["result"]["status"] == "working"
        finally:
            tools.release.set()
        with trio.fail_after(DEADLINE_SECONDS):
            while True:
                fetched = await server.handle(request("tasks/get", {"taskId": task_id}))
                assert fetched is not None
                task = json.loads(fetched.body)["result"]
                if task["status"] != "working":
                    break
                await trio.sleep(0.01)
        assert task["status"] == "completed"
        assert tools.entered == 2


async def test_tasks_cancel_reaches_a_tasks_function() -> None:
    server, tools = build(max_tool_threads=1)
    async with server.running():
        try:
            created = json.loads((await call(server, "vigil")).body)["result"]
            with trio.fail_after(DEADLINE_SECONDS):
                while tools.entered == 0:
                    await trio.sleep(0.01)
            cancel = request("tasks/cancel", {"taskId": created["taskId"]})
            cancelled = await server.handle(cancel)
            assert cancelled is not None
            assert "result" in json.loads(cancelled.body), cancelled
            with trio.fail_after(DEADLINE_SECONDS):
                while server.tool_threads.held:
                    await trio.sleep(0.01)
        finally:
            tools.release.set()
    assert tools.saw_cancelled == [True]


def test_abandoned_tool_threads_never_starve_the_store(tmp_path: Path) -> None:
    """Under trio, anyio's default limiter (40 threads) is what the SQLite store's worker
    runs in: 45 abandoned calls of a blocking tool (the default bound) must not take it."""
    store = SQLiteTaskStore(tmp_path / "tasks.db")
    server = Server("threads", "1", store=store, shutdown_grace_seconds=0.2)
    tools = Tools(server)

    async def main() -> None:
        async with server.running():
            try:
                for _ in range(45):
                    await abandon(server, tools, "stuck")
                assert tools.entered == ServerOptions().max_tool_threads
                created = json.loads((await call(server, "chore")).body)  # a SQLite write
                assert created["result"]["resultType"] == "task", created
            finally:
                tools.release.set()
        await store.aclose()

    on_trio(main)


@LOOPS
def test_a_call_cancelled_before_its_thread_starts_never_runs_the_function(run: Run) -> None:
    threads = ToolThreads(2)
    ran: list[str] = []

    async def main() -> None:
        threads.start(2)
        with anyio.CancelScope() as scope:
            scope.cancel()  # cancelled already: the call ends at its first checkpoint
            await threads.run("never", lambda: ran.append("ran"), queue=False)
        assert scope.cancelled_caught
        assert threads.held == 0
        assert threads.abandoned == 0
        assert await threads.run("once", lambda: ran.append("ran") or "ok", queue=False) == "ok"

    run(main)
    assert ran == ["ran"]


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_tool_threads must be at least 1"):
        ServerOptions(max_tool_threads=0)
