"""The store in two halves: `LocalCoordination`, the coordination a store of one process
takes; a custom store written to the new protocol (the records only) and one written to the
protocol of before the split (one object, `save` with the limits one by one, the lease
methods on it) each serve a task end to end through a real `Server` on loopback HTTP.
"""

from __future__ import annotations

import secrets
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    ElicitParams,
    ElicitResult,
    Server,
    TaskOptions,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.client import Client, connect_http
from mcp_tasks.core import TaskLimits, TaskRecord, TaskStatus, VersionConflict
from mcp_tasks.core._client import PollPolicy
from mcp_tasks.store import (
    Coordination,
    LocalCoordination,
    MemoryTaskStore,
    Signals,
    StoreFull,
    TaskStore,
)
from mcp_tasks.store._legacy import PreSplitStore
from mcp_tasks.transports import serve_http

FAST = PollPolicy(min_interval_ms=10, max_interval_ms=50)
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


# --- LocalCoordination ---------------------------------------------------------------------


async def test_local_leases_are_held_renewed_released_and_never_lapse() -> None:
    local = LocalCoordination("here")
    assert (local.origin, local.shared, local.signals) == ("here", False, None)
    assert await local.lease_holder("t1", 0.0) is None
    await local.claim("t1", 50.0)
    assert await local.lease_holder("t1", 10.0) == "here"
    assert await local.lease_holder("t1", 50.0) is None  # ran out at 50
    await local.renew(["t1", "t2"], 80.0)  # t2 is not held: not taken by a renew
    assert await local.lease_holder("t1", 60.0) == "here"
    assert await local.lease_holder("t2", 10.0) is None
    await local.release("t1")
    assert await local.lease_holder("t1", 10.0) is None
    local.hold("t3", 30.0)  # what a store's save with lease_until does
    assert await local.lease_holder("t3", 10.0) == "here"
    local.drop("t3")  # ... and a save with active=False, or a delete
    assert await local.lease_holder("t3", 10.0) is None
    await local.claim("t4", 5.0)
    assert await local.lapsed(1e12) == []  # one process: its leases end with it
    assert LocalCoordination().origin != LocalCoordination().origin


async def test_local_use_once_remembers_until_its_time_and_then_forgets() -> None:
    local = LocalCoordination()
    assert await local.use_once("k1", until=200.0, now=100.0)
    assert not await local.use_once("k1", until=200.0, now=150.0)  # the second time
    assert await local.use_once("k2", until=200.0, now=150.0)  # another key
    assert not await local.use_once("k1", until=300.0, now=200.0)  # still remembered at 200
    assert await local.use_once("k1", until=400.0, now=201.0)  # forgotten past its until
    assert not await local.use_once("k1", until=400.0, now=300.0)  # remembered anew
    assert await local.shared_key(b"a" * 32) == b"a" * 32  # nobody to agree with
    assert await local.shared_key(b"b" * 32) == b"b" * 32


async def test_the_memory_store_keeps_its_leases_in_its_local_coordination() -> None:
    store = MemoryTaskStore()
    assert isinstance(store.coordination, LocalCoordination)
    first = _record("t1")
    await store.save(first, None, active=True, limits=TaskLimits(max_tasks=1), lease_until=50.0)
    assert await store.coordination.lease_holder("t1", 10.0) == store.coordination.origin
    with pytest.raises(StoreFull):  # the limits whole, as the runtime passes them
        await store.save(_record("t2"), None, active=True, limits=TaskLimits(max_tasks=1))
    await store.save(first.replace(status_message="done"), 1, active=False)
    assert await store.coordination.lease_holder("t1", 10.0) is None
    with pytest.raises(TypeError, match="not both"):
        await store.save(_record("t3"), None, active=True, limits=TaskLimits(max_tasks=9), limit=9)
    with pytest.raises(TypeError, match="limt"):
        await store.save(_record("t3"), None, active=True, limt=9)


def test_a_store_that_is_neither_kind_is_refused_with_what_it_lacks() -> None:
    with pytest.raises(TypeError, match=r"dict is not a task store.*coordination"):
        Server("t", "1", store={})  # type: ignore[arg-type]


# --- custom stores, served -----------------------------------------------------------------


