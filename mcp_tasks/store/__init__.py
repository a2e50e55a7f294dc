"""Task stores: where task records live. All follow `TaskStore` (the records) and offer a
`Coordination` (leases, signals, the shared key, single use) as `store.coordination`; a
store one process uses takes `LocalCoordination`.

`MemoryTaskStore` (the default: one process, gone when it stops), `SQLiteTaskStore` (one
process, durable across restarts), `RedisTaskStore` (several processes, any of them answers
for any task). `open_store(url)` opens the one a URL names.

The durable stores are loaded on first use (PEP 562), so sqlite3 and redis are imported only
by a program that uses them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._base import (
    EXPIRY_CLAIM_SECONDS,
    Coordination,
    Signal,
    Signals,
    StoreFull,
    StoreUnavailable,
    TaskStore,
    redacted,
)
from ._local import LocalCoordination
from ._memory import MemoryTaskStore
from ._open import STORE_URL_HELP, open_store
from ._sessions import MemorySessions, SessionLimits, SessionRecord, SessionRecords, sessions_of

if TYPE_CHECKING:
    from ._redis import RedisTaskStore
    from ._sqlite import SQLiteTaskStore, StoreLocked

_LAZY = {"RedisTaskStore": "._redis", "SQLiteTaskStore": "._sqlite", "StoreLocked": "._sqlite"}
"""The module each durable store's name is loaded from, on first use."""


if not TYPE_CHECKING:  # type checkers see the imports above, and a misspelt name is an error

    def __getattr__(name: str) -> object:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # the next use is a plain lookup
        return value


def __dir__() -> list[str]:
    """The public names are `__all__`, loaded or not."""
    return sorted({*(name for name in globals() if name.startswith("_")), *__all__})


__all__ = [
    "EXPIRY_CLAIM_SECONDS",
    "STORE_URL_HELP",
    "Coordination",
    "LocalCoordination",
    "MemorySessions",
    "MemoryTaskStore",
    "RedisTaskStore",
    "SQLiteTaskStore",
    "SessionLimits",
    "SessionRecord",
    "SessionRecords",
    "Signal",
    "Signals",
    "StoreFull",
    "StoreLocked",
    "StoreUnavailable",
    "TaskStore",
    "open_store",
    "redacted",
    "sessions_of",
]
