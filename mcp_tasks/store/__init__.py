"""Task stores: where task records live. All follow `TaskStore`.

`MemoryTaskStore` (the default: one process, gone when it stops), `SQLiteTaskStore` (one
process, durable across restarts), `RedisTaskStore` (several processes, any of them answers
for any task). `open_store(url)` opens the one a URL names.
"""

from ._base import Signal, Signals, StoreFull, StoreUnavailable, TaskStore
from ._memory import MemoryTaskStore
from ._open import STORE_URL_HELP, open_store
from ._redis import RedisTaskStore
from ._sqlite import SQLiteTaskStore, StoreLocked

__all__ = [
    "STORE_URL_HELP",
    "MemoryTaskStore",
    "RedisTaskStore",
    "SQLiteTaskStore",
    "Signal",
    "Signals",
    "StoreFull",
    "StoreLocked",
    "StoreUnavailable",
    "TaskStore",
    "open_store",
]
