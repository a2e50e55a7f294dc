"""`HttpClientTransport` against real 127.0.0.1 sockets: the project's own `serve_http`
with examples/jobs.py, and a canned HTTP peer for the answers a good server never gives.

Waits are on events under `fail_after`; nothing sleeps and hopes."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from mcp_tasks import TASKS_EXTENSION, Server, ToolContext, ToolOutcome
from mcp_tasks.transports._client_base import TransportError
from mcp_tasks.transports._http_client import HttpClientTransport
from mcp_tasks.transports._http_server import HttpConfig, serve_http

ROOT = Path(__file__).parent.parent.parent
VERSION = "2026-07-28"
TASKS_CAPS = {"extensions": {TASKS_EXTENSION: {}}}
NO_CAPS: dict[str, Any] = {}


def _load_jobs() -> Any:
    path = ROOT / "examples/jobs.py"
    spec = importlib.util.spec_from_file_location("jobs_for_http_client_tests", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.server.shutdown_grace_seconds = 0.5
    return module


JOBS = _load_jobs()


def build(
    method: str,
    params: dict[str, Any] | None,
    request_id: str | int,
    *,
    caps: dict[str, Any] | None = None,
    **meta: Any,
) -> tuple[bytes, dict[str, str]]:
    """A request's bytes and the MCP headers a correct client sends with it."""
    full_meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": TASKS_CAPS if caps is None else caps,
        **meta,
    }
    full = {**(params or {}), "_meta": full_meta}
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": full}
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method}
    name = (params or {}).get("name") or (params or {}).get("taskId")
    if name is not None:
        headers["Mcp-Name"] = name
    return json.dumps(message).encode(), headers


def call(tool: str, arguments: dict[str, Any], request_id: str | int, **kw: Any) -> Any:
    return build("tools/call", {"name": tool, "arguments": arguments}, request_id, **kw)


@asynccontextmanager
async def serving(server: Server) -> AsyncIterator[str]:
    config = HttpConfig(drain_timeout_seconds=2.0)
    async with server.running(), trio.open_nursery() as nursery:
        port = await nursery.start(partial(serve_http, server, "127.0.0.1", 0, config=config))
        yield f"http://127.0.0.1:{port}/mcp"
        nursery.cancel_scope.cancel()


@pytest.fixture
async def transport() -> AsyncIterator[HttpClientTransport]:
    async with serving(JOBS.server) as url, HttpClientTransport(url, timeout_seconds=10) as client:
        yield client


# --- against serve_http --------------------------------------------------------------------


async def test_a_request_gets_its_json_response(transport: HttpClientTransport) -> None:
    message, headers = call("greet", {"name": "Ada"}, 7)
    with trio.fail_after(5):
        response = await transport.request(message, request_id=7, headers=headers)
    assert response["id"] == 7
    assert response["result"]["content"][0]["text"] == "Hello, Ada!"


async def test_sse_notifications_reach_the_callback_before_the_response(
    transport: HttpClientTransport,
) -> None:
    seen: list[dict[str, Any]] = []

    async def on_notification(note: dict[str, Any]) -> None:
        seen.append(note)

    arguments = {"seconds": 0.2, "label": "sse"}
    message, headers = call("slow_compute", arguments, "s1", caps=NO_CAPS, progressToken="tok")
    with trio.fail_after(5):
        response = await transport.request(
            message, request_id="s1", headers=headers, on_notification=on_notification
        )
        seen.append(response)
    *notes, last = seen
    assert last["id"] == "s1"
    assert last["result"]["content"][0]["text"] == "sse done after 0.2s"
    assert [n["params"]["progress"] for n in notes] == [0, 1]
    assert all(n["method"] == "notifications/progress" for n in notes)
    assert {n["params"]["progressToken"] for n in notes} == {"tok"}


async def test_an_http_error_status_with_a_json_rpc_error_is_returned(
    transport: HttpClientTransport,
) -> None:
    message, headers = build("initialize", {}, 3)  # removed in 2026-07-28: 404, -32601
    with trio.fail_after(5):
        response = await transport.request(message, request_id=3, headers=headers)
    assert response["id"] == 3 and response["error"]["code"] == -32601


