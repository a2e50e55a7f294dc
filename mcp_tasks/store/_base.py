"""The store contract: records in, records out, compare-and-set on `version`.

A store knows no status rules and reads no clock: the core decides what a record becomes,
the store only keeps it. Writes name the version they expect to replace (None for a new
record), so two writers never overwrite each other: the loser gets `VersionConflict`, and
reloads. Expiry is indexed by `expires_at` so that finding the records whose time has come
costs O(expired), not O(all tasks).
"""

from __future__ import annotations

from typing import Protocol

from ..core import TaskRecord


class TaskStore(Protocol):
    def get(self, task_id: str) -> TaskRecord | None:
        """The record, or None if there is none (never created, or deleted)."""
        ...

    def save(self, record: TaskRecord, expected_version: int | None) -> None:
        """Write `record` if the stored version equals `expected_version` (None: absent).

        Raises `VersionConflict` otherwise, and writes nothing.
        """
        ...

    def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        """Remove the record (if at `expected_version`, when given). False if absent.

        Raises `VersionConflict` if the stored version differs from `expected_version`.
        """
        ...

    def count(self) -> int:
        """How many records the store holds."""
        ...

    def pop_due(self, now: float, limit: int = 1000) -> list[TaskRecord]:
        """Up to `limit` records whose `expires_at` is at or before `now`, each returned once.

        The records stay stored: hand each to the core's `expire_task` and perform its
        effects (which delete it). A record saved again with a new expiry is indexed anew.
        """
        ...

    def next_deadline(self) -> float | None:
        """The earliest `expires_at` indexed (possibly of a record deleted since), or None."""
        ...
