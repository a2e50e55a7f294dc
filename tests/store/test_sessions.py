"""The sessions contract (`SessionRecords`), run unchanged on every store: memory, SQLite (a
real file) and Redis (a real redis-server): sessions in and out, compare-and-set, the idle
time and its renewal, the two limits, the events of each stream.

Times are the callers' (`now`), as the stores take them; Redis's own expiry, the SQLite
file's purging and migration, and two processes on one Redis are in
test_sessions_durable.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from mcp_tasks.core import VersionConflict
from mcp_tasks.store import (
    MemorySessions,
    MemoryTaskStore,
    SessionLimits,
    SessionRecord,
    SessionRecords,
    StoreFull,
    TaskStore,
    sessions_of,
)

from .test_contract import KINDS, _make

IDLE = 10.0
ROOMY = SessionLimits(max_sessions=100)


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    made = _make(request, tmp_path)
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture
def sessions(store: TaskStore) -> SessionRecords:
    return sessions_of(store)


def session(
    session_id: str = "s1", principal: str | None = "alice", state: bytes = b"{}", version: int = 1
) -> SessionRecord:
    return SessionRecord(session_id=session_id, principal=principal, state=state, version=version)


async def opened(
    sessions: SessionRecords,
    session_id: str = "s1",
    principal: str | None = "alice",
    *,
    limits: SessionLimits = ROOMY,
    now: float = 1000.0,
) -> SessionRecord:
    record = session(session_id, principal)
    await sessions.open_session(record, limits=limits, idle_seconds=IDLE, now=now)
    return record


async def test_a_session_reads_back_exactly(sessions: SessionRecords) -> None:
    state = b'{"v":"2025-11-25"}\x00\xff\n'
    for principal in ("alice", None, "", "é:x"):
        record = session(f"s-{principal}", principal, state)
        await sessions.open_session(record, limits=ROOMY, idle_seconds=IDLE, now=1000.0)
        assert await sessions.get_session(record.session_id, idle_seconds=IDLE, now=1001.0) == (
            record
        )
    assert await sessions.get_session("unknown", idle_seconds=IDLE, now=1001.0) is None


async def test_an_id_is_opened_once(sessions: SessionRecords) -> None:
    await opened(sessions)
    with pytest.raises(VersionConflict):
        await opened(sessions, principal="bob")
    found = await sessions.get_session("s1", idle_seconds=IDLE, now=1001.0)
    assert found is not None and found.principal == "alice"


async def test_a_save_needs_the_stored_version(sessions: SessionRecords) -> None:
    first = await opened(sessions)
    second = session(state=b"two", version=2)
    await sessions.save_session(second, 1, idle_seconds=IDLE, now=1001.0)
    assert await sessions.get_session("s1", idle_seconds=IDLE, now=1002.0) == second
    with pytest.raises(VersionConflict) as stale:
        await sessions.save_session(
            msgspec.structs.replace(first, version=2), 1, idle_seconds=IDLE, now=1003.0
        )
    assert stale.value.found == 2
    assert await sessions.get_session("s1", idle_seconds=IDLE, now=1004.0) == second


async def test_a_save_of_a_closed_or_expired_session_conflicts(sessions: SessionRecords) -> None:
    await opened(sessions, "closed")
    assert await sessions.close_session("closed")
    with pytest.raises(VersionConflict) as closed:
        await sessions.save_session(session("closed", version=2), 1, idle_seconds=IDLE, now=1001)
    assert closed.value.found is None
    await opened(sessions, "idle")
    with pytest.raises(VersionConflict) as expired:
        await sessions.save_session(session("idle", version=2), 1, idle_seconds=IDLE, now=1010)
    assert expired.value.found is None
    assert await sessions.get_session("idle", idle_seconds=IDLE, now=1000.0) is None


async def test_a_save_keeps_the_principal_it_was_opened_for(sessions: SessionRecords) -> None:
    await opened(sessions, principal="alice")
    for other in ("bob", None):
        with pytest.raises(ValueError, match="another principal"):
            record = session(principal=other, version=2)
            await sessions.save_session(record, 1, idle_seconds=IDLE, now=1001.0)
    found = await sessions.get_session("s1", idle_seconds=IDLE, now=1002.0)
    assert found is not None and found.principal == "alice" and found.version == 1


async def test_a_session_lives_idle_seconds_past_its_last_use(sessions: SessionRecords) -> None:
    await opened(sessions, now=1000.0)
    assert await sessions.get_session("s1", idle_seconds=IDLE, now=1009.0) is not None
    assert await sessions.get_session("s1", idle_seconds=IDLE, now=1018.0) is not None  # renewed
    await sessions.save_session(session(version=2), 1, idle_seconds=IDLE, now=1027.0)
    assert await sessions.get_session("s1", idle_seconds=IDLE, now=1036.5) is not None
    assert await sessions.get_session("s1", idle_seconds=IDLE, now=1046.5) is None  # idle 10 s
    assert await sessions.get_session("s1", idle_seconds=IDLE, now=1036.6) is None  # gone for good


async def test_closing_ends_the_session_and_its_events(sessions: SessionRecords) -> None:
    await opened(sessions)
    assert await sessions.append_event("s1", "get", b"one") == 1
    assert await sessions.close_session("s1") is True
    assert await sessions.close_session("s1") is False
    assert await sessions.close_session("unknown") is False
    assert await sessions.get_session("s1", idle_seconds=IDLE, now=1001.0) is None
    assert await sessions.events_after("s1", "get", 0) is None
    assert await sessions.append_event("s1", "get", b"two") == 0
    await opened(sessions, now=1002.0)  # the id is free again, its events gone
    assert await sessions.events_after("s1", "get", 0) == []


async def test_a_principal_holds_its_limit_of_sessions(sessions: SessionRecords) -> None:
    limits = SessionLimits(max_sessions=100, max_per_principal=2)
    for principal in ("alice", "bob", None):
        await opened(sessions, f"{principal}-1", principal, limits=limits, now=1000.0)
        await opened(sessions, f"{principal}-2", principal, limits=limits, now=1001.0)
        with pytest.raises(StoreFull) as full:
            await opened(sessions, f"{principal}-3", principal, limits=limits, now=1002.0)
        assert full.value.per_principal and full.value.limit == 2
        assert full.value.retry_at == 1000.0 + IDLE  # its first session's end, unless used
        assert "sessions of this principal" in str(full.value)
    await opened(sessions, "anyone", "carol", limits=SessionLimits(max_sessions=100))


async def test_the_store_holds_its_limit_of_sessions(sessions: SessionRecords) -> None:
    for per_principal in (None, 5):
        limits = SessionLimits(max_sessions=3, max_per_principal=per_principal)
        await opened(sessions, "a", "alice", limits=limits, now=1000.0)
        await opened(sessions, "b", "bob", limits=limits, now=1001.0)
        await opened(sessions, "c", None, limits=limits, now=1002.0)
        with pytest.raises(StoreFull) as full:
            await opened(sessions, "d", "dave", limits=limits, now=1003.0)
        assert not full.value.per_principal and full.value.limit == 3
        assert full.value.retry_at == 1000.0 + IDLE
        assert str(full.value) == "the store holds its limit of 3 live sessions"
        for session_id in "abc":
            assert await sessions.close_session(session_id)


async def test_expired_and_closed_sessions_are_not_counted(sessions: SessionRecords) -> None:
    both = SessionLimits(max_sessions=2, max_per_principal=2)
    await opened(sessions, "old-1", limits=both, now=1000.0)
    await opened(sessions, "old-2", limits=both, now=1001.0)
    await opened(sessions, "new-1", limits=both, now=1010.0)  # old-1 expired at 1010
    with pytest.raises(StoreFull):
        await opened(sessions, "new-2", limits=both, now=1010.5)
    assert await sessions.close_session("old-2")
    await opened(sessions, "new-2", limits=both, now=1010.5)
    assert await sessions.get_session("old-1", idle_seconds=IDLE, now=1010.5) is None


async def test_a_session_used_since_it_was_opened_is_counted_to_its_new_end(
    sessions: SessionRecords,
) -> None:
    limits = SessionLimits(max_sessions=2)
    await opened(sessions, "a", limits=limits, now=1000.0)
    await opened(sessions, "b", limits=limits, now=1000.0)
    assert await sessions.get_session("a", idle_seconds=IDLE, now=1008.0) is not None
    await opened(sessions, "c", limits=limits, now=1012.0)  # b ended at 1010, a at 1018
    with pytest.raises(StoreFull) as full:
        await opened(sessions, "d", limits=limits, now=1013.0)
    assert full.value.retry_at == 1018.0
    assert await sessions.close_session("a")
    await opened(sessions, "d", limits=limits, now=1013.0)
    with pytest.raises(StoreFull) as full:
        await opened(sessions, "e", limits=limits, now=1014.0)
    assert full.value.retry_at == 1022.0  # c's end: a's closed


async def test_a_shorter_idle_time_ends_a_session_sooner(sessions: SessionRecords) -> None:
    two = SessionLimits(max_sessions=2)
    await opened(sessions, "first", limits=two, now=1000.0)  # to 1010
    await opened(sessions, "a", limits=two, now=1001.0)  # to 1011
    assert await sessions.get_session("a", idle_seconds=2.0, now=1002.0) is not None  # to 1004
    await opened(sessions, "b", limits=two, now=1005.0)
    assert await sessions.get_session("a", idle_seconds=IDLE, now=1005.0) is None


async def test_events_are_numbered_in_each_stream(sessions: SessionRecords) -> None:
    await opened(sessions)
    assert [await sessions.append_event("s1", "get", b"g%d" % n) for n in range(3)] == [1, 2, 3]
    assert await sessions.append_event("s1", "post:7", b"p0") == 1
    assert await sessions.events_after("s1", "get", 0) == [(1, b"g0"), (2, b"g1"), (3, b"g2")]
    assert await sessions.events_after("s1", "get", 2) == [(3, b"g2")]
    assert await sessions.events_after("s1", "get", 3) == []
    assert await sessions.events_after("s1", "post:7", 0) == [(1, b"p0")]
    assert await sessions.events_after("s1", "never", 0) == []
    assert await sessions.events_after("unknown", "get", 0) is None
    assert await sessions.append_event("unknown", "get", b"x") == 0


async def test_only_the_last_max_events_are_kept(sessions: SessionRecords) -> None:
    await opened(sessions)
    for n in range(1, 6):
        data = b"\x00\xff event %d" % n
        assert await sessions.append_event("s1", "get", data, max_events=3) == n
    kept = [(n, b"\x00\xff event %d" % n) for n in (3, 4, 5)]
    assert await sessions.events_after("s1", "get", 2) == kept
    assert await sessions.events_after("s1", "get", 4) == kept[2:]
    assert await sessions.events_after("s1", "get", 1) is None  # 2 was dropped: a gap
    assert await sessions.events_after("s1", "get", 0) is None
    assert await sessions.append_event("s1", "get", b"six", max_events=1) == 6
    assert await sessions.events_after("s1", "get", 5) == [(6, b"six")]
    assert await sessions.events_after("s1", "get", 4) is None
    with pytest.raises(ValueError, match="max_events"):
        await sessions.append_event("s1", "get", b"none", max_events=0)


def test_a_store_without_sessions_keeps_them_in_this_process() -> None:
    class Custom:
        pass

    custom, other = Custom(), Custom()
    assert isinstance(sessions_of(custom), MemorySessions)
    assert sessions_of(custom) is sessions_of(custom)  # the same at every call
    assert sessions_of(other) is not sessions_of(custom)
    memory = MemoryTaskStore()
    assert sessions_of(memory) is memory.sessions