class DictRecords:
    """The reads both custom stores below make of their dict of records."""

    records: dict[str, TaskRecord]

    async def get(self, task_id: str) -> TaskRecord | None:
        return self.records.get(task_id)

    async def count(self) -> int:
        return len(self.records)

    async def pop_due(self, now: float, limit: int = 1000) -> list[TaskRecord]:
        due = [r for r in self.records.values() if r.expires_at is not None and r.expires_at <= now]
        return due[:limit]

    async def next_deadline(self) -> float | None:
        return min((r.expires_at for r in self.records.values() if r.expires_at), default=None)


class RecordsOnly(DictRecords):
    """A custom store written to the new protocol: the records in a dict, and
    `LocalCoordination` for the rest (what a store of one process needs)."""

    def __init__(self) -> None:
        self.coordination = LocalCoordination()
        self.records: dict[str, TaskRecord] = {}
        self.limits_seen: list[TaskLimits] = []

    async def save(
        self,
        record: TaskRecord,
        expected_version: int | None,
        *,
        active: bool,
        limits: TaskLimits | None = None,
        lease_until: float | None = None,
    ) -> None:
        current = self.records.get(record.task_id)
        found = None if current is None else current.version
        if found != expected_version:
            raise VersionConflict(record.task_id, expected_version, found)
        if current is None and limits is not None:
            self.limits_seen.append(limits)
            if len(self.records) >= limits.max_tasks:
                raise StoreFull(limits.max_tasks)
        self.records[record.task_id] = record
        if lease_until is not None:
            self.coordination.hold(record.task_id, lease_until)
        if not active:
            self.coordination.drop(record.task_id)

    async def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        self.coordination.drop(task_id)
        return self.records.pop(task_id, None) is not None

    async def aclose(self) -> None:
        pass


class BeforeTheSplit(DictRecords):
    """A custom store written to the protocol of before the split: one object, `save` with
    the four limits one by one, and the lease methods, `shared_key`, `use_once`, `shared`,
    `origin` and `signals` on it."""

    shared = False

    def __init__(self) -> None:
        self.origin = "old_" + secrets.token_hex(4)
        self.records: dict[str, TaskRecord] = {}
        self.leases: dict[str, float] = {}
        self.used: set[str] = set()
        self.saves: list[dict[str, Any]] = []
        self.calls: list[str] = []

    @property
    def signals(self) -> Signals | None:
        return None

    async def save(
        self,
        record: TaskRecord,
        expected_version: int | None,
        *,
        active: bool,
        limit: int | None = None,
        principal_limit: int | None = None,
        principal_stored_limit: int | None = None,
        bytes_limit: int | None = None,
        lease_until: float | None = None,
    ) -> None:
        current = self.records.get(record.task_id)
        found = None if current is None else current.version
        if found != expected_version:
            raise VersionConflict(record.task_id, expected_version, found)
        self.saves.append(
            {
                "limit": limit,
                "principal_limit": principal_limit,
                "bytes_limit": bytes_limit,
                "lease_until": lease_until,
            }
        )
        if current is None and limit is not None and len(self.records) >= limit:
            raise StoreFull(limit)
        self.records[record.task_id] = record
        if lease_until is not None:
            self.leases[record.task_id] = lease_until
        if not active:
            self.leases.pop(record.task_id, None)

    async def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        self.leases.pop(task_id, None)
        return self.records.pop(task_id, None) is not None

    async def claim(self, task_id: str, until: float) -> None:
        self.calls.append("claim")
        self.leases[task_id] = until

    async def renew(self, task_ids: list[str], until: float) -> None:
        self.calls.append("renew")

    async def release(self, task_id: str) -> None:
        self.calls.append("release")
        self.leases.pop(task_id, None)

    async def lease_holder(self, task_id: str, now: float) -> str | None:
        self.calls.append("lease_holder")
        return self.origin if self.leases.get(task_id, now) > now else None

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        self.calls.append("lapsed")
        return []

    async def shared_key(self, proposal: bytes) -> bytes:
        self.calls.append("shared_key")
        return proposal

    async def use_once(self, key: str, until: float, now: float) -> bool:
        self.calls.append("use_once")
        fresh = key not in self.used
        self.used.add(key)
        return fresh

    async def aclose(self) -> None:
        pass


