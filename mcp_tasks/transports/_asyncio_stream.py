"""The built-in HTTP server's sockets on asyncio: an `asyncio.Protocol` behind anyio's
`SocketStream` interface, without the per-call costs of anyio's own.

anyio's asyncio stream asks the loop to watch the socket before each wait for bytes and to
stop after it (two `epoll_ctl` calls a request on uvloop), yields to the loop once more after
each send, and opens a shielded cancel scope to do it. The HTTP server waits for bytes and
sends an answer once a request, so on asyncio that was its largest cost outside the core:
`serve` on asyncio ran slower than on trio. This stream reads all the time, up to
`READ_LIMIT` bytes held, pausing the socket past that (a client cannot fill memory by not
being read). A wait is an asyncio future, which anyio's cancel scopes cancel as they cancel
any await.

A send is written at the loop's next turn, together with every other connection's sends of
this turn (`_Outbox`): a client reading many connections is woken once for all of them, not
once an answer. Waking a sleeping reader costs the sender more than the write (an
interrupt to the reader's core; about 10 us an answer in a virtual machine, measured under
wrk), so under load this is about a third more task creations a second. A connection holds one
send at most: a second send in the same turn writes both at once, and closing writes what
is held first. A send of more than `HELD_AT_MOST` bytes is written at once and waits while
the kernel's buffer is full, as does any send while it is.

On trio, `_trio_stream.BatchedStream` batches anyio's sockets' sends the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import typing
import weakref
from collections import deque
from typing import Final

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

__all__ = ["HELD_AT_MOST", "READ_LIMIT", "ProtocolStream", "accept_on_asyncio"]

READ_LIMIT: Final = 256 * 1024
"""Bytes read from a client and not yet taken; past this its socket is not read."""
HELD_AT_MOST: Final = 64 * 1024
"""A send of more bytes is written at once, and waits while the kernel's buffer is full."""


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


class _Outbox:
    """One loop's sends of this turn, written at its next turn (the module's docstring says
    why): one send per connection at most, a second written at once with the first."""

    __slots__ = ("_due", "_held", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._held: dict[asyncio.Transport, bytes] = {}
        self._due = False

    def write(self, transport: asyncio.Transport, data: bytes) -> None:
        held = self._held.pop(transport, None)
        if held is not None:  # a second send this turn: both now, in order
            transport.write(held + data)
            return
        self._held[transport] = data
        if not self._due:
            self._due = True
            self._loop.call_soon(self._write_held)

    def write_now(self, transport: asyncio.Transport) -> None:
        """Write what `transport` holds, before it closes or pauses."""
        held = self._held.pop(transport, None)
        if held is not None and not transport.is_closing():
            transport.write(held)

    def _write_held(self) -> None:
        self._due = False
        held, self._held = self._held, {}
        for transport, data in held.items():
            if not transport.is_closing():  # the client is gone: its answer too
                transport.write(data)


_OUTBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Outbox] = (
    weakref.WeakKeyDictionary()
)


def _outbox_of(loop: asyncio.AbstractEventLoop) -> _Outbox:
    outbox = _OUTBOXES.get(loop)
    if outbox is None:
        outbox = _OUTBOXES[loop] = _Outbox(loop)
    return outbox


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class ProtocolStream(anyio.abc.SocketStream):
    """One accepted TCP connection on asyncio, as anyio's `SocketStream`."""

    def __init__(self, transport: asyncio.Transport, pipe: _Pipe, outbox: _Outbox) -> None:
        self._transport = transport
        self._pipe = pipe
        self._outbox = outbox
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
        pipe = self._pipe
        if not pipe.write_paused and len(item) <= HELD_AT_MOST:
            self._outbox.write(self._transport, item)
            return
        self._outbox.write_now(self._transport)
        self._transport.write(item)
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
        self._outbox.write_now(self._transport)
        if not self._transport.is_closing():
            self._transport.write_eof()

    async def aclose(self) -> None:
        self._outbox.write_now(self._transport)
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
        return ProtocolStream(transport, pipe, _outbox_of(loop))


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
