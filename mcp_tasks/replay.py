"""Replaying a journal: `replay(path)`, `timeline(path, task_id)`, `mcp-tasks replay PATH`.

A face of `mcp_tasks.journals`: each line is fed through a fresh core and its answer
compared with the recorded one; the first difference raises `ReplayFailed` with a report.
"""

from .journals._replay import (
    DEFAULT_MAX_LINE_BYTES,
    ReplayFailed,
    ReplayResult,
    TimelineEvent,
    format_timeline,
    replay,
    timeline,
)

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "ReplayFailed",
    "ReplayResult",
    "TimelineEvent",
    "format_timeline",
    "replay",
    "timeline",
]
