"""What a server going away looks like to the HTTP client, and what the Client sends again
(issue 30, point 5): a refused connection sent nothing (any request may go again); a
connection cut before the answer, a stream cut short, a proxy's 502 may have delivered it
(only the requests that change nothing twice go again). Scripted peers on loopback sockets
(trio), answering each request with the bytes a test gives, or closing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
from redis_server import free_port

from mcp_tasks.client import (
    Client,
    RetryPolicy,
    ServerUnreachable,
    TransportError,
)
from mcp_tasks.transports import HttpClientTransport

REQUEST = b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "t"}}'
CLOSE = b""
"""The peer's answer that is no answer: it closes the connection having read the request."""


class Peer:
    """An HTTP/1.1 server that reads each request whole, then sends `answer(request)` (or
    closes, for CLOSE; or says nothing, for None) and closes."""

    def __init__(self, answer: Callable[[bytes], bytes | None]) -> None:
        self.answer = answer
        self.requests: list[bytes] = []

    async def handle(self, stream: trio.SocketStream) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            received += await stream.receive_some()
        head, _, body = received.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            body += await stream.receive_some()
        self.requests.append(body)
        answer = self.answer(body)
        if answer is None:
            await trio.sleep_forever()
        await stream.send_all(answer)
        await stream.aclose()


@asynccontextmanager
async def peer(answer: Callable[[bytes], bytes | None]) -> AsyncIterator[tuple[Peer, str]]:
    serving = Peer(answer)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, host="127.0.0.1"), serving.handle, 0
        )
        port = listeners[0].socket.getsockname()[1]
        yield serving, f"http://127.0.0.1:{port}/mcp"
        nursery.cancel_scope.cancel()


def http(status: str, content_type: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n"
    return f"{head}content-length: {len(body)}\r\n\r\n".encode() + body


async def send(url: str) -> dict[str, Any]:
    async with HttpClientTransport(url, timeout_seconds=5) as transport:
        return await transport.request(REQUEST, request_id=1, headers={})


async def test_a_refused_connection_sent_nothing() -> None:
    with trio.fail_after(10), pytest.raises(ServerUnreachable, match="cannot connect") as raised:
        await send(f"http://127.0.0.1:{free_port()}/mcp")
    assert raised.value.may_have_arrived is False


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (CLOSE, "cut short"),
        (http("502 Bad Gateway", "text/html", b"<h1>502</h1>"), "HTTP 502"),
        (http("504 Gateway Timeout", "text/plain", b"upstream timed out"), "HTTP 504"),
        (http("200 OK", "text/event-stream", b": primed\n\n"), "ended before the response"),
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 90\r\n\r\n{",
            "cut short",
        ),
    ],
)
async def test_a_connection_broken_before_the_answer_may_have_delivered_it(
    answer: bytes, words: str
) -> None:
    async with peer(lambda _: answer) as (_, url):
        with trio.fail_after(10), pytest.raises(ServerUnreachable, match=words) as raised:
            await send(url)
    assert raised.value.may_have_arrived is True


@pytest.mark.parametrize(
    "answer",
    [
        http("500 Internal Server Error", "text/html", b"<h1>oops</h1>"),
        b"HTTP/1.1 200 OK\r\ncontent-length: nonsense\r\n\r\n",
    ],
)
async def test_a_server_that_answers_wrongly_is_no_restart(answer: bytes) -> None:
    async with peer(lambda _: answer) as (_, url):
        with trio.fail_after(10), pytest.raises(TransportError) as raised:
            await send(url)
    assert not isinstance(raised.value, ServerUnreachable)


FAST = RetryPolicy(reconnect_seconds=0.3, reconnect_first_wait=0.05, reconnect_max_wait=0.1)


@asynccontextmanager
async def client_of(
    url: str, told: list[tuple[str, bool]], **options: Any
) -> AsyncIterator[Client]:
    def on_retry(method: str, seconds: float, why: Any) -> None:
        assert isinstance(why, ServerUnreachable) and seconds > 0
        told.append((method, why.may_have_arrived))

    async with HttpClientTransport(url, timeout_seconds=5) as transport:
        yield Client(transport, retry=FAST, on_retry=on_retry, **options)


async def test_a_tool_call_whose_connection_broke_is_not_sent_again() -> None:
    told: list[tuple[str, bool]] = []
    async with peer(lambda _: CLOSE) as (served, url), client_of(url, told) as client:
        with trio.fail_after(10), pytest.raises(ServerUnreachable):
            await client.request("tools/call", {"name": "transfer", "arguments": {}})
    assert (len(served.requests), told) == (1, [])  # it may have run: once is all


async def test_a_tasks_get_whose_connection_broke_is_sent_again_until_it_is_answered() -> None:
    def answer(body: bytes) -> bytes:
        if len(served.requests) < 3:
            return CLOSE
        reply = b'{"jsonrpc": "2.0", "id": %s, "result": {"resultType": "complete"}}'
        request_id = body.split(b'"id":')[1].split(b",")[0].strip()
        return http("200 OK", "application/json", reply % request_id)

    told: list[tuple[str, bool]] = []
    async with peer(answer) as (served, url), client_of(url, told) as client:
        with trio.fail_after(10):
            assert await client.request("tasks/cancel", {"taskId": "t"}) == {
                "resultType": "complete"
            }
    assert (len(served.requests), told) == (3, [("tasks/cancel", True)] * 2)


async def test_a_request_goes_again_while_the_server_refuses_then_gives_up() -> None:
    told: list[tuple[str, bool]] = []
    async with client_of(f"http://127.0.0.1:{free_port()}/mcp", told) as client:
        with trio.fail_after(10), pytest.raises(ServerUnreachable):
            await client.request("tools/call", {"name": "transfer", "arguments": {}})
    assert len(told) >= 3 and set(told) == {("tools/call", False)}


async def test_a_request_not_answered_in_request_timeout_seconds_is_a_transport_error() -> None:
    told: list[tuple[str, bool]] = []
    async with (
        peer(lambda _: None) as (served, url),
        client_of(url, told, request_timeout_seconds=0.2) as client,
    ):
        with trio.fail_after(10), pytest.raises(TransportError, match="no answer to tasks/get"):
            await client.request("tasks/get", {"taskId": "t"})
    assert (len(served.requests), told) == (1, [])
    with pytest.raises(ValueError, match="request_timeout_seconds"):
        Client(HttpClientTransport("http://127.0.0.1:1/mcp"), request_timeout_seconds=0)