async def test_the_mcp_headers_are_sent_as_given(transport: HttpClientTransport) -> None:
    message, headers = call("greet", {"name": "x"}, 4)
    headers["Mcp-Name"] = "not-greet"  # the server compares it with the body: 400, -32020
    with trio.fail_after(5):
        response = await transport.request(message, request_id=4, headers=headers)
    assert response["error"]["code"] == -32020
    assert "Mcp-Name" in response["error"]["message"]


async def test_a_notification_is_accepted(transport: HttpClientTransport) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": "notifications/cancelled"}
    with trio.fail_after(5):
        await transport.notify(json.dumps(note).encode(), headers=headers)


async def test_cancelling_the_caller_closes_the_stream_and_stops_the_call() -> None:
    server = Server("probe", "1.0", shutdown_grace_seconds=0.5)
    started, stopped = trio.Event(), trio.Event()

    @server.tool()
    async def wait_forever(ctx: ToolContext) -> ToolOutcome:
        await ctx.report_progress(1, 2, "waiting")  # the answer becomes an SSE stream
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    async def on_notification(note: dict[str, Any]) -> None:
        started.set()

    message, headers = call("wait_forever", {}, 1, caps=NO_CAPS, progressToken=1)
    async with serving(server) as url, HttpClientTransport(url) as client:
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                send = partial(client.request, message, request_id=1, headers=headers)
                nursery.start_soon(partial(send, on_notification=on_notification))
                await started.wait()
                nursery.cancel_scope.cancel()
            await stopped.wait()  # the server saw the connection close and cancelled it
            message, headers = call("greet", {"name": "again"}, 2)
            assert (await client.request(message, request_id=2, headers=headers))["id"] == 2


async def test_connection_refused_is_a_transport_error_naming_the_url() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()  # nothing listens there now
    url = f"http://127.0.0.1:{port}/mcp"
    message, headers = call("greet", {"name": "x"}, 1)
    async with HttpClientTransport(url) as client:
        with trio.fail_after(5), pytest.raises(TransportError, match="cannot connect") as caught:
            await client.request(message, request_id=1, headers=headers)
        assert url in str(caught.value)
        with trio.fail_after(5), pytest.raises(TransportError, match="cannot connect"):
            await client.notify(message, headers=headers)


# --- a canned peer: what a good server never answers ------------------------------------------


@dataclass
class Canned:
    url: str
    heads: list[bytes] = field(default_factory=list)


@asynccontextmanager
async def canned(answer: bytes | None) -> AsyncIterator[Canned]:
    """An HTTP peer that reads one request per connection, writes `answer` and closes
    (None: answers nothing, ever)."""
    peer = Canned("")

    async def handle(stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        peer.heads.append(head)
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            body += await stream.receive_some(65536)
        if answer is None:
            await trio.sleep_forever()
        await stream.send_all(answer)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        serve = partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        peer.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"
        yield peer
        nursery.cancel_scope.cancel()


def http(status: str, content_type: str | None, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n"
    return head.encode() + b"\r\n" + body


def sse(*messages: dict[str, Any], tail: bytes = b"") -> bytes:
    body = b"".join(b"data: " + json.dumps(m).encode() + b"\n\n" for m in messages) + tail
    return http("200 OK", "text/event-stream", body)


GREETING = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (http("502 Bad Gateway", "text/html", b"<html>bad</html>"), ["HTTP 502", "text/html"]),
        (http("200 OK", "application/json", b""), ["not JSON"]),
        (http("200 OK", "application/json", b"{not json"), ["not JSON", "{not json"]),
        (http("200 OK", None, b""), ["no Content-Type"]),
        (http("202 Accepted", None, b""), ["HTTP 202"]),
        (http("200 OK", "application/json", b'{"jsonrpc": "2.0"}'), ["not a JSON-RPC"]),
        (http("200 OK", "application/json", b'{"jsonrpc": "2.0", "id": 2, "result": {}}'), ["2"]),
        (sse(PROGRESS), ["ended before the response"]),
        (sse({"jsonrpc": "2.0", "id": 9, "method": "sampling/createMessage"}), ["request"]),
        (sse({**GREETING, "id": 5}), ["the response to 5"]),
        (sse(tail=b"data: {broken\n\n"), ["not JSON"]),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{",
            ["cut short"],
        ),
        (b"garbage\r\n\r\n", ["cut short or malformed"]),
    ],
    ids=[
        "html 502",
        "empty json",
        "broken json",
        "no content-type",
        "202 to a request",
        "json but not json-rpc",
        "another id",
        "stream ends without response",
        "request on the stream",
        "another id on the stream",
        "broken json event",
        "cut short",
        "not http",
    ],
)
async def test_what_is_no_json_rpc_response_is_a_transport_error(
    answer: bytes, words: list[str]
) -> None:
    message, headers = call("greet", {"name": "x"}, 1)
    async with canned(answer) as peer, HttpClientTransport(peer.url) as client:
        with trio.fail_after(5), pytest.raises(TransportError) as caught:
            await client.request(message, request_id=1, headers=headers)
    for word in [peer.url, *words]:
        assert word in str(caught.value)


