"""The client's resume log under its name of before issue 28: `mcp_tasks.client.ResumeLog`.

Kept one release: `TaskJournal` is `ResumeLog`, `JournalEntry` is `ResumeEntry`.
"""

from .client._resume import ResumeEntry as JournalEntry
from .client._resume import ResumeLog as TaskJournal

__all__ = ["JournalEntry", "TaskJournal"]
