"""The in-memory store: a dict of records and a heap of expiry times. One process only.

Entries in the heap are never removed eagerly: a record deleted early, or saved with a new
expiry, leaves its old entry behind, and `pop_due` skips entries that no longer match the
stored record. Every entry is pushed once and popped once, so expiry costs O(expired · log n).
Its async methods never yield to the event loop: reading a record and writing its successor cannot
interleave with another writer in the same process. Leases, single use and the shared key are
`LocalCoordination`'s: a save takes or drops the lease there, in the same step as its write.
"""

from __future__ import annotations

import heapq
import secrets

from ..core import (
    TaskRecord,
    VersionConflict,
)
from ..core.commands import (
    TaskLimits,
)
from ._base import EXPIRY_CLAIM_SECONDS, StoreFull
from ._legacy import Save, SavingStore
from ._local import LocalCoordination
from ._sessions import MemorySessions


class MemoryTaskStore(SavingStore):
    """Tasks in this process's memory, gone when it stops; the default store."""

    def __init__(self) -> None:
        self.coordination: LocalCoordination = LocalCoordination("mem_" + secrets.token_hex(6))
        self._records: dict[str, TaskRecord] = {}
        self._expiry_heap: list[tuple[float, str]] = []
        self._claims: dict[str, float] = {}
        """Task id -> when a record `pop_due` handed out comes due again."""
        self._active: dict[str | None, set[str]] = {}
        """Principal -> its unfinished tasks (`max_active_per_principal`)."""
        self._owned: dict[str | None, set[str]] = {}
        """Principal -> all its stored tasks (`max_stored_per_principal`)."""
        self._bytes = 0
        """The task data of every stored record (`max_bytes`)."""
        self.sessions = MemorySessions()
        """The 2025 clients' HTTP sessions (`SessionRecords`)."""

    async def get(self, task_id: str) -> TaskRecord | None:
        return self._records.get(task_id)

    async def _write(self, save: Save) -> None:
        record, expected_version, active, limits, lease_until = save
        current = self._records.get(record.task_id)
        found = None if current is None else current.version
        if found != expected_version:
            raise VersionConflict(record.task_id, expected_version, found)
        unfinished = self._active.setdefault(record.principal, set())
        size = record.data_bytes
        if current is None and limits is not None:
            self._check(record, size, limits, unfinished)
        if current is None:
            self._owned.setdefault(record.principal, set()).add(record.task_id)
        self._records[record.task_id] = record
        self._bytes += size - (0 if current is None else current.data_bytes)
        if active:
            unfinished.add(record.task_id)
        else:
            unfinished.discard(record.task_id)
        if lease_until is not None:
            self.coordination.hold(record.task_id, lease_until)
        if not active:
            self.coordination.drop(record.task_id)
        expires_at = record.expires_at
        if expires_at is not None and (current is None or current.expires_at != expires_at):
            heapq.heappush(self._expiry_heap, (expires_at, record.task_id))

    def _check(
        self, record: TaskRecord, size: int, limits: TaskLimits, unfinished: set[str]
    ) -> None:
        """Raise `StoreFull` if a new `record` of `size` bytes of task data is over `limits`."""
        heap = self._expiry_heap
        if len(self._records) >= limits.max_tasks:
            raise StoreFull(limits.max_tasks, retry_at=heap[0][0] if heap else None)
        most = limits.max_bytes
        if most is not None and self._bytes + size > most:
            raise StoreFull(most, data=True, retry_at=heap[0][0] if heap else None)
        most = limits.max_active_per_principal
        if most is not None and len(unfinished) >= most:
            raise StoreFull(most, per_principal=True)
        most = limits.max_stored_per_principal
        owned = self._owned.get(record.principal, ()) if most is not None else ()
        if most is not None and len(owned) >= most:
            deadlines = (self._records[task_id].expires_at for task_id in owned)
            room_at = min((at for at in deadlines if at is not None), default=None)
            raise StoreFull(most, per_principal=True, stored=True, retry_at=room_at)

    async def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        current = self._records.get(task_id)
        if current is None:
            return False
        if expected_version is not None and current.version != expected_version:
            raise VersionConflict(task_id, expected_version, current.version)
        del self._records[task_id]
        self._bytes -= current.data_bytes
        self.coordination.drop(task_id)
        self._claims.pop(task_id, None)
        self._active.get(current.principal, set()).discard(task_id)
        self._owned.get(current.principal, set()).discard(task_id)
        return True

    async def count(self) -> int:
        return len(self._records)

    async def pop_due(self, now: float, limit: int = 1000) -> list[TaskRecord]:
        due: list[TaskRecord] = []
        heap = self._expiry_heap
        while heap and heap[0][0] <= now and len(due) < limit:
            due_at, task_id = heapq.heappop(heap)
            record = self._records.get(task_id)
            if record is None or due_at not in (record.expires_at, self._claims.get(task_id)):
                continue  # an entry left behind by a delete or a new expiry
            due.append(record)
        again = now + EXPIRY_CLAIM_SECONDS  # as the durable stores do: due again unless deleted
        for record in due:
            self._claims[record.task_id] = again
            heapq.heappush(heap, (again, record.task_id))
        return due

    async def next_deadline(self) -> float | None:
        return self._expiry_heap[0][0] if self._expiry_heap else None

    async def aclose(self) -> None:
        pass

    def __repr__(self) -> str:
        return "MemoryTaskStore()"

    def __len__(self) -> int:
        return len(self._records)
