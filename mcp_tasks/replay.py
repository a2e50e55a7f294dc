"""Replaying a journal: `replay(path)`, `timeline(path, task_id)`, `mcp-tasks replay PATH`.

A face of `mcp_tasks.journals`: each line is fed through a fresh core and its answer
compared with the recorded one; the first difference raises `ReplayFailed` with a report.
"""

from .journals import _replay
from .journals._replay import *  # noqa: F403  (replay's public names, as they are)

__all__ = _replay.__all__
