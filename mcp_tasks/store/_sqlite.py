"""The SQLite store: tasks in one file that outlive the process, used by one process, or
(`shared=True`) by several on one machine.

Records are kept as the JSON of `encode_record`, beside their version (for the
compare-and-set) and the time they come due (for expiry, indexed). The connection runs in
WAL mode and is used by one worker thread at a time (`BatchingWorker`), so each method is
one short transaction that no other write of this process interleaves with; what reads
before it writes takes the file's write lock first (`BEGIN IMMEDIATE`), so another process
cannot write in between either. With `synchronous=NORMAL` (the default) a write survives
the process being killed the moment it returns, and `synchronous=FULL` makes it survive a
power cut too, at an fsync per write.

The counts the limits need (records, bytes of task data, sessions) are one row, `totals`,
kept by triggers in the same transaction as each insert, delete or resize: every process
reads the same figure in O(1).

A lock file beside the database (`<path>.lock`, `flock`) says who has the file open. One
process alone takes it exclusively: the leases in the file are then its own, so when it
opens the file every lease found there is lapsed (its holder gone) and the server takes
those tasks over at start (fails them, or runs resumable ones again). Processes that share
the file take it shared (`--workers N` does): leases run out unless renewed, signals go
through the file (`_sqlite_coordination`), and the first of them to open the file, finding
nobody else, lapses every lease as a lone process would. One sharing and one not cannot
open the same file. Sessions of 2025 clients are in the same file (`_sqlite_sessions`).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal, TextIO, TypeVar

from ..core import (
    TaskRecord,
    VersionConflict,
    decode_record,
    encode_record,
)
from ..core.commands import (
    TaskLimits,
)
from ._base import EXPIRY_CLAIM_SECONDS, Signal, StoreFull, StoreUnavailable
from ._legacy import Save, SavingStore
from ._sqlite_coordination import COORDINATION_SCHEMA, FileCoordination, signal_row
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
"""

_TOTALS: Final = (
    """CREATE TABLE IF NOT EXISTS totals (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        tasks INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        sessions INTEGER NOT NULL
    )""",
    """CREATE TRIGGER IF NOT EXISTS tasks_added AFTER INSERT ON tasks BEGIN
        UPDATE totals SET tasks = tasks + 1, bytes = bytes + NEW.size;
    END""",
    """CREATE TRIGGER IF NOT EXISTS tasks_removed AFTER DELETE ON tasks BEGIN
        UPDATE totals SET tasks = tasks - 1, bytes = bytes - OLD.size;
    END""",
    """CREATE TRIGGER IF NOT EXISTS tasks_resized AFTER UPDATE OF size ON tasks
        WHEN NEW.size != OLD.size BEGIN
        UPDATE totals SET bytes = bytes + NEW.size - OLD.size;
    END""",
    """CREATE TRIGGER IF NOT EXISTS sessions_added AFTER INSERT ON sessions BEGIN
        UPDATE totals SET sessions = sessions + 1;
    END""",
    """CREATE TRIGGER IF NOT EXISTS sessions_removed AFTER DELETE ON sessions BEGIN
        UPDATE totals SET sessions = sessions - 1;
    END""",
    """INSERT INTO totals (one, tasks, bytes, sessions)
        SELECT 1, (SELECT COUNT(*) FROM tasks), (SELECT COALESCE(SUM(size), 0) FROM tasks),
            (SELECT COUNT(*) FROM sessions)
        WHERE NOT EXISTS (SELECT 1 FROM totals)""",
)
"""The counts and the triggers that keep them, made (and counted once, for a file from
before them) in the same transaction as the tables: from then on every write keeps them."""

SHARE_WAIT_SECONDS: Final = 5.0
"""How long a sharing process waits for the file's lock while another one opens it."""


class StoreLocked(Exception):
    """The SQLite file is open in another process (one that does not share it, or, for a
    store opened alone, any)."""


