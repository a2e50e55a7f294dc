"""Three real `mcp-tasks serve` processes (A, B, C) sharing one store: a Redis server, or one
SQLite file that each opens shared (`?shared=true`).

Each test starts its own three processes on its own key prefix (or file), and talks to them with the
library's HTTP client (and, for `subscriptions/listen`, a raw h11 client). What crosses
processes: `tasks/get` (any process answers), `tasks/cancel` and `tasks/update` (they reach
the process running the handler), leases (a killed process's tasks are failed, or run
again when resumable), and `notifications/tasks` (to a listen stream held elsewhere).

Whether a handler is still running is read in the store itself: a running handler holds
its task's lease (in Redis `{prefix}:holders`, in SQLite a live row of `leases`), and lets
go of it when it ends. Every wait is a poll
under `fail_after`.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h11
import pytest
import redis
import trio
from redis_server import free_port
from runtime.helpers import check_notification, request

from mcp_tasks import TASKS_EXTENSION
from mcp_tasks.client import Client
from mcp_tasks.core import (
    CallToolResult,
    CancelledTask,
    DetailedTask,
    FailedTask,
    InputRequiredTask,
    WorkingTask,
)

from .served import ORPHANED, Served, connect, serving, text_of, wait_for

LEASE_SECONDS = 1.5
ANSWER_BO = {"action": "accept", "content": {"name": "bo"}}
LISTEN = "subscriptions/listen"


# --- the shared store --------------------------------------------------------------------


@dataclass
class Shared:
    """The store the processes share: its URL, and how to read who holds a task's lease."""

    url: str
    holder_of: Callable[[str], object]
    """The lease holder of a task (None if nobody holds it), read by a blocking call."""

    async def lease_holder(self, task_id: str) -> object:
        """The store origin of the process whose handler holds the task's lease, if any."""
        return await trio.to_thread.run_sync(self.holder_of, task_id)


@pytest.fixture(params=["redis", "sqlite"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shared]:
    if request.param == "sqlite":
        path = tmp_path / "tasks.db"
        yield Shared(f"sqlite:///{path}?shared=true", partial(_sqlite_holder, path))
        return
    redis_url = request.getfixturevalue("redis_url")
    prefix = f"t{secrets.token_hex(4)}"
    client = redis.Redis.from_url(redis_url)
    try:
        yield Shared(
            f"{redis_url}?prefix={prefix}",
            lambda task_id: client.hget(f"{prefix}:holders", task_id),
        )
    finally:
        client.close()


def _sqlite_holder(path: Path, task_id: str) -> str | None:
    """The live lease's holder in the SQLite file, through a read-only connection of ours."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        row = db.execute(
            "SELECT holder FROM leases WHERE task_id = ? AND until > ?", (task_id, time.time())
        ).fetchone()
    return None if row is None else str(row[0])


# --- the processes -----------------------------------------------------------------------

Cluster = tuple[Served, Served, Served]


@pytest.fixture
async def cluster(shared: Shared) -> AsyncIterator[Cluster]:
    """Processes A, B and C serving the fixture server on one store; all killed at the end."""
    options = ["--lease-seconds", str(LEASE_SECONDS)]
    async with (
        serving(shared.url, options=options) as a,
        serving(shared.url, options=options) as b,
        serving(shared.url, options=options) as c,
    ):
        yield a, b, c


@asynccontextmanager
async def clients(cluster: Cluster) -> AsyncIterator[tuple[Client, Client, Client]]:
    """The library's HTTP client to each of A, B and C (declaring elicitation, which the
    asking tools need; the tests answer by hand with `update_task`)."""
    a, b, c = cluster
    async with connect(a.url) as on_a, connect(b.url) as on_b, connect(c.url) as on_c:
        yield on_a, on_b, on_c


# --- polling -----------------------------------------------------------------------------


async def lease_released(shared: Shared, task_id: str, *, seconds: float = 5.0) -> None:
    """Wait until no handler holds the task's lease: the handler has ended."""
    with trio.fail_after(seconds):
        while await shared.lease_holder(task_id) is not None:
            await trio.sleep(0.001)


def blocking_in(pid: int) -> Callable[[DetailedTask], bool]:
    return lambda task: (
        isinstance(task, WorkingTask) and task.status_message == f"blocking in process {pid}"
    )


