"""Request bodies in flight: the byte budget they share, each one's share of it, and the
pace a body must keep. Used by one `serve_http` (over all its connections) and by one ASGI
app (over all its requests).

Theory of operation
-------------------
A request takes its body's bytes from the budget as they arrive (a `Content-Length` is a
promise, not bytes: a client that declares 4 MiB and sends 10 holds 10), and gives them
back once the server has answered. When the budget is spent, the request waits for room
(what it has not sent stays in the socket, where TCP holds the sender back) for up to
`body_wait_seconds`; then it is refused with 503 and `Retry-After`. A body alone never
waits: a request that is the only one holding bytes always fits. Past its share
(`body_share` of the budget), a body gives way to the requests holding less: while one
of those waits for room, it waits behind it.

A body must keep a pace (`BodyPace`): after `body_grace_seconds`, its next bytes are due
one second later for every `min_body_bytes_per_second` bytes it has sent, and never
later than `body_timeout_seconds` after its head; a body late by that is refused with
408 and its connection closed, so a stalled sender holds neither its bytes nor its
connection for long. Time spent waiting for room is not the sender's, and does not count.

It runs on trio (the built-in server) and asyncio (the ASGI app under uvicorn); deadlines
are on the running loop's clock.
"""

from __future__ import annotations

from typing import Final

from .._backend import cancel_scope, event
from ._http_rules import HttpConfig, Refusal

BUSY_RETRY_SECONDS: Final = 1
"""`Retry-After` of a request refused for want of room among the bodies in flight."""
LINGER_SECONDS: Final = 2.0
"""How long what a refused client still sends is read and dropped (after the answer on
the built-in server, before it on the ASGI app), so that closing does not reset the
connection under its unread answer."""
LINGER_BYTES: Final = 64 * 1024 * 1024
"""The most dropped so: a client sending more than this is cut off."""


class ByteBudget:
    """The bytes of request bodies held at once, at most `limit`; `share` of them (bytes)
    before a body gives way to smaller ones."""

    def __init__(self, limit: int, share: float = 1.0) -> None:
        self.limit = limit
        self.share = max(1, int(limit * share))
        self.held = 0
        self._freed = event()
        self._waiting = 0  # requests waiting for room
        self._waiting_within_share = 0  # those of them that hold less than a share

    @classmethod
    def of(cls, config: HttpConfig) -> ByteBudget:
        return cls(config.max_body_bytes_in_flight, config.body_share)

    async def take(self, size: int, deadline: float, holding: int = 0) -> bool:
        """Hold `size` more bytes for a body that holds `holding`, waiting until
        `deadline` (the loop's clock) for room; False if there was none by then."""
        within_share = holding + size <= self.share
        waited = False
        while self._must_wait(size, within_share):
            freed = self._freed
            self._waiting += 1
            self._waiting_within_share += within_share
            try:
                with cancel_scope(deadline=deadline):
                    await freed.wait()
            finally:
                self._waiting -= 1
                self._waiting_within_share -= within_share
            if not freed.is_set():
                return False
            waited = True
        self.held += size
        if waited and within_share:
            self._wake()  # one waiter fewer within its share: a larger body may go on
        return True

    def _must_wait(self, size: int, within_share: bool) -> bool:
        if not self.held:
            return False
        if self.held + size > self.limit:
            return True
        return not within_share and self._waiting_within_share > 0

    def give_back(self, size: int) -> None:
        if size:
            self.held -= size
            self._wake()

    def _wake(self) -> None:
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
        if not await self._budget.take(size, deadline, self.size):
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


class BodyPace:
    """When the next bytes of one body are due (the theory of operation says how)."""

    def __init__(self, config: HttpConfig, now: float) -> None:
        self.end = now + config.body_timeout_seconds
        self._grace_end = now + config.body_grace_seconds
        self._rate = config.min_body_bytes_per_second

    def deadline(self, received: int) -> float:
        """When the bytes after the first `received` are due."""
        if self._rate is None:
            return self.end
        return min(self.end, self._grace_end + received / self._rate)

    def pause(self, seconds: float) -> None:
        """`seconds` spent waiting for room: not the sender's time."""
        self.end += seconds
        self._grace_end += seconds


def slow_body() -> Refusal:
    """The refusal of a body that came slower than `min_body_bytes_per_second`."""
    message = "Request timeout: the request body came too slowly (below the minimum rate)"
    return Refusal(408, message, reason="slow_body")
