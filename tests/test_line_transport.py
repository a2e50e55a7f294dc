"""examples/line_transport.py, the transport docs/writing-a-transport.md walks through: its
server driver on a loopback port and our `Client` through its client transport, on asyncio
and on trio; and the page's snippets are the example's own lines."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from mcp_tasks import CallToolResult, ElicitParams, ElicitResult, Server, ToolContext, ToolOutcome
from mcp_tasks.client import Client, PollPolicy, RpcError
from mcp_tasks.core import Reply
from mcp_tasks.transports import Connection
from mcp_tasks.transports._telemetry import Telemetry
from tests.doc_snippets import Page

EXAMPLES = Path(__file__).parent.parent / "examples"
BACKENDS = ["asyncio", "trio"]
DEADLINE_SECONDS = 30.0


def _load(name: str) -> ModuleType:
    """An example module, imported as a user's script imports it (examples/ on sys.path)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = _load("line_transport")


def _run(backend: str, body: Callable[[], Awaitable[Any]]) -> Any:
    """`body()` on `backend`, failing (not hanging) past the deadline."""

    async def bounded() -> Any:
        with anyio.fail_after(DEADLINE_SECONDS):
            return await body()

    return anyio.run(bounded, backend=backend)


@asynccontextmanager
async def _client_of(server: Any, **options: Any) -> AsyncIterator[Client]:
    """`server` served by the example on a loopback port; a `Client` over its transport."""
    async with server.running(), anyio.create_task_group() as serving:
        port = await serving.start(example.serve_tcp_lines, server, "127.0.0.1", 0)
        async with example.connect_tcp_lines("127.0.0.1", port) as transport:
            yield Client(transport, poll=PollPolicy(max_interval_ms=100), **options)
        serving.cancel_scope.cancel()


