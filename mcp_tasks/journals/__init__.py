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

from __future__ import annotations

from typing import TYPE_CHECKING

from .._support.lazy import lazy_names

if TYPE_CHECKING:
    from ._codec import FORMAT, JournalDamaged
    from ._playback import Playback, Replayed
    from ._recorder import Recorder, RecordingCore
    from ._replay import (
        DEFAULT_MAX_LINE_BYTES,
        ReplayFailed,
        ReplayResult,
        TimelineEvent,
        format_timeline,
        replay,
        timeline,
    )
    from ._writer import (
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
    "DEFAULT_MAX_LINE_BYTES",
    "FLUSH_SECONDS",
    "FORMAT",
    "MAX_QUEUED_BYTES",
    "JournalDamaged",
    "JournalWriter",
    "Playback",
    "Recorder",
    "RecordingCore",
    "ReplayFailed",
    "ReplayResult",
    "Replayed",
    "TimelineEvent",
    "format_timeline",
    "replay",
    "timeline",
]

_MODULES = {
    **dict.fromkeys(("FORMAT", "JournalDamaged"), "._codec"),
    **dict.fromkeys(("Playback", "Replayed"), "._playback"),
    **dict.fromkeys(("Recorder", "RecordingCore"), "._recorder"),
    **dict.fromkeys(
        (
            "DEFAULT_MAX_LINE_BYTES",
            "ReplayFailed",
            "ReplayResult",
            "TimelineEvent",
            "format_timeline",
            "replay",
            "timeline",
        ),
        "._replay",
    ),
    **dict.fromkeys(
        (
            "BATCH_BYTES",
            "DEFAULT_BACKUPS",
            "DEFAULT_MAX_BYTES",
            "FLUSH_SECONDS",
            "MAX_QUEUED_BYTES",
            "JournalWriter",
        ),
        "._writer",
    ),
}
"""The module each public name is loaded from, on first use: a server that does not
record loads none of them."""

if not TYPE_CHECKING:  # type checkers see the imports above
    __getattr__, __dir__ = lazy_names(__name__, globals(), _MODULES, __all__)
