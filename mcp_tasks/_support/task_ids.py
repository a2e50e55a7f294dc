"""Task ids: 24 bytes each from the system's random source, drawn for many ids at once.

One draw of the source (a system call) for every `IDS_PER_DRAW` ids, instead of one an
id: an id is still 24 random bytes that no other id shares. A child process made by
`fork` forgets what its parent drew, so the two never hand out the same id.
"""

from __future__ import annotations

import base64
import os
import weakref
from typing import Final

ID_BYTES: Final = 24
"""Random bytes in an id: 32 characters of URL-safe base64 (24 is a multiple of 3, so no
padding)."""
IDS_PER_DRAW: Final = 256
_ID_CHARS: Final = ID_BYTES // 3 * 4


class TaskIds:
    """Makes ids `prefix` + 32 URL-safe characters; call it for the next one."""

    __slots__ = ("__weakref__", "_at", "_drawn", "prefix")

    def __init__(self, prefix: str = "tsk_") -> None:
        self.prefix = prefix
        self._drawn = ""
        self._at = 0
        _all_ids.add(self)

    def __call__(self) -> str:
        at = self._at
        if at >= len(self._drawn):
            self._drawn = base64.urlsafe_b64encode(os.urandom(ID_BYTES * IDS_PER_DRAW)).decode()
            at = 0
        self._at = at + _ID_CHARS
        return self.prefix + self._drawn[at : at + _ID_CHARS]

    def forget(self) -> None:
        """Drop what was drawn and not yet handed out."""
        self._drawn, self._at = "", 0


_all_ids: weakref.WeakSet[TaskIds] = weakref.WeakSet()


def _forget_in_child() -> None:
    for ids in list(_all_ids):
        ids.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)

__all__ = ["IDS_PER_DRAW", "ID_BYTES", "TaskIds"]
