"""The tasks of a stdio session's requests that wait (and of its pump), for `_stdio`.

A request that waits keeps the task it waited in, while the pump goes on in a new one; each
of these tasks runs in a cancel scope of its own, which is the request's once it is alone
there (`running_scope`, given to the server as `Connection.task_scope`). anyio's task group
asks about 8 µs a task more than the loop's own, a fifth of a stdio tool call: on trio they
run in a trio nursery, on asyncio in `_LoopTasks`, a small nursery of the loop's own tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import anyio
import trio

from ._port import Cancellable

__all__ = ["RequestTasks", "request_nursery"]


class RequestTasks(Protocol):
    """Where a session's requests that wait run, each keeping the task it waited in (and
    the pump, each time it moves on to a task of its own)."""

    def start_soon(self, run: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run `run(*args)` in a task of its own, in a cancel scope of its own."""

    async def run_here(self, run: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run `run(*args)` in the caller's task, as if it were one of these (the pump
        begins there)."""

    def running_scope(self) -> Cancellable | None:
        """The cancel scope of the task running now (None: not one of these): it cancels
        the request that runs in it (`Connection.task_scope`)."""


@contextlib.asynccontextmanager
async def request_nursery() -> AsyncIterator[RequestTasks]:
    """The tasks of a session's requests that wait (and of the pump), all ended when the
    block is left.

    anyio's task group asks about 8 µs a task more than the loop's own (its task handle,
    with a cancel scope, an event and a coroutine of its own): a fifth of a stdio tool call.
    So on trio they run in a trio nursery; on asyncio in `_LoopTasks`. Each task has a
    cancel scope of its own: a request that waits keeps its task, so the task's scope is
    the request's (a handler needs none of its own: 4 µs a tool call)."""
    if trio.lowlevel.in_trio_task():
        async with trio.open_nursery() as nursery:
            yield _TrioTasks(nursery)
        return
    async with _LoopTasks() as tasks:
        yield tasks


class _ScopedTasks:
    """Each task of these in a cancel scope of its own, kept by its task while it runs."""

    def __init__(self, current_task: Callable[[], object], new_scope: Callable[[], Any]) -> None:
        self._current_task = current_task
        self._new_scope = new_scope
        self._scopes: dict[object, Any] = {}
        self._cancelled = False
        """The tasks were cancelled: one started from now on is cancelled at once."""

    async def run_here(self, run: Callable[..., Awaitable[None]], *args: Any) -> None:
        task = self._current_task()
        with self._new_scope() as scope:
            if self._cancelled:
                scope.cancel()
            self._scopes[task] = scope
            try:
                await run(*args)
            finally:
                del self._scopes[task]

    def running_scope(self) -> Cancellable | None:
        scope: Cancellable | None = self._scopes.get(self._current_task())
        return scope


class _TrioTasks(_ScopedTasks):
    """`RequestTasks` in a trio nursery: each task in a trio cancel scope of its own."""

    def __init__(self, nursery: trio.Nursery) -> None:
        super().__init__(trio.lowlevel.current_task, trio.CancelScope)
        self._nursery = nursery

    def start_soon(self, run: Callable[..., Awaitable[None]], *args: Any) -> None:
        self._nursery.start_soon(self.run_here, run, *args)


class _LoopTasks(_ScopedTasks):
    """A nursery of the asyncio loop's own tasks. Each task runs in an anyio cancel scope of
    its own, which is how they are cancelled (a shielded section in one stays shielded), when
    the block is left by an exception or a cancellation, or a task fails. Leaving the block
    waits for every task; a task's failure is raised there, in an exception group, as anyio's
    task group raises it."""

    def __init__(self) -> None:
        # The class of the cancel scopes anyio makes here: made directly, a scope skips
        # anyio's look-up of the running library (a third of its cost).
        loop = asyncio.get_running_loop()  # named, the task's look-up skips finding it
        super().__init__(functools.partial(asyncio.current_task, loop), type(anyio.CancelScope()))
        self._loop = loop
        self._tasks: set[asyncio.Task[None]] = set()
        self._failures: list[BaseException] = []
        self._all_ended: anyio.Event | None = None

    async def __aenter__(self) -> _LoopTasks:
        return self

    def start_soon(self, run: Callable[..., Awaitable[None]], *args: Any) -> None:
        task = self._loop.create_task(self.run_here(run, *args))
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (failure := task.exception()) is not None:
            self._failures.append(failure)
            self._cancel()
        if not self._tasks and self._all_ended is not None:
            self._all_ended.set()

    def _cancel(self) -> None:
        self._cancelled = True
        for scope in list(self._scopes.values()):
            scope.cancel()

    async def __aexit__(self, kind: object, error: BaseException | None, tb: object) -> bool:
        if error is not None:
            self._cancel()
        try:
            with anyio.CancelScope(shield=error is not None):
                await self._wait()
        except BaseException:  # cancelled while waiting: the tasks go down too
            self._cancel()
            with anyio.CancelScope(shield=True):
                await self._wait()
            raise
        if self._failures:
            raise BaseExceptionGroup("a request of the stdio session failed", self._failures)
        return False

    async def _wait(self) -> None:
        while self._tasks:
            self._all_ended = anyio.Event()
            await self._all_ended.wait()
