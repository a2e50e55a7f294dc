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

A body must keep a pace (`BodyIntake.deadline`): after `body_grace_seconds`, its next bytes are due
one second later for every `min_body_bytes_per_second` bytes it has sent, and never
later than `body_timeout_seconds` after its head; a body late by that is refused with
408 and its connection closed, so a stalled sender holds neither its bytes nor its
connection for long. Time spent waiting for room is not the sender's, and does not count.
One `BodyIntake` per request keeps its count, its bytes held and its pace.

It runs on trio (the built-in server) and asyncio (the ASGI app under uvicorn); deadlines
are on the running loop's clock.
"""

from __future__ import annotations

from typing import Final

import anyio

from .._support.backend import cancel_scope, event
from ._http_rules import HttpConfig, Refusal, body_too_large

BUSY_RETRY_SECONDS: Final = 1
"""`Retry-After` of a request refused for want of room among the bodies in flight."""
LINGER_SECONDS: Final = 2.0
"""How long what a refused client still sends is read and dropped (after the answer on
the built-in server, before it on the ASGI app), so that closing does not reset the
connection under its unread answer."""
LINGER_BYTES: Final = 64 * 1024 * 1024
"""The most dropped so: a client sending more than this is cut off."""
LATE_BODY: Final = "Request timeout: the request body did not arrive in time"


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
        if self.take_now(size):
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

    def take_now(self, size: int) -> bool:
        """Hold `size` more bytes if there is room for them now (a body alone always
        fits): True if they are held."""
        if not self.held or self.held + size <= self.limit:
            self.held += size
            return True
        return False

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


class BodyIntake:
    """One request's body as it comes in: its bytes counted against `max_body_bytes` (413),
    held in the budget (503 without room within `body_wait_seconds` of waiting in all,
    however many times), due at the pace it must keep (`deadline`: 408 past it). Both HTTP
    drivers read a body through one; it gives its bytes back once the request is answered."""

    __slots__ = (
        "_budget",
        "_grace_end",
        "_limit",
        "_rate",
        "_wait_left",
        "chunks",
        "end",
        "held",
        "size",
    )

    def __init__(self, budget: ByteBudget, config: HttpConfig, now: float) -> None:
        self._budget = budget
        self._limit = config.max_body_bytes
        self._wait_left = config.body_wait_seconds
        self._rate = config.min_body_bytes_per_second
        self._grace_end = now + config.body_grace_seconds
        self.end = now + config.body_timeout_seconds
        self.held = 0  # bytes of the budget held
        self.size = 0  # bytes received
        self.chunks: list[bytes] = []

    def deadline(self) -> float:
        """When the next bytes are due."""
        if self._rate is None:
            return self.end
        return min(self.end, self._grace_end + self.size / self._rate)

    def late(self, deadline: float) -> Refusal:
        """The refusal of a body whose bytes due at `deadline` did not come."""
        if deadline < self.end:
            return slow_body()
        return Refusal(408, LATE_BODY, reason="timeout")

    async def take(self, chunk: bytes) -> None:
        """Count `chunk` in and hold its bytes (`Refusal` 413 past `max_body_bytes`, 503
        without room in time; either gives back what it held at once, for others may be
        waiting for the room). Time spent waiting for room is not the sender's."""
        self.size += len(chunk)
        if self.size > self._limit:
            self.give_back()
            raise body_too_large(self._limit)
        if self.size > self.held:
            waited = await self._budget.take(self.size - self.held, self._wait_left, self.held)
            if waited is None:
                self.give_back()
                raise Refusal(
                    503,
                    "The server is busy: too many request bodies in flight; try again shortly",
                    reason="busy",
                    retry_after_seconds=BUSY_RETRY_SECONDS,
                )
            self.held = self.size
            self._wait_left -= waited
            self.end += waited
            self._grace_end += waited
        self.chunks.append(chunk)

    def body(self) -> bytes:
        return b"".join(self.chunks)

    def give_back(self) -> None:
        self._budget.give_back(self.held)
        self.held = 0


def slow_body() -> Refusal:
    """The refusal of a body that came slower than `min_body_bytes_per_second`."""
    message = "Request timeout: the request body came too slowly (below the minimum rate)"
    return Refusal(408, message, reason="slow_body")
