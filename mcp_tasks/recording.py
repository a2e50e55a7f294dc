"""Recording a server's session to a journal: `Server.record(path)`, `serve --record PATH`.

A face of `mcp_tasks.journals`: `JournalWriter` is where a `Recorder`'s lines go (a file,
rotated at a size limit, written by a thread of its own; see its docstring).
"""

from .journals._writer import (
    BATCH_BYTES,
    DEFAULT_BACKUPS,
    DEFAULT_MAX_BYTES,
    FLUSH_SECONDS,
    MAX_QUEUED_BYTES,
    JournalWriter,
)

__all__ = [
    "BATCH_BYTES",
    "DEFAULT_BACKUPS",
    "DEFAULT_MAX_BYTES",
    "FLUSH_SECONDS",
    "MAX_QUEUED_BYTES",
    "JournalWriter",
]
