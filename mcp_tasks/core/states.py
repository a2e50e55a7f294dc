"""The task status table: which event moves a task from which status to which, as data
(`TRANSITIONS`), as questions (`can_happen`, `next_status`), as a table or a diagram.
`TaskStatus` and `TaskEvent` themselves are in `mcp_tasks.core`.
"""

from ._state import (
    INITIAL_STATUS,
    TRANSITIONS,
    TaskEvent,
    TaskStatus,
    can_happen,
    mermaid_diagram,
    next_status,
    transition_table,
)

__all__ = [
    "INITIAL_STATUS",
    "TRANSITIONS",
    "TaskEvent",
    "TaskStatus",
    "can_happen",
    "mermaid_diagram",
    "next_status",
    "transition_table",
]
