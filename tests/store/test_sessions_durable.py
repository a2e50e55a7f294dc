"""Sessions where each durable store keeps them: Redis's own expiry and two processes (two
store objects, sharing nothing but the server) on one Redis, the limits holding across
them; the `session` signal between them; a SQLite file's purge of expired sessions, its
sessions across a reopen, and a file made before sessions (no tables for them yet).
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
import trio
from redis_server import free_port

from mcp_tasks.store import (
    RedisTaskStore,
    SessionLimits,
    SessionRecord,
    Signal,
    SQLiteTaskStore,
    StoreFull,
    StoreUnavailable,
)
from mcp_tasks.store._sqlite_sessions import PURGE_BATCH

from .test_contract import record

LIMITS = SessionLimits(max_sessions=1000)


def session(session_id: str, principal: str | None = "alice") -> SessionRecord:
    return SessionRecord(session_id=session_id, principal=principal, state=b"{}")


@pytest.fixture
async def two(redis_url: str) -> AsyncIterator[tuple[RedisTaskStore, RedisTaskStore]]:
    """Two "processes": two store objects on one server and prefix."""
    prefix = "t" + secrets.token_hex(6)
    first, second = (
        RedisTaskStore(redis_url, prefix=prefix),
        RedisTaskStore(redis_url, prefix=prefix),
    )
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()


async def wait_until_gone(client: redis.Redis, pattern: str, seconds: float = 10.0) -> None:
    """Poll until no key matches `pattern` (Redis expired them), failing after `seconds`."""
    with trio.fail_after(seconds):
        while await trio.to_thread.run_sync(lambda: client.keys(pattern)):
            await trio.sleep(0.02)


# --- Redis -------------------------------------------------------------------------------


async def test_redis_forgets_an_idle_session_by_itself(
    two: tuple[RedisTaskStore, RedisTaskStore], redis_url: str
) -> None:
    one, _ = two
    sessions = one.sessions
    now = time.time()
    limits = SessionLimits(max_sessions=10, max_per_principal=1)
    await sessions.open_session(session("s1"), limits=limits, idle_seconds=0.3, now=now)
    await sessions.open_session(session("s2", None), limits=limits, idle_seconds=0.3, now=now)
    assert await sessions.append_event("s1", "get", b"kept") == 1
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.pttl(f"{one.prefix}:session:s1") > 0
        # Nothing deletes them: Redis's own expiry does, sorted sets and events included.
        await wait_until_gone(client, f"{one.prefix}:*")
    finally:
        client.close()
    # By the callers' clock they would still be live: Redis's expiry is what ended them.
    assert await sessions.get_session("s1", idle_seconds=0.3, now=now) is None
    assert await sessions.events_after("s1", "get", 0) is None
    await sessions.open_session(session("s3"), limits=limits, idle_seconds=10, now=now)


async def test_use_starts_redis_s_idle_time_again(
    two: tuple[RedisTaskStore, RedisTaskStore], redis_url: str
) -> None:
    one, _ = two
    now = time.time()
    await one.sessions.open_session(session("s1"), limits=LIMITS, idle_seconds=0.5, now=now)
    client = redis.Redis.from_url(redis_url)
    key = f"{one.prefix}:session:s1"
    try:
        assert 0 < client.pttl(key) <= 500
        assert await one.sessions.get_session("s1", idle_seconds=60, now=now) is not None
        assert client.pttl(key) > 50_000
        record = SessionRecord(session_id="s1", principal="alice", state=b"2", version=2)
        await one.sessions.save_session(record, 1, idle_seconds=120, now=now)
        assert client.pttl(key) > 110_000
        assert client.pttl(f"{one.prefix}:sessions:of:alice") > 110_000
    finally:
        client.close()


async def test_two_processes_serve_the_same_sessions(
    two: tuple[RedisTaskStore, RedisTaskStore],
) -> None:
    one, other = two
    await one.sessions.open_session(session("s1"), limits=LIMITS, idle_seconds=10, now=1000)
    found = await other.sessions.get_session("s1", idle_seconds=10, now=1001)
    assert found == session("s1")
    saved = SessionRecord(session_id="s1", principal="alice", state=b"two", version=2)
    await other.sessions.save_session(saved, 1, idle_seconds=10, now=1002)
    assert await one.sessions.get_session("s1", idle_seconds=10, now=1003) == saved
    assert await one.sessions.append_event("s1", "get", b"from one") == 1
    assert await other.sessions.append_event("s1", "get", b"from other") == 2
    assert await other.sessions.events_after("s1", "get", 0) == [
        (1, b"from one"),
        (2, b"from other"),
    ]
    assert await one.sessions.close_session("s1")
    assert await other.sessions.get_session("s1", idle_seconds=10, now=1004) is None


async def test_a_session_is_read_after_redis_forgot_the_scripts(
    two: tuple[RedisTaskStore, RedisTaskStore], redis_url: str
) -> None:
    one, _ = two
    await one.sessions.open_session(session("s1"), limits=LIMITS, idle_seconds=10, now=1000)
    client = redis.Redis.from_url(redis_url)
    try:
        client.script_flush()  # as after a restart of Redis
    finally:
        client.close()
    assert await one.sessions.get_session("s1", idle_seconds=10, now=1001) == session("s1")
    assert await one.sessions.get_session("s1", idle_seconds=10, now=1002) == session("s1")


@pytest.mark.parametrize("whose", ["principal", "store"])
async def test_the_limits_hold_across_processes(
    two: tuple[RedisTaskStore, RedisTaskStore], whose: str
) -> None:
    if whose == "principal":
        limits = SessionLimits(max_sessions=1000, max_per_principal=5)
    else:
        limits = SessionLimits(max_sessions=5)
    opened: list[str] = []
    refused: list[StoreFull] = []

    async def open_one(store: RedisTaskStore, session_id: str) -> None:
        try:
            await store.sessions.open_session(
                session(session_id), limits=limits, idle_seconds=10, now=1000
            )
        except StoreFull as full:
            refused.append(full)
        else:
            opened.append(session_id)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(open_one, two[n % 2], f"s{n}")
    assert len(opened) == 5 and len(refused) == 15
    assert all(full.per_principal == (whose == "principal") for full in refused)


async def test_a_session_signal_carries_its_message_between_processes(
    two: tuple[RedisTaskStore, RedisTaskStore], redis_url: str
) -> None:
    one, other = two
    assert one.coordination.signals is not None and other.coordination.signals is not None
    message = b'{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}\x00\xff'
    sent = Signal("session", "s1", one.coordination.origin, data=message)
    old = b'{"kind":"cancel","task_id":"t1","origin":"redis_old"}'  # before `data` was
    client = redis.Redis.from_url(redis_url)
    try:
        async with other.coordination.signals.listen() as signals:
            await one.coordination.signals.publish(sent)
            await trio.to_thread.run_sync(lambda: client.publish(f"{one.prefix}:signals", old))
            with trio.fail_after(10):
                first = await signals.__anext__()
                second = await signals.__anext__()
    finally:
        client.close()
    assert first == sent and first.data == message
    assert second == Signal("cancel", "t1", "redis_old") and second.data is None


async def test_a_redis_out_of_reach_is_named_without_its_password() -> None:
    url = f"redis://user:s3cret-pw@127.0.0.1:{free_port()}/0?password=s3cret-pw"
    store = RedisTaskStore(url)
    calls = [
        store.sessions.open_session(session("s1"), limits=LIMITS, idle_seconds=1, now=1000),
        store.sessions.get_session("s1", idle_seconds=1, now=1000),
        store.sessions.events_after("s1", "get", 0),
    ]
    for call in calls:
        with pytest.raises(StoreUnavailable) as caught:
            await call
        assert "s3cret-pw" not in str(caught.value) and "***@127.0.0.1" in str(caught.value)
        assert "s3cret-pw" not in repr(caught.value.__cause__)


# --- SQLite ------------------------------------------------------------------------------


async def test_sqlite_purges_expired_sessions_a_batch_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SQLiteTaskStore(path)
    try:
        sessions = store.sessions
        for n in range(PURGE_BATCH + 50):
            await sessions.open_session(session(f"old{n}"), limits=LIMITS, idle_seconds=1, now=1000)
            await sessions.append_event(f"old{n}", "get", b"event")
        small = SessionLimits(max_sessions=2, max_per_principal=2)
        await sessions.open_session(session("new1"), limits=small, idle_seconds=10, now=2000)
        assert _rows(path, "sessions") == 50 + 1  # one batch purged, events with them
        assert _rows(path, "session_events") == 50
        # The 50 expired sessions left are not counted.
        await sessions.open_session(session("new2"), limits=small, idle_seconds=10, now=2000)
        with pytest.raises(StoreFull) as full:
            await sessions.open_session(session("new3"), limits=small, idle_seconds=10, now=2000)
        assert not full.value.per_principal and full.value.retry_at == 2010
        assert await sessions.get_session("old149", idle_seconds=1, now=2000) is None
    finally:
        await store.aclose()


async def test_sqlite_keeps_sessions_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SQLiteTaskStore(path)
    limits = SessionLimits(max_sessions=1)
    await store.sessions.open_session(session("s1"), limits=limits, idle_seconds=10, now=1000)
    await store.sessions.append_event("s1", "get", b"one")
    await store.aclose()
    store = SQLiteTaskStore(path)
    try:
        assert await store.sessions.get_session("s1", idle_seconds=10, now=1005) == session("s1")
        assert await store.sessions.events_after("s1", "get", 0) == [(1, b"one")]
        with pytest.raises(StoreFull):  # counted after the reopen too
            await store.sessions.open_session(
                session("s2"), limits=limits, idle_seconds=10, now=1006
            )
    finally:
        await store.aclose()


async def test_sqlite_adds_sessions_to_a_file_made_before_them(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SQLiteTaskStore(path)
    await store.save(record(), None, active=True)
    await store.aclose()
    with sqlite3.connect(path) as db:  # the file as the previous version left it
        db.execute("DROP TABLE session_events")
        db.execute("DROP TABLE sessions")
    store = SQLiteTaskStore(path)
    try:
        assert await store.get("t1") == record()
        await store.sessions.open_session(session("s1"), limits=LIMITS, idle_seconds=10, now=1000)
        assert await store.sessions.get_session("s1", idle_seconds=10, now=1001) is not None
    finally:
        await store.aclose()


def _rows(path: Path, table: str) -> int:
    with sqlite3.connect(path) as db:
        (count,) = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
    return int(count)