def pid_of(text: str) -> int:
    found = re.search(r"from process (\d+)$", text)
    assert found, text
    return int(found.group(1))


# --- a raw listen stream -----------------------------------------------------------------


class ListenStream:
    """A `subscriptions/listen` request over one HTTP connection, its SSE events read as
    they come; every notification is schema-checked."""

    def __init__(self, stream: trio.SocketStream, request_id: str) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)
        self.request_id = request_id
        self.buffer = b""

    @classmethod
    async def open(cls, url: str, task_ids: list[str], request_id: str) -> ListenStream:
        parts = urlsplit(url)
        assert parts.hostname and parts.port
        listener = cls(await trio.open_tcp_stream(parts.hostname, parts.port), request_id)
        body = request(
            LISTEN,
            {"notifications": {"taskIds": task_ids}},
            caps={"extensions": {TASKS_EXTENSION: {}}},
            request_id=request_id,
        )
        headers = [
            ("host", parts.netloc),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", LISTEN),
            ("content-length", str(len(body))),
        ]
        out = listener.h11.send(h11.Request(method="POST", target=parts.path, headers=headers))
        out = (out or b"") + (listener.h11.send(h11.Data(data=body)) or b"")
        out += listener.h11.send(h11.EndOfMessage()) or b""
        with trio.fail_after(5):
            await listener.stream.send_all(out)
            head = await listener._next_event()
        assert isinstance(head, h11.Response), head
        assert head.status_code == 200, head
        assert dict(head.headers)[b"content-type"] == b"text/event-stream"
        return listener

    async def _next_event(self) -> h11.Event:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.stream.receive_some(65536))
                continue
            assert not isinstance(event, type), event
            return event

    async def next(self) -> dict[str, Any]:
        """The next message on the stream (the stream must not end)."""
        while b"\n\n" not in self.buffer:
            event = await self._next_event()
            assert isinstance(event, h11.Data), f"the stream ended: {event!r}"
            self.buffer += event.data
        block, _, self.buffer = self.buffer.partition(b"\n\n")
        assert block.startswith(b"data: "), block
        message: dict[str, Any] = json.loads(block.removeprefix(b"data: "))
        if "method" in message:
            check_notification(message)
        return message

    async def aclose(self) -> None:
        await self.stream.aclose()


# --- the tests ---------------------------------------------------------------------------


async def test_a_task_made_on_a_is_read_on_b_and_c_and_cancelled_through_b(
    cluster: Cluster, shared: Shared
) -> None:
    """Any process reads the task; a cancel sent to B ends the handler running on A."""
    a, _, _ = cluster
    async with clients(cluster) as (on_a, on_b, on_c):
        created = await on_a.call_tool_or_task("blocks")
        assert isinstance(created, WorkingTask), created
        task_id = created.task_id
        for client in (on_b, on_c):
            seen = await wait_for(client, task_id, blocking_in(a.pid))
            assert seen.task_id == task_id
        assert await shared.lease_holder(task_id) is not None  # A's handler runs

        await on_b.cancel_task(task_id)

        await lease_released(shared, task_id)  # the handler on A was cancelled, and ended
        for client in (on_a, on_b, on_c):
            ended = await wait_for(client, task_id, lambda task: not isinstance(task, WorkingTask))
            assert isinstance(ended, CancelledTask), ended
        assert a.process.returncode is None  # cancelled the handler, not the process


async def test_an_answer_sent_to_c_reaches_the_handler_waiting_in_place_on_a(
    cluster: Cluster,
) -> None:
    """An answer sent to C wakes the handler that awaits it in place on A."""
    a, _, _ = cluster
    async with clients(cluster) as (on_a, on_b, on_c):
        created = await on_a.call_tool_or_task("asks_in_place")
        assert isinstance(created, WorkingTask | InputRequiredTask), created
        asking = await wait_for(on_b, created.task_id, lambda t: isinstance(t, InputRequiredTask))
        assert isinstance(asking, InputRequiredTask)
        assert set(asking.input_requests) == {"input-1"}

        await on_c.update_task(created.task_id, {"input-1": ANSWER_BO})

        done = await wait_for(
            on_b, created.task_id, lambda t: not isinstance(t, WorkingTask | InputRequiredTask)
        )
        assert text_of(done) == f"hello bo from process {a.pid}"  # A's handler, woken


