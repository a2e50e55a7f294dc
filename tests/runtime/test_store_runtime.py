"""The server on its durable stores, in process and on the real clock: a real SQLite file,
a real redis-server. Two `Server` objects on one Redis prefix stand for two processes: they
share nothing but Redis, so whatever crosses between them crosses through it.

(The same with real processes, kill -9 included: tests/store/test_sqlite_restart.py and
tests/store/test_shared_processes.py.)
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis
import trio
from redis_server import free_port, running_redis

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    Server,
    TaskOptions,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.core import TaskRecord, TaskStatus
from mcp_tasks.server import Connection
from mcp_tasks.store import (
    EXPIRY_CLAIM_SECONDS,
    MemoryTaskStore,
    RedisTaskStore,
    SQLiteTaskStore,
    StoreUnavailable,
    TaskStore,
    open_store,
    redacted,
)

from .helpers import Client, check_notification, request

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def build(
    store: TaskStore,
    *,
    max_tasks: int = 1000,
    lease_seconds: float = 30.0,
    clock: Callable[[], float] = time.time,
) -> Server:
    server = Server(
        "stores",
        "1",
        tasks=TaskOptions(ttl_ms=600_000, max_tasks=max_tasks),
        store=store,
        lease_seconds=lease_seconds,
        shutdown_grace_seconds=0.5,
        clock=clock,
    )
    server.runs = []  # type: ignore[attr-defined]

    @server.tool(task_support="required")
    async def blocks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        server.runs.append(ctx.task_id)  # type: ignore[attr-defined]
        await ctx.set_status_message("blocking")
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @server.tool(task_support="required")
    async def asks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        server.runs.append(ctx.task_id)  # type: ignore[attr-defined]
        answer = await ctx.elicit("Name?", NAME_SCHEMA)
        return CallToolResult.text(f"hello {(answer.content or {}).get('name')}")

    return server


@asynccontextmanager
async def running(*servers: Server) -> AsyncIterator[list[Client]]:
    async with trio.open_nursery() as nursery:
        stops: list[trio.Event] = []
        for server in servers:
            stop = trio.Event()
            stops.append(stop)
            await nursery.start(_run, server, stop)
        try:
            yield [Client(server) for server in servers]
        finally:
            for stop in stops:
                stop.set()


async def _run(
    server: Server,
    stop: trio.Event,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    async with server.running():
        task_status.started()
        await stop.wait()


async def wait_for(check: Callable[[], bool], seconds: float = 10) -> None:
    """Until `check()` is true (what another task or server does), under one deadline."""
    with trio.fail_after(seconds):
        while not check():
            await trio.sleep(0.01)


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    if request.param == "sqlite":
        made: TaskStore = SQLiteTaskStore(tmp_path / "tasks.db")
    else:
        made = RedisTaskStore(request.getfixturevalue("redis_url"), prefix=_prefix())
    try:
        yield made
    finally:
        await made.aclose()


def _prefix() -> str:
    return "rt" + secrets.token_hex(6)


# --- one server on each durable store --------------------------------------------------------


async def test_a_task_lives_and_ends_on_the_store(store: TaskStore) -> None:
    server = build(store)
    async with running(server) as (client,):
        task_id = await client.start("asks")
        task = await client.wait_status(task_id, "input_required")
        (key,) = task["inputRequests"]
        await client.send(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {key: {"action": "accept", "content": {"name": "x"}}},
            },
        )
        done = await client.wait_status(task_id, "completed")
        assert done["result"]["content"][0]["text"] == "hello x"
        stored = await store.get(task_id)
        assert stored is not None and stored.status.value == "completed"
        assert await store.lease_holder(task_id, server.now()) is None  # released at the end

        blocked = await client.start("blocks")
        await client.wait_status(blocked, "working")
        assert await store.lease_holder(blocked, server.now()) == store.origin
        await client.send("tasks/cancel", {"taskId": blocked})
        assert (await client.get(blocked))["status"] == "cancelled"


async def test_the_task_limit_is_the_stores(store: TaskStore) -> None:
    async with running(build(store, max_tasks=2)) as (client,):
        await client.start("blocks")
        await client.start("blocks")
        refused = await client.call("blocks")
        assert refused["error"]["code"] == -32603
        assert "Too many tasks" in refused["error"]["message"]


# --- two servers, one Redis -------------------------------------------------------------------


@pytest.fixture
def pair(redis_url: str) -> tuple[Server, Server]:
    prefix = _prefix()
    return (
        build(RedisTaskStore(redis_url, prefix=prefix), max_tasks=3),
        build(RedisTaskStore(redis_url, prefix=prefix), max_tasks=3),
    )


async def test_any_server_answers_for_any_task(pair: tuple[Server, Server]) -> None:
    a, b = pair
    async with running(a, b) as (on_a, on_b):
        task_id = await on_a.start("blocks")
        seen = await on_b.get(task_id)  # created durably before the reply: no wait
        assert seen["taskId"] == task_id and seen["status"] == "working"


async def test_cancel_through_one_stops_the_handler_on_the_other(
    pair: tuple[Server, Server],
) -> None:
    a, b = pair
    async with running(a, b) as (on_a, on_b):
        task_id = await on_a.start("blocks")
        await wait_for(lambda: task_id in a.runner.running)
        await on_b.send("tasks/cancel", {"taskId": task_id})
        await wait_for(lambda: task_id not in a.runner.running)  # A's handler is gone
        assert (await on_a.get(task_id))["status"] == "cancelled"
        assert b.runs == []  # type: ignore[attr-defined]


async def test_an_answer_on_one_reaches_the_handler_waiting_on_the_other(
    pair: tuple[Server, Server],
) -> None:
    a, b = pair
    async with running(a, b) as (on_a, on_b):
        task_id = await on_a.start("asks")
        task = await on_b.wait_status(task_id, "input_required")
        (key,) = task["inputRequests"]
        answer = {key: {"action": "accept", "content": {"name": "from b"}}}
        await on_b.send("tasks/update", {"taskId": task_id, "inputResponses": answer})
        done = await on_b.wait_status(task_id, "completed")
        assert done["result"]["content"][0]["text"] == "hello from b"
        assert a.runs == [task_id] and b.runs == []  # type: ignore[attr-defined]


async def test_the_task_limit_holds_across_servers(pair: tuple[Server, Server]) -> None:
    a, b = pair
    async with running(a, b) as (on_a, on_b):
        await on_a.start("blocks")
        await on_b.start("blocks")
        await on_a.start("blocks")
        refused = await on_b.call("blocks")
        assert "Too many tasks" in refused["error"]["message"]


async def test_a_lapsed_lease_fails_the_task_on_the_other(redis_url: str) -> None:
    prefix = _prefix()
    dead = RedisTaskStore(redis_url, prefix=prefix)  # the process that died, as it left things
    record = TaskRecord(
        task_id="tsk_orphan",
        version=1,
        tool_name="blocks",
        status=TaskStatus.WORKING,
        created_at=time.time(),
        last_updated_at=time.time(),
        ttl_ms=600_000,
        poll_interval_ms=None,
    )
    await dead.save(record, None, active=True)
    await dead.claim("tsk_orphan", time.time() + 0.3)
    survivor = build(RedisTaskStore(redis_url, prefix=prefix), lease_seconds=0.3)
    async with running(survivor) as (client,):
        failed = await client.wait_status("tsk_orphan", "failed")
    assert "stopped before the task finished" in failed["error"]["message"]
    await dead.aclose()


async def test_task_notifications_reach_a_stream_on_the_other(
    pair: tuple[Server, Server],
) -> None:
    a, b = pair
    frames: list[dict[str, Any]] = []
    got_cancelled = trio.Event()

    async def notify(body: bytes) -> None:
        message = json.loads(body)
        frames.append(message)
        if message.get("method") == "notifications/tasks":
            check_notification(message)
            if message["params"]["status"] == "cancelled":
                got_cancelled.set()

    async with running(a, b) as (on_a, _):
        task_id = await on_a.start("blocks")
        listen = request("subscriptions/listen", {"notifications": {"taskIds": [task_id]}})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: b.handle(listen, notify=notify, connection=Connection()))
            await wait_for(lambda: bool(frames))  # acknowledged: listening
            await on_a.send("tasks/cancel", {"taskId": task_id})
            with trio.fail_after(10):
                await got_cancelled.wait()
            b.end_subscriptions()
    notes = [f["params"] for f in frames if f.get("method") == "notifications/tasks"]
    assert {note["taskId"] for note in notes} == {task_id}
    assert notes[-1]["status"] == "cancelled"


async def test_memory_is_not_shared() -> None:
    assert MemoryTaskStore().shared is False and MemoryTaskStore().signals is None


class Interleaved(MemoryTaskStore):
    """A memory store where, once armed, another writer changes the record right after the
    server reads it: the race two processes on a shared store run into."""

    def __init__(self) -> None:
        super().__init__()
        self.armed: str | None = None
        self.interleaved = 0

    async def get(self, task_id: str) -> TaskRecord | None:
        record = await super().get(task_id)
        if record is not None and self.armed == task_id:
            self.armed = None
            self.interleaved += 1
            await self.save(
                record.replace(status_message="changed elsewhere"),
                record.version,
                active=not record.status.is_terminal,
            )
        return record


@pytest.mark.parametrize("method", ["tasks/cancel", "tasks/update"])
async def test_a_transition_that_loses_a_race_is_decided_again(method: str) -> None:
    store = Interleaved()
    async with running(build(store)) as (client,):
        task_id = await client.start("asks")
        task = await client.wait_status(task_id, "input_required")
        (key,) = task["inputRequests"]
        before = await store.get(task_id)
        assert before is not None
        store.armed = task_id
        params: dict[str, Any] = {"taskId": task_id}
        if method == "tasks/update":
            params["inputResponses"] = {key: {"action": "accept", "content": {"name": "y"}}}
        reply = await client.send(method, params)
        assert "result" in reply and store.interleaved == 1
        after = await store.get(task_id)
        assert after is not None and after.version >= before.version + 2  # both writes kept
        if method == "tasks/cancel":
            assert after.status is TaskStatus.CANCELLED
        else:
            done = await client.wait_status(task_id, "completed")
            assert done["result"]["content"][0]["text"] == "hello y"


PASSWORD = "s3cret-" + secrets.token_hex(6)


@pytest.mark.parametrize("password", [None, PASSWORD], ids=["no-password", "password"])
async def test_an_unreachable_store_costs_requests_not_the_server(
    caplog: pytest.LogCaptureFixture, password: str | None
) -> None:
    """The requests that need the store get 503 (retryable), the server serves on; and a
    store password reaches neither the clients nor the log (issue 15, point 4)."""
    caplog.set_level("DEBUG")
    with running_redis(password=password) as url:
        store = RedisTaskStore(url, prefix=_prefix())
        server = build(store, lease_seconds=0.3)
        async with running(server) as (client,):
            task_id = await client.start("blocks")
            await client.wait_status(task_id, "working")
            stopper = redis.Redis.from_url(url)
            with contextlib.suppress(redis.ConnectionError):  # it hangs up as it stops
                stopper.shutdown(nosave=True)
            for data in (
                request("tasks/get", {"taskId": task_id}),
                request("tools/call", {"name": "blocks", "arguments": {}}),
            ):
                reply = await server.handle(data, connection=Connection())
                assert reply is not None and reply.http_status == 503
                error = json.loads(reply.body)["error"]
                assert json.loads(reply.body)["id"] == json.loads(data)["id"]
                assert error["code"] == -32603
                assert error["message"] == "The task store is unavailable; try again shortly"
                assert error["data"] == {"retryAfterMs": 1000} and reply.retry_after_seconds == 1
            # The background loops fail too (renewing leases, expiry): logged in a line
            # each (no traceback), and started again; the server serves on.
            await wait_for(lambda: "leases not renewed" in caplog.text)
            await wait_for(lambda: "expiring tasks stopped: " in caplog.text)
            background = [r for r in caplog.records if "stopped: " in r.getMessage()]
            assert "_loop" not in caplog.text  # (what stopped, not a private function)
            assert background and not any(r.exc_info for r in background)
            assert server.is_running
            with pytest.raises(StoreUnavailable) as caught:
                await store.get(task_id)
    if password is not None:
        assert password in url
        for shown in (repr(store), str(caught.value)):
            assert password not in shown and "***@" in shown
        assert "unavailable" in caplog.text and password not in caplog.text


async def test_a_store_down_at_start_stops_the_start_and_not_the_next(redis_url: str) -> None:
    server = build(RedisTaskStore(f"redis://127.0.0.1:{free_port()}/0"))  # nobody there
    with pytest.raises(ExceptionGroup) as caught:
        async with server.running():
            raise AssertionError("started without its store")
    assert caught.group_contains(StoreUnavailable)
    assert not server.is_running
    server.use_store(RedisTaskStore(redis_url, prefix=_prefix()))
    async with running(server) as (client,):
        assert (await client.get(await client.start("asks")))["status"] in (
            "working",
            "input_required",
        )


# --- secrets stay secret (issue 15, point 4) ---------------------------------------------------


def test_a_url_naming_no_store_is_refused_without_its_password() -> None:
    with pytest.raises(ValueError, match=r"no store for 'bogus://\*\*\*@host/0'") as caught:
        open_store(f"bogus://admin:{PASSWORD}@host/0")
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
        ("redis://user:pw@h/0?prefix=a", "redis://***@h/0?prefix=a"),
        ("redis://h/0?password=pw&db=1", "redis://h/0?password=***&db=1"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ],
)
def test_urls_in_logs_have_their_userinfo_redacted(url: str, shown: str) -> None:
    assert redacted(url) == shown


# --- every orphan is taken over at start (issue 15, point 1) -----------------------------------

ORPHANS = 1_000


def _unfinished(number: int, now: float) -> TaskRecord:
    status = TaskStatus.WORKING if number % 3 else TaskStatus.INPUT_REQUIRED  # waits in place
    return TaskRecord(
        task_id=f"tsk_orphan_{number:05d}",
        version=1,
        tool_name="blocks",
        status=status,
        created_at=now,
        last_updated_at=now,
        ttl_ms=600_000,
        poll_interval_ms=None,
    )


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_every_unfinished_task_of_a_stopped_process_is_taken_over_at_start(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A process holding 1,000 unfinished tasks stops (its leases left behind); the next
    server to start on the store fails every one of them before it serves, not 100."""
    now = time.time()
    if kind == "sqlite":
        dead: TaskStore = SQLiteTaskStore(tmp_path / "tasks.db")
    else:
        prefix = _prefix()
        dead = RedisTaskStore(request.getfixturevalue("redis_url"), prefix=prefix)
    lease = math.inf if kind == "sqlite" else now + 0.2  # a file's leases die with its process
    for number in range(ORPHANS):
        await dead.save(_unfinished(number, now), None, active=True, lease_until=lease)
    await dead.aclose()  # it stops without releasing a lease
    if kind == "sqlite":
        store: TaskStore = SQLiteTaskStore(tmp_path / "tasks.db")
    else:
        store = RedisTaskStore(request.getfixturevalue("redis_url"), prefix=prefix)
        await trio.sleep(0.3)  # its leases lapse
    server = build(store, max_tasks=2 * ORPHANS)
    try:
        async with running(server):
            records = [await store.get(_unfinished(n, now).task_id) for n in range(ORPHANS)]
    finally:
        await store.aclose()
    assert all(record is not None for record in records)
    failed = [r for r in records if r is not None and r.status is TaskStatus.FAILED]
    assert len(failed) == ORPHANS
    assert all(
        r.error is not None and "stopped before the task finished" in r.error.message
        for r in failed
    )


