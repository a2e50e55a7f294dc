"""The SQLite store: tasks in one file that outlive the process. One process at a time.

Records are kept as the JSON of `encode_record`, beside their version (for the
compare-and-set) and the time they come due (for expiry, indexed). The connection runs in
WAL mode and is used by one worker thread at a time (`BatchingWorker`), so each method is
one short transaction that no other write interleaves with. With `synchronous=NORMAL` (the
default) a write survives the process being killed the moment it returns, and
`synchronous=FULL` makes it survive a power cut too, at an fsync per write.

A lock file beside the database (`<path>.lock`, `flock`) keeps a second process out: the
leases in the file belong to whichever process has it open, so when the store is opened
every lease found there is lapsed, its holder gone, and the server takes those tasks over
at start (fails them, or runs resumable ones again). Several processes sharing tasks need
the Redis store. Sessions of 2025 clients are in the same file (`_sqlite_sessions`). The
leases, single-use keys and the shared key are the store's
coordination (`_FileCoordination`, `store.coordination`): in the file, not in memory as
`LocalCoordination` keeps them, because they must outlive a restart.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

from ..core import (
    TaskRecord,
    VersionConflict,
    decode_record,
    encode_record,
)
from ..core.commands import (
    TaskLimits,
)
from ._base import EXPIRY_CLAIM_SECONDS, Signals, StoreFull, StoreUnavailable
from ._legacy import Save, SavingStore
from ._sqlite_sessions import SESSIONS_SCHEMA, SQLiteSessions
from ._worker import BatchingWorker

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    due_at REAL,
    record BLOB NOT NULL,
    principal TEXT,
    active INTEGER NOT NULL DEFAULT 1,
    size INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS tasks_due ON tasks (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_active ON tasks (principal) WHERE active = 1;
CREATE INDEX IF NOT EXISTS tasks_principal ON tasks (principal);
CREATE TABLE IF NOT EXISTS settings (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
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
"""


class StoreLocked(Exception):
    """The SQLite file is open in another process."""


