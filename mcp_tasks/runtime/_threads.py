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

* A *keeper* task in the server's nursery runs each function (`to_thread.run_sync`) and
  holds one of `ServerOptions.max_tool_threads` slots until the function has returned.
  The call waits for the keeper's answer; cancelling the call cancels that wait alone. So
  the count is right without anything crossing from the thread back into the event loop.
* The threads take their tokens from a limiter of their own, never anyio's default one
  that the SQLite store's worker uses: tools can never starve the store.
* With every slot held, a call waits at most `wait_seconds` (0.25 s) for one, then is
  refused, retryable: HTTP 503 with `Retry-After: 1`, -32603 with `data.retryAfterMs` (the
  answer comes in well under a second, however many threads are stuck). A task's run waits
  for a slot as long as it takes: it was accepted already, and `tasks/cancel` ends the wait.
* The call's context hears of the cancellation (`ToolContext.cancelled`, a
  `threading.Event` underneath): a function that checks it ends early, and its slot is
  free again.

Log lines (rate-limited, a few per cause and window on `mcp_tasks.server`): a call cancelled
while its function runs on (WARNING), a call refused for want of a thread (WARNING), and an
abandoned thread that has ended (INFO).
"""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.abc
import anyio.to_thread

from .._backend import Event, event
from .._logging import RateLimitedLog
from ..core import INTERNAL_ERROR, Reply, RequestId, error_body

logger = logging.getLogger("mcp_tasks.server")

WAIT_SECONDS: Final = 0.25
"""How long a call (not a task's run) waits for a free tool thread before it is refused."""
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
    """One function's run in a worker thread, as its keeper hands it back."""

    tool: str
    done: Event
    started_at: float | None = None
    """When its thread started (None: not yet)."""
    value: Any = None
    error: BaseException | None = None
    abandoned: bool = False
    """Its call was cancelled before the function returned (or before it started: then
    it never starts)."""


class ToolThreads:
    """The worker threads plain-function tools hold: at most `limit`, abandoned ones
    included. `Server.running()` starts it with the server's nursery."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.wait_seconds = WAIT_SECONDS
        """How long a call waits for a free thread before it is refused."""
        self.abandoned = 0
        """Threads whose call was cancelled and whose function has not returned yet."""
        self._slots: anyio.Semaphore | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._nursery: anyio.abc.TaskGroup | None = None
        self._log = RateLimitedLog(logger)

    def start(self, nursery: anyio.abc.TaskGroup, limit: int) -> None:
        """Run keepers in `nursery` from now on, with `limit` threads (`Server.running()`)."""
        if limit < 1:
            raise ValueError("max_tool_threads must be at least 1")
        self.limit = limit
        self.abandoned = 0
        self._slots = anyio.Semaphore(limit)
        self._limiter = anyio.CapacityLimiter(limit)
        self._nursery = nursery

    @property
    def held(self) -> int:
        """Threads running a tool's function now, abandoned ones included."""
        return 0 if self._slots is None else self.limit - self._slots.value

    async def run(self, tool: str, function: Callable[[], Any], *, queue: bool) -> Any:
        """`function()` in a worker thread, its slot held until it returns, even after this
        call is cancelled. Without a free slot: wait for one (`queue`, a task's run), or
        at most `wait_seconds`, then raise `ToolThreadsFull`."""
        if self._nursery is None:
            raise RuntimeError("the server is not running: tools run inside server.running()")
        await self._take_slot(tool, queue)
        run = _Run(tool, event())
        work = functools.partial(contextvars.copy_context().run, function)
        try:
            self._nursery.start_soon(self._keep, run, work)
        except BaseException:
            self._release()
            raise
        try:
            await run.done.wait()
        finally:
            if not run.done.is_set():  # cancelled
                run.abandoned = True
                if run.started_at is not None:  # the thread runs on
                    self.abandoned += 1
                    self._note_abandoned(tool)
        if run.error is not None:
            raise run.error
        return run.value

    async def _take_slot(self, tool: str, queue: bool) -> None:
        assert self._slots is not None
        try:
            self._slots.acquire_nowait()
            return
        except anyio.WouldBlock:
            pass
        if queue:
            await self._slots.acquire()
            return
        with anyio.move_on_after(self.wait_seconds):
            await self._slots.acquire()
            return
        self._log.log(
            logging.WARNING,
            "tool_threads_full",
            "tool %r refused (503, retryable): all %d tool threads are held, %d of them by "
            "cancelled calls whose functions have not returned; raise max_tool_threads, or "
            "let long plain functions check ctx.cancelled",
            tool,
            self.limit,
            self.abandoned,
            tool=tool,
        )
        raise ToolThreadsFull(tool, self.limit)

    async def _keep(self, run: _Run, work: Callable[[], Any]) -> None:
        """Run `work` in a thread and hold the slot until it has returned: cancelled only
        when the server stops (the thread then runs on unheard)."""
        try:
            if run.abandoned:  # cancelled before its turn came: never started
                return
            run.started_at = time.monotonic()
            run.value = await anyio.to_thread.run_sync(
                work, abandon_on_cancel=True, limiter=self._limiter
            )
        except anyio.get_cancelled_exc_class():
            run.error = RuntimeError("the server stopped before the tool's function returned")
            raise
        except BaseException as error:  # the function's failure, for its caller
            run.error = error
        finally:
            self._release()
            if run.abandoned and run.started_at is not None:
                self.abandoned -= 1
                self._note_ended(run, run.started_at)
            run.done.set()

    def _release(self) -> None:
        assert self._slots is not None
        self._slots.release()

    def _note_abandoned(self, tool: str) -> None:
        self._log.log(
            logging.WARNING,
            "tool_thread_abandoned",
            "tool %r: its call was cancelled while the function ran; its worker thread runs "
            "on until the function returns (%d of %d tool threads held, %d by cancelled "
            "calls); a plain function may check ctx.cancelled to end early",
            tool,
            self.held,
            self.limit,
            self.abandoned,
            tool=tool,
        )

    def _note_ended(self, run: _Run, started_at: float) -> None:
        self._log.log(
            logging.INFO,
            "tool_thread_ended",
            "tool %r: the worker thread of a cancelled call ended after %.1f s "
            "(%d still running for cancelled calls)",
            run.tool,
            time.monotonic() - started_at,
            self.abandoned,
            tool=run.tool,
        )
