"""The trio runtime: execution, cancellation, input rounds, expiry and shutdown, on trio's
virtual clock (autojump), through `Server.handle` with real handlers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import trio
from trio.testing import MockClock

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    ErrorObject,
    InputRequired,
    ProtocolError,
    Server,
    TaskOptions,
    ToolContext,
    ToolError,
    ToolOutcome,
)

from .helpers import ALL_CAPS, Client, request, trio_clock


class Work(msgspec.Struct):
    seconds: float
    label: str = ""


def build(ttl_ms: int | None = 600_000, grace: float = 5.0) -> tuple[Server, dict[str, Any]]:
    server = Server(
        "t", "1", tasks=TaskOptions(ttl_ms=ttl_ms), clock=trio_clock, shutdown_grace_seconds=grace
    )
    seen: dict[str, Any] = {"runs": 0, "cancelled": 0, "finished": 0}

    @server.tool(task_support="optional")
    async def work(ctx: ToolContext, args: Work) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        seen["runs"] += 1
        try:
            for step in range(int(args.seconds)):
                await ctx.report_progress(step, args.seconds)
                await trio.sleep(1)
        except trio.Cancelled:
            seen["cancelled"] += 1
            raise
        seen["finished"] += 1
        return CallToolResult.text(f"worked {args.seconds:g}s {args.label}")

    @server.tool(task_support="required")
    async def crash(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        raise RuntimeError("secret internal detail /etc/passwd")

    @server.tool(task_support="required")
    async def tool_error(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        raise ToolError("bad input")

    @server.tool(task_support="required")
    async def rpc_error(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        raise ProtocolError(-32603, "upstream crashed")

    @server.tool(task_support="required")
    async def rerun(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        seen["runs"] += 1
        answer = ctx.elicit_response("ok")
        if answer is None:
            ask = ElicitRequest(
                params=ElicitParams(
                    message="ok?",
                    requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
                )
            )
            return InputRequired(requests={"ok": ask}, status_message="asking")
        return CallToolResult.text(f"answered {answer.action}")

    @server.tool(task_support="required")
    async def in_place(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        seen["runs"] += 1
        first = await ctx.elicit(
            "name?", {"type": "object", "properties": {"name": {"type": "string"}}}
        )
        second = await ctx.elicit(
            "colour?", {"type": "object", "properties": {"colour": {"type": "string"}}}
        )
        return CallToolResult.text(
            f"{(first.content or {}).get('name')} {(second.content or {}).get('colour')}"
        )

    @server.tool()
    async def sync_progress(ctx: ToolContext) -> ToolOutcome:
        for step in range(3):
            await ctx.report_progress(step + 1, 3, "going")
        return "done"

    @server.tool()
    async def hang(ctx: ToolContext) -> ToolOutcome:
        await trio.sleep_forever()
        raise AssertionError

    @server.tool()
    async def crash_sync(ctx: ToolContext) -> ToolOutcome:
        raise ValueError("a secret")

    return server, seen


@pytest.fixture
async def env() -> AsyncIterator[tuple[Server, Client, dict[str, Any]]]:
    server, seen = build()
    async with server.running():
        yield server, Client(server), seen


Env = tuple[Server, Client, dict[str, Any]]


async def test_task_runs_in_the_background_and_completes(
    env: Env, autojump_clock: MockClock
) -> None:
    _, client, _ = env
    start = trio.current_time()
    task_id = await client.start("work", {"seconds": 3, "label": "x"})
    assert (await client.get(task_id))["status"] == "working"
    await trio.sleep(1.5)
    assert (await client.get(task_id))["statusMessage"] == "1/3"
    done = await client.wait_status(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "worked 3s x"
    assert trio.current_time() - start == pytest.approx(3, abs=0.1)


async def test_optional_task_runs_in_place_without_the_extension(
    env: Env, autojump_clock: MockClock
) -> None:
    _, client, seen = env
    reply = await client.call("work", {"seconds": 2}, caps={})
    assert reply["result"]["content"][0]["text"] == "worked 2s "
    assert seen["runs"] == 1


async def test_invalid_arguments_name_the_field(env: Env, autojump_clock: MockClock) -> None:
    _, client, _ = env
    error = (await client.call("work", {"seconds": "soon"}))["error"]
    assert error["code"] == -32602 and "arguments.seconds" in error["message"]
    error = (await client.call("work", {}))["error"]
    assert error["code"] == -32602 and "seconds" in error["message"]


async def test_cancel_stops_the_handler_at_its_next_await(
    env: Env, autojump_clock: MockClock
) -> None:
    _, client, seen = env
    start = trio.current_time()
    task_id = await client.start("work", {"seconds": 60})
    await trio.sleep(2.5)
    ack = await client.send("tasks/cancel", {"taskId": task_id})
    assert ack["result"]["resultType"] == "complete"
    await trio.sleep(0.01)
    assert seen["cancelled"] == 1 and seen["finished"] == 0
    assert (await client.get(task_id))["status"] == "cancelled"
    assert trio.current_time() - start < 3


async def test_an_exception_fails_the_task_without_leaking_it(
    env: Env, autojump_clock: MockClock
) -> None:
    _, client, _ = env
    task = await client.wait_status(await client.start("crash"), "failed")
    assert task["error"]["code"] == -32603
    assert "secret" not in json.dumps(task) and "Traceback" not in json.dumps(task)


async def test_an_exception_before_a_task_is_an_internal_error_reply(
    env: Env, autojump_clock: MockClock
) -> None:
    _, client, _ = env
    error = (await client.call("crash_sync"))["error"]
    assert error["code"] == -32603 and "secret" not in error["message"]


async def test_tool_error_completes_and_protocol_error_fails(
    env: Env, autojump_clock: MockClock
) -> None:
    _, client, _ = env
    done = await client.wait_status(await client.start("tool_error"), "completed", "failed")
    assert done["status"] == "completed" and done["result"]["isError"] is True
    failed = await client.wait_status(await client.start("rpc_error"), "completed", "failed")
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": -32603, "message": "upstream crashed"}


async def test_returned_input_request_runs_the_handler_again_with_the_answer(
    env: Env, autojump_clock: MockClock
) -> None:
    _, client, seen = env
    task_id = await client.start("rerun")
    waiting = await client.wait_status(task_id, "input_required")
    assert list(waiting["inputRequests"]) == ["ok"] and waiting["statusMessage"] == "asking"
    await client.send(
        "tasks/update", {"taskId": task_id, "inputResponses": {"ok": {"action": "accept"}}}
    )
    done = await client.wait_status(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "answered accept"
    assert seen["runs"] == 2


async def test_a_task_whose_tool_was_removed_while_it_waited_fails_saying_so(
    env: Env, autojump_clock: MockClock
) -> None:
    server, client, seen = env
    task_id = await client.start("rerun")
    await client.wait_status(task_id, "input_required")
    server.remove_tool("rerun")
    await client.send(
        "tasks/update", {"taskId": task_id, "inputResponses": {"ok": {"action": "accept"}}}
    )
    failed = await client.wait_status(task_id, "failed")
    assert failed["error"]["message"] == "Tool 'rerun' is no longer registered"
    assert seen["runs"] == 1  # its answers found nothing to run
    assert server.runner.running == {}


async def test_awaited_elicit_waits_in_place(env: Env, autojump_clock: MockClock) -> None:
    _, client, seen = env
    task_id = await client.start("in_place")
    first = await client.wait_status(task_id, "input_required")
    (key,) = first["inputRequests"]
    await client.send(
        "tasks/update",
        {
            "taskId": task_id,
            "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}},
        },
    )
    second = await client.wait_status(task_id, "input_required")
    (key2,) = second["inputRequests"]
    assert key2 != key
    await client.send(
        "tasks/update",
        {
            "taskId": task_id,
            "inputResponses": {key2: {"action": "accept", "content": {"colour": "green"}}},
        },
    )
    done = await client.wait_status(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "Ada green"
    assert seen["runs"] == 1  # never re-run: one life, no repeated side effects


async def test_cancel_while_waiting_in_place_ends_the_handler(
    env: Env, autojump_clock: MockClock
) -> None:
    server, client, _ = env
    task_id = await client.start("in_place")
    await client.wait_status(task_id, "input_required")
    await client.send("tasks/cancel", {"taskId": task_id})
    await trio.sleep(0.01)
    assert (await client.get(task_id))["status"] == "cancelled"
    assert server.runner.running == {}


async def test_awaited_elicit_without_the_capability_fails_the_task(
    env: Env, autojump_clock: MockClock
) -> None:
    _, client, _ = env
    caps = {"extensions": ALL_CAPS["extensions"]}
    reply = await client.call("in_place", caps=caps)
    task_id = reply["result"]["taskId"]
    failed = await client.wait_status(task_id, "failed")
    assert failed["error"]["code"] == -32021


async def test_progress_notifications_only_when_the_request_asks(
    env: Env, autojump_clock: MockClock
) -> None:
    _, client, _ = env
    await client.call("sync_progress")
    assert client.notifications == []
    reply = await client.call("sync_progress", progressToken="p-1")
    assert reply["result"]["content"][0]["text"] == "done"
    assert [n["params"]["progress"] for n in client.notifications] == [1, 2, 3]
    assert {n["params"]["progressToken"] for n in client.notifications} == {"p-1"}


async def test_cancelled_notification_stops_an_in_flight_call(
    env: Env, autojump_clock: MockClock
) -> None:
    server, client, _ = env
    replies: list[Any] = []

    async def call_hang() -> None:
        data = request("tools/call", {"name": "hang", "arguments": {}}, request_id=777)
        replies.append(await server.handle(data, connection=client.connection))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call_hang)
        await trio.sleep(1)
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 777}}
        assert await server.handle(json.dumps(note).encode(), connection=client.connection) is None
    assert replies == [None]


async def test_expiry_removes_the_task_at_its_ttl(autojump_clock: MockClock) -> None:
    server, _ = build(ttl_ms=10_000)
    async with server.running():
        client = Client(server)
        task_id = await client.start("work", {"seconds": 60})
        await trio.sleep(9.9)
        assert (await client.get(task_id))["status"] == "working"
        await trio.sleep(0.2)
        error = (await client.send("tasks/get", {"taskId": task_id}))["error"]
        assert error["code"] == -32602
        assert await server.store.count() == 0 and server.runner.running == {}


async def test_shutdown_gives_tasks_a_grace_period_then_cancels(autojump_clock: MockClock) -> None:
    server, seen = build(grace=2.0)
    start = trio.current_time()
    async with server.running():
        client = Client(server)
        await client.start("work", {"seconds": 1})
        await client.start("work", {"seconds": 100})
    assert seen["finished"] == 1 and seen["cancelled"] == 1
    assert trio.current_time() - start == pytest.approx(2.0, abs=0.1)


async def test_shutdown_refuses_new_calls_but_answers_polls(autojump_clock: MockClock) -> None:
    server, _ = build(grace=1.0)
    async with server.running():
        client = Client(server)
        task_id = await client.start("work", {"seconds": 100})
        server.closing = True  # what leaving `running()` does first
        error = (await client.call("work", {"seconds": 1}))["error"]
        assert "shutting down" in error["message"]
        assert (await client.get(task_id))["status"] == "working"


async def test_shutdown_refuses_a_tool_that_runs_only_as_a_task(
    autojump_clock: MockClock,
) -> None:
    """Its task is created by the core at once, not after a handler's `START_TASK`: the
    core still creates none while the server shuts down."""
    server, seen = build(grace=1.0)
    async with server.running():
        client = Client(server)
        server.closing = True  # what leaving `running()` does first
        error = (await client.call("rerun"))["error"]
        assert error["code"] == -32603 and "shutting down" in error["message"]
        assert await server.store.count() == 0 and seen["runs"] == 0


async def test_handle_outside_running_is_a_clear_error(autojump_clock: MockClock) -> None:
    server, _ = build()
    with pytest.raises(RuntimeError, match="running"):
        await server.handle(request("tools/list"))


def test_input_schema_comes_from_the_argument_struct() -> None:
    server, _ = build()
    schema = server.core.tools["work"].input_schema
    assert schema["type"] == "object" and schema["required"] == ["seconds"]
    assert schema["properties"]["seconds"]["type"] == "number"
    assert server.core.tools["crash"].input_schema == {"type": "object"}


def test_tools_need_no_context_but_must_name_their_arguments() -> None:
    # Issue 19: plain functions (run in a worker thread) and plain parameters are tools too.
    # Issue 32: a tool without the context is one (it was refused: "must take the context").
    server = Server("t", "1")
    server.tool(name="nothing")(lambda: "done")
    assert "nothing" in server.core.catalog.tools

    async def spread(ctx: ToolContext, *words: str) -> ToolOutcome:
        return ErrorObject(code=1, message="")

    with pytest.raises(TypeError, match=r"\*args and \*\*kwargs"):
        server.tool()(spread)


async def test_shutdown_by_cancellation_still_grants_the_grace_period(
    autojump_clock: MockClock,
) -> None:
    server, seen = build(grace=2.0)
    with trio.move_on_after(0.5):
        async with server.running():
            await Client(server).start("work", {"seconds": 1})
            await trio.sleep_forever()
    assert seen["finished"] == 1 and seen["cancelled"] == 0
    assert not server.is_running


async def test_log_messages_only_when_the_request_asks_and_at_its_level(
    autojump_clock: MockClock,
) -> None:
    server = Server("t", "1")

    @server.tool(task_support="optional")
    async def chatty(ctx: ToolContext) -> ToolOutcome:
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, {"said": level}, logger="chatty")
        if not ctx.in_task and ctx.meta.log_level == "error":
            return START_TASK  # inside the task the same logging must send nothing
        return "done"

    async with server.running():
        client = Client(server)
        await client.call("chatty", caps={})
        assert client.notifications == []
        await client.call("chatty", caps={}, **{"io.modelcontextprotocol/logLevel": "warning"})
        sent = [n["params"] for n in client.notifications]
        assert [p["level"] for p in sent] == ["warning", "error"]
        assert sent[0] == {"level": "warning", "data": {"said": "warning"}, "logger": "chatty"}
        assert {n["method"] for n in client.notifications} == {"notifications/message"}
        client.notifications.clear()
        reply = await client.call("chatty", **{"io.modelcontextprotocol/logLevel": "error"})
        await client.wait_status(reply["result"]["taskId"], "completed")
        assert [n["params"]["level"] for n in client.notifications] == ["error"]  # before the task


async def test_a_task_whose_tool_now_takes_other_arguments_fails_without_running_it(
    env: Env, autojump_clock: MockClock
) -> None:
    """The core decodes a run's arguments for the tool as registered when the run starts:
    a task whose arguments no longer fit fails with the -32602 decoding gave, and the new
    handler never runs."""
    server, client, seen = env
    task_id = await client.start("rerun")
    await client.wait_status(task_id, "input_required")
    server.remove_tool("rerun")
    ran: list[int] = []

    @server.tool(name="rerun", task_support="required")
    async def counted(ctx: ToolContext, count: int) -> str:
        ran.append(count)
        return "ran"

    await client.send(
        "tasks/update", {"taskId": task_id, "inputResponses": {"ok": {"action": "accept"}}}
    )
    failed = await client.wait_status(task_id, "failed")
    assert failed["error"]["code"] == -32602
    assert failed["error"]["message"].startswith("Invalid arguments for tool 'rerun'")
    assert ran == [] and seen["runs"] == 1
    assert server.runner.running == {}