async def test_the_post_carries_json_accept_and_the_mcp_headers() -> None:
    message, headers = call("greet", {"name": "x"}, 1)
    answer = http("200 OK", "application/json; charset=utf-8", json.dumps(GREETING).encode())
    async with canned(answer) as peer, HttpClientTransport(peer.url) as client:
        with trio.fail_after(5):
            assert await client.request(message, request_id=1, headers=headers) == GREETING
    head = peer.heads[0].decode().lower()
    assert head.startswith("post /mcp http/1.1")
    for line in [
        "content-type: application/json",
        "accept: application/json, text/event-stream",
        f"mcp-protocol-version: {VERSION}",
        "mcp-method: tools/call",
        "mcp-name: greet",
    ]:
        assert line in head.split("\r\n")


async def test_an_error_without_id_from_an_http_refusal_is_returned() -> None:
    refusal = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Unsupported Content-Type"}}
    answer = http("415 Unsupported Media Type", "application/json", json.dumps(refusal).encode())
    message, headers = call("greet", {"name": "x"}, 1)
    async with canned(answer) as peer, HttpClientTransport(peer.url) as client:
        with trio.fail_after(5):
            assert await client.request(message, request_id=1, headers=headers) == refusal


async def test_sse_comments_crlf_and_multi_line_data_are_read() -> None:
    data = json.dumps(GREETING, indent=1).encode().replace(b"\n", b"\r\ndata: ")
    body = b": keep-alive\r\n\r\nevent: other\r\ndata: {}\r\n\r\ndata: " + data + b"\r\n\r\n"
    message, headers = call("greet", {"name": "x"}, 1)
    answer = http("200 OK", "text/event-stream", body)
    async with canned(answer) as peer, HttpClientTransport(peer.url) as client:
        with trio.fail_after(5):
            assert await client.request(message, request_id=1, headers=headers) == GREETING


@pytest.mark.parametrize("stream", [False, True])
async def test_a_body_or_event_over_the_cap_is_a_transport_error(stream: bool) -> None:
    big = {**GREETING, "result": {"content": [], "pad": "x" * 2000}}
    answer = sse(big) if stream else http("200 OK", "application/json", json.dumps(big).encode())
    message, headers = call("greet", {"name": "x"}, 1)
    async with (
        canned(answer) as peer,
        HttpClientTransport(peer.url, max_message_bytes=1000) as client,
    ):
        with trio.fail_after(5), pytest.raises(TransportError, match="larger than 1000"):
            await client.request(message, request_id=1, headers=headers)


async def test_a_server_that_never_answers_times_out() -> None:
    message, headers = call("greet", {"name": "x"}, 1)
    async with (
        canned(None) as peer,
        HttpClientTransport(peer.url, timeout_seconds=0.2) as client,
    ):
        with trio.fail_after(5), pytest.raises(TransportError, match="timed out"):
            await client.request(message, request_id=1, headers=headers)


async def test_a_notification_answered_with_anything_but_202_is_a_transport_error() -> None:
    refusal = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "no"}}
    answer = http("400 Bad Request", "application/json", json.dumps(refusal).encode())
    async with canned(answer) as peer, HttpClientTransport(peer.url) as client:
        with trio.fail_after(5), pytest.raises(TransportError, match="HTTP 400"):
            await client.notify(b'{"jsonrpc": "2.0", "method": "x"}', headers={})


async def test_a_shared_http_client_is_left_open() -> None:
    import httpx2  # noqa: PLC0415

    async with serving(JOBS.server) as url, httpx2.AsyncClient() as shared:
        async with HttpClientTransport(url, http_client=shared) as client:
            message, headers = call("greet", {"name": "x"}, 1)
            assert (await client.request(message, request_id=1, headers=headers))["id"] == 1
        assert not shared.is_closed
