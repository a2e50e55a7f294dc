"""The process's own stdin and stdout as byte streams of the running loop, for `serve_stdio`.

On trio they are `trio.lowlevel.FdStream`s. On asyncio (uvloop too) they are the loop's
pipe transports (`connect_read_pipe`, `connect_write_pipe`) behind anyio's byte-stream
interface: the loop waits for the pipe to turn readable or writable, no thread per read or
write. A stdin or stdout that is a regular file (`serve < requests.jsonl`), which no loop
watches, is read and written directly: a file never makes a read or a write wait.

Each opens a duplicate of fd 0 or 1, so the process's own stay open after serving.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import IO, Any, Final

import anyio
import anyio.abc
import anyio.lowlevel
import trio

__all__ = ["open_stdin", "open_stdout"]

_BUFFER_BYTES: Final = 64 * 1024


StdinStream = trio.abc.ReceiveStream | anyio.abc.ByteReceiveStream
StdoutStream = trio.abc.SendStream | anyio.abc.ByteSendStream


def open_stdin() -> AbstractAsyncContextManager[StdinStream]:
    """fd 0 (duplicated) as a byte stream of the running loop, closed on exit."""
    return _open_duplicate(0, _PipeReader.open)


def open_stdout() -> AbstractAsyncContextManager[StdoutStream]:
    """fd 1 (duplicated) as a byte stream of the running loop, closed on exit."""
    return _open_duplicate(1, _PipeWriter.open)


@asynccontextmanager
async def _open_duplicate(
    fd: int, open_pipe: Callable[[int], Awaitable[anyio.abc.AsyncResource]]
) -> AsyncIterator[Any]:
    """A duplicate of `fd` as the running loop's stream: trio's own, a regular file's, or
    the asyncio loop's pipe (`open_pipe`)."""
    fd = os.dup(fd)
    if trio.lowlevel.in_trio_task():
        async with trio.lowlevel.FdStream(fd) as stream:
            yield stream
        return
    if _is_file(fd):
        async with _FileStream(fd) as file_stream:
            yield file_stream
        return
    async with await open_pipe(fd) as pipe:
        yield pipe


def _is_file(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


class _PipeReader(anyio.abc.ByteReceiveStream):
    """A pipe, socket or terminal read by the asyncio loop's read-pipe transport."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.ReadTransport) -> None:
        self._reader = reader
        self._transport = transport

    @classmethod
    async def open(cls, fd: int) -> _PipeReader:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_BUFFER_BYTES)
        pipe = _file(fd, "rb")
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
        return cls(reader, transport)

    async def receive(self, max_bytes: int = _BUFFER_BYTES) -> bytes:
        try:
            data = await self._reader.read(max_bytes)
        except OSError as error:
            raise anyio.BrokenResourceError from error
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self._transport.close()
        await anyio.lowlevel.checkpoint()


class WritesAtOnce(anyio.abc.ByteSendStream):
    """A byte stream that can also write without waiting (the asyncio loop's pipe)."""

    def write_at_once(self, item: bytes) -> bool:
        """Write `item` now, without waiting: True once all of it is out, False when the
        stream holds the rest until it can go (`drained` waits for it)."""
        raise NotImplementedError

    async def drained(self) -> None:
        """Wait until what `write_at_once` left is out."""
        raise NotImplementedError


class _PipeWriter(WritesAtOnce):
    """A pipe, socket or terminal written by the asyncio loop's write-pipe transport; a
    write returns once all of it is written."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    @classmethod
    async def open(cls, fd: int) -> _PipeWriter:
        loop = asyncio.get_running_loop()
        pipe = _file(fd, "wb")
        protocol_factory: Any = asyncio.streams.FlowControlMixin
        transport, protocol = await loop.connect_write_pipe(protocol_factory, pipe)
        transport.set_write_buffer_limits(high=0)  # a write returns once it is all out
        return cls(asyncio.StreamWriter(transport, protocol, None, loop))

    async def send(self, item: bytes) -> None:
        self.write_at_once(item)
        await self.drained()

    def write_at_once(self, item: bytes) -> bool:
        transport = self._writer.transport
        if transport.is_closing():
            raise anyio.BrokenResourceError("stdout is closed")
        transport.write(item)  # the loop writes at once what the pipe takes
        return transport.get_write_buffer_size() == 0

    async def drained(self) -> None:
        try:
            await self._writer.drain()
        except OSError as error:  # the reader went away (a broken pipe, a reset)
            raise anyio.BrokenResourceError from error

    async def aclose(self) -> None:
        self._writer.close()
        await anyio.lowlevel.checkpoint()


class _FileStream(anyio.abc.ByteStream):
    """A regular file: read and written at once, no loop involved (it never waits)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def receive(self, max_bytes: int = _BUFFER_BYTES) -> bytes:
        await anyio.lowlevel.checkpoint()
        data = os.read(self._fd, max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()
        view = memoryview(item)
        while view:
            view = view[os.write(self._fd, view) :]

    async def send_eof(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        os.close(self._fd)
        await anyio.lowlevel.checkpoint()


def _file(fd: int, mode: str) -> IO[bytes]:
    return os.fdopen(fd, mode, buffering=0)
