"""What the runtime's parts share, and `Server` may change before it runs.

Theory of operation
-------------------
Every part (`Interpreter`, `TaskRunner`, `Background`, `ListenStreams`) holds this one
object, made by `Server` before them. It carries what all or several of them use: the
`Decide` (the one way to the core), the worker threads of plain-function tools, and the
`ExpiryAlarm` by which a `WakeAt` reaches the expiry loop; those never change. A few things
do: `use_store` and `use_telemetry` swap the store (and its telemetry wrapper), the command
line sets `lease_seconds`, leaving `running()` sets `closing`. Those live here too, so a
swap made on `Server` is seen by every part at once, and no part can be left holding the
store before it. What only one or two parts use (the runner, the listen streams, the
interpreter) they are handed by `Server` as parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .._support.backend import Event
from ..store import TaskStore
from ..transports._telemetry import Telemetry
from ._decide import Decide
from ._task_watch import TaskWatch
from ._threads import ToolThreads


class ExpiryAlarm:
    """How a `WakeAt` reaches the expiry loop: the interpreter calls `wake_at`, the loop
    sleeps on it. Made before either of them, so neither holds the other."""

    __slots__ = ("sleeping_until", "wake")

    def __init__(self) -> None:
        self.wake: Event | None = None
        """Set to wake the expiry loop (None while it does not run: it reads the store's
        next deadline when it starts)."""
        self.sleeping_until = math.inf
        """Until when the expiry loop sleeps (inf while it is awake: any deadline counts)."""

    def wake_at(self, deadline: float) -> None:
        """A record's expiry is due at `deadline`: wake the expiry loop if it sleeps past it."""
        if self.wake is not None and deadline < self.sleeping_until:
            self.wake.set()


class Shared:
    """The `Decide`, the tool threads and the expiry alarm; the store, the telemetry, the
    clock, the lease length and the closing flag, as the server holds them now."""

    __slots__ = (
        "_clock",
        "alarm",
        "closing",
        "decide",
        "lease_seconds",
        "store",
        "telemetry",
        "tool_threads",
        "watch",
    )

    def __init__(
        self,
        decide: Decide,
        tool_threads: ToolThreads,
        store: TaskStore,
        telemetry: Telemetry,
        *,
        clock: Callable[[], float],
        lease_seconds: float,
    ) -> None:
        self.decide = decide
        """The one way to the core: `shared.decide(input)`."""
        self.tool_threads = tool_threads
        """The worker threads plain-function tools hold, in a task or not."""
        self.alarm = ExpiryAlarm()
        self.watch = TaskWatch()
        """Who waits for which task to change (a 2025 client's `tasks/result`)."""
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
