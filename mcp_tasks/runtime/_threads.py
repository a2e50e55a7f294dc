"""Worker threads for plain-function tools: a bound that counts the abandoned ones too.

Theory of operation
-------------------
A plain-function (`def`) tool runs in a worker thread, and Python cannot stop a thread:
when its call is cancelled (the client hung up, `notifications/cancelled`, `tasks/cancel`)
the call stops waiting, but the thread runs on until the function returns. anyio's
`to_thread` then forgets it: on asyncio the limiter's token comes back at once and
abandoned threads pile up without bound (120 abandoned calls, 125 threads); on trio it
stays taken, so forty abandoned threads starve every later call (a quick one waited 25 s),
and the store's threads with them. `ToolThreads` counts each thread until it has ended:

* A call takes one of `ServerOptions.max_tool_threads` slots before its thread starts, and
  the thread gives it back itself, as the function returns: so a thread whose call was
  cancelled keeps its slot for as long as it runs. The count is a plain integer under a
  `threading.Lock`; nothing else crosses between the thread and the event loop.
* The threads come from a limiter of their own (with no limit: the slots are the bound),
  never anyio's default one that the SQLite store's worker uses: tools never starve it.
* With every slot held, a call waits at most `wait_seconds` (0.25 s) for one, then is
  refused, retryable: HTTP 503 with `Retry-After: 1`, -32603 with `data.retryAfterMs`. The
  answer comes in well under a second however many threads are stuck. A task's run waits
  as long as it takes: it was accepted already, and `tasks/cancel` ends the wait. A waiter
  is woken when a call hands its slot back; a slot an abandoned thread gives back is seen
  within `POLL_SECONDS`.
* The call's context hears of the cancellation (`ToolContext.cancelled`, a
  `threading.Event` underneath): a function that checks it ends early, and its slot is
  free again. A call cancelled before its thread started never starts the function.

Measured (soak/tool_threads.py, docs/reliability.md): 500 calls hung up on leave 32
threads, and a fresh call is refused in 0.25 s. A slot costs a lock and no task, so a
trivial plain function is served about as fast as before.

Log lines (rate-limited, a few per cause and window, on `mcp_tasks.server`): a call
cancelled while its function runs on (WARNING), a call refused for want of a thread
(WARNING), and an abandoned thread that has ended (INFO).
"""

from __future__ import annotations

import contextvars
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.to_thread

from .._support.backend import Event, event
from .._support.logs import RateLimitedLog
from ..core import (
    Reply,
)
from ..core.wire import (
    INTERNAL_ERROR,
    RequestId,
    error_body,
)

logger = logging.getLogger("mcp_tasks.server")

WAIT_SECONDS: Final = 0.25
"""How long a call (not a task's run) waits for a free tool thread before it is refused."""
POLL_SECONDS: Final = 0.05
"""How soon a waiter sees a slot that an abandoned thread gave back (the thread cannot wake
it: it only counts)."""
RETRY_AFTER_MS: Final = 1000
"""The wait a refused call is advised to leave before it tries again."""


class ToolThreadsFull(Exception):
    """Every tool thread is held and the call may not wait longer: refused, retryable."""

    def __init__(self, tool: str, limit: int) -> None:
        super().__init__(
            f"No worker thread is free for tool {tool!r} (all {limit} are busy); try again shortly"
        )

    def reply(self, request_id: RequestId | None) -> Reply:
        """The refusal: -32603 with `data.retryAfterMs`, over HTTP 503 with `Retry-After`."""
        body = error_body(request_id, INTERNAL_ERROR, str(self), {"retryAfterMs": RETRY_AFTER_MS})
        return Reply(
            body=body,
            http_status=503,
            request_id=request_id,
            error_code=INTERNAL_ERROR,
            retry_after_seconds=RETRY_AFTER_MS // 1000,
        )


@dataclass(eq=False)
class _Run:
    """One function's run; its fields change under `ToolThreads._lock` only."""

    tool: str
    started_at: float | None = None
    """When its thread began the function (None: not yet)."""
    returned: bool = False
    abandoned: bool = False
    """Its call was cancelled while the function ran: the thread gives the slot back."""
    dropped: bool = False
    """Its call was cancelled before the function began: it never begins."""


