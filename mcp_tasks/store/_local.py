"""`LocalCoordination`: the coordination half for a store one process uses.

With one process there is nobody to coordinate with: no signals to carry, no lease that
another process could take over, no key to agree on. What is left is kept in this
process's memory and ends with it:

* leases: a dict of task id -> lease end. One process holds them all and they end with it,
  so none ever lapses (`lapsed` is always empty). The store's own `save` and `delete` take
  and drop them in the same step as their write, through `hold` and `drop` (no await:
  nothing can come between the write and the lease);
* `use_once`: a dict of keys and a heap of when each may be forgotten, soonest first, so
  forgetting costs O(forgotten · log n);
* `shared_key`: the proposal itself (a store that keeps tasks across restarts wants a key
  that does too, and brings its own coordination: SQLite).
"""

from __future__ import annotations

import heapq
import secrets

from ._base import Signals


class LocalCoordination:
    """Leases, single use and the shared key of a store only this process uses, kept in
    memory; no signals. `MemoryTaskStore` uses it; so may a custom store of one process."""

    shared = False
    """Only this process uses the store: leases never need renewing."""

    def __init__(self, origin: str | None = None) -> None:
        self.origin = "local_" + secrets.token_hex(6) if origin is None else origin
        self._leases: dict[str, float] = {}
        self._used: dict[str, float] = {}
        self._used_heap: list[tuple[float, str]] = []
        """`use_once` keys and when each may be forgotten, soonest first."""

    @property
    def signals(self) -> Signals | None:
        """None: no other process to tell anything."""
        return None

    def hold(self, task_id: str, until: float) -> None:
        """This process holds the lease on `task_id` until `until`: what a store's `save`
        with `lease_until` does, in the same step as its write."""
        self._leases[task_id] = until

    def drop(self, task_id: str) -> None:
        """The lease on `task_id` is gone: what a store's `save` with `active=False`, and
        its `delete`, do in the same step as their write."""
        self._leases.pop(task_id, None)

    async def claim(self, task_id: str, until: float) -> None:
        self._leases[task_id] = until

    async def renew(self, task_ids: list[str], until: float) -> None:
        for task_id in task_ids:
            if task_id in self._leases:
                self._leases[task_id] = until

    async def release(self, task_id: str) -> None:
        self._leases.pop(task_id, None)

    async def lease_holder(self, task_id: str, now: float) -> str | None:
        until = self._leases.get(task_id)
        return self.origin if until is not None and until > now else None

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        return []  # one process holds every lease, and they end with it

    async def shared_key(self, proposal: bytes) -> bytes:
        return proposal  # nobody to share it with

    async def use_once(self, key: str, until: float, now: float) -> bool:
        heap = self._used_heap
        while heap and heap[0][0] < now:
            _, old = heapq.heappop(heap)
            if self._used.get(old, now) < now:
                del self._used[old]
        if key in self._used:
            return False
        self._used[key] = until
        heapq.heappush(heap, (until, key))
        return True

    def __repr__(self) -> str:
        return f"LocalCoordination(origin={self.origin!r})"
