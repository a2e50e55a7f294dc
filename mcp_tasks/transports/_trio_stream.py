"""The built-in HTTP server's sockets on trio: anyio's stream, whose small sends of one
scheduling batch are written together (`_asyncio_stream` says why: a client's reader woken
once for many answers, not once an answer).

The first send of a batch leads: it yields once, so the batch's other connections queue
their sends behind it, then writes them all (non-blocking) and wakes their senders. A send
the kernel did not take whole goes on as anyio's does, waiting while the buffer is full. A
send cancelled while it waits in the queue writes nothing.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any, Final

import anyio.abc
import outcome
import trio

from ._asyncio_stream import HELD_AT_MOST

__all__ = ["BatchedStream"]


class _Queued:
    __slots__ = ("data", "raw", "task")

    def __init__(self, raw: socket.socket, data: bytes, task: trio.lowlevel.Task | None) -> None:
        self.raw = raw
        self.data = data
        self.task = task


class _Batch:
    """One trio run's sends waiting for their batch's leader."""

    __slots__ = ("queued",)

    def __init__(self) -> None:
        self.queued: list[_Queued] = []

    async def send(self, raw: socket.socket, data: bytes) -> int:
        """Bytes of `data` the kernel took (the rest is the caller's to send)."""
        queued = self.queued
        if queued:  # a leader writes this batch: wait for it
            entry = _Queued(raw, data, trio.lowlevel.current_task())
            queued.append(entry)

            def abort(_: Any) -> trio.lowlevel.Abort:
                self.queued.remove(entry)
                return trio.lowlevel.Abort.SUCCEEDED

            taken: int = await trio.lowlevel.wait_task_rescheduled(abort)
            return taken
        queued.append(_Queued(raw, data, None))
        try:
            await trio.lowlevel.cancel_shielded_checkpoint()  # the batch's others queue behind
        finally:
            self.queued = []
            own = _write(queued)
        return own


def _write(queued: list[_Queued]) -> int:
    """Write each queued send and wake its sender; the bytes the leader's took."""
    own = 0
    cut: set[socket.socket] = set()  # a socket the kernel took part of: the rest waits
    for entry in queued:
        taken = 0
        if entry.raw not in cut:
            with contextlib.suppress(OSError):  # full, or broken: the sender goes on as
                taken = entry.raw.send(entry.data)  # anyio's send does
            if taken < len(entry.data):
                cut.add(entry.raw)
        if entry.task is None:
            own = taken
        else:
            trio.lowlevel.reschedule(entry.task, outcome.Value(taken))
    return own


_BATCH: Final = trio.lowlevel.RunVar[_Batch]("mcp_tasks.http_send_batch")


def _batch() -> _Batch:
    try:
        return _BATCH.get()
    except LookupError:
        batch = _Batch()
        _BATCH.set(batch)
        return batch


class BatchedStream(anyio.abc.SocketStream):
    """anyio's trio `SocketStream`, its small sends written with the batch's others."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self._stream = stream
        self._raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        self._batch = _batch()

    @property
    def _raw_socket(self) -> socket.socket:
        return self._raw

    @property
    def extra_attributes(self) -> Any:
        return self._stream.extra_attributes

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._stream.receive(max_bytes)

    async def send(self, item: bytes) -> None:
        if len(item) <= HELD_AT_MOST and self._raw.fileno() >= 0:
            taken = await self._batch.send(self._raw, item)
            if taken == len(item):
                return
            item = item[taken:]
        await self._stream.send(item)

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()
