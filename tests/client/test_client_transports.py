"""The Client end to end over both real transports against examples/jobs.py: Streamable
HTTP on a loopback socket, and stdio to a real subprocess (`mcp-tasks serve --stdio`)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from runtime.test_jobs_example import load_jobs

from mcp_tasks import CallToolResult
from mcp_tasks.client import (
    Client,
    RpcError,
    ServerUnreachable,
    TaskCancelled,
    TaskFailed,
    TransportError,
    connect_http,
    connect_stdio,
)
from mcp_tasks.core._client import PollPolicy, RetryPolicy
from mcp_tasks.journal import TaskJournal
from mcp_tasks.transports import serve_http

from .in_process import text_result
from .test_client_in_process import Answers

ROOT = Path(__file__).parent.parent.parent
SERVE_STDIO = [
    sys.executable,
    "-m",
    "mcp_tasks.cli",
    "serve",
    str(ROOT / "examples" / "jobs.py"),
    "--stdio",
]
FAST = PollPolicy(min_interval_ms=20, max_interval_ms=100)


@asynccontextmanager
async def http_client(**options: Any) -> AsyncIterator[Client]:
    server = load_jobs()
    async with server.running(), trio.open_nursery() as nursery:
        port = await nursery.start(serve_http, server, "127.0.0.1", 0)
        async with connect_http(f"http://127.0.0.1:{port}/mcp", **options) as client:
            yield client
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def stdio_client(**options: Any) -> AsyncIterator[Client]:
    async with connect_stdio(SERVE_STDIO, stderr="capture", **options) as client:
        yield client


CONNECT = {"http": http_client, "stdio": stdio_client}


@pytest.fixture(params=sorted(CONNECT))
def connect(request: pytest.FixtureRequest) -> Any:
    return CONNECT[request.param]


async def test_every_call_shape(connect: Any) -> None:
    answers = Answers({"confirm": True}, {"name": "Alice"})
    with trio.fail_after(30):
        async with connect(on_elicit=answers, poll=FAST) as client:
            tools = {tool.name for tool in await client.list_tools()}
            assert {"greet", "slow_compute", "confirm_delete"} <= tools
            discovered = await client.discover()
            assert "io.modelcontextprotocol/tasks" in discovered["capabilities"]["extensions"]
            assert await client.call_tool("greet", {"name": "W"}) == text_result("Hello, W!")
            slow = await client.call_tool("slow_compute", {"seconds": 0.3, "label": "s"})
            assert slow.content[0].text == "s done after 0.3s"  # type: ignore[union-attr]
            deleted = await client.call_tool("confirm_delete", {"filename": "f"})
            assert deleted == text_result("Deleted f")
            named = await client.call_tool("test_tool_with_task")
            assert "Alice" in named.content[0].text  # type: ignore[union-attr]
            assert (await client.call_tool("failing_job")).is_error is True
            with pytest.raises(TaskFailed):
                await client.call_tool("protocol_error_job")
            with pytest.raises(RpcError) as unknown:
                await client.call_tool("nope")
            assert unknown.value.code == -32602
    assert answers.asked == ["Delete f?", "What is your name?"]


async def test_cancel_from_the_client(connect: Any) -> None:
    with trio.fail_after(30):
        async with connect(poll=FAST) as client:
            handle = await client.call_tool_or_task("slow_compute", {"seconds": 60})
            assert not isinstance(handle, CallToolResult)
            with trio.move_on_after(0.3):
                await client.await_task(handle)
            with pytest.raises(TaskCancelled):
                await client.await_task(handle.task_id)


async def test_journal_resume_over_the_wire(connect: Any, tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with trio.fail_after(30):
        async with connect(
            on_elicit=Answers({"name": "Ada"}),
            poll=FAST,
            journal=TaskJournal(path),
            cancel_on_exit=False,
        ) as first:
            with trio.move_on_after(1):
                await first.call_tool("interview")
            (pending,) = TaskJournal(path).pending()
            second = Client(
                first.transport,
                on_elicit=Answers({"colour": "teal"}),
                poll=FAST,
                journal=TaskJournal(path),
            )
            result = await second.resume_task(pending.task_id)
            assert result == text_result("Ada likes teal")


async def test_a_stdio_server_that_dies_mid_task_is_a_clear_error() -> None:
    with trio.fail_after(30):
        async with stdio_client(poll=FAST) as client:
            handle = await client.call_tool_or_task("slow_compute", {"seconds": 60})
            assert not isinstance(handle, CallToolResult)
            os.kill(client.transport.pid, signal.SIGKILL)  # type: ignore[attr-defined]
            with pytest.raises(TransportError, match="exited"):
                await client.await_task(handle)


async def test_an_http_server_that_disappears_mid_task_is_a_clear_error() -> None:
    """...once `reconnect_seconds` of trying again have passed, each wait told."""
    server = load_jobs()
    waits: list[tuple[str, float, bool]] = []

    def told(method: str, seconds: float, why: Any) -> None:
        assert isinstance(why, ServerUnreachable)
        waits.append((method, seconds, why.may_have_arrived))

    with trio.fail_after(30):
        async with server.running(), trio.open_nursery() as nursery:
            serving = trio.CancelScope()

            async def serve(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
                with serving:
                    await serve_http(server, "127.0.0.1", 0, task_status=task_status)

            port = await nursery.start(serve)
            async with connect_http(
                f"http://127.0.0.1:{port}/mcp",
                poll=FAST,
                cancel_on_exit=False,
                retry=RetryPolicy(reconnect_seconds=0.5),
                on_retry=told,
            ) as client:
                handle = await client.call_tool_or_task("slow_compute", {"seconds": 60})
                assert not isinstance(handle, CallToolResult)
                serving.cancel()
                with pytest.raises(TransportError, match="cannot connect"):
                    await client.await_task(handle)
            assert {(method, sent) for method, _, sent in waits} == {("tasks/get", False)}
            assert sum(seconds for _, seconds, _ in waits) == pytest.approx(0.5)
            nursery.cancel_scope.cancel()