def _text(result: CallToolResult) -> str:
    [content] = result.content
    text: str = getattr(content, "text")  # noqa: B009
    return text


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_plain_tool_call_goes_over_the_lines(backend: str) -> None:
    jobs = _load("jobs")

    async def body() -> str:
        async with _client_of(jobs.server) as client:
            result = await client.call_tool_or_task("greet", {"name": "lines"})
            assert isinstance(result, CallToolResult)
            return _text(result)

    assert _run(backend, body) == "Hello, lines!"
    assert _run(backend, example.main) == "Hello, TCP!"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_task_is_created_polled_and_completed(backend: str) -> None:
    jobs = _load("jobs")
    statuses: list[str] = []

    async def body() -> str:
        async with _client_of(jobs.server) as client:
            task = await client.call_tool_or_task("slow_compute", {"seconds": 0.3, "label": "x"})
            assert not isinstance(task, CallToolResult), "slow_compute should start a task"
            assert task.status == "working"
            result = await client.await_task(task, on_status=lambda t: statuses.append(t.status))
            assert (await client.get_task(task.task_id)).status == "completed"
            return _text(result)

    assert _run(backend, body) == "x done after 0.3s"
    assert statuses[-1] == "completed"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_task_asking_for_input_gets_its_answer(backend: str) -> None:
    jobs = _load("jobs")
    asked: list[str] = []

    async def answer(params: ElicitParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": True})

    async def body() -> str:
        async with _client_of(jobs.server, on_elicit=answer) as client:
            return _text(await client.call_tool("confirm_delete", {"filename": "a.txt"}))

    assert _run(backend, body) == "Deleted a.txt"
    assert asked == ["Delete a.txt?"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancelling_a_request_cancels_it_on_the_server(backend: str) -> None:
    server = Server("waits", "0.1.0")
    events: dict[str, anyio.Event] = {}

    @server.tool()
    async def wait_forever(ctx: ToolContext) -> ToolOutcome:
        """Wait until cancelled; say so."""
        events["entered"].set()
        try:
            await anyio.sleep_forever()
        finally:
            events["cancelled"].set()
        raise AssertionError("unreachable")

    @server.tool()
    async def ping(ctx: ToolContext) -> ToolOutcome:
        """Answer at once."""
        return CallToolResult.text("pong")

    async def body() -> str:
        events.update(entered=anyio.Event(), cancelled=anyio.Event())
        async with _client_of(server) as client:
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "wait_forever")
                await events["entered"].wait()
                group.cancel_scope.cancel()  # the client sends notifications/cancelled
            await events["cancelled"].wait()  # the server's tool was cancelled by it
            return _text(await client.call_tool("ping"))  # and the connection goes on

    assert _run(backend, body) == "pong"
    assert events["cancelled"].is_set()


class _FailingServer(Server):
    """A bug behind `handle`, on purpose, for any message naming "boom"."""

    async def handle(self, data: bytes, **options: Any) -> Reply | None:
        if b"boom" in data:
            raise RuntimeError("a bug, on purpose")
        return await super().handle(data, **options)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bug_behind_handle_is_answered_with_the_internal_error_and_the_line_goes_on(
    backend: str,
) -> None:
    server = _FailingServer("failing", "0.1.0")

    @server.tool()
    async def greet(ctx: ToolContext, name: str = "world") -> ToolOutcome:
        """Say hello."""
        return CallToolResult.text(f"Hello, {name}!")

    async def body() -> tuple[int, str, str]:
        async with _client_of(server) as client:
            with anyio.fail_after(5), pytest.raises(RpcError) as failed:  # not left waiting
                await client.call_tool("greet", {"name": "boom"})
            fine = await client.call_tool("greet", {"name": "lines"})
            return failed.value.code, failed.value.message, _text(fine)

    assert _run(backend, body) == (-32603, "Internal error", "Hello, lines!")


def test_the_example_runs_as_a_script() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "line_transport.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout == "Hello, TCP!\n"


def test_the_page_shows_the_examples_own_lines() -> None:
    source = (EXAMPLES / "line_transport.py").read_text()
    snippets = Page("writing-a-transport.md").snippets
    assert snippets
    for snippet in snippets:
        assert snippet in source, snippet[:200]


class _Recording:
    """A `MessageHandler` in front of a `Server`: what the driver asks of the port."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.ended: list[Connection | None] = []
        self.connections: set[int] = set()

    async def handle(self, data: bytes, **given: Any) -> Reply | None:
        self.connections.add(id(given["connection"]))
        return await self.server.handle(data, **given)

    def end_subscriptions(self, connection: Connection | None = None) -> None:
        self.ended.append(connection)
        self.server.end_subscriptions(connection)

    async def readiness(self, timeout_seconds: float) -> str | None:
        return await self.server.readiness(timeout_seconds)

    @property
    def telemetry(self) -> Telemetry:
        return self.server.telemetry


async def test_each_connection_is_its_own_and_ends_its_subscriptions_when_it_closes() -> None:
    jobs = _load("jobs")
    port_of_server = _Recording(jobs.server)
    async with jobs.server.running(), anyio.create_task_group() as serving:
        port = await serving.start(example.serve_tcp_lines, port_of_server, "127.0.0.1", 0)
        for _ in range(2):
            async with example.connect_tcp_lines("127.0.0.1", port) as transport:
                await Client(transport).call_tool("greet")
            with anyio.fail_after(DEADLINE_SECONDS):
                while len(port_of_server.ended) < len(port_of_server.connections):
                    await anyio.sleep(0.01)  # the server sees the close a moment later
        serving.cancel_scope.cancel()
    assert len(port_of_server.connections) == 2
    assert {id(c) for c in port_of_server.ended} == port_of_server.connections


async def test_a_line_past_the_limit_ends_that_connection_only() -> None:
    jobs = _load("jobs")
    async with jobs.server.running(), anyio.create_task_group() as serving:
        port = await serving.start(example.serve_tcp_lines, jobs.server, "127.0.0.1", 0)
        with anyio.fail_after(DEADLINE_SECONDS):
            async with await anyio.connect_tcp("127.0.0.1", port) as hostile:
                with contextlib.suppress(anyio.BrokenResourceError):
                    await hostile.send(b"x" * (example.MAX_LINE_BYTES + 65536))
                with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                    await hostile.receive()  # closed by the server, nothing answered
            async with example.connect_tcp_lines("127.0.0.1", port) as transport:
                result = await Client(transport).call_tool("greet", {"name": "still"})
        serving.cancel_scope.cancel()
    assert _text(result) == "Hello, still!"
