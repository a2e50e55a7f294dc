"""The in-memory store: a dict of records and a heap of expiry times.

Entries in the heap are never removed eagerly: a record deleted early, or saved with a new
expiry, leaves its old entry behind, and `pop_due` skips entries that no longer match the
stored record. Every entry is pushed once and popped once, so expiry costs O(expired · log n).
"""

from __future__ import annotations

import heapq

from ..core import TaskRecord, VersionConflict


class MemoryTaskStore:
    def __init__(self) -> None:
        self._records: dict[str, TaskRecord] = {}
        self._expiry_heap: list[tuple[float, str]] = []

    def get(self, task_id: str) -> TaskRecord | None:
        return self._records.get(task_id)

    def save(self, record: TaskRecord, expected_version: int | None) -> None:
        current = self._records.get(record.task_id)
        found = None if current is None else current.version
        if found != expected_version:
            raise VersionConflict(record.task_id, expected_version, found)
        self._records[record.task_id] = record
        expires_at = record.expires_at
        if expires_at is not None and (current is None or current.expires_at != expires_at):
            heapq.heappush(self._expiry_heap, (expires_at, record.task_id))

    def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        current = self._records.get(task_id)
        if current is None:
            return False
        if expected_version is not None and current.version != expected_version:
            raise VersionConflict(task_id, expected_version, current.version)
        del self._records[task_id]
        return True

    def count(self) -> int:
        return len(self._records)

    def pop_due(self, now: float, limit: int = 1000) -> list[TaskRecord]:
        due: list[TaskRecord] = []
        heap = self._expiry_heap
        while heap and heap[0][0] <= now and len(due) < limit:
            expires_at, task_id = heapq.heappop(heap)
            record = self._records.get(task_id)
            if record is not None and record.expires_at == expires_at:
                due.append(record)
        return due

    def next_deadline(self) -> float | None:
        return self._expiry_heap[0][0] if self._expiry_heap else None

    def __len__(self) -> int:
        return len(self._records)
