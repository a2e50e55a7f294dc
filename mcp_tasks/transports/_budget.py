"""The byte budget of request bodies in flight: what one `serve_http` reads and handles at
once, over all its connections.

A request takes its body's bytes from the budget before (and, for a chunked body, while)
it is read, and gives them back once the server has answered. When the budget is spent, a
request waits (its body stays in the socket, where TCP holds the sender back) for up to
`wait_seconds`; then it is refused with 503 and `Retry-After`. A body alone never waits
for more than the whole budget (which is at least `max_body_bytes`): a request that is the
only one in flight always fits. It runs on trio (the built-in server) and asyncio (the ASGI
app under uvicorn); deadlines are on the running loop's clock.
"""

from __future__ import annotations

from typing import Final

from .._backend import cancel_scope, event
from ._http_rules import Refusal

BUSY_RETRY_SECONDS: Final = 1
"""`Retry-After` of a request refused for want of room among the bodies in flight."""


class ByteBudget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._freed = event()
        self._waiting = 0  # requests waiting for room

    async def take(self, size: int, deadline: float) -> bool:
        """Hold `size` more bytes, waiting until `deadline` (the loop's clock) for room;
        False if there was none by then."""
        while self.held and self.held + size > self.limit:
            freed = self._freed
            self._waiting += 1
            try:
                with cancel_scope(deadline=deadline):
                    await freed.wait()
            finally:
                self._waiting -= 1
            if not freed.is_set():
                return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        if size:
            self.held -= size
            if self._waiting:  # a new event only when someone waited on this one
                self._freed.set()
                self._freed = event()


class HeldBytes:
    """The bytes of the budget one request's body holds; a refusal (503) when there is
    no room for more by the deadline."""

    def __init__(self, budget: ByteBudget) -> None:
        self._budget = budget
        self.size = 0

    async def take(self, size: int, deadline: float) -> None:
        if not await self._budget.take(size, deadline):
            raise Refusal(
                503,
                "The server is busy: too many request bodies in flight; try again shortly",
                reason="busy",
                retry_after_seconds=BUSY_RETRY_SECONDS,
            )
        self.size += size

    def give_back(self) -> None:
        self._budget.give_back(self.size)
        self.size = 0
