"""The sessions of a SQLite store (`SQLiteTaskStore.sessions`), in the store's file.

`sessions` holds one row a session (its state, version and the time it expires, indexed by
principal for the per-principal count and by expiry for purging); `session_events` the
last events of each stream, numbered within it. Every call runs in the store's worker
thread, as the store's own do; those that read before they write are one `BEGIN
IMMEDIATE` transaction.

An expired session stays in the file until it is purged: each `open_session` deletes up to
`PURGE_BATCH` of them (and their events), oldest first, and a `get_session` or
`save_session` that finds one expired deletes it. Until then it is never returned nor
counted. The store-wide count is the store's `totals` row (kept by triggers), less the
expired ones left, which the index counts: opening a session costs O(log n), not O(n), and
every process sharing the file reads the same figure.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final, TypeVar

from ..core import VersionConflict
from ._base import StoreFull
from ._sessions import (
    MAX_EVENTS,
    SessionLimits,
    SessionRecord,
    check_max_events,
    check_principal,
    sessions_full,
)

if TYPE_CHECKING:
    from ._sqlite import SQLiteTaskStore

T = TypeVar("T")

SESSIONS_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    principal TEXT,
    state BLOB NOT NULL,
    version INTEGER NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_principal ON sessions (principal, expires_at);
CREATE INDEX IF NOT EXISTS sessions_expiry ON sessions (expires_at);
CREATE TABLE IF NOT EXISTS session_events (
    session_id TEXT NOT NULL,
    stream TEXT NOT NULL,
    number INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session_id, stream, number)
) WITHOUT ROWID;
"""
"""Created on open when missing: a file made before sessions gains them."""

PURGE_BATCH: Final = 100
"""Expired sessions one `open_session` deletes at most."""


