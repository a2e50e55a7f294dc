"""`serve_http` on asyncio, where each connection is a `ProtocolStream` (`_asyncio_stream`):
the stream on real 127.0.0.1 sockets (bytes whole and in order, a turn's sends written
together at the next turn, what a client leaves unread
held to `READ_LIMIT`, a send that waits for a client that does not read, EOF, reset, close,
cancellation), then the server over it (keep-alive and pipelining, a client that leaves
mid-request, a head that never ends, a body refused unread, a drain).

Each test body runs under `asyncio.run` (`run_asyncio`, bounded by its deadline); waits are
on bytes, events and end-of-file, never on a sleep that hopes.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import h11
import pytest
from loopback_pairs import MEGABYTE, dialled, receive_exactly
from on_asyncio import run_asyncio, wait_until

from mcp_tasks import TASKS_EXTENSION, Server, ToolContext
from mcp_tasks.transports._asyncio_stream import READ_LIMIT, ProtocolStream, accept_on_asyncio
from mcp_tasks.transports._http_server import HttpConfig, serve_http

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
}


def on_asyncio(test: Callable[[], Awaitable[None]]) -> Callable[[], None]:
    """A test whose body runs under `asyncio.run`."""

    def run() -> None:
        run_asyncio(test)

    run.__name__ = test.__name__
    run.__doc__ = test.__doc__
    return run


# --- the stream --------------------------------------------------------------------------


def connected() -> AbstractAsyncContextManager[tuple[ProtocolStream, anyio.abc.SocketStream]]:
    """A `ProtocolStream` (the server's side) and anyio's stream of the client that dialled it."""
    return dialled(accept_on_asyncio)


def pending_bytes(client: anyio.abc.SocketStream) -> bytes:
    """What has reached `client`'s socket and is not read yet (peeked, without waiting)."""
    descriptor = client.extra(anyio.abc.SocketAttribute.raw_socket).fileno()
    with socket.socket(fileno=os.dup(descriptor)) as raw:
        try:
            return raw.recv(MEGABYTE, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return b""


@on_asyncio
async def test_sends_of_one_turn_are_written_together_at_the_next_turn_in_order() -> None:
    async with connected() as (first, first_client), connected() as (second, second_client):
        await first.send(b"one")
        await second.send(b"two")
        assert pending_bytes(first_client) == pending_bytes(second_client) == b""
        await first.send(b", more")  # a second send of the turn: both at once, in order
        assert pending_bytes(first_client) == b"one, more"
        assert pending_bytes(second_client) == b""
        await anyio.lowlevel.checkpoint()  # the loop's next turn
        assert pending_bytes(second_client) == b"two"
        assert await receive_exactly(first_client, 9) == b"one, more"
        assert await receive_exactly(second_client, 3) == b"two"


@on_asyncio
async def test_closing_writes_what_a_send_left_for_the_next_turn() -> None:
    async with connected() as (server, client):
        await server.send(b"last answer")
        await server.send_eof()
        assert await receive_exactly(client, 11) == b"last answer"
    async with connected() as (server, client):
        await server.send(b"goodbye")
        await server.aclose()
        assert await receive_exactly(client, 7) == b"goodbye"


@on_asyncio
async def test_a_client_that_sends_more_than_is_read_is_held_to_the_read_limit() -> None:
    async with connected() as (server, client):
        total = 8 * MEGABYTE
        flood = bytes(range(251)) * (total // 251)

        async def send_all() -> None:
            await client.send(flood)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(send_all)
            # Nothing is read: the server stops reading its socket past READ_LIMIT.
            await wait_until(lambda: not server._pipe.reading)
            held = server._pipe.held
            assert READ_LIMIT < held <= READ_LIMIT + MEGABYTE
            got = await receive_exactly(server, len(flood))  # reading resumes as it is taken
        assert got == flood
        assert server._pipe.reading and server._pipe.held == 0


@on_asyncio
async def test_a_send_to_a_client_that_does_not_read_waits_until_it_does() -> None:
    async with connected() as (server, client):
        answer = bytes(range(256)) * (32 * MEGABYTE // 256)
        sent = anyio.Event()

        async def send() -> None:
            await server.send(answer)
            sent.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(send)
            await wait_until(lambda: server._pipe.write_paused)
            assert not sent.is_set()  # the kernel's buffer is full: the send waits
            got = await receive_exactly(client, len(answer))
            await sent.wait()
        assert got == answer


@on_asyncio
async def test_end_of_file_ends_reading_and_the_answer_can_still_be_sent() -> None:
    async with connected() as (server, client):
        await client.send(b"last words")
        await client.send_eof()
        assert await server.receive() == b"last words"
        with pytest.raises(anyio.EndOfStream):
            await server.receive()
        await server.send(b"answered")  # a half-closed client still reads
        assert await client.receive() == b"answered"


@on_asyncio
async def test_a_reset_breaks_the_stream() -> None:
    async with connected() as (server, client):
        raw = client.extra(anyio.abc.SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        await client.aclose()  # linger 0: a reset, not a FIN
        with pytest.raises((anyio.BrokenResourceError, anyio.EndOfStream)):
            await server.receive()
        with pytest.raises(anyio.BrokenResourceError):
            for _ in range(100):  # the first write may be taken before the reset is seen
                await server.send(b"x" * 65536)


@on_asyncio
async def test_closing_wakes_a_waiting_reader_and_later_calls_are_refused() -> None:
    async with connected() as (server, _client):
        outcome: list[type[BaseException]] = []

        async def read() -> None:
            try:
                await server.receive()
            except anyio.ClosedResourceError as error:
                outcome.append(type(error))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            await wait_until(lambda: server._pipe.readable is not None)
            await server.aclose()
        assert outcome == [anyio.ClosedResourceError]
        with pytest.raises(anyio.ClosedResourceError):
            await server.receive()
        with pytest.raises(anyio.ClosedResourceError):
            await server.send(b"x")


@on_asyncio
async def test_a_cancelled_wait_leaves_the_stream_usable_and_one_reader_at_a_time() -> None:
    async with connected() as (server, client):
        with anyio.move_on_after(0.05) as scope:
            await server.receive()
        assert scope.cancelled_caught
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.receive)
            await wait_until(lambda: server._pipe.readable is not None)
            with pytest.raises(anyio.BusyResourceError):
                await server.receive()
            await client.send(b"x")
        await client.send(b"after")
        assert await server.receive() == b"after"


# --- the server over it ------------------------------------------------------------------


def build_server(stopped: dict[str, bool]) -> Server:
    server = Server("asyncio-http", "1.0")

    @server.tool()
    async def greet(ctx: ToolContext, name: str) -> str:
        """Says hello."""
        return f"Hello, {name}!"

    @server.tool()
    async def wait_forever(ctx: ToolContext) -> str:
        """Runs until cancelled."""
        stopped["started"] = True
        try:
            await anyio.sleep_forever()
        finally:
            stopped["cancelled"] = True
        return "never"

    return server


@asynccontextmanager
async def serving(server: Server, **config: Any) -> AsyncIterator[int]:
    async with server.running(), anyio.create_task_group() as tasks:
        settings = {"drain_timeout_seconds": 2.0, **config}
        serve = partial(serve_http, server, "127.0.0.1", 0, config=HttpConfig(**settings))
        port: int = await tasks.start(serve)
        yield port
        tasks.cancel_scope.cancel()


def post(name: str, arguments: dict[str, Any], request_id: int = 1, extra: str = "") -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": META},
        }
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
        f"Mcp-Method: tools/call\r\nMcp-Name: {name}\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class Answers:
    """Responses read off a client's stream, whatever was written (raw bytes, pipelined):
    an h11 client, primed as if it had sent a request, for each response in turn."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self.stream = stream
        self.left = b""
        self.closed = False

    async def next(self) -> tuple[int, bytes]:
        reader = h11.Connection(h11.CLIENT)
        reader.send(h11.Request(method="POST", target="/", headers=[("Host", "x")]))
        reader.send(h11.EndOfMessage())
        if self.left:  # b"" would tell h11 the connection closed
            reader.receive_data(self.left)
        status, body = 0, b""
        while True:
            event = reader.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = await self.stream.receive()
                except anyio.EndOfStream:
                    data = b""
                reader.receive_data(data)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                self.left = reader.trailing_data[0]
                return status, body
            else:
                raise AssertionError(f"the connection ended before an answer: {event}")


def text(body: bytes) -> str:
    result = json.loads(body)["result"]
    return str(result["content"][0]["text"])


@on_asyncio
async def test_keep_alive_and_pipelined_requests_are_answered_in_order() -> None:
    async with serving(build_server({})) as port:
        client = await anyio.connect_tcp("127.0.0.1", port)
        async with client:
            read = Answers(client)
            for round_ in range(20):
                await client.send(post("greet", {"name": f"n{round_}"}, round_))
                status, body = await read.next()
                assert status == 200 and text(body) == f"Hello, n{round_}!"
            await client.send(b"".join(post("greet", {"name": n}, i) for i, n in enumerate("abc")))
            got = [await read.next() for _ in range(3)]
        assert [text(body) for _, body in got] == ["Hello, a!", "Hello, b!", "Hello, c!"]


@on_asyncio
async def test_a_client_that_leaves_mid_request_cancels_it() -> None:
    seen: dict[str, bool] = {}
    async with serving(build_server(seen)) as port:
        client = await anyio.connect_tcp("127.0.0.1", port)
        await client.send(post("wait_forever", {}))
        await wait_until(lambda: seen.get("started", False))
        await client.aclose()  # how a client cancels a request over HTTP
        await wait_until(lambda: seen.get("cancelled", False))


@on_asyncio
async def test_a_head_that_never_ends_is_answered_408_and_closed() -> None:
    async with serving(build_server({}), header_timeout_seconds=0.2) as port:
        client = await anyio.connect_tcp("127.0.0.1", port)
        async with client:
            await client.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            status, body = await Answers(client).next()
            assert status == 408 and b"request head did not arrive in time" in body
            rest = b""
            with pytest.raises(anyio.EndOfStream):
                while True:
                    rest += await client.receive()
            assert rest == b""


@on_asyncio
async def test_a_body_refused_unread_is_answered_before_the_connection_closes() -> None:
    async with serving(build_server({}), max_body_bytes=1000) as port:
        client = await anyio.connect_tcp("127.0.0.1", port)
        async with client:
            request = post("greet", {"name": "x" * 5000})
            await client.send(request)
            status, body = await Answers(client).next()
            assert status == 413 and b"too large" in body


@on_asyncio
async def test_cancelling_serve_closes_idle_connections_and_ends() -> None:
    server = build_server({})
    async with server.running():
        async with anyio.create_task_group() as tasks:
            port = await tasks.start(partial(serve_http, server, "127.0.0.1", 0))
            client = await anyio.connect_tcp("127.0.0.1", port)
            await client.send(post("greet", {"name": "a"}))
            status, _ = await Answers(client).next()
            assert status == 200
            tasks.cancel_scope.cancel()  # the drain: the idle connection is closed
        with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
            await client.receive()
        await client.aclose()
