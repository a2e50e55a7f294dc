"""Recording a server's session to a journal: `Server.record(path)`, `serve --record PATH`.

A face of `mcp_tasks.journals`: `JournalWriter` is where a `Recorder`'s lines go (a file,
rotated at a size limit, written by a thread of its own; see its docstring).
"""

from .journals import _writer
from .journals._writer import *  # noqa: F403  (the writer's public names, as they are)

__all__ = _writer.__all__
