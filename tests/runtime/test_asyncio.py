"""The runtime under asyncio: the same `Server` as under trio, run by `asyncio.run`, on
every store (memory, a SQLite file, the real Redis), for a task's whole life: created,
polled, asked in place and answered with `tasks/update`, cancelled while it runs, expired
at its TTL; a request cancelled by `notifications/cancelled`; shutdown's grace; and between
two servers on one Redis prefix, a cancel and an answer crossing over.

Plain (synchronous) tests: each runs its body with `asyncio.run`, under one deadline. What
another task does is waited for with `wait_for` (bounded); no assertion is on time. With a
shared store, a lapsed lease taken over and a listen stream fed from the other server.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from on_asyncio import run_asyncio, wait_until

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome
from mcp_tasks.core import TaskRecord, TaskStatus
from mcp_tasks.server import Connection
from mcp_tasks.store import MemoryTaskStore, RedisTaskStore, SQLiteTaskStore, TaskStore
from mcp_tasks.transports import serve_http, serve_stdio

from .helpers import Client, request

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def build(
    store: TaskStore, *, ttl_ms: int = 600_000, lease_seconds: float = 30.0
) -> tuple[Server, dict[str, Any]]:
    server = Server(
        "asyncio",
        "1",
        tasks=TaskOptions(ttl_ms=ttl_ms),
        store=store,
        shutdown_grace_seconds=0.2,
        lease_seconds=lease_seconds,
    )
    seen: dict[str, Any] = {"runs": [], "cancelled": 0}

    @server.tool(task_support="required")
    async def quick(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await ctx.report_progress(1, 1, "done")
        return CallToolResult.text("quick done")

    @server.tool(task_support="required")
    async def blocks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        seen["runs"].append(ctx.task_id)
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen["cancelled"] += 1
            raise
        raise AssertionError("unreachable")

    @server.tool(task_support="required")
    async def asks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        seen["runs"].append(ctx.task_id)
        answer = await ctx.elicit("Name?", NAME_SCHEMA)
        return CallToolResult.text(f"hello {(answer.content or {}).get('name')}")

    @server.tool()
    async def hang(ctx: ToolContext) -> ToolOutcome:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return server, seen


@pytest.fixture(params=["memory", "sqlite", "redis"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TaskStore]:
    """Makes the store (inside the test's loop) the test then closes."""

    def make() -> TaskStore:
        if request.param == "memory":
            return MemoryTaskStore()
        if request.param == "sqlite":
            return SQLiteTaskStore(tmp_path / "tasks.db")
        url = request.getfixturevalue("redis_url")
        return RedisTaskStore(url, prefix="aio" + secrets.token_hex(6))

    if request.param == "redis":
        request.getfixturevalue("redis_url")  # started outside any event loop
    return make


@asynccontextmanager
async def serving(*servers: Server) -> AsyncIterator[list[Client]]:
    """The servers running (and their stores closed after), a `Client` for each."""
    async with AsyncExitStack() as stack:
        for server in servers:
            stack.push_async_callback(server.store.aclose)
        for server in servers:
            await stack.enter_async_context(server.running())
        yield [Client(server) for server in servers]


def test_a_task_lives_and_is_answered_in_place(make_store: Callable[[], TaskStore]) -> None:
    async def main() -> None:
        server, seen = build(make_store())
        async with serving(server) as (client,):
            done = await client.wait_status(await client.start("quick"), "completed")
            assert done["result"]["content"][0]["text"] == "quick done"

            task_id = await client.start("asks")
            asking = await client.wait_status(task_id, "input_required")
            (key,) = asking["inputRequests"]
            answer = {key: {"action": "accept", "content": {"name": "Ada"}}}
            await client.send("tasks/update", {"taskId": task_id, "inputResponses": answer})
            done = await client.wait_status(task_id, "completed")
            assert done["result"]["content"][0]["text"] == "hello Ada"
            assert seen["runs"] == [task_id]  # answered in place: never run again

    run_asyncio(main)


def test_cancel_stops_a_running_handler(make_store: Callable[[], TaskStore]) -> None:
    async def main() -> None:
        server, seen = build(make_store())
        async with serving(server) as (client,):
            task_id = await client.start("blocks")
            await wait_until(lambda: task_id in server.runner.running)
            ack = await client.send("tasks/cancel", {"taskId": task_id})
            assert ack["result"]["resultType"] == "complete"
            await wait_until(lambda: task_id not in server.runner.running)
            assert seen["cancelled"] == 1
            assert (await client.get(task_id))["status"] == "cancelled"

            asking = await client.start("asks")  # cancelled while it waits for an answer
            await client.wait_status(asking, "input_required")
            await client.send("tasks/cancel", {"taskId": asking})
            await wait_until(lambda: asking not in server.runner.running)
            assert (await client.get(asking))["status"] == "cancelled"

    run_asyncio(main)


def test_a_task_expires_at_its_ttl(make_store: Callable[[], TaskStore]) -> None:
    async def main() -> None:
        server, _ = build(make_store(), ttl_ms=300)
        async with serving(server) as (client,):
            task_id = await client.start("blocks")
            await wait_until(lambda: task_id in server.runner.running)
            while "result" in await client.send("tasks/get", {"taskId": task_id}):
                await anyio.sleep(0.02)
            error = (await client.send("tasks/get", {"taskId": task_id}))["error"]
            assert error["code"] == -32602
            await wait_until(lambda: task_id not in server.runner.running)  # its handler ended
            assert await server.store.count() == 0

    run_asyncio(main)


def test_notifications_cancelled_stops_a_request_in_flight() -> None:
    async def main() -> None:
        server, _ = build(MemoryTaskStore())
        replies: list[Any] = []
        async with serving(server) as (client,):

            async def call_hang() -> None:
                data = request("tools/call", {"name": "hang", "arguments": {}}, request_id=7)
                replies.append(await server.handle(data, connection=client.connection))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call_hang)
                await wait_until(lambda: 7 in client.connection.in_flight)
                note = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": 7},
                    }
                )
                assert await server.handle(note.encode(), connection=client.connection) is None
        assert replies == [None]

    run_asyncio(main)


