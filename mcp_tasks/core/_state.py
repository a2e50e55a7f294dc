"""The task status machine: one table.

Theory of operation
-------------------
A task is born `working` (the table's initial status). After that, *everything* that changes
a task's status is a row of `TRANSITIONS` below, and any (status, event) pair missing from
it is illegal: `next_status` raises `IllegalTransition` for it, and nothing else in the
library checks status rules a second time.

* `completed`, `failed` and `cancelled` are terminal: no row leaves them.
* `need_input` may repeat while input is outstanding (a handler may ask again before the
  first answer comes); `input_answered` fires once every outstanding request is answered.
* `expire` ends an unfinished task whose TTL ran out (as `failed`). The core deletes such
  a record at once, so clients see `-32602` for it, never the `failed` status.

The table is given to `transitions` to build one machine for the whole module (never one
per task: that would cost kilobytes and tens of microseconds per task). The machine is the
validated source of truth; `next_status` reads a plain dict derived from it once at import.
"""

from __future__ import annotations

import enum
from typing import Final

from transitions import Machine

from ._errors import IllegalTransition


class TaskStatus(enum.StrEnum):
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL


class TaskEvent(enum.StrEnum):
    NEED_INPUT = "need_input"
    INPUT_ANSWERED = "input_answered"
    COMPLETE = "complete"
    FAIL = "fail"
    CANCEL = "cancel"
    EXPIRE = "expire"
    ORPHAN = "orphan"
    """The process running the handler stopped (restart, crash, lost lease)."""
    RESTART = "restart"
    """Like ORPHAN, for a resumable tool: its handler runs again from the start."""


_TERMINAL: Final = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})
_ACTIVE: Final = [TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED]

INITIAL_STATUS: Final = TaskStatus.WORKING

# event             from                          to
TRANSITIONS: Final = [
    (TaskEvent.NEED_INPUT, _ACTIVE, TaskStatus.INPUT_REQUIRED),
    (TaskEvent.INPUT_ANSWERED, [TaskStatus.INPUT_REQUIRED], TaskStatus.WORKING),
    (TaskEvent.COMPLETE, _ACTIVE, TaskStatus.COMPLETED),
    (TaskEvent.FAIL, _ACTIVE, TaskStatus.FAILED),
    (TaskEvent.CANCEL, _ACTIVE, TaskStatus.CANCELLED),
    (TaskEvent.EXPIRE, _ACTIVE, TaskStatus.FAILED),
    (TaskEvent.ORPHAN, _ACTIVE, TaskStatus.FAILED),
    (TaskEvent.RESTART, _ACTIVE, TaskStatus.WORKING),
]

MACHINE: Final = Machine(
    model=None,
    states=[status.value for status in TaskStatus],
    transitions=[
        {"trigger": event.value, "source": [s.value for s in sources], "dest": dest.value}
        for event, sources, dest in TRANSITIONS
    ],
    initial=INITIAL_STATUS.value,
    auto_transitions=False,
)


def _table_from_machine(machine: Machine) -> dict[tuple[TaskStatus, TaskEvent], TaskStatus]:
    table: dict[tuple[TaskStatus, TaskEvent], TaskStatus] = {}
    for event_name, event in machine.events.items():
        for source, transitions in event.transitions.items():
            (only,) = transitions  # one destination per (status, event): no guards
            assert only.dest is not None  # no internal (destination-less) transitions
            table[TaskStatus(source), TaskEvent(event_name)] = TaskStatus(only.dest)
    return table


_TABLE: Final = _table_from_machine(MACHINE)


def next_status(status: TaskStatus, event: TaskEvent) -> TaskStatus:
    """The status after `event`, or `IllegalTransition` if the table has no such row."""
    try:
        return _TABLE[status, event]
    except KeyError:
        raise IllegalTransition(f"can't {event.value} a task that is {status.value}") from None


def can_happen(status: TaskStatus, event: TaskEvent) -> bool:
    return (status, event) in _TABLE


def transition_table() -> dict[tuple[TaskStatus, TaskEvent], TaskStatus]:
    """A copy of the whole table, for docs and tests."""
    return dict(_TABLE)


def mermaid_diagram() -> str:
    """The state diagram of the table, in Mermaid syntax, for the docs."""
    lines = ["stateDiagram-v2", f"    [*] --> {INITIAL_STATUS.value}"]
    for (source, event), dest in sorted(_TABLE.items()):
        lines.append(f"    {source.value} --> {dest.value}: {event.value}")
    lines.extend(f"    {status.value} --> [*]" for status in TaskStatus if status.is_terminal)
    return "\n".join(lines) + "\n"
