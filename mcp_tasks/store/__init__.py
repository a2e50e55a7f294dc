"""Task stores: where task records live. Memory by default; all follow `TaskStore`."""

from ._base import TaskStore
from ._memory import MemoryTaskStore

__all__ = ["MemoryTaskStore", "TaskStore"]
