"""The Client against the project's own server (examples/jobs.py), in one trio run on the
virtual clock: every call shape, input inside and before a task, cancelling, expiry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import trio
from runtime.helpers import trio_clock
from runtime.test_jobs_example import load_jobs
from trio.testing import MockClock

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    CreateMessageParams,
    CreateMessageRequest,
    ElicitParams,
    ElicitResult,
    InputRequired,
    SamplingMessage,
    Server,
    TaskOptions,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.client import (
    Client,
    MissingInputHandler,
    RetryPolicy,
    RpcError,
    TaskCancelled,
    TaskExpired,
    TaskFailed,
)
from mcp_tasks.core import CreateMessageResult, DetailedTask, ListRootsResult, Root

from .in_process import InProcessTransport, text_result


class Answers:
    """An elicitation handler that answers from a script and records what it was asked;
    past the end of the script it never answers."""

    def __init__(self, *contents: dict[str, Any]) -> None:
        self.contents = list(contents)
        self.asked: list[str] = []

    async def __call__(self, params: ElicitParams) -> ElicitResult:
        self.asked.append(params.message)
        if not self.contents:  # nobody answers (yet): the question stays open
            await trio.sleep_forever()
        return ElicitResult(action="accept", content=self.contents.pop(0))


@pytest.fixture
async def jobs() -> AsyncIterator[Server]:
    server = load_jobs()
    async with server.running():
        yield server


def client_for(server: Server, **kw: Any) -> Client:
    return Client(InProcessTransport(server), **kw)


async def test_a_sync_tool_returns_its_result(jobs: Server, autojump_clock: MockClock) -> None:
    result = await client_for(jobs).call_tool("greet", {"name": "Ada"})
    assert result == text_result("Hello, Ada!")


async def test_a_task_is_waited_for_with_each_status_reported(
    jobs: Server, autojump_clock: MockClock
) -> None:
    seen: list[tuple[str, Any]] = []

    def on_status(task: DetailedTask) -> None:
        seen.append((type(task).__name__, task.status_message))

    result = await client_for(jobs).call_tool(
        "slow_compute", {"seconds": 3, "label": "x"}, on_status=on_status
    )
    assert result.content[0].text == "x done after 3s"  # type: ignore[union-attr]
    assert seen[0][0] == "WorkingTask" and seen[-1][0] == "CompletedTask"
    assert len(seen) == len(set(seen))  # only changes are reported


async def test_call_tool_or_task_gives_the_handle(jobs: Server, autojump_clock: MockClock) -> None:
    client = client_for(jobs)
    handle = await client.call_tool_or_task("slow_compute", {"seconds": 2})
    assert not isinstance(handle, CallToolResult) and handle.task_id.startswith("tsk_")
    assert (await client.get_task(handle.task_id)).task_id == handle.task_id
    result = await client.await_task(handle.task_id)
    assert result.content


async def test_input_inside_a_task_is_asked_once_and_answered(
    jobs: Server, autojump_clock: MockClock
) -> None:
    answers = Answers({"confirm": True})
    result = await client_for(jobs, on_elicit=answers).call_tool(
        "confirm_delete", {"filename": "a.txt"}
    )
    assert result == text_result("Deleted a.txt")
    assert answers.asked == ["Delete a.txt?"]


async def test_two_questions_at_once_and_waiting_in_place(
    jobs: Server, autojump_clock: MockClock
) -> None:
    answers = Answers({"answer": "a"}, {"answer": "b"}, {"name": "Ada"}, {"colour": "red"})
    client = client_for(jobs, on_elicit=answers)
    both = await client.call_tool("multi_input")
    assert both.content[0].text == "Answers: accept, accept"  # type: ignore[union-attr]
    talk = await client.call_tool("interview")
    assert talk.content[0].text == "Ada likes red"  # type: ignore[union-attr]
    assert answers.asked == [
        "First question?",
        "Second question?",
        "Your name?",
        "Favourite colour, Ada?",
    ]


async def test_input_before_a_task_echoes_request_state(
    jobs: Server, autojump_clock: MockClock
) -> None:
    transport = InProcessTransport(jobs)
    client = Client(transport, on_elicit=Answers({"name": "Alice"}))
    result = await client.call_tool("test_tool_with_task")
    assert "Alice" in result.content[0].text  # type: ignore[union-attr]
    calls = [m for m in map(msgspec.json.decode, transport.sent) if m["method"] == "tools/call"]
    first, second = calls[:2]
    assert "inputResponses" not in first["params"] and "requestState" in second["params"]


async def test_a_tool_error_is_a_result_and_a_failed_task_raises(
    jobs: Server, autojump_clock: MockClock
) -> None:
    client = client_for(jobs)
    assert (await client.call_tool("failing_job")).is_error is True
    with pytest.raises(TaskFailed) as failed:
        await client.call_tool("protocol_error_job")
    assert failed.value.code == -32603 and "crashed" in failed.value.message


async def test_a_json_rpc_error_raises_with_code_and_data(
    jobs: Server, autojump_clock: MockClock
) -> None:
    with pytest.raises(RpcError) as raised:
        await client_for(jobs).call_tool("nope")
    assert raised.value.code == -32602 and "nope" in raised.value.message


async def test_a_question_without_a_handler_names_the_missing_handler(
    autojump_clock: MockClock,
) -> None:
    server = Server("t", "1")

    @server.tool(task_support="required")
    async def asks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await ctx.elicit("hi?")
        return "never"

    async with server.running():
        # Declared elicitation, so the server asks; the client then finds no handler.
        client = client_for(server, on_elicit=Answers())
        client.on_elicit = None
        with pytest.raises(MissingInputHandler, match="on_elicit"):
            await client.call_tool("asks")


async def test_cancelling_the_wait_cancels_the_task(
    jobs: Server, autojump_clock: MockClock
) -> None:
    client = client_for(jobs)
    handle = await client.call_tool_or_task("slow_compute", {"seconds": 100})
    assert not isinstance(handle, CallToolResult)
    with trio.move_on_after(2):
        await client.await_task(handle)
    assert type(await client.get_task(handle.task_id)).__name__ == "CancelledTask"
    with pytest.raises(TaskCancelled):
        await client.await_task(handle.task_id)


async def test_waiting_gives_up_at_the_ttl(autojump_clock: MockClock) -> None:
    server = Server("t", "1", tasks=TaskOptions(ttl_ms=5000), clock=trio_clock)

    @server.tool(task_support="required")
    async def forever(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await trio.sleep_forever()
        raise AssertionError

    async with server.running():
        client = client_for(server, clock=trio_clock)
        start = trio.current_time()
        with pytest.raises(TaskExpired):
            await client.call_tool("forever")
        assert trio.current_time() - start == pytest.approx(5, abs=1.1)


async def test_a_client_clock_ahead_of_the_servers_does_not_end_the_wait(
    autojump_clock: MockClock,
) -> None:
    """The server judges a task's expiry: a client whose clock runs an hour ahead sees the
    task past `createdAt + ttlMs` from the first poll, and waits on all the same."""
    server = Server("t", "1", tasks=TaskOptions(ttl_ms=5000), clock=trio_clock)

    @server.tool(task_support="required")
    async def slow(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await trio.sleep(3)
        return CallToolResult.text("done")

    async with server.running():
        client = client_for(server, clock=lambda: trio_clock() + 3600)
        assert await client.call_tool("slow") == text_result("done")


async def test_sampling_and_roots_are_answered_by_their_handlers(
    autojump_clock: MockClock,
) -> None:
    server = Server("t", "1")

    @server.tool(task_support="required")
    async def research(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        roots = await ctx.list_roots()
        reply = await ctx.sample(
            [SamplingMessage(role="user", content={"type": "text", "text": "sum up"})], 50
        )
        return f"{len(roots.roots)} roots; model {reply.model} said {reply.content['text']}"

    @server.tool()
    async def ask_model_first(ctx: ToolContext) -> ToolOutcome:
        answer = ctx.sample_response("s")
        if answer is None:
            message = SamplingMessage(role="user", content={"type": "text", "text": "hi"})
            request = CreateMessageRequest(
                params=CreateMessageParams(messages=[message], max_tokens=5)
            )
            return InputRequired(requests={"s": request})
        return f"before any task: {answer.content['text']}"

    asked: list[str] = []

    async def on_sample(params: CreateMessageParams) -> CreateMessageResult:
        asked.append(f"sample {params.max_tokens}")
        return CreateMessageResult(
            role="assistant", model="m-1", content={"type": "text", "text": "ok"}
        )

    async def on_roots() -> ListRootsResult:
        asked.append("roots")
        return ListRootsResult(roots=[Root(uri="file:///a"), Root(uri="file:///b")])

    async with server.running():
        client = client_for(server, on_sample=on_sample, on_roots=on_roots)
        result = await client.call_tool("research")
        assert result == text_result("2 roots; model m-1 said ok")
        early = await client.call_tool("ask_model_first")
        assert early == text_result("before any task: ok")
    assert asked == ["roots", "sample 50", "sample 5"]


# --- a busy server is retried (issue 15, point 7) ---------------------------------------------


def _busy_server(**tasks: Any) -> Server:
    server = Server("busy", "1", tasks=TaskOptions(**tasks), clock=trio_clock)

    @server.tool(task_support="required")
    async def hold(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    return server


async def test_a_full_server_is_tried_again_when_its_next_task_expires(
    autojump_clock: MockClock,
) -> None:
    server = _busy_server(max_tasks=1, ttl_ms=5_000)
    waits: list[tuple[str, float, int]] = []
    async with server.running():
        client = client_for(server, on_retry=lambda m, s, e: waits.append((m, s, e.code)))
        first = await client.call_tool_or_task("hold")
        asked_at = trio.current_time()
        second = await client.call_tool_or_task("hold")  # refused until the first expires
        assert isinstance(first, DetailedTask) and isinstance(second, DetailedTask)
        assert first.task_id != second.task_id
        assert trio.current_time() - asked_at >= 5.0
    (method, seconds, code), *_ = waits
    assert method == "tools/call" and code == -32603
    assert 5.0 <= seconds <= 5.0 * 1.2  # the wait asked for, and some jitter on top


async def test_a_poll_too_soon_is_tried_again_after_the_wait(autojump_clock: MockClock) -> None:
    server = _busy_server(poll_interval_ms=1000, min_poll_fraction=1.0)
    waits: list[tuple[str, float]] = []
    async with server.running():
        client = client_for(server, on_retry=lambda m, s, e: waits.append((m, s)))
        task = await client.call_tool_or_task("hold")
        assert isinstance(task, DetailedTask)
        await client.get_task(task.task_id)
        polled_at = trio.current_time()
        again = await client.get_task(task.task_id)  # 429 at once, then answered
        assert again.task_id == task.task_id and trio.current_time() - polled_at >= 1.0
    assert [method for method, _ in waits] == ["tasks/get"]


async def test_a_wait_longer_than_the_policy_allows_is_an_error_at_once(
    autojump_clock: MockClock,
) -> None:
    server = _busy_server(max_tasks=1, ttl_ms=600_000)
    async with server.running():
        client = client_for(server, retry=RetryPolicy(max_wait_seconds=30))
        await client.call_tool_or_task("hold")
        asked_at = trio.current_time()
        with pytest.raises(RpcError) as refused:
            await client.call_tool_or_task("hold")
        assert trio.current_time() == asked_at  # no waiting ten minutes for nothing
        assert refused.value.retry_after_ms is not None and refused.value.retry_after_ms > 30_000
