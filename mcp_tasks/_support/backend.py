"""The event loop the runtime and the stores run on: trio or asyncio, through anyio.

The runtime and the stores are written once, on anyio (task groups, sleeps, timeouts,
threads), and run under `trio.run` as under `asyncio.run`. Two primitives are taken here
instead, because some paths make one per request: a cancel scope and an event. Under trio
anyio wraps trio's own (about 1.5 µs more per scope, 0.8 µs per event: 5% of a stdio tool
call), so in a trio task they are trio's own, and anyio's elsewhere. Both kinds have the
same interface (`cancel()`, `cancelled_caught`, `shield`; `set()`, `wait()`, `is_set()`)
and work inside anyio's task groups on trio, where anyio's are trio's underneath.

A store's worker thread is fed by a task tied to no caller (`spawn_detached`): trio's
system nursery, or under asyncio a task of the loop's own.

The built-in HTTP and stdio servers are written on anyio too, with these primitives, so
they run on either loop (`mcp-tasks serve --loop`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

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
    as a function to call without anyio's look-up of the running library each time."""
    if trio.lowlevel.in_trio_task():
        return trio.current_time
    return asyncio.get_running_loop().time


def event() -> Event:
    """An event of the running loop's kind."""
    if trio.lowlevel.in_trio_task():
        return trio.Event()
    return anyio.Event()


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


__all__ = [
    "CancelScope",
    "Event",
    "cancel_scope",
    "event",
    "spawn_detached",
]
