"""What the runtime's parts share, and `Server` may change before it runs.

Theory of operation
-------------------
The parts (`Interpreter`, `TaskRunner`, `Background`) are given their collaborators
when `Server` makes them: the `Decide`, the runner, the listen streams, the tool threads.
Those never change. A few things do: `use_store` and `use_telemetry` swap the store (and
its telemetry wrapper), the command line sets `lease_seconds`, leaving `running()` sets
`closing`. Those live here, in one object every part holds, so a swap made on `Server`
is seen by every part at once, and no part can be left holding the store before it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..store import TaskStore
from ..transports._telemetry import Telemetry


class Shared:
    """The store, the telemetry, the clock, the lease length and the closing flag, as the
    server holds them now."""

    __slots__ = ("_clock", "closing", "lease_seconds", "store", "telemetry")

    def __init__(
        self,
        store: TaskStore,
        telemetry: Telemetry,
        clock: Callable[[], float],
        lease_seconds: float,
    ) -> None:
        self.store = store
        self.telemetry = telemetry
        self._clock = clock
        self.lease_seconds = lease_seconds
        self.closing = False
        """Leaving `running()`: new tool calls are refused."""

    def now(self) -> float:
        return self._clock()

    def lease_until(self) -> float:
        """The end of a lease taken or renewed now. A store only this process uses hears
        of no other process to take over: its leases never lapse while it runs."""
        return self.now() + self.lease_seconds if self.store.coordination.shared else math.inf

    @property
    def poll_seconds(self) -> float:
        """How often loops waiting on a shared store look again."""
        return min(1.0, self.lease_seconds / 3)
