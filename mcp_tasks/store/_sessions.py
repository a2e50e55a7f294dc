"""Sessions of 2025 clients over HTTP (`Mcp-Session-Id`), kept beside the task records so
that every process on a store serves every session: no sticky sessions.

A session is a small opaque record (`SessionRecord.state`: the runtime's encoding of what
`initialize` negotiated and the log level) bound to the principal that opened it. It lives
`idle_seconds` past its last use: each `get_session` and `save_session` starts that time
again, and a session not used for that long is gone (as if closed). A principal holds at
most `SessionLimits.max_per_principal` live sessions, the store `max_sessions`: opening one
more raises `StoreFull`, checked in the same atomic step as the write, across processes.

Each session also keeps the last events of its SSE streams (`append_event`,
`events_after`), so a client that reconnects with `Last-Event-ID`, to any process, is sent
what it missed: at most `max_events` a stream, the oldest dropped first.

All times are wall-clock seconds (`time.time()`), given by the caller. A session's
principal is bound when it is opened: a save naming another one is refused (`ValueError`).
Where each store keeps them: docs/stores.md, "Sessions of 2025 clients".
"""

from __future__ import annotations

import heapq
import itertools
import weakref
from typing import Final, Protocol

import msgspec

from ..core import VersionConflict
from ._base import StoreFull

__all__ = [
    "MAX_EVENTS",
    "MemorySessions",
    "SessionLimits",
    "SessionRecord",
    "SessionRecords",
    "sessions_of",
]

MAX_EVENTS: Final = 256
"""Events kept for each SSE stream of a session, by default."""


class SessionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One session as the store keeps it. `state` is opaque to the store."""

    session_id: str
    principal: str | None
    state: bytes
    version: int = 1
    """Bumped by each `save_session` (compare-and-set, as task records are)."""


class SessionLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The limits a new session is opened under."""

    max_sessions: int
    """Live sessions the store may hold at once."""
    max_per_principal: int | None = None
    """Live sessions one principal may hold at once (None: no such limit)."""


class SessionRecords(Protocol):
    """The sessions half of a store (`store.sessions`)."""

    async def open_session(
        self, record: SessionRecord, *, limits: SessionLimits, idle_seconds: float, now: float
    ) -> None:
        """Store a new session (its id must be new: `VersionConflict` otherwise), live
        until `now + idle_seconds`. `StoreFull` (`per_principal` when it is the
        principal's limit; `retry_at` when the first of the sessions counted expires,
        unless used again) when `limits` are reached, counting only live sessions, in the
        same atomic step as the write."""
        ...

    async def get_session(
        self, session_id: str, *, idle_seconds: float, now: float
    ) -> SessionRecord | None:
        """The live session, its idle time started again; None if unknown or expired."""
        ...

    async def save_session(
        self, record: SessionRecord, expected_version: int, *, idle_seconds: float, now: float
    ) -> None:
        """Replace the session's state if it is at `expected_version` and live
        (`VersionConflict` otherwise: reload, or it is gone), its idle time started again;
        `record.version` is the new one. `ValueError` if `record.principal` is not the
        session's."""
        ...

    async def close_session(self, session_id: str) -> bool:
        """End the session and its events now. False if it was not live."""
        ...

    async def append_event(
        self, session_id: str, stream: str, data: bytes, *, max_events: int = MAX_EVENTS
    ) -> int:
        """Keep `data` as the next event of the session's `stream` and return its number
        (1, 2, ...: the order within the stream). Only the last `max_events` (at least 1:
        `ValueError` otherwise) are kept. 0 if the session is not live (nothing is kept).
        The session's idle time is not started again (its requests do that)."""
        ...

    async def events_after(
        self, session_id: str, stream: str, after: int
    ) -> list[tuple[int, bytes]] | None:
        """The kept events of `stream` numbered above `after`, oldest first; None when
        some of those were dropped already (or the session is gone): resuming there
        would skip events."""
        ...


def sessions_full(
    limit: int, *, per_principal: bool = False, retry_at: float | None = None
) -> StoreFull:
    """The `StoreFull` a session refused at `limit` raises, its message about sessions."""
    full = StoreFull(limit, per_principal=per_principal, retry_at=retry_at)
    whose = "live sessions of this principal" if per_principal else "live sessions"
    full.args = (f"the store holds its limit of {limit} {whose}",)
    return full


def check_max_events(max_events: int) -> None:
    """`ValueError` unless `max_events` keeps at least the last event."""
    if max_events < 1:
        raise ValueError(f"max_events must be at least 1, not {max_events}")


def another_principal(record: SessionRecord) -> ValueError:
    """The error a save of `record` naming another principal than its session's raises."""
    return ValueError(f"session {record.session_id!r} belongs to another principal")


def check_principal(record: SessionRecord, bound: str | None) -> None:
    """`ValueError` if `record` names another principal than the session's (`bound`)."""
    if record.principal != bound:
        raise another_principal(record)


class _Session:
    __slots__ = ("expires_at", "queued_at", "record", "streams")

    def __init__(self, record: SessionRecord, expires_at: float) -> None:
        self.record = record
        self.expires_at = expires_at
        self.queued_at = expires_at
        """The time of its entry in `MemorySessions._ends` (others are stale)."""
        self.streams: dict[str, tuple[int, list[tuple[int, bytes]]]] = {}
        """Stream -> (its last event's number, the events kept, oldest first)."""