class SQLiteSessions:
    """`SessionRecords` in a SQLite store's file."""

    def __init__(self, store: SQLiteTaskStore) -> None:
        self._store = store
        self._db = store._db

    async def open_session(
        self, record: SessionRecord, *, limits: SessionLimits, idle_seconds: float, now: float
    ) -> None:
        def work() -> Exception | None:
            db = self._db
            with db:  # a refusal keeps what was purged
                db.execute("BEGIN IMMEDIATE")
                self._purge(db, now)
                if self._live(db, record.session_id, now) is not None:
                    return VersionConflict(record.session_id, None, 1)
                refusal = self._refusal(db, record.principal, limits, now)
                if refusal is not None:
                    return refusal
                db.execute(
                    "INSERT INTO sessions (session_id, principal, state, version, expires_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (*_row(record), now + idle_seconds),
                )
            return None

        refusal = await self._store._run(work)
        if refusal is not None:
            raise refusal

    def _purge(self, db: sqlite3.Connection, now: float) -> None:
        """Delete up to `PURGE_BATCH` expired sessions and their events."""
        rows = db.execute(
            "SELECT session_id FROM sessions WHERE expires_at <= ? ORDER BY expires_at LIMIT ?",
            (now, PURGE_BATCH),
        ).fetchall()
        db.executemany("DELETE FROM sessions WHERE session_id = ?", rows)
        db.executemany("DELETE FROM session_events WHERE session_id = ?", rows)

    def _refusal(
        self, db: sqlite3.Connection, principal: str | None, limits: SessionLimits, now: float
    ) -> StoreFull | None:
        """The `StoreFull` a new session of `principal` over `limits` is refused with (live
        sessions counted), or None."""
        (expired,) = db.execute(
            "SELECT COUNT(*) FROM sessions WHERE expires_at <= ?", (now,)
        ).fetchone()
        (rows,) = db.execute("SELECT sessions FROM totals").fetchone()
        if rows - expired >= limits.max_sessions:
            (first,) = db.execute(
                "SELECT MIN(expires_at) FROM sessions WHERE expires_at > ?", (now,)
            ).fetchone()
            return sessions_full(limits.max_sessions, retry_at=first)
        most = limits.max_per_principal
        if most is not None:
            held, first = db.execute(
                "SELECT COUNT(*), MIN(expires_at) FROM sessions "
                "WHERE principal IS ? AND expires_at > ?",
                (principal, now),
            ).fetchone()
            if held >= most:
                return sessions_full(most, per_principal=True, retry_at=first)
        return None

    def _live(
        self, db: sqlite3.Connection, session_id: str, now: float
    ) -> tuple[str | None, bytes, int] | None:
        """The live session's principal, state and version; an expired one is deleted."""
        row = db.execute(
            "SELECT principal, state, version, expires_at FROM sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        if row[3] <= now:
            self._delete(db, session_id)
            return None
        return row[0], bytes(row[1]), int(row[2])

    def _delete(self, db: sqlite3.Connection, session_id: str) -> bool:
        """Delete the session and its events (in the caller's transaction, if any)."""
        if not db.in_transaction:
            with db:
                db.execute("BEGIN IMMEDIATE")
                return self._delete(db, session_id)
        gone = db.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,)).rowcount
        db.execute("DELETE FROM session_events WHERE session_id = ?", (session_id,))
        return bool(gone)

    async def get_session(
        self, session_id: str, *, idle_seconds: float, now: float
    ) -> SessionRecord | None:
        def work() -> SessionRecord | None:
            found = self._live(self._db, session_id, now)
            if found is None:
                return None
            self._db.execute(
                "UPDATE sessions SET expires_at = ? WHERE session_id = ?",
                (now + idle_seconds, session_id),
            )
            principal, state, version = found
            return SessionRecord(
                session_id=session_id, principal=principal, state=state, version=version
            )

        return await self._store._run(work)

    async def save_session(
        self, record: SessionRecord, expected_version: int, *, idle_seconds: float, now: float
    ) -> None:
        def work() -> VersionConflict | None:
            with self._db as db:  # the write lock first: nothing writes between read and write
                db.execute("BEGIN IMMEDIATE")
                found = self._live(db, record.session_id, now)
                stored = None if found is None else found[2]
                if found is None or stored != expected_version:  # an expired one stays deleted
                    return VersionConflict(record.session_id, expected_version, stored)
                check_principal(record, found[0])
                db.execute(
                    "UPDATE sessions SET state = ?, version = ?, expires_at = ? "
                    "WHERE session_id = ?",
                    (record.state, record.version, now + idle_seconds, record.session_id),
                )
            return None

        conflict = await self._store._run(work)
        if conflict is not None:
            raise conflict

    async def close_session(self, session_id: str) -> bool:
        return await self._store._run(lambda: self._delete(self._db, session_id))

    async def append_event(
        self, session_id: str, stream: str, data: bytes, *, max_events: int = MAX_EVENTS
    ) -> int:
        check_max_events(max_events)

        def work() -> int:
            db = self._db
            with db:
                db.execute("BEGIN IMMEDIATE")
                known = db.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,))
                if known.fetchone() is None:
                    return 0
                number = self._last(db, session_id, stream) + 1
                db.execute(
                    "INSERT INTO session_events (session_id, stream, number, data) "
                    "VALUES (?, ?, ?, ?)",
                    (session_id, stream, number, data),
                )
                db.execute(
                    "DELETE FROM session_events "
                    "WHERE session_id = ? AND stream = ? AND number <= ?",
                    (session_id, stream, number - max_events),
                )
            return number

        return await self._store._run(work)

    @staticmethod
    def _last(db: sqlite3.Connection, session_id: str, stream: str) -> int:
        """The number of the stream's last event (kept always), or 0."""
        (last,) = db.execute(
            "SELECT MAX(number) FROM session_events WHERE session_id = ? AND stream = ?",
            (session_id, stream),
        ).fetchone()
        return 0 if last is None else int(last)

    async def events_after(
        self, session_id: str, stream: str, after: int
    ) -> list[tuple[int, bytes]] | None:
        def work() -> list[tuple[int, bytes]] | None:
            db = self._db
            known = db.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,))
            if known.fetchone() is None:
                return None
            rows = db.execute(
                "SELECT number, data FROM session_events "
                "WHERE session_id = ? AND stream = ? AND number > ? ORDER BY number",
                (session_id, stream, after),
            ).fetchall()
            if rows and rows[0][0] > after + 1:
                return None  # dropped already
            return [(int(number), bytes(data)) for number, data in rows]

        return await self._store._run(work)


def _row(record: SessionRecord) -> tuple[str, str | None, bytes, int]:
    return record.session_id, record.principal, record.state, record.version
