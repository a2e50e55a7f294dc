"""Waiting for a task to change: what a 2025 client's `tasks/result` and its session's
`notifications/tasks/status` wait on.

Whoever waits takes a `Change` (`next_change`) before it reads the task, so a save made
between the read and the wait is not missed, and waits on its event. Every save this
process makes (the interpreter's `SaveTask`, `DeleteTask`) and every `changed` signal of
another process on a shared store sets the events of that task's waiters (`changed`), and
hands them the record when it was saved here. With nobody waiting (the rule for a server
without 2025 task clients) a save pays one truth test of an empty dict.
"""

from __future__ import annotations

from .._support.backend import Event, event
from ..core import TaskRecord

__all__ = ["Change", "TaskWatch"]


class Change:
    """One waiter's next change of one task: `happened` is set when it comes, `record`
    is the record as saved (None: deleted, or saved by another process)."""

    __slots__ = ("happened", "record")

    def __init__(self) -> None:
        self.happened: Event = event()
        self.record: TaskRecord | None = None


class TaskWatch:
    """The waiters of each task's next change."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting: dict[str, list[Change]] = {}
        """Task id -> the changes awaited (empty: nobody waits; saves skip `changed`)."""

    def next_change(self, task_id: str) -> Change:
        """Wait for the next change of `task_id` on the returned `Change`; `forget` it
        once done with it."""
        change = Change()
        self.waiting.setdefault(task_id, []).append(change)
        return change

    def forget(self, task_id: str, change: Change) -> None:
        waiters = self.waiting.get(task_id)
        if waiters is not None and change in waiters:
            waiters.remove(change)
            if not waiters:
                del self.waiting[task_id]

    def changed(self, task_id: str, record: TaskRecord | None = None) -> None:
        """`task_id` changed (to `record`, when known): wake its waiters."""
        for change in self.waiting.pop(task_id, ()):
            change.record = record
            change.happened.set()
