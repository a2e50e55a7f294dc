"""A SQLite store opened shared by several processes on one machine: what the file holds
for them all (records, limits, counts, leases, signals) and who may open it.

"Another process" is a second store object on the same file: its own connection, worker
thread and lock on the file, nothing else in common (`flock` locks of two opens exclude
each other as two processes' do). Real servers on one file are in test_shared_processes.py
and test_cli_workers.py.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path

import anyio
import msgspec
import pytest

import mcp_tasks.store._sqlite as sqlite_module
import mcp_tasks.store._sqlite_coordination as coordination_module
from mcp_tasks.core import TaskRecord, TaskStatus
from mcp_tasks.core.commands import TaskLimits
from mcp_tasks.store import Signal, SQLiteTaskStore, StoreFull, StoreLocked, StoreUnavailable

from .test_contract import record as contract_record

WAIT = 5.0  # seconds any one wait may take, at most


def record(task_id: str, *, principal: str | None = None) -> TaskRecord:
    return msgspec.structs.replace(contract_record(task_id), principal=principal)


@asynccontextmanager
async def sharing(path: Path, count: int = 2) -> AsyncIterator[list[SQLiteTaskStore]]:
    stores = [SQLiteTaskStore(path, shared=True) for _ in range(count)]
    try:
        yield stores
    finally:
        for store in stores:
            await store.aclose()


async def test_limits_hold_across_processes_creating_at_once(tmp_path: Path) -> None:
    """40 creations at once from two processes under a limit of 25 tasks and 30 of one
    principal's: 25 stored, 15 refused, and both count 25."""
    limits = TaskLimits(max_tasks=25, max_stored_per_principal=30)
    refused: list[str] = []

    async def create(store: SQLiteTaskStore, task_id: str) -> None:
        try:
            await store.save(record(task_id, principal="p"), None, active=True, limits=limits)
        except StoreFull:
            refused.append(task_id)

    async with sharing(tmp_path / "tasks.db") as (a, b):
        async with anyio.create_task_group() as creating:
            for number in range(20):
                creating.start_soon(create, a, f"a{number}")
                creating.start_soon(create, b, f"b{number}")
        assert len(refused) == 15
        assert await a.count() == await b.count() == 25
        stored = [task_id for task_id in (f"{s}{n}" for s in "ab" for n in range(20))]
        found = [task_id for task_id in stored if await b.get(task_id) is not None]
        assert sorted(found + refused) == sorted(stored)


async def test_a_record_one_process_saves_is_read_and_replaced_by_the_other(
    tmp_path: Path,
) -> None:
    async with sharing(tmp_path / "tasks.db") as (a, b):
        await a.save(record("t1"), None, active=True)
        seen = await b.get("t1")
        assert seen == record("t1")
        await b.save(seen.replace(status=TaskStatus.COMPLETED), 1, active=False)
        done = await a.get("t1")
        assert done is not None and done.status is TaskStatus.COMPLETED
        assert await a.delete("t1", expected_version=2)
        assert await b.get("t1") is None and await b.count() == 0


async def test_a_signal_reaches_each_listener_and_none_is_replayed(tmp_path: Path) -> None:
    async with sharing(tmp_path / "tasks.db") as (a, b):
        a_signals, b_signals = a.coordination.signals, b.coordination.signals
        assert a_signals is not None and b_signals is not None
        before = Signal("cancel", "before", a.coordination.origin)
        await a_signals.publish(before)  # nobody listens yet: it reaches nobody
        async with a_signals.listen() as heard_on_a, b_signals.listen() as heard_on_b:
            cancel = Signal("cancel", "t1", a.coordination.origin)
            resume = Signal("resume", "t2", b.coordination.origin, to=a.coordination.origin)
            await a_signals.publish(cancel)
            await b_signals.publish(resume)
            with anyio.fail_after(WAIT):
                assert [await anext(heard_on_b), await anext(heard_on_b)] == [cancel, resume]
                assert [await anext(heard_on_a), await anext(heard_on_a)] == [cancel, resume]