class ToolThreads:
    """The worker threads plain-function tools hold: at most `limit`, abandoned ones
    included. `Server.running()` starts it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.wait_seconds = WAIT_SECONDS
        """How long a call waits for a free thread before it is refused."""
        self._lock = threading.Lock()
        self._held = 0
        self._abandoned = 0
        self._waiting = 0
        self._freed: Event | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._log = RateLimitedLog(logger)

    def start(self, limit: int) -> None:
        """Hold at most `limit` threads from now on (`Server.running()`, in its event loop).
        Threads still running from an earlier run keep their slots until they end."""
        if limit < 1:
            raise ValueError("max_tool_threads must be at least 1")
        self.limit = limit
        self._freed = event()
        self._limiter = anyio.CapacityLimiter(math.inf)

    @property
    def held(self) -> int:
        """Threads running a tool's function now (or about to), abandoned ones included."""
        return self._held

    @property
    def abandoned(self) -> int:
        """Threads whose call was cancelled and whose function has not returned yet."""
        return self._abandoned

    async def run(self, tool: str, function: Callable[[], Any], *, queue: bool) -> Any:
        """`function()` in a worker thread, holding a slot until it returns, even after
        this call is cancelled. Without a free slot: wait for one (`queue`: a task's run),
        or at most `wait_seconds`, then raise `ToolThreadsFull`."""
        if self._limiter is None:
            raise RuntimeError("the server is not running: tools run inside server.running()")
        await self._take_slot(tool, queue)
        run = _Run(tool)
        context = contextvars.copy_context()

        def work() -> Any:
            with self._lock:
                if run.dropped:
                    return None
                run.started_at = time.monotonic()
            try:
                return context.run(function)
            finally:
                self._returned(run)

        try:
            return await anyio.to_thread.run_sync(
                work, abandon_on_cancel=True, limiter=self._limiter
            )
        except BaseException:
            self._cancelled(run)
            raise
        finally:
            self._wake_waiters()

    async def _take_slot(self, tool: str, queue: bool) -> None:
        if self._try_take():
            return
        deadline = math.inf if queue else anyio.current_time() + self.wait_seconds
        self._waiting += 1
        try:
            while (remaining := deadline - anyio.current_time()) > 0:
                assert self._freed is not None
                with anyio.move_on_after(min(remaining, POLL_SECONDS)):
                    await self._freed.wait()
                if self._try_take():
                    return
        finally:
            self._waiting -= 1
        with self._lock:
            self._log.log(
                logging.WARNING,
                "tool_threads_full",
                "tool %r refused (503, retryable): all %d tool threads are held, %d of them by "
                "cancelled calls whose functions have not returned; raise max_tool_threads, "
                "or let long plain functions check ctx.cancelled",
                tool,
                self.limit,
                self._abandoned,
                tool=tool,
            )
        raise ToolThreadsFull(tool, self.limit)

    def _try_take(self) -> bool:
        with self._lock:
            if self._held >= self.limit:
                return False
            self._held += 1
            return True

    def _wake_waiters(self) -> None:
        """A call is over and may have given its slot back: let the waiters look."""
        if self._waiting and self._freed is not None:
            self._freed.set()
            self._freed = event()

    def _returned(self, run: _Run) -> None:
        """In the thread, as the function returns (or raises): its slot is free."""
        with self._lock:
            run.returned = True
            self._held -= 1
            if not run.abandoned:
                return
            self._abandoned -= 1
            assert run.started_at is not None
            self._log.log(
                logging.INFO,
                "tool_thread_ended",
                "tool %r: the worker thread of a cancelled call ended after %.1f s "
                "(%d still running for cancelled calls)",
                run.tool,
                time.monotonic() - run.started_at,
                self._abandoned,
                tool=run.tool,
            )

    def _cancelled(self, run: _Run) -> None:
        """In the event loop: the call stopped waiting before the function returned."""
        with self._lock:
            if run.returned:
                return  # the thread gave its slot back already
            if run.started_at is None:
                run.dropped = True  # it will never begin: its slot is free now
                self._held -= 1
                return
            run.abandoned = True
            self._abandoned += 1
            self._log.log(
                logging.WARNING,
                "tool_thread_abandoned",
                "tool %r: its call was cancelled while the function ran; its worker thread "
                "runs on until the function returns (%d of %d tool threads held, %d by "
                "cancelled calls); a plain function may check ctx.cancelled to end early",
                run.tool,
                self._held,
                self.limit,
                self._abandoned,
                tool=run.tool,
            )
