"""One worker thread for a store's blocking calls, with whatever queues up batched.

A trio-to-thread hop costs about as much as answering a whole `tasks/get` from memory
(~75-125 µs here, measured in benchmarks/stores.py's notes), so a store that hopped once
per call would halve the server's throughput. Instead, calls queue; one hop runs every call
that is waiting, in order, in one thread; calls that arrive meanwhile go in the next hop.
Under load, one hop serves many requests; alone, a call costs one hop as before.

Calls run one at a time, in arrival order, so the store's connection never sees two at
once. A caller cancelled while its call is queued or running still waits for it (the
store's write happened or not: the caller must not guess), as `trio.to_thread.run_sync`
does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import trio

T = TypeVar("T")


class _Call(Generic[T]):
    __slots__ = ("done", "error", "result", "work")

    def __init__(self, work: Callable[[], T]) -> None:
        self.work = work
        self.done = trio.Event()
        self.result: T | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.work()
        except BaseException as error:  # handed to the caller, in its own task
            self.error = error


class BatchingWorker:
    def __init__(self) -> None:
        self._queue: list[_Call[Any]] = []
        self._draining = False

    async def run(self, work: Callable[[], T]) -> T:
        """`work()` in the worker thread; its result, or its exception raised here."""
        call = _Call(work)
        self._queue.append(call)
        if not self._draining:
            self._draining = True
            trio.lowlevel.spawn_system_task(self._drain)
        with trio.CancelScope(shield=True):
            await call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                await trio.to_thread.run_sync(_run_all, batch)
                for call in batch:
                    call.done.set()
        finally:
            self._draining = False


def _run_all(batch: list[_Call[Any]]) -> None:
    for call in batch:
        call.run()
