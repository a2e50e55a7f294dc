"""The byte budget of request bodies in flight (issue 15, point 11): over real loopback
sockets, bodies being read and handled at once never hold more than
`max_body_bytes_in_flight`; past it a request waits, the rest of its body unread, and after
`body_wait_seconds` is refused with 503 and `Retry-After`. Nothing read is lost."""

from __future__ import annotations

import json
from typing import Any

import trio
from runtime.helpers import request
from test_http import HttpClient, mcp_headers, serving

from mcp_tasks import CallToolResult, Server, ToolContext, ToolOutcome

BODY_BYTES = 100_000
"""Each request's size, about: the padding in its arguments."""


def build(release: trio.Event, entered: list[int]) -> Server:
    server = Server("budget", "1")

    @server.tool()  # answered in place: its body is held while it runs
    async def hold(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        entered.append(len(args["pad"]))
        await release.wait()
        return CallToolResult.text("released")

    return server


def padded_call() -> bytes:
    return request("tools/call", {"name": "hold", "arguments": {"pad": "x" * BODY_BYTES}})


async def test_bodies_past_the_budget_wait_then_get_503_with_retry_after() -> None:
    release, entered = trio.Event(), []
    server = build(release, entered)
    config: dict[str, Any] = {
        "max_body_bytes": 2 * BODY_BYTES,
        "max_body_bytes_in_flight": 2 * BODY_BYTES + 1_000,  # two padded calls, not three
        "body_wait_seconds": 0.5,
    }
    headers = mcp_headers("tools/call", "hold")
    async with serving(server, **config) as port:
        holders = [await HttpClient.connect(port) for _ in range(2)]
        async with trio.open_nursery() as nursery:
            answers: list[Any] = []

            async def call(client: HttpClient) -> None:
                answers.append(await client.post(padded_call(), headers))

            for client in holders:
                nursery.start_soon(call, client)
            with trio.fail_after(10):
                while len(entered) < 2:  # both bodies read, both handlers running
                    await trio.sleep(0.01)
            third = await HttpClient.connect(port)
            refused = await third.post(padded_call(), headers)
            assert refused.status == 503
            assert refused.headers["retry-after"] == "1"
            assert refused.headers.get("connection") == "close"  # its body was never read
            error = json.loads(refused.body)["error"]
            assert error["code"] == -32603 and error["data"] == {"retryAfterMs": 1000}
            assert "too many request bodies in flight" in error["message"]
            assert len(entered) == 2  # the third handler never ran
            await third.aclose()

            # Room again once one is answered: a request waiting meanwhile gets in.
            late = await HttpClient.connect(port)
            nursery.start_soon(call, late)
            release.set()
        assert [answer.status for answer in answers] == [200, 200, 200]
        assert len(entered) == 3
        for client in (*holders, late):
            await client.aclose()


async def test_a_chunked_body_takes_from_the_budget_as_it_arrives() -> None:
    release, entered = trio.Event(), []
    server = build(release, entered)
    config: dict[str, Any] = {
        "max_body_bytes": 2 * BODY_BYTES,
        "max_body_bytes_in_flight": 2 * BODY_BYTES,
        "body_wait_seconds": 0.3,
    }
    async with serving(server, **config) as port:
        first = await HttpClient.connect(port)
        second = await HttpClient.connect(port)
        headers = mcp_headers("tools/call", "hold")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first.post, padded_call(), headers)
            with trio.fail_after(10):
                while not entered:
                    await trio.sleep(0.01)
            await second.send_raw(chunked_request(padded_call() + b" " * BODY_BYTES, headers))
            refused = await second.response()
            assert refused.status == 503 and refused.headers["retry-after"] == "1"
            assert len(entered) == 1
            release.set()
        await first.aclose()
        await second.aclose()


def chunked_request(body: bytes, headers: list[Any], size: int = 16_384) -> bytes:
    """A POST whose body comes in chunks of `size`, without a Content-Length."""
    head = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ntransfer-encoding: chunked\r\n"
    head += b"content-type: application/json\r\n"
    head += b"".join(f"{name}: {value}\r\n".encode() for name, value in headers) + b"\r\n"
    pieces = [body[at : at + size] for at in range(0, len(body), size)]
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
    return head + chunks + b"0\r\n\r\n"
