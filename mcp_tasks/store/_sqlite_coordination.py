"""The coordination of a SQLite store (`SQLiteTaskStore.coordination`), in its file.

Leases, single-use keys and the shared key are rows of the store's file, so they outlive
the process. Opened by one process (the default), a lease is held until released: nobody
else could take the task over, and the next process to open the file counts every lease
it finds as lapsed. Opened `shared`, several processes on one machine use the file at
once: leases then run out at their `until` unless renewed, as with Redis, and `Signal`s
travel through the `signals` table.

Signals in a table
------------------
`publish` inserts a row (its id from AUTOINCREMENT, so ids only grow, even after the table
empties); each listener polls for ids past the last it saw every `SIGNAL_POLL_SECONDS`,
and when it finds some, polls again at once. A listener starts at the newest id: signals
are not replayed. Rows older than `SIGNAL_KEEP_SECONDS` are deleted by whichever listener
looks; one that did not poll for half that time (its process stalled) may have missed
rows, so its stream ends with `StoreUnavailable`, and the server listens again and catches
up from the records, as after a Redis outage.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import anyio
import msgspec

from ._base import Signal, Signals, StoreUnavailable

if TYPE_CHECKING:
    from ._sqlite import SQLiteTaskStore

SIGNAL_POLL_SECONDS: Final = 0.02
"""How often a listener looks for new signals when there were none: the most a cancel or
an answer waits before the process running the handler sees it."""
SIGNAL_KEEP_SECONDS: Final = 30.0
"""How long a signal's row is kept for the listeners that have not read it yet."""
SIGNAL_BATCH: Final = 1000
"""Signals read by one poll at most."""

COORDINATION_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS used_once (
    key TEXT PRIMARY KEY,
    until REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS used_once_until ON used_once (until);
CREATE TABLE IF NOT EXISTS leases (
    task_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS signals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    signal BLOB NOT NULL
);
"""

_encode_signal = msgspec.json.Encoder().encode
_decode_signal = msgspec.json.Decoder(Signal).decode


def signal_row(signal: Signal) -> tuple[float, bytes]:
    """The `signals` row (`at`, `signal`) that publishes `signal`."""
    return time.time(), _encode_signal(signal)


class FileCoordination:
    """Leases, single use and the shared key in the store's file; with a `shared` store,
    signals through it too."""

    def __init__(self, store: SQLiteTaskStore, *, shared: bool) -> None:
        self._store = store
        self.shared = shared
        self.origin = "sqlite_" + secrets.token_hex(6)
        self._signals = _TableSignals(store) if shared else None

    @property
    def signals(self) -> Signals | None:
        return self._signals

    async def claim(self, task_id: str, until: float) -> None:
        await self._store._run(
            lambda: self._store._db.execute(
                "INSERT OR REPLACE INTO leases (task_id, holder, until) VALUES (?, ?, ?)",
                (task_id, self.origin, until),
            )
        )

    async def renew(self, task_ids: list[str], until: float) -> None:
        rows = [(until, task_id, self.origin) for task_id in task_ids]
        await self._store._run(
            lambda: self._store._db.executemany(
                "UPDATE leases SET until = ? WHERE task_id = ? AND holder = ?", rows
            )
        )

    async def release(self, task_id: str) -> None:
        await self._store._run(
            lambda: self._store._db.execute(
                "DELETE FROM leases WHERE task_id = ? AND holder = ?", (task_id, self.origin)
            )
        )

    async def lease_holder(self, task_id: str, now: float) -> str | None:
        def work() -> str | None:
            row = self._store._db.execute(
                "SELECT holder FROM leases WHERE task_id = ? AND until > ?", (task_id, now)
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._store._run(work)

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        def work() -> list[str]:
            db = self._store._db
            with db:
                db.execute("BEGIN IMMEDIATE")
                rows = db.execute(
                    "SELECT task_id FROM leases WHERE until <= ? ORDER BY until LIMIT ?",
                    (now, limit),
                ).fetchall()
                db.executemany("DELETE FROM leases WHERE task_id = ?", rows)
            return [str(row[0]) for row in rows]

        return await self._store._run(work)

    async def use_once(self, key: str, until: float, now: float) -> bool:
        def work() -> bool:
            with self._store._db as db:
                db.execute("BEGIN IMMEDIATE")
                db.execute("DELETE FROM used_once WHERE until < ?", (now,))
                taken = db.execute(
                    "INSERT OR IGNORE INTO used_once (key, until) VALUES (?, ?)", (key, until)
                ).rowcount
            return bool(taken == 1)

        return await self._store._run(work)

    async def shared_key(self, proposal: bytes) -> bytes:
        def work() -> bytes:
            self._store._db.execute(
                "INSERT OR IGNORE INTO settings (name, value) VALUES ('state_key', ?)",
                (proposal,),
            )
            row = self._store._db.execute("SELECT value FROM settings WHERE name = 'state_key'")
            return bytes(row.fetchone()[0])

        return await self._store._run(work)


class _TableSignals:
    """`Signals` through the `signals` table of a shared SQLite store."""

    def __init__(self, store: SQLiteTaskStore) -> None:
        self._store = store

    async def publish(self, signal: Signal) -> None:
        row = signal_row(signal)
        await self._store._run(
            lambda: self._store._db.execute("INSERT INTO signals (at, signal) VALUES (?, ?)", row)
        )

    @asynccontextmanager
    async def listen(self) -> AsyncIterator[AsyncIterator[Signal]]:
        db = self._store._db

        def newest() -> int:
            (last,) = db.execute("SELECT COALESCE(MAX(id), 0) FROM signals").fetchone()
            return int(last)

        yield _Polled(self._store, await self._store._run(newest))


class _Polled:
    """The signals after `last`, read by polling the table."""

    def __init__(self, store: SQLiteTaskStore, last: int) -> None:
        self._store = store
        self._last = last
        self._ready: list[Signal] = []
        self._looked_at = time.monotonic()
        self._pruned_at = 0.0

    def __aiter__(self) -> _Polled:
        return self

    async def __anext__(self) -> Signal:
        while not self._ready:
            rows = await self._store._run(self._poll)
            now = time.monotonic()
            if now - self._looked_at > SIGNAL_KEEP_SECONDS / 2:
                raise StoreUnavailable(
                    f"signals in {self._store.path} not read for {now - self._looked_at:.0f} s: "
                    "some may be lost"
                )
            self._looked_at = now
            for number, data in rows:
                self._last = number
                try:
                    self._ready.append(_decode_signal(data))
                except msgspec.DecodeError:
                    continue  # not one of ours
            if not rows:
                await anyio.sleep(SIGNAL_POLL_SECONDS)
                self._looked_at = time.monotonic()
        return self._ready.pop(0)

    def _poll(self) -> list[tuple[int, bytes]]:
        db = self._store._db
        rows = db.execute(
            "SELECT id, signal FROM signals WHERE id > ? ORDER BY id LIMIT ?",
            (self._last, SIGNAL_BATCH),
        ).fetchall()
        now = time.time()
        if now - self._pruned_at >= SIGNAL_KEEP_SECONDS / 30:  # each second, at most
            self._pruned_at = now
            # By id, oldest first: the rows older than the cutoff are a prefix of the table.
            db.execute(
                "DELETE FROM signals WHERE id < COALESCE("
                "(SELECT id FROM signals WHERE at >= ? ORDER BY id LIMIT 1), "
                "(SELECT MAX(id) + 1 FROM signals))",
                (now - SIGNAL_KEEP_SECONDS,),
            )
        return [(int(number), bytes(data)) for number, data in rows]
