"""The store contract, run unchanged on every store: memory, SQLite (a real file) and Redis
(a real redis-server): records in and out exactly, compare-and-set, the task limit, the
expiry index, leases.

Where a store may be shared by several processes (Redis, SQLite opened shared), "another
process" is a second store object on the same server and prefix, or the same file: it
shares nothing with the first but the store.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.lowlevel
import msgspec
import pytest
from msgspec import Raw

from mcp_tasks.core import (
    CallToolResult,
    ClientCapabilities,
    ElicitParams,
    ElicitRequest,
    ErrorObject,
    RequestMeta,
    TaskLimits,
    TaskRecord,
    TaskStatus,
    VersionConflict,
    decode_record,
    encode_record,
)
from mcp_tasks.store import (
    EXPIRY_CLAIM_SECONDS,
    MemoryTaskStore,
    RedisTaskStore,
    SQLiteTaskStore,
    StoreFull,
    TaskStore,
)

KINDS = ["memory", "sqlite", "sqlite-shared", "redis"]


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    made = _make(request, tmp_path)
    try:
        yield made
    finally:
        await made.aclose()


def _make(request: pytest.FixtureRequest, tmp_path: Path) -> TaskStore:
    if request.param == "memory":
        return MemoryTaskStore()
    if request.param == "sqlite":
        return SQLiteTaskStore(tmp_path / "tasks.db")
    if request.param == "sqlite-shared":
        return SQLiteTaskStore(tmp_path / "tasks.db", shared=True)
    url = request.getfixturevalue("redis_url")
    return RedisTaskStore(url, prefix="t" + secrets.token_hex(6))


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


def full_record() -> TaskRecord:
    """A record with every field set, awkward values included."""
    ask = ElicitRequest(params=ElicitParams(message="Name? é ✓ \x00", requested_schema={}))
    return record().replace(
        status=TaskStatus.INPUT_REQUIRED,
        status_message="waiting on “you”",
        arguments=Raw(b'{"n":1.5e300,"s":"\\u2028","deep":[[[]]],"neg":-0.0}'),
        request_meta=RequestMeta(
            protocol_version="2026-07-28",
            client_capabilities=ClientCapabilities(),
            progress_token="p",
        ),
        prior_responses={"a": Raw(b'{"x":1}')},
        handler_state="opaque state",
        input_requests={"input-1": ask},
        input_responses={"k": Raw(b"[1,2]")},
        issued_keys=frozenset({"input-1", "k"}),
    )


async def test_a_saved_record_reads_back_exactly(store: TaskStore) -> None:
    original = full_record()
    await store.save(original, None, active=True)
    back = await store.get("t1")
    assert back == original  # Raw fields compare byte for byte
    assert back is not None and back.arguments is not None and original.arguments is not None
    assert bytes(back.arguments) == bytes(original.arguments)
    assert await store.get("t2") is None
    assert await store.count() == 1


@pytest.mark.parametrize("ending", ["result", "error"])
async def test_results_and_errors_round_trip_exactly(store: TaskStore, ending: str) -> None:
    first = record()
    await store.save(first, None, active=True)
    if ending == "result":
        result = Raw(msgspec.json.encode(CallToolResult.text("done ✓")))
        done = first.replace(status=TaskStatus.COMPLETED, result=result)
    else:
        error = ErrorObject(code=-32603, message="boom", data={"why": [1, None]})
        done = first.replace(status=TaskStatus.FAILED, error=error)
    await store.save(done, 1, active=False)
    assert await store.get("t1") == done


async def test_create_refuses_an_existing_id(store: TaskStore) -> None:
    await store.save(record(), None, active=True)
    with pytest.raises(VersionConflict) as caught:
        await store.save(record(), None, active=True)
    assert caught.value.found == 1


async def test_replace_needs_the_stored_version(store: TaskStore) -> None:
    first = record()
    await store.save(first, None, active=True)
    second = first.replace(status_message="x")
    with pytest.raises(VersionConflict):
        await store.save(second, 2, active=True)
    await store.save(second, 1, active=True)
    third = second.replace(status_message="y")
    with pytest.raises(VersionConflict) as caught:
        await store.save(third, 1, active=True)
    assert (caught.value.expected, caught.value.found) == (1, 2)
    assert await store.get("t1") == second


async def test_replace_of_a_missing_record_conflicts(store: TaskStore) -> None:
    with pytest.raises(VersionConflict):
        await store.save(record(version=2), 1, active=True)
    assert await store.get("t1") is None


async def test_delete_with_and_without_a_version(store: TaskStore) -> None:
    await store.save(record(), None, active=True)
    with pytest.raises(VersionConflict):
        await store.delete("t1", 5)
    assert await store.delete("t1", 1) is True
    assert await store.delete("t1") is False
    assert await store.get("t1") is None and await store.count() == 0


async def test_concurrent_transitions_never_lose_one(store: TaskStore) -> None:
    """Twenty writers each add their key by read, change, compare-and-set, retry: every
    key ends up in the record and the version counts every write."""
    await store.save(record(), None, active=True)

    async def add(key: str) -> None:
        while True:
            current = await store.get("t1")
            assert current is not None
            try:
                await store.save(
                    current.replace(issued_keys=current.issued_keys | {key}),
                    current.version,
                    active=True,
                )
                return
            except VersionConflict:
                await anyio.lowlevel.checkpoint()

    keys = {f"k{n}" for n in range(20)}
    async with anyio.create_task_group() as tasks:  # anyio's: also run under asyncio
        for key in keys:
            tasks.start_soon(add, key)
    final = await store.get("t1")
    assert final is not None and final.issued_keys == keys and final.version == 21


async def test_the_limit_refuses_new_records_only(store: TaskStore) -> None:
    await store.save(record("a"), None, active=True, limit=2)
    await store.save(record("b"), None, active=True, limit=2)
    with pytest.raises(StoreFull) as caught:
        await store.save(record("c"), None, active=True, limit=2)
    assert caught.value.limit == 2 and await store.get("c") is None
    await store.save(
        record("a").replace(status_message="fine"), 1, active=True, limit=2
    )  # a change
    await store.delete("b")
    await store.save(record("c"), None, active=True, limit=2)  # room again
    assert await store.count() == 2


async def test_a_refusal_says_when_there_may_be_room_again(store: TaskStore) -> None:
    """`StoreFull.retry_at`: for the store's limits its next deadline, for a principal's
    stored tasks that principal's first to expire, for its unfinished ones nothing."""
    soon, later = record("a", ttl_ms=30_000), record("b", ttl_ms=90_000)
    await store.save(later, None, active=True, limits=TaskLimits(max_tasks=2))
    await store.save(soon, None, active=True, limits=TaskLimits(max_tasks=2))
    deadline = await store.next_deadline()
    assert deadline is not None
    with pytest.raises(StoreFull) as caught:
        await store.save(record("c"), None, active=True, limits=TaskLimits(max_tasks=2))
    assert caught.value.retry_at == deadline and not caught.value.per_principal
    with pytest.raises(StoreFull) as caught:
        limits = TaskLimits(max_tasks=10, max_bytes=later.data_bytes + soon.data_bytes)
        await store.save(
            record("c").replace(arguments=Raw(b'"xx"')), None, active=True, limits=limits
        )
    assert caught.value.data and caught.value.retry_at == deadline
    share = TaskLimits(max_tasks=100, max_stored_per_principal=2)
    alice = [
        msgspec.structs.replace(record(f"a{n}", ttl_ms=ttl), principal="alice")
        for n, ttl in ((1, 60_000), (2, 40_000))
    ]
    for made in alice:
        await store.save(made, None, active=True, limits=share)
    with pytest.raises(StoreFull) as caught:
        await store.save(
            msgspec.structs.replace(record("a3"), principal="alice"),
            None,
            active=True,
            limits=share,
        )
    assert caught.value.retry_at == alice[1].expires_at
    with pytest.raises(StoreFull) as caught:
        await store.save(
            msgspec.structs.replace(record("a3"), principal="alice"),
            None,
            active=True,
            limits=TaskLimits(max_tasks=100, max_active_per_principal=2),
        )
    assert caught.value.per_principal and caught.value.retry_at is None


