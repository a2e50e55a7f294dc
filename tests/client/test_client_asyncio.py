"""The client under `asyncio.run`, not trio: against `mcp-tasks serve` in a real process,
over HTTP (a loopback port read from the server's log) and over stdio (a command the client
spawns). The tests are plain functions that start their own asyncio loop (pytest runs the
async ones under trio), and what they wait for is asyncio's own: `asyncio.Event`,
`asyncio.create_task`, `task.cancel()`, `asyncio.timeout`."""

from __future__ import annotations

import asyncio
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    ElicitParams,
    ElicitResult,
    Server,
    TaskOptions,
    TextContent,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.client import Client, RpcError, Task, connect_http, connect_stdio
from mcp_tasks.core import SubscriptionFilter, TaskStatus
from mcp_tasks.journal import TaskJournal
from mcp_tasks.transports import TransportError, open_stdio_transport

from .in_process import InProcessTransport

ROOT = Path(__file__).parent.parent.parent
TARGET = str(ROOT / "tests" / "client" / "conformance_target.py")
SERVE = [sys.executable, "-m", "mcp_tasks.cli", "serve", TARGET, "--log-level", "warning"]
FAST_POLLS = ("--poll-interval", "0.1")
BUSY = ("--max-tasks", "1", "--ttl", "2", *FAST_POLLS)
"""One task at a time, each kept 2 s: the next is refused (503, Retry-After) until then."""
TIMEOUT = 30.0

Connect = Callable[..., AbstractAsyncContextManager[Client]]
"""`connect(**options)`: a client (options go to `Client`) of the server under test."""
_Result = TypeVar("_Result")

ANSWERS: dict[str, dict[str, Any]] = {
    "Delete f?": {"confirm": True},
    "What is your name?": {"name": "Ada"},
    "Your name?": {"name": "Ada"},
    "Favourite colour, Ada?": {"colour": "blue"},
    "What context should the prompt use?": {"context": "the moon"},
}


def run(scenario: Callable[[], Awaitable[_Result]]) -> _Result:
    """`scenario()` under `asyncio.run`, cut off after TIMEOUT."""

    async def bounded() -> _Result:
        async with asyncio.timeout(TIMEOUT):
            return await scenario()

    return asyncio.run(bounded())


@contextmanager
def serving_http(*flags: str) -> Iterator[str]:
    """The endpoint of `mcp-tasks serve --http 127.0.0.1:0` in its own process."""
    command = [*SERVE, "--http", "127.0.0.1:0", *flags]
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=ROOT) as server:

        def drain() -> None:  # reads stderr to its end, so the server never blocks on it
            for line in server.stderr or ():
                lines.put(line)

        drainer = threading.Thread(target=drain, daemon=True)
        drainer.start()
        try:
            yield _url_in(lines)
        finally:
            server.send_signal(signal.SIGINT)
            server.send_signal(signal.SIGINT)  # the second one: no grace for what still runs
            server.wait(TIMEOUT)
            drainer.join(TIMEOUT)