class MemorySessions:
    """Sessions in this process's memory (the memory store's, and any store without
    sessions of its own: then only this process serves them).

    A heap holds one entry a session (`queued_at`), at or before its end: a use that starts
    its idle time again pushes nothing (unless its end comes sooner, a shorter idle time),
    and an entry that comes due for a session used since is pushed again at the session's
    new end. So every session past its end is found by the
    opening that comes after, at O(log n) an entry, and what is left is what the limits
    count."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._owned: dict[str | None, set[str]] = {}
        """Principal -> the ids of its sessions."""
        self._ends: list[tuple[float, int, _Session]] = []
        self._pushed = itertools.count()

    def _live(self, session_id: str, now: float) -> _Session | None:
        found = self._sessions.get(session_id)
        if found is not None and found.expires_at <= now:
            self._drop(found)
            return None
        return found

    def _drop(self, session: _Session) -> None:
        """Forget `session` (its heap entry is skipped when it comes due)."""
        session_id, principal = session.record.session_id, session.record.principal
        del self._sessions[session_id]
        owned = self._owned[principal]
        owned.discard(session_id)
        if not owned:
            del self._owned[principal]

    def _queue(self, session: _Session) -> None:
        """Give `session` its entry at its end (an entry it had is stale from now on)."""
        session.queued_at = session.expires_at
        heapq.heappush(self._ends, (session.expires_at, next(self._pushed), session))

    def _renew(self, session: _Session, expires_at: float) -> None:
        session.expires_at = expires_at
        if expires_at < session.queued_at:  # sooner (a shorter idle time): queued again
            self._queue(session)

    def _purge(self, now: float) -> None:
        """Forget every session past its end; then the heap's first entry is the end of
        the live session that ends first."""
        ends = self._ends
        while ends:
            end, _, session = ends[0]
            entry = self._sessions.get(session.record.session_id) is session
            entry = entry and end == session.queued_at
            if entry and end == session.expires_at and end > now:
                return
            heapq.heappop(ends)
            if not entry:
                continue  # closed, found expired or queued again already
            if session.expires_at <= now:
                self._drop(session)
            else:  # used since: its end is later
                self._queue(session)

    async def open_session(
        self, record: SessionRecord, *, limits: SessionLimits, idle_seconds: float, now: float
    ) -> None:
        self._purge(now)
        if record.session_id in self._sessions:
            raise VersionConflict(record.session_id, None, 1)
        if len(self._sessions) >= limits.max_sessions:
            first = self._ends[0][0] if self._ends else None
            raise sessions_full(limits.max_sessions, retry_at=first)
        owned = self._owned.get(record.principal, set())
        most = limits.max_per_principal
        if most is not None and len(owned) >= most:
            first = min((self._sessions[key].expires_at for key in owned), default=None)
            raise sessions_full(most, per_principal=True, retry_at=first)
        session = _Session(record, now + idle_seconds)
        self._sessions[record.session_id] = session
        self._owned.setdefault(record.principal, set()).add(record.session_id)
        self._queue(session)

    async def get_session(
        self, session_id: str, *, idle_seconds: float, now: float
    ) -> SessionRecord | None:
        found = self._sessions.get(session_id)  # `_live` and `_renew`, inline: every request
        if found is None:
            return None
        if found.expires_at <= now:
            self._drop(found)
            return None
        found.expires_at = expires_at = now + idle_seconds
        if expires_at < found.queued_at:
            self._queue(found)
        return found.record

    async def save_session(
        self, record: SessionRecord, expected_version: int, *, idle_seconds: float, now: float
    ) -> None:
        found = self._live(record.session_id, now)
        stored = None if found is None else found.record.version
        if found is None or stored != expected_version:
            raise VersionConflict(record.session_id, expected_version, stored)
        check_principal(record, found.record.principal)
        found.record = record
        self._renew(found, now + idle_seconds)

    async def close_session(self, session_id: str) -> bool:
        found = self._sessions.get(session_id)
        if found is not None:
            self._drop(found)
        return found is not None

    async def append_event(
        self, session_id: str, stream: str, data: bytes, *, max_events: int = MAX_EVENTS
    ) -> int:
        check_max_events(max_events)
        found = self._sessions.get(session_id)
        if found is None:
            return 0
        last, kept = found.streams.get(stream, (0, []))
        number = last + 1
        kept.append((number, data))
        if len(kept) > max_events:
            del kept[: len(kept) - max_events]
        found.streams[stream] = (number, kept)
        return number

    async def events_after(
        self, session_id: str, stream: str, after: int
    ) -> list[tuple[int, bytes]] | None:
        found = self._sessions.get(session_id)
        if found is None:
            return None
        last, kept = found.streams.get(stream, (0, []))
        if after >= last:
            return []
        if not kept or kept[0][0] > after + 1:
            return None  # dropped already
        return [(number, data) for number, data in kept if number > after]


_KEPT_IN_MEMORY: weakref.WeakKeyDictionary[object, MemorySessions] = weakref.WeakKeyDictionary()
"""The `MemorySessions` of each store without sessions of its own, for as long as it lives."""


def sessions_of(store: object) -> SessionRecords:
    """The store's sessions half (`store.sessions`), or for a store without one the
    `MemorySessions` kept for it (the same at every call: sessions live in this process
    only). `TypeError` for a store that can be neither weakly referenced nor hashed."""
    found: SessionRecords | None = getattr(store, "sessions", None)
    if found is None:
        found = _KEPT_IN_MEMORY.setdefault(store, MemorySessions())
    return found
