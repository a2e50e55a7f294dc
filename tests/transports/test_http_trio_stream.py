"""`BatchedStream` (`_trio_stream`), the built-in server's sockets on trio, on real
127.0.0.1 sockets: many connections' sends at once, each arriving whole and in order; a
send the kernel takes only part of, finished as anyio's does (waiting for the reader); a
send cancelled while it waits for its batch, writing nothing."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import anyio
import anyio.abc
import pytest
import trio
import trio.testing
from loopback_pairs import MEGABYTE, dialled, receive_exactly

from mcp_tasks.transports._asyncio_stream import HELD_AT_MOST
from mcp_tasks.transports._trio_stream import BatchedStream, _batch, _Queued


def connected() -> AbstractAsyncContextManager[tuple[BatchedStream, anyio.abc.SocketStream]]:
    """A `BatchedStream` (the server's side) and the stream of the client that dialled it."""

    async def accept(listener: anyio.abc.SocketListener) -> BatchedStream:
        return BatchedStream(await listener.accept())

    return dialled(accept)


async def test_many_connections_sending_at_once_each_arrive_whole_and_in_order() -> None:
    async with (
        connected() as (first, first_client),
        connected() as (second, second_client),
        connected() as (third, third_client),
    ):
        pairs = [(first, first_client), (second, second_client), (third, third_client)]
        # Near HELD_AT_MOST each, more than the kernel holds: it takes only part of one,
        # whose rest waits until the client reads.
        messages = [bytes([n % 251]) * (HELD_AT_MOST - n) for n in range(200)]
        expected = b"".join(messages)
        received: dict[int, bytes] = {}

        async def send_all(server: BatchedStream) -> None:
            for message in messages:
                await server.send(message)

        async def read(index: int, client: anyio.abc.SocketStream) -> None:
            received[index] = await receive_exactly(client, len(expected))

        async with anyio.create_task_group() as tasks:
            for server, _ in pairs:
                tasks.start_soon(send_all, server)
            await trio.testing.wait_all_tasks_blocked()  # each sender waits for its reader
            for index, (_, client) in enumerate(pairs):
                tasks.start_soon(read, index, client)
        assert all(received[index] == expected for index in range(3))


async def test_a_send_cancelled_while_its_batch_waits_writes_nothing() -> None:
    async with connected() as (server, client):
        batch = _batch()
        leader = _Queued(server._raw_socket, b"", None)  # a batch already led: this one waits
        batch.queued.append(leader)
        try:
            with trio.CancelScope() as scope:
                scope.cancel()
                await server.send(b"never")
            assert scope.cancelled_caught
            assert batch.queued == [leader]
        finally:
            batch.queued.clear()
        await server.send(b"sent")
        assert await receive_exactly(client, 4) == b"sent"


async def test_a_send_larger_than_a_batch_holds_goes_as_anyios_does() -> None:
    async with connected() as (server, client):
        answer = bytes(range(256)) * (8 * MEGABYTE // 256)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.send, answer)
            assert await receive_exactly(client, len(answer)) == answer
        with pytest.raises(anyio.ClosedResourceError):
            await server.aclose()
            await server.send(b"after")