async def test_the_principal_limit_counts_unfinished_tasks_of_that_principal(
    store: TaskStore,
) -> None:
    def owned(task_id: str, principal: str | None) -> TaskRecord:
        return msgspec.structs.replace(record(task_id), principal=principal)

    await store.save(owned("a1", "alice"), None, active=True, principal_limit=2)
    await store.save(owned("a2", "alice"), None, active=True, principal_limit=2)
    with pytest.raises(StoreFull) as caught:
        await store.save(owned("a3", "alice"), None, active=True, principal_limit=2)
    assert caught.value.per_principal and caught.value.limit == 2
    await store.save(owned("b1", "bob"), None, active=True, principal_limit=2)  # bob has his own
    await store.save(owned("n1", None), None, active=True, principal_limit=2)  # and so has nobody
    done = owned("a1", "alice").replace(status=TaskStatus.COMPLETED)
    await store.save(done, 1, active=False)  # a finished task no longer counts
    await store.save(owned("a3", "alice"), None, active=True, principal_limit=2)
    await store.delete("a2")  # nor does a deleted one
    await store.save(owned("a4", "alice"), None, active=True, principal_limit=2)
    with pytest.raises(StoreFull):
        await store.save(owned("a5", "alice"), None, active=True, principal_limit=2)


async def test_the_principal_share_counts_every_stored_task_of_that_principal(
    store: TaskStore,
) -> None:
    def owned(task_id: str, principal: str | None, expires_in: float) -> TaskRecord:
        made = record(task_id, ttl_ms=int(expires_in * 1000))
        return msgspec.structs.replace(made, principal=principal)

    first = owned("a1", "alice", 50)
    await store.save(first, None, active=True, principal_stored_limit=2)
    await store.save(owned("a2", "alice", 90), None, active=True, principal_stored_limit=2)
    done = first.replace(status=TaskStatus.COMPLETED)
    await store.save(done, 1, active=False)  # finished: it still counts until it is deleted
    with pytest.raises(StoreFull) as caught:
        await store.save(owned("a3", "alice", 90), None, active=True, principal_stored_limit=2)
    full = caught.value
    assert full.per_principal and full.stored and full.limit == 2
    assert full.room_at == first.expires_at  # when alice's first stored task expires
    assert await store.get("a3") is None
    await store.save(owned("b1", "bob", 90), None, active=True, principal_stored_limit=2)
    await store.delete("a1")  # expired and deleted: room again
    await store.save(owned("a3", "alice", 90), None, active=True, principal_stored_limit=2)
    with pytest.raises(StoreFull):
        await store.save(owned("a4", "alice", 90), None, active=True, principal_stored_limit=2)