def test_shutdown_grants_the_grace_then_cancels(make_store: Callable[[], TaskStore]) -> None:
    async def main() -> None:
        server, seen = build(make_store())
        async with serving(server) as (client,):
            task_id = await client.start("blocks")
            await wait_until(lambda: task_id in server.runner.running)
        assert seen["cancelled"] == 1 and server.runner.running == {}
        assert not server.is_running

    run_asyncio(main)


def test_signals_cross_between_two_servers_on_one_redis(redis_url: str) -> None:
    async def main() -> None:
        prefix = "aio" + secrets.token_hex(6)
        a, seen_a = build(RedisTaskStore(redis_url, prefix=prefix))
        b, seen_b = build(RedisTaskStore(redis_url, prefix=prefix))
        async with serving(a, b) as (on_a, on_b):
            task_id = await on_a.start("blocks")
            await wait_until(lambda: task_id in a.runner.running)
            await on_b.send("tasks/cancel", {"taskId": task_id})
            await wait_until(lambda: task_id not in a.runner.running)  # A's handler is gone
            assert seen_a["cancelled"] == 1
            assert (await on_b.get(task_id))["status"] == "cancelled"

            task_id = await on_a.start("asks")
            asking = await on_b.wait_status(task_id, "input_required")
            (key,) = asking["inputRequests"]
            answer = {key: {"action": "accept", "content": {"name": "from b"}}}
            await on_b.send("tasks/update", {"taskId": task_id, "inputResponses": answer})
            done = await on_b.wait_status(task_id, "completed")
            assert done["result"]["content"][0]["text"] == "hello from b"
            assert seen_b["runs"] == []  # every handler ran on A

    run_asyncio(main)


