"""The event loop the runtime and the stores run on: trio or asyncio, through anyio.

The runtime and the stores are written once, on anyio (task groups, sleeps, timeouts,
threads), and run under `trio.run` as under `asyncio.run`. Two primitives are taken here
instead, because some paths make one per request: a cancel scope and an event. Under trio
anyio wraps trio's own (about 1.5 µs more per scope, 0.8 µs per event: 5% of a stdio tool
call), so in a trio task they are trio's own, and anyio's elsewhere. Both kinds have the
same interface (`cancel()`, `cancelled_caught`, `shield`; `set()`, `wait()`, `is_set()`)
and work inside anyio's task groups on trio, where anyio's are trio's underneath. On
asyncio both are anyio's, made from their class directly (anyio's look-up of the running
library is most of their cost).

A store's worker thread is fed by a task tied to no caller (`spawn_detached`): trio's
system nursery, or under asyncio a task of the loop's own.

A server starts a task for each task run (`spawning`): anyio's task groups (4.16) wrap
each child in a cancel scope and an event of their own, about 16 µs a child on asyncio,
a sixth of a task's creation; these are the loop's own tasks instead.

The built-in HTTP and stdio servers are written on anyio too, with these primitives, so
they run on either loop (`mcp-tasks serve --loop`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeAlias

import anyio
import trio

CancelScope: TypeAlias = trio.CancelScope | anyio.CancelScope
Event: TypeAlias = trio.Event | anyio.Event


def cancel_scope(*, shield: bool = False, deadline: float = math.inf) -> CancelScope:
    """A cancel scope of the running loop's kind; `deadline` on its clock."""
    global _asyncio_scope  # noqa: PLW0603  (learnt once)
    if trio.lowlevel.in_trio_task():
        return trio.CancelScope(shield=shield, deadline=deadline)
    if _asyncio_scope is not None:
        return _asyncio_scope(shield=shield, deadline=deadline)
    scope = anyio.CancelScope(shield=shield, deadline=deadline)
    _asyncio_scope = type(scope)
    return scope


_asyncio_scope: type[anyio.CancelScope] | None = None
"""The class of anyio's cancel scopes on asyncio, once one is made: made directly, a scope
skips anyio's look-up of the running library (a third of its cost, 0.9 µs a request)."""


def clock() -> Callable[[], float]:
    """The running loop's clock (what anyio's `current_time` reads, and deadlines are on),
    as a function to call without anyio's look-up of the running library each time (on
    trio, the clock's own method: `trio.current_time` finds the run first, 0.4 µs)."""
    if trio.lowlevel.in_trio_task():
        return trio.lowlevel.current_clock().current_time
    return asyncio.get_running_loop().time


def event() -> Event:
    """An event of the running loop's kind."""
    global _asyncio_event  # noqa: PLW0603  (learnt once)
    if trio.lowlevel.in_trio_task():
        return trio.Event()
    if _asyncio_event is not None:
        return _asyncio_event()
    made = anyio.Event()
    _asyncio_event = type(made)
    return made


_asyncio_event: type[anyio.Event] | None = None
"""The class of anyio's events on asyncio, once one is made: made directly, an event skips
anyio's look-up of the running library (1.7 us an event, against 0.3)."""


_detached: set[asyncio.Task[Any]] = set()
"""The asyncio tasks `spawn_detached` started, held until they end (the loop holds its
tasks only weakly)."""


def spawn_detached(function: Callable[[], Awaitable[Any]]) -> None:
    """Run `function()` in a task of its own that no caller's cancellation reaches, until
    it returns or the event loop ends."""
    if trio.lowlevel.in_trio_task():
        trio.lowlevel.spawn_system_task(function)
        return

    async def run() -> None:
        await function()

    task = asyncio.get_running_loop().create_task(run())
    _detached.add(task)
    task.add_done_callback(_detached.discard)


class Spawner(Protocol):
    """Starts tasks that run until they return (`spawning` says how they end)."""

    def spawn(
        self, function: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: str
    ) -> None: ...


@asynccontextmanager
async def spawning() -> AsyncIterator[Spawner]:
    """A place to start tasks in. A task's exception is logged as it happens, and the
    others run on; on leaving, the tasks still running are cancelled and waited for, and
    the exceptions raised meanwhile are raised (in a group)."""
    if trio.lowlevel.in_trio_task():
        trio_spawner = _TrioSpawner()
        async with trio.open_nursery() as nursery:
            trio_spawner.nursery = nursery
            yield trio_spawner
            nursery.cancel_scope.cancel()
        trio_spawner.raise_failures()
        return
    spawner = _AsyncioSpawner()
    try:
        yield spawner
    finally:
        await spawner.end()
    spawner.raise_failures()


class _Failures:
    def __init__(self) -> None:
        self.failures: list[Exception] = []

    def failed(self, name: str, failure: Exception) -> None:
        self.failures.append(failure)
        _logger.error("%s failed", name, exc_info=failure)

    def raise_failures(self) -> None:
        if self.failures:
            raise ExceptionGroup("tasks failed", self.failures)


class _TrioSpawner(_Failures):
    nursery: trio.Nursery

    def spawn(
        self, function: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: str
    ) -> None:
        self.nursery.start_soon(self._run, function, args, name, name=name)

    async def _run(
        self, function: Callable[..., Coroutine[Any, Any, Any]], args: tuple[Any, ...], name: str
    ) -> None:
        try:
            await function(*args)
        except Exception as failure:
            self.failed(name, failure)


class _AsyncioSpawner(_Failures):
    def __init__(self) -> None:
        super().__init__()
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(
        self, function: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: str
    ) -> None:
        task = self._loop.create_task(function(*args), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        failure = task.exception()
        if isinstance(failure, Exception):
            self.failed(task.get_name(), failure)

    async def end(self) -> None:
        with anyio.CancelScope(shield=True):  # the caller may be cancelled already
            while self._tasks:
                for task in self._tasks:
                    task.cancel()
                await asyncio.wait(list(self._tasks))


_logger = logging.getLogger("mcp_tasks.server")


__all__ = [
    "CancelScope",
    "Event",
    "Spawner",
    "cancel_scope",
    "event",
    "spawn_detached",
    "spawning",
]