async def test_a_full_share_for_one_principal_refuses_nobody_else(store: TaskStore) -> None:
    async def fill(principal: str, count: int) -> int:
        taken = 0
        for n in range(count):
            made = msgspec.structs.replace(record(f"{principal}{n}"), principal=principal)
            try:
                await store.save(made, None, active=False, limit=8, principal_stored_limit=4)
                taken += 1
            except StoreFull:
                pass
        return taken

    assert await fill("mallory", 20) == 4  # finished at once, and still only her share
    assert await fill("alice", 2) == 2
    assert await fill("bob", 2) == 2


async def test_the_byte_budget_counts_task_data_as_records_change(store: TaskStore) -> None:
    def sized(task_id: str, pad: int) -> TaskRecord:
        return msgspec.structs.replace(record(task_id), arguments=Raw(b'"' + b"x" * pad + b'"'))

    budget = 1000
    await store.save(sized("a", 398), None, active=True, bytes_limit=budget)  # 400 bytes
    await store.save(sized("b", 398), None, active=True, bytes_limit=budget)  # 800
    with pytest.raises(StoreFull) as caught:
        await store.save(sized("c", 398), None, active=True, bytes_limit=budget)
    assert caught.value.data and caught.value.limit == budget and not caught.value.per_principal
    assert await store.get("c") is None
    # A result is task data too: "a" finishing with 150 bytes (and no arguments) is 150.
    done = sized("a", 398).replace(
        status=TaskStatus.COMPLETED, arguments=None, result=Raw(b'"' + b"r" * 148 + b'"')
    )
    await store.save(done, 1, active=False)
    await store.save(sized("c", 398), None, active=True, bytes_limit=budget)  # 150+400+400
    with pytest.raises(StoreFull):
        await store.save(sized("d", 58), None, active=True, bytes_limit=budget)  # 1010
    await store.save(sized("d", 48), None, active=True, bytes_limit=budget)  # 1000: fits
    await store.delete("b")  # deleted: its 400 bytes are free
    await store.save(sized("e", 398), None, active=True, bytes_limit=budget)