def _build(store: object) -> Server:
    server = Server(
        "halves",
        "1",
        tasks=TaskOptions(ttl_ms=600_000, max_tasks=7),
        store=store,  # type: ignore[arg-type]  # an old-style store is no TaskStore
        shutdown_grace_seconds=0.5,
    )

    @server.tool(task_support="required")
    async def asks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        answer = await ctx.elicit("Name?", NAME_SCHEMA)
        return CallToolResult.text(f"hello {(answer.content or {}).get('name')}")

    return server


async def _named(params: ElicitParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"name": "Ada"})


@asynccontextmanager
async def _served(server: Server) -> AsyncIterator[Client]:
    async with server.running(), trio.open_nursery() as nursery:
        port = await nursery.start(serve_http, server, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{port}/mcp"
        async with connect_http(url, poll=FAST, on_elicit=_named) as client:
            yield client
        nursery.cancel_scope.cancel()


async def test_a_custom_store_of_records_only_serves_a_task_end_to_end() -> None:
    store = RecordsOnly()
    checked: TaskStore = store  # the protocol, as mypy reads it
    coordination: Coordination = store.coordination
    assert checked is store and coordination.shared is False
    with trio.fail_after(30):
        async with _served(_build(store)) as client:
            result = await client.call_tool("asks")
    assert result.content[0].text == "hello Ada"  # type: ignore[union-attr]
    (record,) = store.records.values()
    assert record.status.value == "completed"
    (limits,) = store.limits_seen  # the limits whole, those of TaskOptions
    assert limits.max_tasks == 7 and limits.max_bytes == 256 * 1024 * 1024
    assert await store.coordination.lease_holder(record.task_id, 0.0) is None  # dropped at the end


async def test_a_store_written_before_the_split_still_serves_a_task_end_to_end() -> None:
    store = BeforeTheSplit()
    with pytest.warns(DeprecationWarning, match="BeforeTheSplit is a store written before"):
        server = _build(store)
    with trio.fail_after(30), warnings.catch_warnings():
        warnings.simplefilter("error")  # adapted once, at Server(): no warning per call
        async with _served(server) as client:
            result = await client.call_tool("asks")
    assert result.content[0].text == "hello Ada"  # type: ignore[union-attr]
    (record,) = store.records.values()
    assert record.status.value == "completed"
    created = store.saves[0]  # the limits one by one, as the old save takes them
    assert created["limit"] == 7 and created["principal_limit"] is None
    assert created["bytes_limit"] == 256 * 1024 * 1024
    assert created["lease_until"] is not None  # the lease taken in the save, as before
    assert {"shared_key", "lapsed"} <= set(store.calls)  # its own coordination, called
    assert record.task_id not in store.leases  # the finished task's lease dropped


async def test_a_wrapped_pre_split_store_takes_the_old_limit_keywords_as_the_built_in_ones_do() -> (
    None
):
    old = BeforeTheSplit()
    store = PreSplitStore(old)  # what `Server` makes of it
    await store.save(_record("t1"), None, active=True, limit=1, lease_until=50.0)
    assert old.saves == [
        {"limit": 1, "principal_limit": None, "bytes_limit": None, "lease_until": 50.0}
    ]
    with pytest.raises(StoreFull):  # the old keyword, passed on as the limit it was
        await store.save(_record("t2"), None, active=True, limit=1)
    with pytest.raises(TypeError, match="not both"):
        await store.save(_record("t3"), None, active=True, limits=TaskLimits(max_tasks=9), limit=9)


def test_use_store_wraps_a_store_written_before_the_split_too() -> None:
    server = _build(MemoryTaskStore())
    old = BeforeTheSplit()
    with pytest.warns(DeprecationWarning, match="BeforeTheSplit"):
        server.use_store(old)
    assert server.store.old is old  # type: ignore[attr-defined]  # the store as it was written
    assert server.store.coordination is old  # its own lease methods serve as coordination
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        server.use_store(MemoryTaskStore())  # a store of today: no warning


def _record(task_id: str) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        version=1,
        tool_name="tool",
        status=TaskStatus.WORKING,
        created_at=100.0,
        last_updated_at=100.0,
        ttl_ms=1000,
        poll_interval_ms=1000,
    )