# --- expiry is crash-safe (issue 15, point 2) --------------------------------------------------

EXPIRED = 10_000


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_a_process_killed_inside_an_expiry_batch_leaks_no_record(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """10,000 records expired; three processes in a row each take a batch of them to delete
    and die part way (after 0, 400 and 999 deletions): the next server on the store still
    removes every record, and the count is back to zero."""
    now = time.time()
    prefix = _prefix()

    def open_store_again() -> TaskStore:
        if kind == "sqlite":
            return SQLiteTaskStore(tmp_path / "tasks.db")
        return RedisTaskStore(request.getfixturevalue("redis_url"), prefix=prefix)

    store = open_store_again()

    async def save_some(first: int) -> None:
        for number in range(first, min(first + 500, EXPIRED)):
            done = msgspec.structs.replace(
                _unfinished(number, now - 100), status=TaskStatus.COMPLETED, ttl_ms=1_000
            )
            await store.save(done, None, active=False)

    async with trio.open_nursery() as nursery:
        for first in range(0, EXPIRED, 500):
            nursery.start_soon(save_some, first)
    assert await store.count() == EXPIRED
    for deleted in (0, 400, 999):
        batch = await store.pop_due(now)
        assert len(batch) == 1000
        for record in batch[:deleted]:
            assert await store.delete(record.task_id, record.version)
        await store.aclose()  # it dies here: the rest of its batch is never deleted
        store = open_store_again()
    later = now + EXPIRY_CLAIM_SECONDS + 1  # the dead processes' claims have run out
    server = build(store, max_tasks=2 * EXPIRED, clock=lambda: later)
    try:
        async with running(server):
            with trio.fail_after(60):
                while await store.count():
                    await trio.sleep(0.05)
    finally:
        await store.aclose()