def test_a_lapsed_lease_is_taken_over(redis_url: str) -> None:
    async def main() -> None:
        prefix = "aio" + secrets.token_hex(6)
        dead = RedisTaskStore(redis_url, prefix=prefix)  # a process that died, as it left things
        now = time.time()
        orphan = TaskRecord(
            task_id="tsk_orphan",
            version=1,
            tool_name="blocks",
            status=TaskStatus.WORKING,
            created_at=now,
            last_updated_at=now,
            ttl_ms=600_000,
            poll_interval_ms=None,
        )
        await dead.save(orphan, None, active=True)
        await dead.claim("tsk_orphan", now + 0.3)
        await dead.aclose()
        survivor, _ = build(RedisTaskStore(redis_url, prefix=prefix), lease_seconds=0.3)
        async with serving(survivor) as (client,):
            failed = await client.wait_status("tsk_orphan", "failed")
        assert "stopped before the task finished" in failed["error"]["message"]

    run_asyncio(main)


def test_a_listen_stream_hears_a_change_made_on_the_other_server(redis_url: str) -> None:
    async def main() -> None:
        prefix = "aio" + secrets.token_hex(6)
        a, _ = build(RedisTaskStore(redis_url, prefix=prefix))
        b, _ = build(RedisTaskStore(redis_url, prefix=prefix))
        frames: list[dict[str, Any]] = []

        async def notify(body: bytes) -> None:
            frames.append(json.loads(body))

        def statuses() -> list[str]:
            return [
                f["params"]["status"] for f in frames if f.get("method") == "notifications/tasks"
            ]

        async with serving(a, b) as (on_a, _):
            task_id = await on_a.start("blocks")
            listen = request("subscriptions/listen", {"notifications": {"taskIds": [task_id]}})
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(lambda: b.handle(listen, notify=notify, connection=Connection()))
                await wait_until(lambda: bool(frames))  # acknowledged: listening
                await on_a.send("tasks/cancel", {"taskId": task_id})
                await wait_until(lambda: "cancelled" in statuses())
                b.end_subscriptions()
        assert statuses()[-1] == "cancelled"

    run_asyncio(main)


def test_the_built_in_http_server_runs_under_asyncio_and_a_client_gone_cancels_its_call() -> None:
    async def main() -> None:
        server, _ = build(MemoryTaskStore())
        entered, cancelled = anyio.Event(), anyio.Event()

        @server.tool()
        async def waits(ctx: ToolContext) -> ToolOutcome:
            entered.set()
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.set()
                raise
            raise AssertionError("unreachable")

        body = request("tools/call", {"name": "waits", "arguments": {}}, caps={})
        head = (
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n"
            f"Mcp-Method: tools/call\r\nMcp-Name: waits\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        async with serving(server), anyio.create_task_group() as group:
            port = await group.start(serve_http, server, "127.0.0.1", 0)
            stream = await anyio.connect_tcp("127.0.0.1", port)
            await stream.send(head.encode() + body)
            await entered.wait()
            await stream.aclose()  # the client leaves mid-request: its call is cancelled
            await cancelled.wait()
            group.cancel_scope.cancel()

    run_asyncio(main)


def test_the_built_in_stdio_server_runs_under_asyncio_on_anyio_streams() -> None:
    async def main() -> None:
        server, _ = build(MemoryTaskStore())

        @server.tool()
        async def hello(ctx: ToolContext) -> ToolOutcome:
            await anyio.sleep(0)
            return CallToolResult.text("hello from asyncio")

        async with serving(server), await anyio.create_tcp_listener(local_host="127.0.0.1") as lis:
            port = lis.extra(anyio.abc.SocketAttribute.local_port)
            client = await anyio.connect_tcp("127.0.0.1", port)
            async with anyio.create_task_group() as group:
                accepted: list[anyio.abc.SocketStream] = []

                async def serve_one(stream: anyio.abc.SocketStream) -> None:
                    accepted.append(stream)
                    await serve_stdio(server, stdin=stream, stdout=stream)
                    await stream.aclose()

                group.start_soon(lis.serve, serve_one)
                await client.send(request("tools/call", {"name": "hello", "arguments": {}}) + b"\n")
                reply = b""
                while not reply.endswith(b"\n"):
                    reply += await client.receive()
                assert json.loads(reply)["result"]["content"][0]["text"] == "hello from asyncio"
                await client.send_eof()  # stdin at EOF: serve_stdio returns
                with pytest.raises(anyio.EndOfStream):
                    await client.receive()
                group.cancel_scope.cancel()

    run_asyncio(main)