class SQLiteTaskStore(SavingStore):
    """Tasks in one SQLite file, kept across restarts; one process at a time."""

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: Literal["normal", "full"] = "normal"
    ) -> None:
        if synchronous not in ("normal", "full"):
            raise ValueError(f"synchronous must be 'normal' or 'full', not {synchronous!r}")
        self.path = Path(path)
        self._lock_file = open(f"{self.path}.lock", "a")  # noqa: SIM115 - held while open
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise StoreLocked(
                f"{self.path} is open in another process; one process at a time uses a SQLite "
                "store (several processes share tasks through the Redis store)"
            ) from None
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._db.executescript(_SCHEMA + SESSIONS_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(tasks)")}
            if "size" not in columns:  # a file from before the byte budget
                self._db.execute("ALTER TABLE tasks ADD COLUMN size INTEGER NOT NULL DEFAULT 0")
            # Whoever held these leases is gone: we hold the lock now.
            self._db.execute("UPDATE leases SET until = -1")
            (self._count,) = self._db.execute("SELECT COUNT(*) FROM tasks").fetchone()
            self._sizes: dict[str, int] = dict(
                self._db.execute("SELECT task_id, size FROM tasks WHERE size > 0").fetchall()
            )
            """Task data bytes of each stored record that has any (`max_bytes`)."""
            self._bytes = sum(self._sizes.values())
            self.sessions = SQLiteSessions(self)
            """The 2025 clients' HTTP sessions (`SessionRecords`), in the same file."""
        except BaseException:
            self._lock_file.close()
            raise
        self._worker = BatchingWorker()
        self.coordination = _FileCoordination(self)

    async def _run(self, work: Callable[[], T]) -> T:
        try:
            return await self._worker.run(work)
        except sqlite3.OperationalError as error:  # locked, read-only, disk I/O, ...
            raise StoreUnavailable(f"SQLite at {self.path}: {error}") from error

    async def get(self, task_id: str) -> TaskRecord | None:
        def work() -> bytes | None:
            row = self._db.execute(
                "SELECT record FROM tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
            return None if row is None else bytes(row[0])

        data = await self._run(work)
        return None if data is None else decode_record(data)

    async def _write(self, save: Save) -> None:
        record, expected_version, active, limits, lease_until = save
        data = encode_record(record)
        task_id, due_at, size = record.task_id, record.expires_at, record.data_bytes

        def write(db: sqlite3.Connection) -> None:
            if expected_version is None:
                if limits is not None:
                    self._check(db, record, size, limits)
                try:
                    values = (task_id, record.version, due_at, data, record.principal, int(active))
                    db.execute(
                        "INSERT INTO tasks "
                        "(task_id, version, due_at, record, principal, active, size) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (*values, size),
                    )
                except sqlite3.IntegrityError:
                    raise VersionConflict(task_id, None, self._version(task_id)) from None
            else:
                changed = db.execute(
                    "UPDATE tasks SET version = ?, due_at = ?, record = ?, active = ?, size = ? "
                    "WHERE task_id = ? AND version = ?",
                    (record.version, due_at, data, int(active), size, task_id, expected_version),
                ).rowcount
                if changed != 1:
                    raise VersionConflict(task_id, expected_version, self._version(task_id))
            if lease_until is not None:
                db.execute(
                    "INSERT OR REPLACE INTO leases (task_id, holder, until) VALUES (?, ?, ?)",
                    (task_id, self.coordination.origin, lease_until),
                )
            if not active:
                db.execute("DELETE FROM leases WHERE task_id = ?", (task_id,))

        def work() -> None:
            db = self._db
            counted = limits is not None and (
                limits.max_active_per_principal is not None
                or limits.max_stored_per_principal is not None
            )
            if lease_until is None and not counted and active:
                write(db)  # one statement: atomic as it is
            else:
                with db:
                    db.execute("BEGIN IMMEDIATE")
                    write(db)
            if expected_version is None:
                self._count += 1
            self._bytes += size - self._sizes.pop(task_id, 0)
            if size:
                self._sizes[task_id] = size

        await self._run(work)

    def _check(
        self, db: sqlite3.Connection, record: TaskRecord, size: int, limits: TaskLimits
    ) -> None:
        """Raise `StoreFull` if a new `record` of `size` bytes of task data is over `limits`
        (in the write's transaction)."""
        if self._count >= limits.max_tasks and self._version(record.task_id) is None:
            raise StoreFull(limits.max_tasks, retry_at=self._next_deadline(db))
        most = limits.max_bytes
        over = most is not None and self._bytes + size > most
        if over and most is not None and self._version(record.task_id) is None:
            raise StoreFull(most, data=True, retry_at=self._next_deadline(db))
        most = limits.max_active_per_principal
        if most is not None:
            (held,) = db.execute(
                "SELECT COUNT(*) FROM tasks WHERE principal IS ? AND active = 1",
                (record.principal,),
            ).fetchone()
            if held >= most:
                raise StoreFull(most, per_principal=True)
        most = limits.max_stored_per_principal
        if most is not None:
            held, room_at = db.execute(
                "SELECT COUNT(*), MIN(due_at) FROM tasks WHERE principal IS ?",
                (record.principal,),
            ).fetchone()
            if held >= most:
                raise StoreFull(most, per_principal=True, stored=True, retry_at=room_at)

    @staticmethod
    def _next_deadline(db: sqlite3.Connection) -> float | None:
        row = db.execute(
            "SELECT due_at FROM tasks WHERE due_at IS NOT NULL ORDER BY due_at LIMIT 1"
        ).fetchone()
        return None if row is None else float(row[0])

    def _version(self, task_id: str) -> int | None:
        row = self._db.execute("SELECT version FROM tasks WHERE task_id = ?", (task_id,))
        found = row.fetchone()
        return None if found is None else int(found[0])

    async def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        def work() -> bool:
            db = self._db
            found = self._version(task_id)
            if found is None:
                return False
            if expected_version is not None and found != expected_version:
                raise VersionConflict(task_id, expected_version, found)
            with db:
                db.execute("BEGIN IMMEDIATE")
                db.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))
                db.execute("DELETE FROM leases WHERE task_id = ?", (task_id,))
            self._count -= 1
            self._bytes -= self._sizes.pop(task_id, 0)
            return True

        return await self._run(work)

    async def count(self) -> int:
        return int(self._count)

    async def pop_due(self, now: float, limit: int = 1000) -> list[TaskRecord]:
        def work() -> list[bytes]:
            db = self._db
            with db:
                db.execute("BEGIN IMMEDIATE")
                rows = db.execute(
                    "SELECT task_id, record FROM tasks WHERE due_at <= ? "
                    "ORDER BY due_at, task_id LIMIT ?",
                    (now, limit),
                ).fetchall()
                # Claimed, not forgotten: due again later unless deleted meanwhile.
                again = now + EXPIRY_CLAIM_SECONDS
                db.executemany(
                    "UPDATE tasks SET due_at = ? WHERE task_id = ?", [(again, r[0]) for r in rows]
                )
            return [bytes(r[1]) for r in rows]

        return [decode_record(data) for data in await self._run(work)]

    async def next_deadline(self) -> float | None:
        return await self._run(lambda: self._next_deadline(self._db))

    async def aclose(self) -> None:
        await self._run(self._db.close)
        self._lock_file.close()

    def __repr__(self) -> str:
        return f"SQLiteTaskStore({str(self.path)!r})"


class _FileCoordination:
    """The coordination of a SQLite store, in its file: leases (which lapse when the file
    is opened again, their holder gone), single use and the shared key outlive the
    process; no signals (one process at a time)."""

    shared = False

    def __init__(self, store: SQLiteTaskStore) -> None:
        self._store = store
        self.origin = "sqlite_" + secrets.token_hex(6)

    @property
    def signals(self) -> Signals | None:
        return None

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
