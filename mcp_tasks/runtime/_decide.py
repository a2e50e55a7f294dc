"""The one place the runtime calls the core.

Every part of the runtime that needs a decision (the interpreter for each message and
handler outcome, the task runner for its handlers' news, the background loops for timers
and lapsed leases, the listen streams for their messages) reaches the same `Decide`, as
`shared.decide` (`Shared`), and calls it with an input; it hands the input to the core
with the time, and nothing else reaches the core. Recording swaps the core behind it
(`use`), so no part is rewired.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, overload

from ..core import Need, Step
from ..core.inputs import Input, Received, StepInput, ToolReturned


class Handles(Protocol):
    """The core's one entry (`ServerCore`, or a journal's `Recorder` wrapping it)."""

    def handle(self, input: Input, now: float) -> Step | Need: ...


class Decide:
    """Call it with an input: the core's `Step` or `Need`, decided at the clock's now."""

    __slots__ = ("_clock", "core")

    def __init__(self, core: Handles, clock: Callable[[], float]) -> None:
        self.core = core
        self._clock = clock

    @overload
    def __call__(self, input: Received | ToolReturned) -> Step | Need: ...
    @overload
    def __call__(self, input: StepInput) -> Step: ...
    def __call__(self, input: Received | ToolReturned | StepInput) -> Step | Need:
        return self.core.handle(input, self._clock())

    def use(self, core: Handles) -> None:
        """Decide with `core` from now on (a recording core wrapping the one before)."""
        self.core = core
