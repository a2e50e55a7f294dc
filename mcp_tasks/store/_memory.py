"""The in-memory store: a dict of records and a heap of expiry times. One process only.

Entries in the heap are never removed eagerly: a record deleted early, or saved with a new
expiry, leaves its old entry behind, and `pop_due` skips entries that no longer match the
stored record. Every entry is pushed once and popped once, so expiry costs O(expired · log n).
Its async methods never yield to the event loop: reading a record and writing its successor cannot
interleave with another writer in the same process.
"""

from __future__ import annotations

import heapq
import secrets

from ..core import TaskRecord, VersionConflict
from ._base import EXPIRY_CLAIM_SECONDS, Signals, StoreFull


class MemoryTaskStore:
    shared = False

    def __init__(self) -> None:
        self.origin = "mem_" + secrets.token_hex(6)
        self._records: dict[str, TaskRecord] = {}
        self._expiry_heap: list[tuple[float, str]] = []
        self._leases: dict[str, float] = {}
        self._claims: dict[str, float] = {}
        """Task id -> when a record `pop_due` handed out comes due again."""
        self._active: dict[str | None, set[str]] = {}
        """Principal -> its unfinished tasks (`principal_limit`)."""
        self._owned: dict[str | None, set[str]] = {}
        """Principal -> all its stored tasks (`principal_stored_limit`)."""
        self._bytes = 0
        """The task data of every stored record (`bytes_limit`)."""
        self._used: dict[str, float] = {}
        self._used_heap: list[tuple[float, str]] = []
        """`use_once` keys and when each may be forgotten, soonest first."""

    @property
    def signals(self) -> Signals | None:
        return None

    async def get(self, task_id: str) -> TaskRecord | None:
        return self._records.get(task_id)

    async def save(
        self,
        record: TaskRecord,
        expected_version: int | None,
        *,
        active: bool,
        limit: int | None = None,
        principal_limit: int | None = None,
        principal_stored_limit: int | None = None,
        bytes_limit: int | None = None,
        lease_until: float | None = None,
    ) -> None:
        current = self._records.get(record.task_id)
        found = None if current is None else current.version
        if found != expected_version:
            raise VersionConflict(record.task_id, expected_version, found)
        unfinished = self._active.setdefault(record.principal, set())
        size = record.data_bytes
        if current is None:
            if limit is not None and len(self._records) >= limit:
                raise StoreFull(limit)
            if bytes_limit is not None and self._bytes + size > bytes_limit:
                raise StoreFull(bytes_limit, data=True)
            if principal_limit is not None and len(unfinished) >= principal_limit:
                raise StoreFull(principal_limit, per_principal=True)
            owned = self._owned.setdefault(record.principal, set())
            if principal_stored_limit is not None and len(owned) >= principal_stored_limit:
                deadlines = (self._records[task_id].expires_at for task_id in owned)
                room_at = min((at for at in deadlines if at is not None), default=None)
                raise StoreFull(
                    principal_stored_limit, per_principal=True, stored=True, room_at=room_at
                )
            owned.add(record.task_id)
        self._records[record.task_id] = record
        self._bytes += size - (0 if current is None else current.data_bytes)
        if active:
            unfinished.add(record.task_id)
        else:
            unfinished.discard(record.task_id)
        if lease_until is not None:
            self._leases[record.task_id] = lease_until
        if not active:
            self._leases.pop(record.task_id, None)
        expires_at = record.expires_at
        if expires_at is not None and (current is None or current.expires_at != expires_at):
            heapq.heappush(self._expiry_heap, (expires_at, record.task_id))

    async def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        current = self._records.get(task_id)
        if current is None:
            return False
        if expected_version is not None and current.version != expected_version:
            raise VersionConflict(task_id, expected_version, current.version)
        del self._records[task_id]
        self._bytes -= current.data_bytes
        self._leases.pop(task_id, None)
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

    async def use_once(self, key: str, until: float, now: float) -> bool:
        heap = self._used_heap
        while heap and heap[0][0] < now:
            _, old = heapq.heappop(heap)
            if self._used.get(old, now) < now:
                del self._used[old]
        if key in self._used:
            return False
        self._used[key] = until
        heapq.heappush(heap, (until, key))
        return True

    async def next_deadline(self) -> float | None:
        return self._expiry_heap[0][0] if self._expiry_heap else None

    # Leases: one process holds them all, and they end with it, so none ever lapses.

    async def claim(self, task_id: str, until: float) -> None:
        self._leases[task_id] = until

    async def renew(self, task_ids: list[str], until: float) -> None:
        for task_id in task_ids:
            if task_id in self._leases:
                self._leases[task_id] = until

    async def release(self, task_id: str) -> None:
        self._leases.pop(task_id, None)

    async def lease_holder(self, task_id: str, now: float) -> str | None:
        until = self._leases.get(task_id)
        return self.origin if until is not None and until > now else None

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        return []

    async def shared_key(self, proposal: bytes) -> bytes:
        return proposal

    async def aclose(self) -> None:
        pass

    def __repr__(self) -> str:
        return "MemoryTaskStore()"

    def __len__(self) -> int:
        return len(self._records)
