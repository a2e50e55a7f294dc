"""The built-in HTTP server's sockets on asyncio: an `asyncio.Protocol` behind anyio's
`SocketStream` interface, without the per-call costs of anyio's own.

anyio's asyncio stream asks the loop to watch the socket before each wait for bytes and to
stop after it (two `epoll_ctl` calls a request on uvloop), yields to the loop once more after
each send, and opens a shielded cancel scope to do it. The HTTP server waits for bytes and
sends an answer once a request, so on asyncio that was its largest cost outside the core:
`serve` on asyncio ran slower than on trio. This stream reads all the time, up to
`READ_LIMIT` bytes held, pausing the socket past that (a client cannot fill memory by not
being read); it sends at once, waiting only while the kernel's buffer is full (as anyio's,
nothing is held in user space past a send). A wait is an asyncio future, which anyio's
cancel scopes cancel as they cancel any await.

Trio's sockets are used as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import typing
from collections import deque
from typing import Final

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

__all__ = ["READ_LIMIT", "ProtocolStream", "accept_on_asyncio"]

READ_LIMIT: Final = 256 * 1024
"""Bytes read from a client and not yet taken; past this its socket is not read."""


class _Pipe(asyncio.Protocol):
    """The socket's side: bytes in a queue, the waiting reader and writer woken."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.held = 0
        self.reading = True
        self.at_eof = False
        self.lost: BaseException | None = None
        self.closed = False  # the connection is gone, by either side
        self.readable: asyncio.Future[None] | None = None
        self.writable: asyncio.Future[None] | None = None
        self.write_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)  # uvloop's: no subclass
        self.transport.set_write_buffer_limits(0)  # a send ends once the kernel holds its bytes

    def data_received(self, data: bytes) -> None:
        self.chunks.append(bytes(data))
        self.held += len(data)
        if self.held > READ_LIMIT and self.reading:
            assert self.transport is not None
            self.transport.pause_reading()
            self.reading = False
        _wake(self.readable)

    def eof_received(self) -> bool:
        self.at_eof = True
        _wake(self.readable)
        return True  # keep the writing half open: the answer may still be on its way

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost = exc
        _wake(self.readable)
        _wake(self.writable)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        _wake(self.writable)


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class ProtocolStream(anyio.abc.SocketStream):
    """One accepted TCP connection on asyncio, as anyio's `SocketStream`."""

    def __init__(self, transport: asyncio.Transport, pipe: _Pipe) -> None:
        self._transport = transport
        self._pipe = pipe
        self._aborted = False

    @property
    def _raw_socket(self) -> socket.socket:
        found: socket.socket = self._transport.get_extra_info("socket")
        return found

    async def receive(self, max_bytes: int = 65536) -> bytes:
        pipe = self._pipe
        if self._aborted:
            raise anyio.ClosedResourceError
        while not pipe.chunks:
            if self._aborted:
                raise anyio.ClosedResourceError
            if pipe.lost is not None:
                raise anyio.BrokenResourceError from pipe.lost
            if pipe.at_eof or pipe.closed:
                raise anyio.EndOfStream
            if pipe.readable is not None:
                raise anyio.BusyResourceError("reading from")
            pipe.readable = asyncio.get_running_loop().create_future()
            try:
                await pipe.readable
            finally:
                pipe.readable = None
        chunk = pipe.chunks.popleft()
        if len(chunk) > max_bytes:
            chunk, rest = chunk[:max_bytes], chunk[max_bytes:]
            pipe.chunks.appendleft(rest)
        pipe.held -= len(chunk)
        if not pipe.reading and pipe.held <= READ_LIMIT // 2 and not pipe.closed:
            self._transport.resume_reading()
            pipe.reading = True
        return chunk

    async def send(self, item: bytes) -> None:
        self._raise_if_closed()
        self._transport.write(item)
        pipe = self._pipe
        while pipe.write_paused:  # the kernel's buffer is full: wait until it drains
            if pipe.writable is not None:
                raise anyio.BusyResourceError("writing to")
            pipe.writable = asyncio.get_running_loop().create_future()
            try:
                await pipe.writable
            finally:
                pipe.writable = None
            self._raise_if_closed()

    def _raise_if_closed(self) -> None:
        if self._aborted:
            raise anyio.ClosedResourceError
        if self._pipe.closed or self._transport.is_closing():
            raise anyio.BrokenResourceError from self._pipe.lost

    async def send_eof(self) -> None:
        if not self._transport.is_closing():
            self._transport.write_eof()

    async def aclose(self) -> None:
        self._aborted = True
        self._transport.abort()
        _wake(self._pipe.readable)
        _wake(self._pipe.writable)


async def accept_on_asyncio(listener: anyio.abc.SocketListener) -> ProtocolStream:
    """The next connection on `listener` (anyio's, on asyncio) as a `ProtocolStream`;
    one that is gone before it is set up is skipped."""
    loop = asyncio.get_running_loop()
    listening = listener.extra(SocketAttribute.raw_socket)
    while True:
        client = await _accept_socket(loop, listening)
        try:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            transport, pipe = await loop.connect_accepted_socket(_Pipe, client)
        except OSError:  # reset already: not a connection to serve
            client.close()
            continue
        except BaseException:
            client.close()
            raise
        return ProtocolStream(transport, pipe)


async def _accept_socket(
    loop: asyncio.AbstractEventLoop, listening: socket.socket
) -> socket.socket:
    try:
        client, _ = await loop.sock_accept(listening)
    except asyncio.CancelledError:
        # A cancelled sock_accept can leave its reader behind (bpo-41317), and the
        # listener's socket is closed next.
        with contextlib.suppress(ValueError, NotImplementedError):
            loop.remove_reader(listening)
        raise
    return client
