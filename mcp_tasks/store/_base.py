"""The store contract, in two halves: the records (`TaskStore`) and what the processes
sharing them agree on (`Coordination`: leases, signals, the shared key, single use).

A store knows no status rules: the core decides what a record becomes, the store only
keeps it. It never reads a record's status either: each save says whether the task is still
unfinished (`active`), which is all the store needs for the per-principal limit and for
dropping the lease of a finished task. Every method is async, because durable stores do
their I/O in a worker thread.

* Writes name the version they expect to replace (None for a new record), so two writers,
  in one process or several, never overwrite each other: the loser gets `VersionConflict`,
  reloads and decides again. A new record may carry `limits` (`TaskLimits`, whole): the
  store refuses it with `StoreFull` when it already holds that many, checked in the same
  atomic step, so the limits hold across every process sharing the store.
* Expiry is indexed by `expires_at`: `pop_due` finds the records whose time has come in
  O(expired), each once, even when several processes ask.
* A process running a task's handler holds a *lease* on the task. A lease that lapses (its
  process died and stopped renewing it) is handed, once, to whichever process asks
  `lapsed`; that process fails the task or runs it again (`ServerCore.task_orphaned`).
  A save takes or drops a lease in the same step as its write, so the two halves of a
  shared store live in one place (Redis); one process alone needs no such care, and
  `LocalCoordination` keeps its leases in memory.
* A store that several processes share (`shared`) also carries `Signal`s between them:
  cancel this task, resume that one, this record changed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Final, Literal, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec

from ..core import (
    TaskRecord,
)
from ..core.commands import (
    TaskLimits,
)


def redacted(url: str) -> str:
    """`url` fit for a log line: its userinfo (user and password) and any `password`
    query parameter replaced with `***`."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = parts.query
    if "password" in query.lower():
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(key, "***" if key.lower() == "password" else value) for key, value in pairs],
            safe="*",
        )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


EXPIRY_CLAIM_SECONDS: Final = 30.0
"""How long a record `pop_due` handed out is left to its process to delete before it comes
due again (that process may have died mid-batch)."""


class StoreUnavailable(Exception):
    """The store cannot be reached or used right now (Redis down, the disk failing). The
    server answers the request with -32603 and HTTP 503, and goes on serving."""


class StoreFull(Exception):
    """A new record was refused: the store holds its `limit` of records already, or (when
    `per_principal`) its principal has `limit` unfinished (saved `active`) tasks already,
    or (when `per_principal` and `stored`) `limit` stored tasks, finished ones included,
    or (when `data`) `limit` bytes of task data.

    `retry_at` is when there may be room again, which the refusal tells the caller
    (`Retry-After`): for the store's limits (of tasks, of bytes) the store's next deadline
    (`next_deadline`), for a principal's stored tasks its first to expire; None for a
    principal's unfinished tasks (room comes when one finishes) or when not known. A store
    fills it as it refuses; the server passes it on."""

    def __init__(
        self,
        limit: int,
        *,
        per_principal: bool = False,
        stored: bool = False,
        data: bool = False,
        retry_at: float | None = None,
        room_at: float | None = None,
    ) -> None:
        if data:
            whose = "bytes of task data"
        elif not per_principal:
            whose = "tasks"
        elif stored:
            whose = "stored tasks of this principal"
        else:
            whose = "unfinished tasks of this principal"
        super().__init__(f"the store holds its limit of {limit} {whose}")
        self.limit = limit
        self.per_principal = per_principal
        self.stored = stored and per_principal
        self.data = data
        """The store holds `limit` bytes of task data (`TaskRecord.data_bytes`) already."""
        self.retry_at = room_at if retry_at is None else retry_at
        """When there may be room again (None: not known, or when a task finishes)."""

    @property
    def room_at(self) -> float | None:
        """The name `retry_at` had (given for a principal's stored tasks alone): kept for
        the stores written before; `room_at=` is still taken."""
        return self.retry_at


class Signal(msgspec.Struct, frozen=True):
    """A message between the processes sharing a store.

    `cancel`: stop the handler of `task_id`; `resume`: its answers are in, wake the handler
    (or run it again); `changed`: the record was saved (for `notifications/tasks`);
    `session`: `data` is a message a 2025 client sent on its HTTP session `task_id` (an
    answer to a request of the server's, a cancellation) for the process that awaits it;
    `event`: `data` is an event of that session's own stream (its number, a space, the
    message) for the process where the stream is open.
    """

    kind: Literal["cancel", "resume", "changed", "session", "event"]
    task_id: str
    origin: str
    """The process that sent it (a process ignores its own `changed`)."""
    to: str | None = None
    """The one process meant to act on it (`resume`: the lease holder), or None: all."""
    data: bytes | None = None
    """A `session` signal's message, as the client sent it."""


