"""Journals: a server's inputs written down as they are handled, and replayed.

`Server.record(path)` (or `mcp-tasks serve --record PATH`) wraps the core's one entry,
`handle(input, now)`, in a `Recorder`: each input, what the core drew while it decided
(task ids, seals, verdicts) and its answer go to a `JournalWriter`, a file rotated at a
size limit and written by a thread of its own. `replay(path)` feeds a journal's lines
through a fresh core and stops at the first answer that differs; `timeline(path, task_id)`
tells one task's life. The codec, the recorder and the playback are pure (no I/O); the
writer and `replay` do the file work. `mcp_tasks.recording`, `mcp_tasks.replay` and
`mcp_tasks.testing` are faces of this package.
"""

from . import _replay, _writer
from ._codec import FORMAT, JournalDamaged
from ._playback import Playback, Replayed
from ._recorder import Recorder, RecordingCore
from ._replay import *  # noqa: F403  (replaying: `replay`, `timeline`, `ReplayFailed`...)
from ._writer import *  # noqa: F403  (writing: `JournalWriter` and its limits)

__all__ = ["FORMAT", "JournalDamaged", "Playback", "Recorder", "RecordingCore", "Replayed"]
__all__ += _replay.__all__
__all__ += _writer.__all__
