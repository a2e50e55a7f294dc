"""A client's resume log: the tasks it was waiting for, so it can go on after a restart.

(Its name before issue 28 was the task journal; journals are now the server's records of
what it handled, `mcp_tasks.journals`.) The log is an append-only file of JSON lines, one
event each:

    {"event": "started", "task_id": ..., "tool": ..., "at": ...}
    {"event": "answered", "task_id": ..., "keys": [...]}
    {"event": "ended", "task_id": ..., "status": ...}

Answers are logged after the server acknowledged them. A crash between the two leaves
the key unlogged, but the server has consumed it, so it is no longer outstanding and is
not asked again; a key the server never got is still outstanding and is rightly asked
again. Each line is flushed and fsynced before the call returns. A torn last line (a crash
mid-write) is skipped when the log is read.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec


@dataclass
class ResumeEntry:
    task_id: str
    tool: str
    started_at: float
    answered: set[str] = field(default_factory=set)
    ended: str | None = None
    """The terminal status, once the task ended (or None while it may still run)."""


class _Event(msgspec.Struct, omit_defaults=True):
    event: str
    task_id: str
    tool: str = ""
    at: float = 0.0
    keys: list[str] = []
    status: str = ""


_decoder = msgspec.json.Decoder(_Event)
_encoder = msgspec.json.Encoder()


class ResumeLog:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.entries: dict[str, ResumeEntry] = {}
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        for line in self.path.read_bytes().splitlines():
            try:
                event = _decoder.decode(line)
            except msgspec.DecodeError:
                continue  # a torn write at a crash, or foreign text: not ours to act on
            self._apply(event)

    def _apply(self, event: _Event) -> None:
        if event.event == "started":
            self.entries[event.task_id] = ResumeEntry(event.task_id, event.tool, event.at)
            return
        entry = self.entries.get(event.task_id)
        if entry is None:
            return
        if event.event == "answered":
            entry.answered.update(event.keys)
        elif event.event == "ended":
            entry.ended = event.status

    def _append(self, event: _Event) -> None:
        self._apply(event)
        with self.path.open("ab") as file:
            file.write(_encoder.encode(event) + b"\n")
            file.flush()
            os.fsync(file.fileno())

    def started(self, task_id: str, tool: str) -> None:
        self._append(_Event(event="started", task_id=task_id, tool=tool, at=time.time()))

    def answered(self, task_id: str, keys: list[str]) -> None:
        if keys:
            self._append(_Event(event="answered", task_id=task_id, keys=sorted(keys)))

    def ended(self, task_id: str, status: str) -> None:
        self._append(_Event(event="ended", task_id=task_id, status=status))

    def pending(self) -> list[ResumeEntry]:
        """Tasks started and not known to have ended, oldest first."""
        open_entries = [e for e in self.entries.values() if e.ended is None]
        return sorted(open_entries, key=lambda entry: entry.started_at)

    def answered_keys(self, task_id: str) -> frozenset[str]:
        entry = self.entries.get(task_id)
        return frozenset() if entry is None else frozenset(entry.answered)