def _url_in(lines: queue.Queue[str]) -> str:
    """The URL of the "serving ... on URL" line, the first such line within TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        if found := re.search(r"on (http://127\.0\.0\.1:\d+/mcp)", line):
            return found.group(1)


@contextmanager
def connector(transport: str, *flags: str) -> Iterator[Connect]:
    """How to connect to a server started with `flags`: over HTTP to a process started
    here, or over stdio to one each client spawns."""
    if transport == "stdio":
        command = [*SERVE, "--stdio", *flags]
        yield lambda **options: connect_stdio(command, stderr="capture", **options)
        return
    with serving_http(*flags) as url:
        yield lambda **options: connect_http(url, **options)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with serving_http(*FAST_POLLS) as url:
        yield url


@pytest.fixture(params=["http", "stdio"])
def connect(request: pytest.FixtureRequest, http_url: str) -> Connect:
    if request.param == "http":
        return lambda **options: connect_http(http_url, **options)
    command = [*SERVE, "--stdio", *FAST_POLLS]
    return lambda **options: connect_stdio(command, stderr="capture", **options)


async def answer(params: ElicitParams) -> ElicitResult:
    await asyncio.sleep(0)  # an asyncio coroutine, awaited by the client
    return ElicitResult(action="accept", content=ANSWERS[params.message])


async def until(client: Client, task_id: str, status: TaskStatus) -> Task:
    """Poll until the task is in `status` (bounded by `run`'s timeout)."""
    while (task := await client.get_task(task_id)).status != status:
        assert not task.status.is_terminal, task
        await asyncio.sleep(0.05)
    return task


def text(result: CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, TextContent), result
    return content.text


def test_a_synchronous_tool_answers_at_once(connect: Connect) -> None:
    async def scenario() -> CallToolResult:
        async with connect() as client:
            return await client.call_tool("greet", {"name": "W"})

    result = run(scenario)
    assert text(result) == "Hello, W!" and result.is_error is False


def test_a_task_is_polled_to_completion_and_journaled(connect: Connect, tmp_path: Path) -> None:
    journal_path = tmp_path / "tasks.jsonl"
    statuses: list[TaskStatus] = []

    async def scenario() -> CallToolResult:
        async with connect(journal=TaskJournal(journal_path)) as client:
            arguments = {"seconds": 0.3, "label": "sum"}
            return await client.call_tool(
                "slow_compute", arguments, on_status=lambda task: statuses.append(task.status)
            )

    assert text(run(scenario)) == "sum done after 0.3s"
    assert statuses[0] == TaskStatus.WORKING and statuses[-1] == TaskStatus.COMPLETED
    (entry,) = TaskJournal(journal_path).entries.values()
    assert (entry.tool, entry.ended) == ("slow_compute", "completed")


def test_input_requests_are_answered_by_on_elicit(connect: Connect) -> None:
    async def scenario() -> list[str]:
        async with connect(on_elicit=answer) as client:
            in_a_round = await client.call_tool("confirm_delete", {"filename": "f"})
            before_the_task = await client.call_tool("test_tool_with_task")
            in_place = await client.call_tool("interview")
            return [text(in_a_round), text(before_the_task), text(in_place)]

    assert run(scenario) == [
        "Deleted f",
        "Hello, Ada! (from inside the task)",
        "Ada likes blue",
    ]


def test_cancelling_the_wait_cancels_the_task_on_the_server(connect: Connect) -> None:
    async def scenario() -> Task:
        async with connect() as client:
            started: list[Task] = []
            seen = asyncio.Event()

            def on_status(task: Task) -> None:
                started.append(task)
                seen.set()

            call = client.call_tool("slow_compute", {"seconds": 60}, on_status=on_status)
            waiting = asyncio.create_task(call)
            await seen.wait()
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            return await client.get_task(started[0].task_id)

    assert run(scenario).status == TaskStatus.CANCELLED


def test_an_anyio_cancel_scope_around_the_wait_cancels_the_task_on_the_server(
    connect: Connect,
) -> None:
    """The same through an anyio cancel scope (which, under asyncio, cancels again at each
    await until the scope is left): the `tasks/cancel` is shielded from it."""

    async def scenario() -> Task:
        async with connect() as client:
            started: list[Task] = []
            with anyio.CancelScope() as scope:

                def on_status(task: Task) -> None:
                    started.append(task)
                    scope.cancel()

                await client.call_tool("slow_compute", {"seconds": 60}, on_status=on_status)
            assert scope.cancelled_caught
            return await client.get_task(started[0].task_id)

    assert run(scenario).status == TaskStatus.CANCELLED


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_busy_server_is_asked_again_after_the_wait_it_gives(transport: str) -> None:
    retries: list[tuple[str, RpcError]] = []

    def on_retry(method: str, seconds: float, error: RpcError) -> None:
        retries.append((method, error))

    async def scenario(connect: Connect) -> CallToolResult:
        async with connect(on_retry=on_retry) as client:
            held = await client.call_tool_or_task("slow_compute", {"seconds": 30})
            assert not isinstance(held, CallToolResult)
            return await client.call_tool("slow_compute", {"seconds": 0.1, "label": "next"})

    with connector(transport, *BUSY) as connect:
        assert text(run(lambda: scenario(connect))) == "next done after 0.1s"
    assert retries, "the second task was not refused: the server is not busy"
    for method, error in retries:
        assert method == "tools/call" and "Too many tasks" in error.message
        assert error.retry_after_ms is not None and error.retry_after_ms > 0


def test_lists_and_prompts_have_their_helpers(connect: Connect) -> None:
    async def scenario() -> list[object]:
        async with connect(on_elicit=answer) as client:
            tools = {tool.name for tool in await client.list_tools()}
            assert {"greet", "slow_compute", "confirm_delete"} <= tools
            prompts = {prompt.name for prompt in await client.list_prompts()}
            assert "test_prompt_with_arguments" in prompts
            plain = await client.get_prompt(
                "test_prompt_with_arguments", {"arg1": "a", "arg2": "b"}
            )
            asked = await client.get_prompt("test_input_required_result_prompt")  # a round
            return [message.content for prompt in (plain, asked) for message in prompt.messages]

    assert run(scenario) == [
        TextContent(text="Prompt with arguments: arg1='a', arg2='b'"),
        TextContent(text="Use this context: the moon"),
    ]


def test_a_listen_stream_tells_of_a_task_until_the_listener_is_cancelled(
    connect: Connect,
) -> None:
    heard: list[dict[str, Any]] = []

    async def scenario() -> None:
        acknowledged, completed = asyncio.Event(), asyncio.Event()

        def on_notification(message: dict[str, Any]) -> None:
            heard.append(message)
            if message["method"] == "notifications/subscriptions/acknowledged":
                acknowledged.set()
            elif message["params"].get("status") == "completed":
                completed.set()

        async with connect(on_elicit=answer) as client, asyncio.TaskGroup() as listeners:
            task = await client.call_tool_or_task("confirm_delete", {"filename": "f"})
            assert not isinstance(task, CallToolResult)
            wanted = SubscriptionFilter(task_ids=[task.task_id])
            listening = listeners.create_task(client.listen(wanted, on_notification))
            await acknowledged.wait()
            await until(client, task.task_id, TaskStatus.INPUT_REQUIRED)
            yes = ElicitResult(action="accept", content={"confirm": True})
            await client.update_task(task.task_id, {"confirm": yes})
            await completed.wait()
            listening.cancel()
        assert listening.cancelled()

    run(scenario)
    assert heard[0]["method"] == "notifications/subscriptions/acknowledged"
    last = heard[-1]
    assert last["method"] == "notifications/tasks"
    assert last["params"]["result"]["content"] == [{"type": "text", "text": "Deleted f"}]


def test_a_server_that_dies_is_a_transport_error_with_its_exit_code_and_stderr() -> None:
    script = "import sys; sys.stdin.readline(); print('out of cheese', file=sys.stderr); exit(3)"

    async def scenario() -> str:
        async with connect_stdio([sys.executable, "-c", script], stderr="capture") as client:
            with pytest.raises(TransportError) as caught:
                await client.call_tool("greet")
            with pytest.raises(TransportError):  # and so does every later call
                await client.call_tool("greet")
            return str(caught.value)

    message = run(scenario)
    assert "server process exited with code 3" in message and "out of cheese" in message


def test_a_server_that_reads_nothing_ends_the_session_after_the_write_timeout() -> None:
    script = "import time; time.sleep(60)"
    command = [sys.executable, "-c", script]

    async def scenario() -> str:
        stdio = open_stdio_transport(command, write_timeout_seconds=0.5, close_timeout_seconds=1)
        async with stdio as transport:
            with pytest.raises(TransportError) as caught:  # more than the pipe holds
                await Client(transport).call_tool("greet", {"name": "x" * 2**20})
            return str(caught.value)

    assert "read nothing of its stdin for 0.5 seconds" in run(scenario)


def test_client_and_server_share_one_asyncio_loop() -> None:
    """In process (`Server.handle`, no socket): a task that asks in place is answered, and
    a wait cancelled by `task.cancel()` cancels its task."""
    server = Server("asyncio", "0.1.0", tasks=TaskOptions(poll_interval_ms=100))
    held = asyncio.Event()

    @server.tool(task_support="required")
    async def ask(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        name = await ctx.elicit("Your name?", {"type": "object"})
        return CallToolResult.text(f"Hello, {(name.content or {}).get('name')}!")

    @server.tool(task_support="required")
    async def hold(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        held.set()
        await asyncio.Event().wait()  # until cancelled
        return CallToolResult.text("never")

    async def scenario() -> tuple[str, TaskStatus]:
        async with server.running():
            client = Client(InProcessTransport(server), on_elicit=answer)
            answered = await client.call_tool("ask")
            started: list[Task] = []
            waiting = asyncio.create_task(client.call_tool("hold", on_status=started.append))
            await held.wait()
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            return text(answered), (await client.get_task(started[0].task_id)).status

    assert run(scenario) == ("Hello, Ada!", TaskStatus.CANCELLED)
