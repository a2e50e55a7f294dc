"""Request bodies in flight: the byte budget they share, and the pace a body must keep.
Used by one `serve_http` (over all its connections) and by one ASGI app (over all its
requests).

Theory of operation
-------------------
A request takes its body's bytes from the budget as they arrive (a `Content-Length` is a
promise, not bytes: a client that declares 4 MiB and sends 10 holds 10), and gives them
back once the server has answered. When the budget is spent, the request waits for room
(what it has not sent stays in the socket, where TCP holds the sender back) for up to
`body_wait_seconds`; then it is refused with 503 and `Retry-After`. A body alone never
waits: a request that is the only one holding bytes always fits. Bodies partly received
can fill the budget between them, each waiting for room the others hold: when every byte
held is a waiting body's, the one holding the least gives way at once (503), and the
room it frees lets the others finish.

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

import anyio

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
    """The bytes of request bodies held at once, at most `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._freed = event()
        self._waiters: dict[object, int] = {}  # a waiting body: the bytes it holds
        self._held_by_waiters = 0

    @classmethod
    def of(cls, config: HttpConfig) -> ByteBudget:
        return cls(config.max_body_bytes_in_flight)

    async def take(self, size: int, wait_seconds: float, holding: int = 0) -> float | None:
        """Hold `size` more bytes for a body that holds `holding`, waiting up to
        `wait_seconds` for room: the seconds it waited, or None if there was none (or
        this body is the one to give way: `_must_give_way`)."""
        if not self.held or self.held + size <= self.limit:
            self.held += size
            return 0.0
        started = anyio.current_time()
        waiter = object()
        self._waiters[waiter] = holding
        self._held_by_waiters += holding
        try:
            if not await self._wait_for_room(waiter, size, started + wait_seconds):
                return None
        finally:
            del self._waiters[waiter]
            self._held_by_waiters -= holding
        self.held += size
        return anyio.current_time() - started

    async def _wait_for_room(self, waiter: object, size: int, deadline: float) -> bool:
        while self.held and self.held + size > self.limit:
            if self._must_give_way(waiter):
                return False
            freed = self._freed
            with cancel_scope(deadline=deadline):
                await freed.wait()
            if not freed.is_set():
                return False
        return True

    def _must_give_way(self, waiter: object) -> bool:
        """Whether `waiter` is to be refused at once: every byte held is a waiting
        body's (room will never come), and it holds the least of them (the last come,
        of those holding as little). Another is to: it is woken to see it."""
        if self._held_by_waiters < self.held:
            return False  # bodies being handled, or still coming: room may come
        least = min(reversed(self._waiters.items()), key=lambda item: item[1])[0]
        if least is waiter:
            return True
        self._wake()
        return False

    def give_back(self, size: int) -> None:
        if size:
            self.held -= size
            self._wake()

    def _wake(self) -> None:
        if self._waiters:  # a new event only when someone waits on this one
            self._freed.set()
            self._freed = event()


class HeldBytes:
    """The bytes of the budget one request's body holds; a refusal (503) when there is
    no room for more within `wait_seconds` (of waiting in all, however many times)."""

    def __init__(self, budget: ByteBudget, wait_seconds: float) -> None:
        self._budget = budget
        self._wait_left = wait_seconds
        self.size = 0

    async def take(self, size: int) -> float:
        """Hold `size` more bytes: the seconds it waited for room (503 past the wait)."""
        if size <= 0:
            return 0.0
        waited = await self._budget.take(size, self._wait_left, self.size)
        if waited is None:
            raise Refusal(
                503,
                "The server is busy: too many request bodies in flight; try again shortly",
                reason="busy",
                retry_after_seconds=BUSY_RETRY_SECONDS,
            )
        self.size += size
        self._wait_left -= waited
        return waited

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