class SQLiteTaskStore(SavingStore):
    """Tasks in one SQLite file, kept across restarts: one process's, or with `shared=True`
    several processes' on one machine."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["normal", "full"] = "normal",
        shared: bool = False,
    ) -> None:
        if synchronous not in ("normal", "full"):
            raise ValueError(f"synchronous must be 'normal' or 'full', not {synchronous!r}")
        self.path = Path(path)
        self._shared = shared
        self._lock_file = open(f"{self.path}.lock", "a")  # noqa: SIM115 - held while open
        try:
            alone = _lock(self._lock_file, self.path, shared=shared)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._make_tables()
            if alone:  # whoever held these leases is gone
                self._db.execute("UPDATE leases SET until = -1")
            if shared and alone:  # let the others in
                fcntl.flock(self._lock_file, fcntl.LOCK_SH | fcntl.LOCK_NB)
            self.sessions = SQLiteSessions(self)
            """The 2025 clients' HTTP sessions (`SessionRecords`), in the same file."""
        except BlockingIOError:
            self._lock_file.close()
            message = f"{self.path} was opened meanwhile by a process that does not share it"
            raise StoreLocked(message) from None
        except BaseException:
            self._lock_file.close()
            raise
        self._worker = BatchingWorker()
        self.coordination = FileCoordination(self, shared=shared)

    def _make_tables(self) -> None:
        """The tables, the totals and their triggers, in one transaction: a process opening
        the file at the same moment finds them whole."""
        db = self._db
        with db:
            db.execute("BEGIN IMMEDIATE")
            for script in (_SCHEMA, SESSIONS_SCHEMA, COORDINATION_SCHEMA):
                for statement in script.split(";"):
                    if statement.strip():
                        db.execute(statement)
            columns = {row[1] for row in db.execute("PRAGMA table_info(tasks)")}
            if "size" not in columns:  # a file from before the byte budget
                db.execute("ALTER TABLE tasks ADD COLUMN size INTEGER NOT NULL DEFAULT 0")
            for statement in _TOTALS:
                db.execute(statement)

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
        origin = self.coordination.origin
        changed = signal_row(Signal("changed", task_id, origin)) if self._shared else None

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
                changed_rows = db.execute(
                    "UPDATE tasks SET version = ?, due_at = ?, record = ?, active = ?, size = ? "
                    "WHERE task_id = ? AND version = ?",
                    (record.version, due_at, data, int(active), size, task_id, expected_version),
                ).rowcount
                if changed_rows != 1:
                    raise VersionConflict(task_id, expected_version, self._version(task_id))
            if lease_until is not None:
                db.execute(
                    "INSERT OR REPLACE INTO leases (task_id, holder, until) VALUES (?, ?, ?)",
                    (task_id, origin, lease_until),
                )
            if not active:
                db.execute("DELETE FROM leases WHERE task_id = ?", (task_id,))
            if changed is not None:  # for the listen streams of the other processes
                db.execute("INSERT INTO signals (at, signal) VALUES (?, ?)", changed)

        def work() -> None:
            db = self._db
            counted = limits is not None and (
                limits.max_active_per_principal is not None
                or limits.max_stored_per_principal is not None
            )
            if lease_until is None and not counted and active and not self._shared:
                # One statement, or (with limits) reads before it that no other process and
                # no other write of this one can come between.
                write(db)
            else:
                with db:
                    db.execute("BEGIN IMMEDIATE")
                    write(db)

        await self._run(work)

    def _check(
        self, db: sqlite3.Connection, record: TaskRecord, size: int, limits: TaskLimits
    ) -> None:
        """Raise `StoreFull` if a new `record` of `size` bytes of task data is over `limits`
        (in the write's transaction)."""
        tasks, data_bytes = db.execute("SELECT tasks, bytes FROM totals").fetchone()
        if tasks >= limits.max_tasks and self._version(record.task_id) is None:
            raise StoreFull(limits.max_tasks, retry_at=self._next_deadline(db))
        most = limits.max_bytes
        over = most is not None and data_bytes + size > most
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
            with self._db as db:
                db.execute("BEGIN IMMEDIATE")
                found = self._version(task_id)
                if found is None:
                    return False
                if expected_version is not None and found != expected_version:
                    raise VersionConflict(task_id, expected_version, found)
                db.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))
                db.execute("DELETE FROM leases WHERE task_id = ?", (task_id,))
            return True

        return await self._run(work)

    async def count(self) -> int:
        def work() -> int:
            (tasks,) = self._db.execute("SELECT tasks FROM totals").fetchone()
            return int(tasks)

        return await self._run(work)

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


def _lock(lock_file: TextIO, path: Path, *, shared: bool) -> bool:
    """Take the file's lock for one process alone, or (`shared`) beside others that share;
    True if this process has it alone (nobody else has the file open). Raises `StoreLocked`
    if another process has it in a way that excludes this one."""
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        if not shared:
            raise StoreLocked(
                f"{path} is open in another process; one process at a time uses a SQLite "
                "store unless each opens it shared (sqlite:///...?shared=true)"
            ) from None
    deadline = time.monotonic() + SHARE_WAIT_SECONDS
    while True:  # another sharing process may hold it alone for a moment, as it opens
        try:
            fcntl.flock(lock_file, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise StoreLocked(
                    f"{path} is open in another process that does not share it"
                ) from None
            time.sleep(0.01)
