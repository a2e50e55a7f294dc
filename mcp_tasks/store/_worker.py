"""One worker thread for a store's blocking calls, with whatever queues up batched.

A hop to a thread costs about as much as answering a whole `tasks/get` from memory
(~75-125 µs here, measured in benchmarks/stores.py's notes), so a store that hopped once
per call would halve the server's throughput. Instead, calls queue; one hop runs every call
that is waiting, in order, in one thread; calls that arrive meanwhile go in the next hop.
Under load, one hop serves many requests; alone, a call costs one hop as before.

Calls run one at a time, in arrival order, so the store's connection never sees two at
once. A caller cancelled while its call is queued or running still waits for it (the
store's write happened or not: the caller must not guess), as `anyio.to_thread.run_sync`
does. The hops are made by a task of the worker's own (`spawn_detached`), under trio or
asyncio.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio.to_thread

from .._support.backend import cancel_scope, event, spawn_detached

T = TypeVar("T")


class _Call(Generic[T]):
    __slots__ = ("done", "error", "finish", "result", "stage", "work")

    def __init__(
        self,
        work: Callable[[], T] | None,
        stage: Callable[[Any], None] | None = None,
        finish: Callable[[Any], T] | None = None,
    ) -> None:
        self.work = work
        self.stage = stage
        self.finish = finish
        self.done = event()
        self.result: T | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        assert self.work is not None
        try:
            self.result = self.work()
        except BaseException as error:  # handed to the caller, in its own task
            self.error = error

    def finished(self, reply: Any) -> None:
        assert self.finish is not None
        try:
            if isinstance(reply, Exception):
                raise reply
            self.result = self.finish(reply)
        except BaseException as error:
            self.error = error


class BatchingWorker:
    """`pipeline()`, when given, makes a pipeline (redis-py's) for `run_piped` calls: the
    consecutive ones in a batch go to the server together, one round trip for all."""

    def __init__(self, pipeline: Callable[[], Any] | None = None) -> None:
        self._queue: list[_Call[Any]] = []
        self._draining = False
        self._pipeline = pipeline

    async def run(self, work: Callable[[], T]) -> T:
        """`work()` in the worker thread; its result, or its exception raised here."""
        return await self._queued(_Call(work))

    async def run_piped(self, stage: Callable[[Any], None], finish: Callable[[Any], T]) -> T:
        """`stage(pipeline)` adds one command; `finish(reply)` makes the result of its reply
        (an error reply is raised here)."""
        assert self._pipeline is not None, "this worker has no pipeline"
        return await self._queued(_Call(None, stage, finish))

    async def _queued(self, call: _Call[T]) -> T:
        self._queue.append(call)
        if not self._draining:
            self._draining = True
            spawn_detached(self._drain)
        with cancel_scope(shield=True):
            await call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                await anyio.to_thread.run_sync(self._run_all, batch)
                for call in batch:
                    call.done.set()
        finally:
            self._draining = False

    def _run_all(self, batch: list[_Call[Any]]) -> None:
        piped: list[_Call[Any]] = []
        for call in batch:
            if call.stage is not None:
                piped.append(call)
                continue
            self._send(piped)
            call.run()
        self._send(piped)

    def _send(self, piped: list[_Call[Any]]) -> None:
        """Run the staged calls as one pipeline, and empty the list."""
        if not piped:
            return
        try:
            assert self._pipeline is not None
            with self._pipeline() as pipeline:
                for call in piped:
                    assert call.stage is not None
                    call.stage(pipeline)
                replies = pipeline.execute(raise_on_error=False)
        except BaseException as error:  # the connection failed: every call in it did
            for call in piped:
                call.error = error
        else:
            for call, reply in zip(piped, replies, strict=True):
                call.finished(reply)
        piped.clear()