class Signals(Protocol):
    async def publish(self, signal: Signal) -> None:
        """Send `signal` to every process listening, this one included."""
        ...

    def listen(self) -> AbstractAsyncContextManager[AsyncIterator[Signal]]:
        """Signals as they arrive, for as long as the context is open."""
        ...


class Coordination(Protocol):
    """What the processes sharing a store agree on, beside the records: who runs each
    task (leases), what one process tells the others (`signals`), the secret that seals
    `requestState` (`shared_key`) and what was used already (`use_once`).

    A store one process uses gets all of it from `LocalCoordination`; a store several
    processes share (Redis) brings its own, kept where the records are.
    """

    shared: bool
    """Other processes may use the same records: leases must be renewed while handlers
    run, and `signals` carries what one process tells the others."""

    origin: str
    """This process's name in leases and signals (random, one per store object)."""

    @property
    def signals(self) -> Signals | None:
        """The channel between processes, or None for a store only one process uses."""
        ...

    async def claim(self, task_id: str, until: float) -> None:
        """Take the lease on `task_id` for this process (`origin`) until `until`, as a
        handler starts on a stored task (one just created took it in `TaskStore.save`)."""
        ...

    async def renew(self, task_ids: list[str], until: float) -> None:
        """Extend this process's leases on `task_ids` to `until` (those it still holds)."""
        ...

    async def release(self, task_id: str) -> None:
        """Give up this process's lease on `task_id` (nothing if another holds it)."""
        ...

    async def lease_holder(self, task_id: str, now: float) -> str | None:
        """The `origin` holding a live lease on `task_id`, or None."""
        ...

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        """Up to `limit` tasks whose lease ran out by `now`, each returned once (to one
        process only); their leases are gone. A store opened anew by one process (SQLite)
        counts every lease it finds as lapsed: their holder is gone."""
        ...

    async def shared_key(self, proposal: bytes) -> bytes:
        """The secret every process on this store uses to seal `requestState`: the first
        process's `proposal`, kept in the store (a store only one process uses may keep
        it across restarts, or return `proposal`)."""
        ...

    async def use_once(self, key: str, until: float, now: float) -> bool:
        """Remember `key` until `until` (wall-clock seconds); True if it was not remembered
        already, in one atomic step across every process sharing the store. What is
        remembered past its `until` (before `now`) may be forgotten."""
        ...


class TaskStore(Protocol):
    """The records: read, write with compare-and-set under the limits, expire.

    `coordination` is the other half (leases, signals, the shared key, single use); a
    store one process uses sets it to a `LocalCoordination`.
    """

    @property
    def coordination(self) -> Coordination:
        """Leases, signals, the shared key and single use, for the processes on this store."""
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or None if there is none (never created, or deleted)."""
        ...

    async def save(
        self,
        record: TaskRecord,
        expected_version: int | None,
        *,
        active: bool,
        limits: TaskLimits | None = None,
        lease_until: float | None = None,
    ) -> None:
        """Write `record` if the stored version equals `expected_version` (None: absent).

        Raises `VersionConflict` otherwise, and writes nothing. `active` is the caller's word
        (the store reads no status) that the task is unfinished: it counts toward its
        principal's `max_active_per_principal` while saved active. A new record saved with
        `limits` raises `StoreFull` if the store holds `max_tasks` records already; if its
        principal has `max_active_per_principal` active records; if its principal has
        `max_stored_per_principal` records stored, finished or not (every record counts
        toward it until it is deleted); if the records stored would hold more than
        `max_bytes` bytes of task data (`TaskRecord.data_bytes`, counted on every save)
        with it. All in one atomic step. With `lease_until`, this process takes the task's
        lease (`coordination.lease_holder`) in the same step (a task is never stored
        unleased while its handler starts). A save with `active=False` drops the task's
        lease: no handler runs for it any more.
        """
        ...

    async def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        """Remove the record (if at `expected_version`, when given) and its lease. False if
        absent. Raises `VersionConflict` if the stored version differs."""
        ...

    async def count(self) -> int:
        """How many records the store holds."""
        ...

    async def pop_due(self, now: float, limit: int = 1000) -> list[TaskRecord]:
        """Up to `limit` records whose `expires_at` is at or before `now`, each returned once
        (to one process only) per `EXPIRY_CLAIM_SECONDS`.

        The records stay stored: hand each to the core's `expire_task` and perform its
        effects (which delete it). A record handed out and not deleted (its process died
        mid-batch) comes due again `EXPIRY_CLAIM_SECONDS` after `now`, so none is left
        behind. A record saved again is indexed anew.
        """
        ...

    async def next_deadline(self) -> float | None:
        """The earliest `expires_at` indexed (possibly of a record deleted since), or None."""
        ...

    async def aclose(self) -> None:
        """Let go of connections and files."""
        ...


__all__ = [
    "EXPIRY_CLAIM_SECONDS",
    "Coordination",
    "Signal",
    "Signals",
    "StoreFull",
    "StoreUnavailable",
    "TaskStore",
    "redacted",
]
