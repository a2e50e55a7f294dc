"""The store contract, for every store: records in and out, compare-and-set, expiry index.

Later stores (SQLite, Redis) join by adding a factory to STORES.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcp_tasks.core import (
    CallToolResult,
    TaskRecord,
    TaskStatus,
    VersionConflict,
    decode_record,
    encode_record,
)
from mcp_tasks.store import MemoryTaskStore, TaskStore

STORES: dict[str, Callable[[], TaskStore]] = {"memory": MemoryTaskStore}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest) -> TaskStore:
    return STORES[request.param]()


def record(
    task_id: str = "t1", *, version: int = 1, created_at: float = 100.0, ttl_ms: int | None = 1000
) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        version=version,
        tool_name="tool",
        status=TaskStatus.WORKING,
        created_at=created_at,
        last_updated_at=created_at,
        ttl_ms=ttl_ms,
        poll_interval_ms=1000,
    )


def test_a_saved_record_reads_back_equal(store: TaskStore) -> None:
    store.save(record(), None)
    assert store.get("t1") == record() and store.get("t2") is None
    assert store.count() == 1


def test_create_refuses_an_existing_id(store: TaskStore) -> None:
    store.save(record(), None)
    with pytest.raises(VersionConflict, match="t1"):
        store.save(record(), None)


def test_replace_needs_the_stored_version(store: TaskStore) -> None:
    first = record()
    store.save(first, None)
    second = first.replace(status=TaskStatus.CANCELLED)
    with pytest.raises(VersionConflict):
        store.save(second, 2)
    store.save(second, 1)
    third = first.replace(status=TaskStatus.FAILED)  # a writer that read version 1 too
    with pytest.raises(VersionConflict) as lost:
        store.save(third, 1)
    assert (lost.value.expected, lost.value.found) == (1, 2)
    assert store.get("t1") == second


def test_replace_of_a_missing_record_conflicts(store: TaskStore) -> None:
    with pytest.raises(VersionConflict):
        store.save(record(version=2), 1)


def test_delete_with_and_without_a_version(store: TaskStore) -> None:
    store.save(record(), None)
    with pytest.raises(VersionConflict):
        store.delete("t1", 5)
    assert store.delete("t1", 1) is True
    assert store.delete("t1") is False and store.get("t1") is None and store.count() == 0


def test_pop_due_returns_only_records_whose_time_has_come(store: TaskStore) -> None:
    store.save(record("a", created_at=100.0), None)  # expires 101
    store.save(record("b", created_at=105.0), None)  # expires 106
    store.save(record("c", ttl_ms=None), None)  # never
    assert store.next_deadline() == 101.0
    assert store.pop_due(100.999) == []
    assert [r.task_id for r in store.pop_due(101.0)] == ["a"]
    assert store.pop_due(101.0) == []  # each record comes due once
    assert store.get("a") is not None  # still stored until the core says delete
    assert [r.task_id for r in store.pop_due(10_000)] == ["b"]


def test_pop_due_skips_deleted_records_and_honours_the_limit(store: TaskStore) -> None:
    for n in range(5):
        store.save(record(f"t{n}", created_at=100.0 + n), None)
    store.delete("t0")
    assert [r.task_id for r in store.pop_due(1000, limit=2)] == ["t1", "t2"]
    assert [r.task_id for r in store.pop_due(1000)] == ["t3", "t4"]


def test_a_new_expiry_is_indexed_anew(store: TaskStore) -> None:
    first = record()
    store.save(first, None)
    longer = first.replace(ttl_ms=5000)
    store.save(longer, 1)
    assert store.pop_due(101.0) == []
    assert store.pop_due(105.0) == [longer]


def test_records_round_trip_through_json() -> None:
    done = record().replace(status=TaskStatus.COMPLETED, result=None, status_message="ok")
    assert decode_record(encode_record(done)) == done
    assert CallToolResult.text("x").result_type == "complete"


def test_memory_expiry_cost_is_proportional_to_what_expired() -> None:
    store = MemoryTaskStore()
    for n in range(10_000):
        store.save(record(f"t{n}", created_at=100.0 + n), None)
    heap = store._expiry_heap
    assert len(store.pop_due(104.0)) == 4
    assert len(heap) == 10_000 - 4  # popped exactly the expired entries, touched no others