async def test_a_save_tells_the_other_processes_that_the_record_changed(tmp_path: Path) -> None:
    async with sharing(tmp_path / "tasks.db") as (a, b):
        assert b.coordination.signals is not None
        async with b.coordination.signals.listen() as heard:
            await a.save(record("t1"), None, active=True)
            with anyio.fail_after(WAIT):
                signal = await anext(heard)
        assert signal == Signal("changed", "t1", a.coordination.origin)


async def test_a_store_alone_and_stores_sharing_exclude_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "SHARE_WAIT_SECONDS", 0.2)
    path = tmp_path / "tasks.db"
    alone = SQLiteTaskStore(path)
    with pytest.raises(StoreLocked, match="open in another process that does not share it"):
        SQLiteTaskStore(path, shared=True)
    await alone.aclose()
    async with sharing(path, 3):
        with pytest.raises(StoreLocked, match=r"unless each opens it shared"):
            SQLiteTaskStore(path)


async def test_the_first_to_share_a_file_takes_over_the_leases_left_and_no_later_one_does(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tasks.db"
    alone = SQLiteTaskStore(path)  # a process alone holds its leases for good
    await alone.save(record("left"), None, active=True, lease_until=math.inf)
    await alone.aclose()

    first = SQLiteTaskStore(path, shared=True)
    try:
        now = time.time()
        assert await first.coordination.lapsed(now) == ["left"]
        await first.save(record("mine"), None, active=True, lease_until=now + 60)
        second = SQLiteTaskStore(path, shared=True)
        try:
            assert await second.coordination.lapsed(now) == []
            holder = await second.coordination.lease_holder("mine", now)
            assert holder == first.coordination.origin
            # Not renewed, a shared lease runs out: the other process takes the task over.
            assert await second.coordination.lapsed(now + 61) == ["mine"]
        finally:
            await second.aclose()
    finally:
        await first.aclose()


async def test_a_file_from_before_the_totals_is_counted_once_as_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SQLiteTaskStore(path)
    big = record("a").replace(status_message="x" * 300)
    for task_id in ("a", "b", "c"):
        await store.save(big.replace(task_id=task_id), None, active=True)
    size = big.data_bytes
    await store.aclose()
    with closing(sqlite3.connect(path)) as db:  # as a file written before them looks
        db.executescript(
            "DROP TRIGGER tasks_added; DROP TRIGGER tasks_removed; DROP TRIGGER tasks_resized;"
            "DROP TRIGGER sessions_added; DROP TRIGGER sessions_removed; DROP TABLE totals;"
        )

    again = SQLiteTaskStore(path, shared=True)
    try:
        assert await again.count() == 3
        with pytest.raises(StoreFull) as full:
            limits = TaskLimits(max_tasks=10, max_bytes=4 * size - 1)
            await again.save(big.replace(task_id="d"), None, active=True, limits=limits)
        assert full.value.data
        await again.delete("a")
        await again.save(big.replace(task_id="d"), None, active=True, limits=limits)
        assert await again.count() == 3
    finally:
        await again.aclose()


async def test_old_signals_are_deleted_and_a_listener_that_stalled_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With signals kept 0.4 s: a listener that does not look for 0.3 s (over half of it)
    may have missed some, so it ends with `StoreUnavailable` (the server listens again and
    catches up from the records); a listener's look deletes the rows older than 0.4 s."""
    monkeypatch.setattr(coordination_module, "SIGNAL_KEEP_SECONDS", 0.4)
    path = tmp_path / "tasks.db"
    async with sharing(path, 1) as (store,):
        signals = store.coordination.signals
        assert signals is not None
        first = Signal("cancel", "t1", store.coordination.origin)
        async with signals.listen() as heard:
            await signals.publish(first)
            with anyio.fail_after(WAIT):
                assert await anext(heard) == first
            await anyio.sleep(0.5)  # stalled: not looking, and the first is past keeping
            second = Signal("cancel", "t2", store.coordination.origin)
            await signals.publish(second)
            with pytest.raises(StoreUnavailable, match="some may be lost"):
                await anext(heard)
        with closing(sqlite3.connect(path)) as db:
            left = [row[0] for row in db.execute("SELECT signal FROM signals")]
        assert len(left) == 1 and b'"t2"' in left[0]