async def test_an_answer_sent_to_c_runs_a_handler_that_returned_input_required(
    cluster: Cluster,
) -> None:
    """A handler that returned InputRequired on A runs again, with the answer sent to C."""
    a, b, c = cluster
    async with clients(cluster) as (on_a, on_b, on_c):
        created = await on_a.call_tool_or_task("asks_by_returning")
        assert isinstance(created, WorkingTask | InputRequiredTask), created
        asking = await wait_for(on_b, created.task_id, lambda t: isinstance(t, InputRequiredTask))
        assert isinstance(asking, InputRequiredTask)
        assert set(asking.input_requests) == {"name"}
        assert asking.status_message == "waiting for a name"

        await on_c.update_task(created.task_id, {"name": ANSWER_BO})

        done = await wait_for(
            on_b, created.task_id, lambda t: not isinstance(t, WorkingTask | InputRequiredTask)
        )
        text = text_of(done)
        assert text.startswith("hello bo from process "), text
        assert pid_of(text) in {a.pid, b.pid, c.pid}


async def test_the_running_task_of_a_killed_process_fails_within_the_lease(
    cluster: Cluster, shared: Shared
) -> None:
    """kill -9 A: its running task fails once its lease lapses; its finished one stays."""
    a, _, _ = cluster
    async with clients(cluster) as (on_a, on_b, _):
        quick = await on_a.call_tool_or_task("quick", {"text": "abc"})
        assert not isinstance(quick, CallToolResult), quick
        finished = await wait_for(on_a, quick.task_id, lambda t: not isinstance(t, WorkingTask))
        assert text_of(finished) == "ABC"
        blocking = await on_a.call_tool_or_task("blocks")
        assert isinstance(blocking, WorkingTask), blocking
        await wait_for(on_b, blocking.task_id, blocking_in(a.pid))

        await a.kill()
        killed_at = trio.current_time()

        with trio.fail_after(6):  # the lease (1.5 s), a reaper's round (0.5 s), and a margin
            failed = await wait_for(
                on_b, blocking.task_id, lambda t: not isinstance(t, WorkingTask), seconds=6
            )
        print(f"\nfailed {trio.current_time() - killed_at:.2f} s after kill -9")
        assert isinstance(failed, FailedTask), failed
        assert ORPHANED in failed.error.message, failed.error
        assert await shared.lease_holder(blocking.task_id) is None

        kept = await on_b.get_task(quick.task_id)  # finished before the kill: nothing lost
        assert text_of(kept) == "ABC"


async def test_a_resumable_task_of_a_killed_process_runs_again_on_another(
    cluster: Cluster, tmp_path: Path
) -> None:
    """kill -9 A: its resumable task runs again, to the end, on B or C."""
    a, b, c = cluster
    runs = tmp_path / "runs.txt"
    async with clients(cluster) as (on_a, on_b, _):
        created = await on_a.call_tool_or_task("resumable_counter", {"path": str(runs)})
        assert isinstance(created, WorkingTask), created
        await wait_for(
            on_b,
            created.task_id,
            lambda t: isinstance(t, WorkingTask) and t.status_message == "first run: blocking",
        )
        assert runs.read_text().splitlines() == [str(a.pid)]

        await a.kill()

        with trio.fail_after(6):
            done = await wait_for(
                on_b, created.task_id, lambda t: not isinstance(t, WorkingTask), seconds=6
            )
        assert text_of(done) == "ran 2 times"
        first, second = runs.read_text().splitlines()
        assert int(first) == a.pid
        assert int(second) in {b.pid, c.pid}


async def test_a_listen_stream_on_b_hears_of_a_task_on_a_cancelled_through_c(
    cluster: Cluster,
) -> None:
    """A listen stream held on B hears of a task made on A and cancelled through C."""
    a, b, _ = cluster
    async with clients(cluster) as (on_a, _, on_c):
        created = await on_a.call_tool_or_task("blocks")
        assert isinstance(created, WorkingTask), created
        task_id = created.task_id
        await wait_for(on_c, task_id, blocking_in(a.pid))
        listener = await ListenStream.open(b.url, [task_id], "listen-on-b")
        try:
            with trio.fail_after(5):
                ack = await listener.next()
                assert ack["method"] == "notifications/subscriptions/acknowledged", ack
                assert ack["params"]["notifications"] == {"taskIds": [task_id]}

                await on_c.cancel_task(task_id)

                while True:
                    message = await listener.next()
                    assert message.get("method") == "notifications/tasks", message
                    assert message["params"]["taskId"] == task_id, message
                    if message["params"]["status"] != "working":
                        break
            assert message["params"]["status"] == "cancelled", message
        finally:
            await listener.aclose()


