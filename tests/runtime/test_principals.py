"""Principals: every task belongs to whoever created it. Another principal's `tasks/get`,
`tasks/update` and `tasks/cancel` are answered exactly as for an id that never existed; an
input round sealed for one principal does not open for another; a listen stream hears only
of its own principal's tasks. In process, through `Server.handle(principal=...)`; the HTTP
authenticator is tested in tests/transports/test_auth.py.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

import pytest
import trio

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    InputRequired,
    Server,
    TaskOptions,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.server import Connection

from .helpers import check_message, request

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def build() -> Server:
    server = Server("owned", "1", tasks=TaskOptions(ttl_ms=600_000))

    @server.tool(task_support="required")
    async def waits(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        answer = await ctx.elicit("Name?", NAME_SCHEMA)
        return CallToolResult.text(f"hello {(answer.content or {}).get('name')}")

    @server.tool()
    async def asks_first(ctx: ToolContext) -> ToolOutcome:
        answer = ctx.elicit_response("name")
        if answer is None:
            ask = ElicitRequest(params=ElicitParams(message="Name?", requested_schema=NAME_SCHEMA))
            return InputRequired(requests={"name": ask})
        return CallToolResult.text(f"hi {(answer.content or {}).get('name')}")

    return server


async def send(
    server: Server, principal: str | None, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    reply = await server.handle(
        request(method, params), connection=Connection(), principal=principal
    )
    assert reply is not None
    check_message(method, reply.body)
    answer: dict[str, Any] = json.loads(reply.body)
    return answer


def without_ids(message: str) -> str:
    return re.sub(r"'tsk_[^']*'", "'<id>'", message)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_another_principals_task_is_an_unknown_task(method: str) -> None:
    server = build()
    async with server.running():
        created = await send(server, "alice", "tools/call", {"name": "waits", "arguments": {}})
        task_id = created["result"]["taskId"]
        params: dict[str, Any] = {"taskId": task_id}
        never: dict[str, Any] = {"taskId": "tsk_" + secrets.token_urlsafe(24)}
        if method == "tasks/update":
            answer = {"input-1": {"action": "accept", "content": {"name": "bob"}}}
            params["inputResponses"] = never["inputResponses"] = answer
        for stranger in ("bob", None):  # another principal, and nobody
            theirs = await send(server, stranger, method, params)
            unknown = await send(server, stranger, method, never)
            assert theirs["error"]["code"] == unknown["error"]["code"] == -32602
            assert without_ids(theirs["error"]["message"]) == without_ids(
                unknown["error"]["message"]
            )
        mine = await send(server, "alice", "tasks/get", {"taskId": task_id})
        assert mine["result"]["status"] in ("working", "input_required")  # untouched


async def test_an_input_round_opens_only_for_its_principal() -> None:
    server = build()
    async with server.running():
        asked = await send(server, "alice", "tools/call", {"name": "asks_first", "arguments": {}})
        state = asked["result"]["requestState"]
        retry = {
            "name": "asks_first",
            "arguments": {},
            "requestState": state,
            "inputResponses": {"name": {"action": "accept", "content": {"name": "x"}}},
        }
        stolen = await send(server, "bob", "tools/call", retry)
        assert stolen["error"]["code"] == -32602
        assert "issued for a different request" in stolen["error"]["message"]
        own = await send(server, "alice", "tools/call", retry)
        assert own["result"]["content"][0]["text"] == "hi x"


async def test_a_listen_stream_hears_only_of_its_principals_tasks() -> None:
    server = build()
    heard: dict[str, list[dict[str, Any]]] = {"alice": [], "bob": []}
    async with server.running():
        created = await send(server, "alice", "tools/call", {"name": "waits", "arguments": {}})
        task_id = created["result"]["taskId"]
        async with trio.open_nursery() as nursery:
            for who, messages in heard.items():

                async def notify(body: bytes, messages: list[dict[str, Any]] = messages) -> None:
                    messages.append(json.loads(body))

                listen = request("subscriptions/listen", {"notifications": {"taskIds": [task_id]}})
                nursery.start_soon(
                    lambda data=listen, n=notify, p=who: server.handle(
                        data, notify=n, connection=Connection(), principal=p
                    )
                )
            with trio.fail_after(10):
                while not (heard["alice"] and heard["bob"]):  # both acknowledged
                    await trio.sleep(0.01)
            await send(server, "alice", "tasks/cancel", {"taskId": task_id})
            with trio.fail_after(10):
                while not any(m.get("method") == "notifications/tasks" for m in heard["alice"]):
                    await trio.sleep(0.01)
            server.end_subscriptions()
    assert not any(m.get("method") == "notifications/tasks" for m in heard["bob"])


def test_task_ids_carry_192_random_bits() -> None:
    server = build()
    ids = {server.core.injected.new_task_id() for _ in range(2000)}
    assert len(ids) == 2000
    for task_id in ids:
        assert re.fullmatch(r"tsk_[A-Za-z0-9_-]{32}", task_id)  # 24 bytes of secrets, base64url


# --- quotas ---------------------------------------------------------------------------------


def build_limited(clock: list[float] | None = None, **options: Any) -> Server:
    tasks = TaskOptions(ttl_ms=600_000, poll_interval_ms=1000, **options)
    if clock is None:
        server = Server("limited", "1", tasks=tasks)
    else:
        server = Server("limited", "1", tasks=tasks, clock=lambda: clock[0])

    @server.tool(task_support="required")
    async def blocks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    return server


async def test_each_principal_may_hold_so_many_unfinished_tasks() -> None:
    server = build_limited(max_active_per_principal=2)
    call = {"name": "blocks", "arguments": {}}
    async with server.running():
        first = (await send(server, "alice", "tools/call", call))["result"]["taskId"]
        await send(server, "alice", "tools/call", call)
        refused = await send(server, "alice", "tools/call", call)
        assert refused["error"]["code"] == -32603
        assert refused["error"]["message"] == (
            "Too many unfinished tasks for this caller: at most 2 at once; try again when "
            "one has finished (or cancel one)"
        )
        assert "result" in await send(server, "bob", "tools/call", call)  # bob's own count
        await send(server, "alice", "tasks/cancel", {"taskId": first})
        assert "result" in await send(server, "alice", "tools/call", call)  # room again


async def test_polling_faster_than_advised_may_be_refused() -> None:
    clock = [1_800_000_000.0]
    server = build_limited(clock, min_poll_fraction=0.5)  # at most one poll per 500 ms
    async with server.running():
        created = await send(server, "alice", "tools/call", {"name": "blocks", "arguments": {}})
        get = {"taskId": created["result"]["taskId"]}
        assert "result" in await send(server, "alice", "tasks/get", get)
        clock[0] += 0.2
        reply = await server.handle(request("tasks/get", get), principal="alice")
        assert reply is not None and reply.http_status == 429 and reply.retry_after_seconds == 1
        error = json.loads(reply.body)["error"]
        assert error["code"] == -32000 and error["data"] == {"retryAfterMs": 300}
        assert error["message"].startswith("Polling too fast: task 'tsk_")
        strangers = await send(server, "bob", "tasks/get", get)
        assert strangers["error"]["code"] == -32602  # not his: unknown, not "too fast"
        clock[0] += 0.3
        assert "result" in await send(server, "alice", "tasks/get", get)  # 500 ms on: fine


async def test_polls_are_never_refused_by_default() -> None:
    server = build_limited()
    async with server.running():
        created = await send(server, None, "tools/call", {"name": "blocks", "arguments": {}})
        for _ in range(20):
            assert "result" in await send(
                server, None, "tasks/get", {"taskId": created["result"]["taskId"]}
            )