async def test_a_key_is_used_once_until_it_may_be_forgotten(store: TaskStore) -> None:
    assert await store.use_once("k1", until=200.0, now=100.0)
    assert not await store.use_once("k1", until=200.0, now=150.0)  # the second time
    assert await store.use_once("k2", until=200.0, now=150.0)  # another key
    assert not await store.use_once("k1", until=300.0, now=199.0)  # still remembered


@pytest.mark.parametrize("kind", ["redis", "sqlite"])
async def test_processes_on_one_store_use_a_key_once_between_them(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    a, b = _two_processes(kind, request, tmp_path)
    try:
        now = time.time()
        taken = [await a.use_once("k", now + 60, now), await b.use_once("k", now + 60, now)]
        assert taken == [True, False]
    finally:
        await a.aclose()
        await b.aclose()


def _two_processes(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[TaskStore, TaskStore]:
    """Two store objects on one shared store, as two processes have them."""
    if kind == "sqlite":
        path = tmp_path / "shared.db"
        return SQLiteTaskStore(path, shared=True), SQLiteTaskStore(path, shared=True)
    url, prefix = request.getfixturevalue("redis_url"), "two" + secrets.token_hex(6)
    return RedisTaskStore(url, prefix=prefix), RedisTaskStore(url, prefix=prefix)


async def test_pop_due_returns_only_records_whose_time_has_come(store: TaskStore) -> None:
    await store.save(record("a", created_at=100.0), None, active=True)  # expires 101
    await store.save(record("b", created_at=105.0), None, active=True)  # expires 106
    await store.save(record("c", ttl_ms=None), None, active=True)  # never
    assert await store.next_deadline() == 101.0
    assert await store.pop_due(100.999) == []
    assert [r.task_id for r in await store.pop_due(101.0)] == ["a"]
    assert await store.pop_due(101.0) == []  # each record comes due once
    assert await store.get("a") is not None  # still stored until the core says delete
    # "a" was handed out at 101 and never deleted (its process died, say): it comes due
    # again once the claim runs out, after "b".
    assert [r.task_id for r in await store.pop_due(10_000)] == ["b", "a"]
    assert await store.next_deadline() == 10_000 + EXPIRY_CLAIM_SECONDS


async def test_pop_due_skips_deleted_records_and_honours_the_limit(store: TaskStore) -> None:
    for n in range(5):
        await store.save(record(f"t{n}", created_at=100.0 + n), None, active=True)
    await store.delete("t0")
    assert [r.task_id for r in await store.pop_due(1000, limit=2)] == ["t1", "t2"]
    assert [r.task_id for r in await store.pop_due(1000)] == ["t3", "t4"]


async def test_a_new_expiry_is_indexed_anew(store: TaskStore) -> None:
    first = record()
    await store.save(first, None, active=True)
    longer = first.replace(ttl_ms=5000)
    await store.save(longer, 1, active=True)
    assert await store.pop_due(101.0) == []
    assert await store.pop_due(105.0) == [longer]


async def test_a_lease_is_held_renewed_and_released(store: TaskStore) -> None:
    await store.save(record(), None, active=True)
    assert await store.lease_holder("t1", 0.0) is None
    await store.claim("t1", 50.0)
    assert await store.lease_holder("t1", 10.0) == store.origin
    await store.renew(["t1"], 80.0)
    assert await store.lease_holder("t1", 60.0) == store.origin
    await store.release("t1")
    assert await store.lease_holder("t1", 60.0) is None
    assert await store.lapsed(1000.0) == []  # released leases never lapse


async def test_a_new_record_can_take_its_lease_as_it_is_written(store: TaskStore) -> None:
    await store.save(record(), None, active=True, lease_until=50.0)
    assert await store.lease_holder("t1", 10.0) == store.origin


async def test_a_terminal_save_drops_the_lease(store: TaskStore) -> None:
    first = record()
    await store.save(first, None, active=True, lease_until=50.0)
    waiting = first.replace(status=TaskStatus.INPUT_REQUIRED)
    await store.save(waiting, 1, active=True)
    assert await store.lease_holder("t1", 10.0) == store.origin  # still running
    await store.save(waiting.replace(status=TaskStatus.CANCELLED), 2, active=False)
    assert await store.lease_holder("t1", 10.0) is None
    assert await store.lapsed(1000.0) == []  # nothing left to take over


async def test_the_store_takes_active_from_the_caller_not_the_status(store: TaskStore) -> None:
    """The store reads no status: `active` alone decides what counts toward the principal
    limit and when the lease goes."""
    finished_looking = msgspec.structs.replace(record("a"), status=TaskStatus.COMPLETED)
    await store.save(finished_looking, None, active=True, principal_limit=1, lease_until=50.0)
    assert await store.lease_holder("a", 10.0) == store.origin  # kept: still active
    with pytest.raises(StoreFull):  # and it counts
        await store.save(record("b"), None, active=True, principal_limit=1)
    await store.save(record("c"), None, active=False, lease_until=50.0)  # working, yet done
    assert await store.lease_holder("c", 10.0) is None
    await store.save(finished_looking.replace(status_message="x"), 1, active=False)
    await store.save(record("b"), None, active=True, principal_limit=1)  # room again


async def test_a_refused_write_takes_no_lease(store: TaskStore) -> None:
    await store.save(record("a"), None, active=True, limit=1)
    with pytest.raises(StoreFull):
        await store.save(record("b"), None, active=True, limit=1, lease_until=50.0)
    assert await store.lease_holder("b", 10.0) is None


async def test_deleting_a_record_drops_its_lease(store: TaskStore) -> None:
    await store.save(record(), None, active=True)
    await store.claim("t1", 50.0)
    await store.delete("t1")
    assert await store.lease_holder("t1", 10.0) is None
    assert await store.lapsed(1000.0) == []


async def test_the_first_proposed_key_is_the_shared_key(store: TaskStore) -> None:
    first = await store.shared_key(b"k" * 32)
    again = await store.shared_key(b"z" * 32)
    if store.shared or isinstance(store, SQLiteTaskStore):  # kept: later proposals lose
        assert first == again == b"k" * 32
    else:  # one process, nothing to share
        assert (first, again) == (b"k" * 32, b"z" * 32)


@pytest.mark.parametrize("kind", ["redis", "sqlite"])
async def test_processes_on_one_store_share_the_key(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    one, other = _two_processes(kind, request, tmp_path)
    assert await one.shared_key(b"a" * 32) == await other.shared_key(b"b" * 32) == b"a" * 32
    await one.aclose()
    await other.aclose()


async def test_sqlite_counts_task_data_across_a_reopen(tmp_path: Path) -> None:
    big = msgspec.structs.replace(record("a"), arguments=Raw(b'"' + b"x" * 398 + b'"'))
    first = SQLiteTaskStore(tmp_path / "tasks.db")
    await first.save(big, None, active=True)
    await first.aclose()
    again = SQLiteTaskStore(tmp_path / "tasks.db")
    try:
        with pytest.raises(StoreFull):  # 400 stored, 400 more: over 700
            await again.save(
                msgspec.structs.replace(big, task_id="b"), None, active=True, bytes_limit=700
            )
        await again.delete("a")
        await again.save(
            msgspec.structs.replace(big, task_id="b"), None, active=True, bytes_limit=700
        )
    finally:
        await again.aclose()


async def test_sqlite_keeps_its_key_across_a_reopen(tmp_path: Path) -> None:
    store = SQLiteTaskStore(tmp_path / "k.db")
    assert await store.shared_key(b"a" * 32) == b"a" * 32
    await store.aclose()
    reopened = SQLiteTaskStore(tmp_path / "k.db")
    assert await reopened.shared_key(b"b" * 32) == b"a" * 32
    await reopened.aclose()


def test_records_round_trip_through_json() -> None:
    done = record().replace(status=TaskStatus.COMPLETED, result=None, status_message="ok")
    assert decode_record(encode_record(done)) == done


async def test_memory_expiry_cost_is_proportional_to_what_expired() -> None:
    store = MemoryTaskStore()
    for n in range(10_000):
        await store.save(record(f"t{n}", created_at=100.0 + n), None, active=True)
    heap = store._expiry_heap
    popped = {r.task_id for r in await store.pop_due(104.0)}
    assert len(popped) == 4
    # Popped exactly the expired entries, touched no others; each came back as its claim.
    assert len(heap) == 10_000 - 4 + 4
    claims = {task_id for due, task_id in heap if due == 104.0 + EXPIRY_CLAIM_SECONDS}
    assert popped <= claims


async def test_a_memory_lease_never_lapses() -> None:
    store = MemoryTaskStore()
    await store.claim("t1", 5.0)
    assert await store.lapsed(1e12) == []  # one process: its leases end with it