async def test_cancel_latency_from_b_to_the_handler_on_a(cluster: Cluster, shared: Shared) -> None:
    """Measured, not asserted: from `tasks/cancel` sent to B until (1) A answers `tasks/get`
    with `cancelled` and (2) A's handler has ended (its lease released)."""
    a, _, _ = cluster
    count = 20
    async with clients(cluster) as (on_a, on_b, _):
        task_ids = []
        for _ in range(count):
            created = await on_a.call_tool_or_task("blocks")
            assert isinstance(created, WorkingTask), created
            task_ids.append(created.task_id)
        for task_id in task_ids:
            await wait_for(on_a, task_id, blocking_in(a.pid))
            assert await shared.lease_holder(task_id) is not None

        acked, read, ended = [], [], []
        for task_id in task_ids:
            start = trio.current_time()
            await on_b.cancel_task(task_id)
            acked.append(trio.current_time() - start)
            cancelled = await wait_for(on_a, task_id, lambda t: isinstance(t, CancelledTask))
            assert isinstance(cancelled, CancelledTask)
            read.append(trio.current_time() - start)
            await lease_released(shared, task_id)
            ended.append(trio.current_time() - start)

    def show(what: str, seconds: list[float]) -> str:
        ms = sorted(s * 1000 for s in seconds)
        p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
        return (
            f"{what}: p50 {statistics.median(ms):.1f} ms, p99 {p99:.1f} ms, "
            f"min {ms[0]:.1f} ms, max {ms[-1]:.1f} ms (n={len(ms)})"
        )

    print()
    print(show("cancel on B acknowledged", acked))
    print(show("cancel on B -> tasks/get on A reads cancelled", read))
    print(show("cancel on B -> the handler on A has ended", ended))


# --- readiness when the store goes away ----------------------------------------------------


def _start_redis(port: int) -> subprocess.Popen[bytes]:
    """redis-server on `port` (free, or freed by a stopped one), once it answers PING."""
    binary = shutil.which("redis-server")
    assert binary is not None, "the redis_url fixture has found it"
    options = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen([binary, *options], stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_timeout=0.5)
    deadline = time.monotonic() + 10
    while True:
        try:
            if client.ping():
                client.close()
                return process
        except redis.ConnectionError:
            assert process.poll() is None and time.monotonic() < deadline, "redis did not start"
            time.sleep(0.02)


async def _probe(url: str, path: str) -> tuple[int, dict[str, Any]]:
    """GET a probe path of the server at `url`: (status, JSON body)."""
    probe_url = url.removesuffix("/mcp") + path
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy from env

    def get() -> tuple[int, dict[str, Any]]:
        try:
            with direct.open(probe_url, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    return await trio.to_thread.run_sync(get)


async def _until_ready_is(url: str, status: int, seconds: float = 5.0) -> dict[str, Any]:
    with trio.fail_after(seconds):
        while True:
            found, body = await _probe(url, "/readyz")
            if found == status:
                return body
            await trio.sleep(0.05)


async def test_a_process_whose_store_is_unreachable_is_not_ready_until_it_is_back(
    redis_url: str,
) -> None:
    """Two processes on a Redis of this test's own: stopped, both answer /readyz with 503
    "store unreachable" (each within its one-second store read) while /healthz stays 200;
    started again on the same port, both are ready again."""
    port = free_port()
    store = _start_redis(port)
    try:
        url = f"redis://127.0.0.1:{port}/0?prefix=ready{secrets.token_hex(4)}"
        async with serving(url) as a, serving(url) as b:
            for served in (a, b):
                assert await _probe(served.url, "/readyz") == (200, {"status": "ready"})
            store.terminate()
            await trio.to_thread.run_sync(store.wait)
            for served in (a, b):
                body = await _until_ready_is(served.url, 503)
                assert body == {"status": "not ready", "reason": "store unreachable"}
                assert await _probe(served.url, "/healthz") == (200, {"status": "ok"})
            store = await trio.to_thread.run_sync(_start_redis, port)
            for served in (a, b):
                assert await _until_ready_is(served.url, 200) == {"status": "ready"}
    finally:
        store.terminate()
        store.wait()
