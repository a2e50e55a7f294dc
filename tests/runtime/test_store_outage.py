"""A store outage is not a restart: a real redis-server behind a TCP proxy the test cuts
(every connection closed, new ones refused) and restores, on loopback.

A handler that finishes while Redis is out of reach keeps its outcome and saves it once
Redis is back, even when the outage outlasted its lease; past `outcome_retry_seconds` the
outcome is dropped and the task fails with an error that says so, not "restarted".
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import trio

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome
from mcp_tasks.core import TaskRecord
from mcp_tasks.store import RedisTaskStore

from .test_store_runtime import running, wait_for

T = TypeVar("T")
LEASE_SECONDS = 0.6
OUTAGE_SECONDS = 3 * LEASE_SECONDS
"""How long Redis stays out of reach: several leases, so each one lapses meanwhile."""


class CuttableProxy:
    """Forwards loopback TCP connections to `target_port` until `cut()`, which closes them
    all and refuses new ones until `restore()`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._nursery: trio.Nursery | None = None
        self._up: trio.CancelScope | None = None

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._accept)
            task_status.started()
            await trio.sleep_forever()  # open for restore() after a cut

    def cut(self) -> None:
        assert self._up is not None
        self._up.cancel()
        self._up = None

    async def restore(self) -> None:
        assert self._nursery is not None and self._up is None
        await self._nursery.start(self._accept)

    async def _accept(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        with trio.CancelScope() as self._up:
            (listener,) = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
            self.port = listener.socket.getsockname()[1]
            async with listener, trio.open_nursery() as connections:
                task_status.started()
                while True:
                    client = await listener.accept()
                    connections.start_soon(self._forward, client)

    async def _forward(self, client: trio.SocketStream) -> None:
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        except OSError:
            await client.aclose()
            return
        async with client, upstream, trio.open_nursery() as both:
            both.start_soon(_pipe, client, upstream, both.cancel_scope)
            both.start_soon(_pipe, upstream, client, both.cancel_scope)


async def _pipe(source: trio.SocketStream, sink: trio.SocketStream, done: trio.CancelScope) -> None:
    try:
        while data := await source.receive_some(65536):
            await sink.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    done.cancel()


def _finishing_server(store: RedisTaskStore, release: trio.Event) -> Server:
    server = Server(
        "outage",
        "1",
        tasks=TaskOptions(ttl_ms=600_000),
        store=store,
        lease_seconds=LEASE_SECONDS,
        shutdown_grace_seconds=0.5,
    )

    @server.tool(task_support="required")
    async def finishes(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await release.wait()
        return CallToolResult.text("done")

    return server


async def _until(check: Callable[[], Awaitable[T | None]], seconds: float = 20) -> T:
    """What `check()` gives once it gives something, asked again every 20 ms until then."""
    with trio.fail_after(seconds):
        while (found := await check()) is None:
            await trio.sleep(0.02)
    return found


async def _settled(store: RedisTaskStore, task_id: str) -> TaskRecord:
    """The record once it ended, read straight from Redis (not through the proxy)."""

    async def ended() -> TaskRecord | None:
        record = await store.get(task_id)
        return record if record is not None and record.status.is_terminal else None

    return await _until(ended)


async def _finished_during_an_outage(
    proxied: tuple[CuttableProxy, RedisTaskStore, RedisTaskStore],
    outcome_retry_seconds: float | None = None,
) -> TaskRecord:
    """Cut Redis off, let the handler finish, keep it cut for `OUTAGE_SECONDS` (every
    lease lapses meanwhile, and longer than a short `outcome_retry_seconds`), restore it:
    the task's record once it ended."""
    proxy, through, direct = proxied
    release = trio.Event()
    server = _finishing_server(through, release)
    if outcome_retry_seconds is not None:
        server.runner.outcome_retry_seconds = outcome_retry_seconds
    async with running(server) as (client,):
        task_id = await client.start("finishes")
        proxy.cut()
        release.set()
        await wait_for(lambda: task_id not in server.runner.running)  # it returned
        await trio.sleep(OUTAGE_SECONDS)
        await proxy.restore()
        return await _settled(direct, task_id)


@pytest.fixture
async def proxied(redis_url: str) -> Any:
    port = int(redis_url.rsplit(":", 1)[1].split("/", maxsplit=1)[0])
    proxy = CuttableProxy(port)
    prefix = "outage" + secrets.token_hex(6)
    direct = RedisTaskStore(redis_url, prefix=prefix)
    async with trio.open_nursery() as nursery:
        await nursery.start(proxy.serve)
        through = RedisTaskStore(f"redis://127.0.0.1:{proxy.port}/0", prefix=prefix)
        try:
            yield proxy, through, direct
        finally:
            await through.aclose()
            await direct.aclose()
            nursery.cancel_scope.cancel()


async def test_an_outcome_finished_during_an_outage_is_saved_when_the_store_is_back(
    proxied: tuple[CuttableProxy, RedisTaskStore, RedisTaskStore],
) -> None:
    record = await _finished_during_an_outage(proxied)
    assert record.status.value == "completed", record.error
    assert record.result is not None and b'"done"' in bytes(record.result)


async def test_an_outcome_lost_to_a_long_outage_fails_the_task_saying_so(
    proxied: tuple[CuttableProxy, RedisTaskStore, RedisTaskStore],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_tasks.server")
    record = await _finished_during_an_outage(proxied, outcome_retry_seconds=0.5)
    assert record.status.value == "failed"
    assert record.error is not None
    assert record.error.message == (
        "The task's handler finished, but its outcome was lost: the task store could not "
        "be reached for 0.5 s afterwards"
    )
    assert "restarted" not in record.error.message
    assert "its outcome is dropped" in caplog.text


async def test_a_handler_running_through_an_outage_keeps_its_task(
    proxied: tuple[CuttableProxy, RedisTaskStore, RedisTaskStore],
) -> None:
    proxy, through, direct = proxied
    release = trio.Event()
    server = _finishing_server(through, release)
    async with running(server) as (client,):
        task_id = await client.start("finishes")
        proxy.cut()
        await trio.sleep(OUTAGE_SECONDS)  # its lease lapses: no renewal reaches Redis
        await proxy.restore()

        # Back, the process claims its own lapsed lease again instead of failing the task.
        async def held_here() -> bool | None:
            return await direct.lease_holder(task_id, server.now()) == through.origin or None

        await _until(held_here)
        assert (await direct.get(task_id)).status.value == "working"  # type: ignore[union-attr]
        release.set()
        record = await _settled(direct, task_id)
    assert record.status.value == "completed", record.error


def _asking_server(store: RedisTaskStore, release: trio.Event, lease_seconds: float) -> Server:
    server = Server(
        "outage",
        "1",
        tasks=TaskOptions(ttl_ms=600_000),
        store=store,
        lease_seconds=lease_seconds,
        shutdown_grace_seconds=0.5,
    )

    @server.tool(task_support="required")
    async def asks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await release.wait()
        answer = await ctx.elicit("Name?", NAME_SCHEMA)
        return CallToolResult.text(f"hello {(answer.content or {}).get('name')}")

    return server


async def _status(store: RedisTaskStore, task_id: str, *statuses: str) -> TaskRecord:
    """The record once its status is one of `statuses` (read straight from Redis)."""

    async def reached() -> TaskRecord | None:
        record = await store.get(task_id)
        return record if record is not None and record.status.value in statuses else None

    return await _until(reached)


ANSWER = {"action": "accept", "content": {"name": "bo"}}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


async def test_a_question_asked_during_an_outage_is_saved_when_the_store_is_back(
    proxied: tuple[CuttableProxy, RedisTaskStore, RedisTaskStore],
) -> None:
    """Found by soak/chaos.py: `ctx.elicit` while Redis was down raised the store's error
    in the handler, and the task failed with "Tool 'asks' failed with an internal error"."""
    proxy, through, direct = proxied
    release = trio.Event()
    server = _asking_server(through, release, lease_seconds=30.0)
    async with running(server) as (client,):
        task_id = await client.start("asks")
        proxy.cut()
        release.set()
        await trio.sleep(OUTAGE_SECONDS)  # it asks meanwhile
        await proxy.restore()
        record = await _status(direct, task_id, "input_required", "failed", "completed")
        assert record.status.value == "input_required", record.error
        (key,) = record.input_requests or {}
        await client.send("tasks/update", {"taskId": task_id, "inputResponses": {key: ANSWER}})
        done = await client.wait_status(task_id, "completed", "failed")
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "hello bo"


async def test_an_answer_given_while_the_holder_was_cut_off_reaches_its_handler(
    proxied: tuple[CuttableProxy, RedisTaskStore, RedisTaskStore],
) -> None:
    """Found by soak/chaos.py: the answer's signal to the process holding the handler
    went out while that process was cut off from Redis (its signal loop between two
    subscriptions), was lost, and the handler waited in place until the task's TTL."""
    proxy, through, direct = proxied
    release = trio.Event()
    release.set()
    a = _asking_server(through, release, lease_seconds=30.0)
    b = _asking_server(direct, release, lease_seconds=30.0)
    async with running(a, b) as (on_a, on_b):
        task_id = await on_a.start("asks")
        task = await on_b.wait_status(task_id, "input_required")
        (key,) = task["inputRequests"]
        proxy.cut()
        answer = {"taskId": task_id, "inputResponses": {key: ANSWER}}
        assert "result" in await on_b.send("tasks/update", answer)
        await trio.sleep(LEASE_SECONDS)
        await proxy.restore()
        record = await _status(direct, task_id, "completed", "failed")
    assert record.status.value == "completed", record.error
    assert record.result is not None and b"hello bo" in bytes(record.result)


async def test_a_cancel_given_while_the_holder_was_cut_off_reaches_its_handler(
    proxied: tuple[CuttableProxy, RedisTaskStore, RedisTaskStore],
) -> None:
    """The cancel's signal to the process running the handler went out while that process
    was cut off from Redis, and was lost: the client saw `cancelled` while the handler ran
    on to its end. Listening again, the process reads its handlers' records and cancels
    those whose task ended."""
    proxy, through, direct = proxied
    started, stopped = trio.Event(), trio.Event()

    def build(store: RedisTaskStore) -> Server:
        server = Server(
            "outage", "1", tasks=TaskOptions(ttl_ms=600_000), store=store,
            lease_seconds=30.0, shutdown_grace_seconds=0.5,
        )  # fmt: skip

        @server.tool(task_support="required")
        async def waits(ctx: ToolContext) -> ToolOutcome:
            if not ctx.in_task:
                return START_TASK
            started.set()
            try:
                await trio.sleep_forever()
            finally:
                stopped.set()
            return CallToolResult.text("never")  # pragma: no cover

        return server

    async with running(build(through), build(direct)) as (on_a, on_b):
        task_id = await on_a.start("waits")
        with trio.fail_after(20):
            await started.wait()
        proxy.cut()
        assert "result" in await on_b.send("tasks/cancel", {"taskId": task_id})
        await trio.sleep(LEASE_SECONDS)  # the signal goes out to no one meanwhile
        await proxy.restore()
        with trio.fail_after(20):
            await stopped.wait()
        record = await _status(direct, task_id, "cancelled", "completed", "failed")
    assert record.status.value == "cancelled"


async def test_a_late_resume_never_starts_a_second_run_of_a_live_handler() -> None:
    """A resume signal that comes late or twice (the catch-up after an outage, then the
    signal itself) finds the handler running here, not waiting: it is done with. Before,
    `TaskRunner.resume` started the handler again beside the live one."""
    release = trio.Event()
    runs: list[int] = []
    server = Server("late", "1", tasks=TaskOptions(ttl_ms=600_000))

    @server.tool(task_support="required")
    async def counts(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        runs.append(1)
        await release.wait()
        return CallToolResult.text(f"runs: {len(runs)}")

    async with running(server) as (client,):
        task_id = await client.start("counts")
        await wait_for(lambda: bool(runs))
        record = await server.store.get(task_id)
        late = server.core.task_resumed(record)
        assert late is not None  # a working task: what a late signal reads
        server.runner.resume(late)
        server.runner.resume(late)
        release.set()
        task = await client.wait_status(task_id, "completed", "failed")
    assert len(runs) == 1
    assert task["status"] == "completed"
