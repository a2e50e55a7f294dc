"""A server-side stream and the client that dialled it, over a real 127.0.0.1 socket: for
the tests of the built-in server's own streams (`_asyncio_stream`, `_trio_stream`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio
import anyio.abc

MEGABYTE = 1024 * 1024
Stream = TypeVar("Stream", bound=anyio.abc.SocketStream)


@asynccontextmanager
async def dialled(
    accept: Callable[[anyio.abc.SocketListener], Awaitable[Stream]],
) -> AsyncIterator[tuple[Stream, anyio.abc.SocketStream]]:
    """The stream `accept` makes of the server's side, and the client's; both closed after."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with listener:
        listening = getattr(listener, "listeners", [listener])[0]
        port = listening.extra(anyio.abc.SocketAttribute.local_port)
        client = await anyio.connect_tcp("127.0.0.1", port)
        server = await accept(listening)
        try:
            yield server, client
        finally:
            await server.aclose()
            await client.aclose()


async def receive_exactly(stream: anyio.abc.ByteReceiveStream, size: int) -> bytes:
    """`size` bytes off `stream`, however many reads they take."""
    data = bytearray()
    while len(data) < size:
        data += await stream.receive(MEGABYTE)
    return bytes(data)
