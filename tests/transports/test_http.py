"""Streamable HTTP: `serve_http` on real 127.0.0.1 sockets, spoken to by a raw h11 client.

Every JSON-RPC body the server sends is checked against the official schemas. Waits are on
events and end-of-file under `fail_after`, never a sleep that hopes; the timeouts under
test are configured short.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import h11
import msgspec
import pytest
import trio
from runtime.helpers import request
from schema_check import check_reply

from mcp_tasks import (
    START_TASK,
    TASKS_EXTENSION,
    Server,
    ServerOptions,
    TaskOptions,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.transports._http_server import HttpConfig, serve_http

ROOT = Path(__file__).parent.parent.parent
TASKS_CAPS = {"extensions": {TASKS_EXTENSION: {}}}
NO_CAPS: dict[str, Any] = {}
VERSION = "2026-07-28"
Headers = Sequence[tuple[str, str]]


def _load_jobs() -> Any:
    spec = importlib.util.spec_from_file_location("jobs_for_http_tests", ROOT / "examples/jobs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.server.shutdown_grace_seconds = 0.5
    return module


JOBS = _load_jobs()


# --- a raw client ------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(self.body)
        return decoded

    def events(self) -> list[dict[str, Any]]:
        """The JSON messages of an SSE body, in order."""
        assert self.headers["content-type"] == "text/event-stream"
        blocks = self.body.decode().split("\n\n")
        assert blocks[-1] == "", "the stream ends with a whole event"
        return [json.loads(block.removeprefix("data: ")) for block in blocks[:-1]]


class HttpClient:
    """One HTTP/1.1 connection to 127.0.0.1, written with h11 (keep-alive, pipelining)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)

    @classmethod
    async def connect(cls, port: int) -> HttpClient:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    def encode(
        self, method: str, headers: Headers, body: bytes = b"", target: str = "/mcp"
    ) -> bytes:
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        names = {name.lower() for name, _ in headers}
        full = [("host", "127.0.0.1"), *headers] if "host" not in names else list(headers)
        if body or method == "POST":
            full.append(("content-length", str(len(body))))
        out = self.h11.send(h11.Request(method=method, target=target, headers=full)) or b""
        if body:
            out += self.h11.send(h11.Data(data=body)) or b""
        return out + (self.h11.send(h11.EndOfMessage()) or b"")

    async def send(
        self, method: str, headers: Headers, body: bytes = b"", target: str = "/mcp"
    ) -> None:
        await self.stream.send_all(self.encode(method, headers, body, target))

    async def send_raw(self, data: bytes, *, method: str = "POST") -> None:
        """Bytes h11 would not write (odd headers); h11 is moved along as if it had."""
        self.encode(method, [])
        await self.stream.send_all(data)

    async def next_event(self) -> h11.Event:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.stream.receive_some(65536))
                continue
            assert not isinstance(event, type), event
            return event

    async def head(self) -> h11.Response:
        while True:
            event = await self.next_event()
            if isinstance(event, h11.Response):
                return event
            assert isinstance(event, h11.InformationalResponse), event

    async def response(self) -> Response:
        head = await self.head()
        body = await self.response_rest()
        headers = {name.decode(): value.decode() for name, value in head.headers}
        return Response(head.status_code, headers, body)

    async def response_rest(self) -> bytes:
        """The rest of a response body whose head has been read."""
        body = b""
        while not isinstance(event := await self.next_event(), h11.EndOfMessage):
            assert isinstance(event, h11.Data), event
            body += event.data
        return body

    async def post(self, body: bytes, headers: Headers, target: str = "/mcp") -> Response:
        await self.send("POST", [("content-type", "application/json"), *headers], body, target)
        return await self.response()

    async def rest_until_closed(self) -> bytes:
        """Whatever the server still sends, up to its end-of-file; then close as well."""
        rest = b""
        while data := await self.stream.receive_some(65536):
            rest += data
        await self.stream.aclose()
        return rest

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def exchange_once(
        self, method: str, target: str, headers: Headers = (), wait: float = 10
    ) -> Response:
        """One request and its answer, then the connection closes."""
        try:
            with trio.fail_after(wait):
                await self.send(method, list(headers), target=target)
                return await self.response()
        finally:
            await self.aclose()


def mcp_headers(method: str, name: str | None = None, version: str = VERSION) -> list[Any]:
    headers = [
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", version),
        ("mcp-method", method),
    ]
    return headers if name is None else [*headers, ("mcp-name", name)]


async def rpc(
    client: HttpClient,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    caps: dict[str, Any] | None = None,
    headers: Headers | None = None,
    **meta: Any,
) -> Response:
    """Send one request with the headers a correct client sends, unless told otherwise."""
    if name is None and params is not None:
        name = params.get("name") or params.get("taskId")
    body = request(method, params, caps=TASKS_CAPS if caps is None else caps, **meta)
    response = await client.post(body, mcp_headers(method, name) if headers is None else headers)
    if response.headers.get("content-type") == "application/json":
        check_reply(method if response.status == 200 else None, response.body)
    return response


async def call(client: HttpClient, tool: str, arguments: dict[str, Any], **kw: Any) -> Response:
    return await rpc(client, "tools/call", {"name": tool, "arguments": arguments}, **kw)


def assert_refused(response: Response, status: int, *words: str) -> None:
    """An HTTP-level refusal: the status, and a JSON-RPC error (no id) that names it."""
    assert response.status == status, response
    assert response.headers["content-type"] == "application/json"
    check_reply(None, response.body)
    error = response.json()
    assert "id" not in error and error["error"]["code"] == -32600
    for word in words:
        assert word in error["error"]["message"], error


# --- servers -----------------------------------------------------------------------------


@asynccontextmanager
async def serving(server: Server, **config: Any) -> AsyncIterator[int]:
    settings = {"drain_timeout_seconds": 2.0, **config}
    async with server.running(), trio.open_nursery() as nursery:
        serve = partial(serve_http, server, "127.0.0.1", 0, config=HttpConfig(**settings))
        port: int = await nursery.start(serve)
        yield port
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def serving_on_asyncio(server: Server, **config: Any) -> AsyncIterator[int]:
    """`serving`, with the server on an asyncio loop of its own thread (each connection a
    `ProtocolStream`); the test talks to it over the socket from trio. The server must
    not share trio objects with the test."""
    settings = {"drain_timeout_seconds": 2.0, **config}
    ready = threading.Event()
    held: dict[str, Any] = {}

    async def main() -> None:
        async with server.running(), anyio.create_task_group() as tasks:
            serve = partial(serve_http, server, "127.0.0.1", 0, config=HttpConfig(**settings))
            held["port"] = await tasks.start(serve)
            held["stop"] = partial(
                asyncio.get_running_loop().call_soon_threadsafe, tasks.cancel_scope.cancel
            )
            ready.set()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as error:  # handed to the test
            held["error"] = error
            ready.set()

    thread = threading.Thread(target=run, name="asyncio server")
    thread.start()
    try:
        assert await trio.to_thread.run_sync(ready.wait, 10.0), "the server did not start"
        if "error" in held:
            raise held["error"]
        yield held["port"]
    finally:
        if "stop" in held:
            held["stop"]()
        await trio.to_thread.run_sync(thread.join, 10.0)
        assert not thread.is_alive(), "the server did not stop"
    if "error" in held:
        raise held["error"]


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """A refusal or a vanished client is no error: nothing may be logged as one."""
    yield
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [record.getMessage() for record in errors]


@pytest.fixture
async def port() -> AsyncIterator[int]:
    async with serving(JOBS.server) as bound:
        yield bound


@pytest.fixture
async def client(port: int) -> AsyncIterator[HttpClient]:
    connection = await HttpClient.connect(port)
    yield connection
    await connection.aclose()


@dataclass
class Probe:
    started: trio.Event
    cancelled: trio.Event
    release: trio.Event


def probe_server(options: ServerOptions | None = None) -> tuple[Server, Probe]:
    """Tools that report what happened to them, for cancellation and drain."""
    server = Server("probe", "1.0", options=options, shutdown_grace_seconds=0.5)
    probe = Probe(trio.Event(), trio.Event(), trio.Event())

    @server.tool()
    async def gated(ctx: ToolContext) -> ToolOutcome:
        probe.started.set()
        await ctx.report_progress(1, 2, "waiting for the gate")
        try:
            await probe.release.wait()
        except trio.Cancelled:
            probe.cancelled.set()
            raise
        return "released"

    @server.tool(task_support="required")
    async def job(ctx: ToolContext) -> ToolOutcome:
        return "done" if ctx.in_task else START_TASK

    return server, probe


# --- the status table --------------------------------------------------------------------


async def test_a_request_gets_its_json_reply(client: HttpClient) -> None:
    response = await rpc(client, "server/discover")
    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(response.body)
    result = response.json()["result"]
    assert result["capabilities"]["extensions"] == {TASKS_EXTENSION: {}}


async def test_a_notification_gets_202_and_no_body(client: HttpClient) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response = await client.post(json.dumps(note).encode(), mcp_headers("notifications/cancelled"))
    assert (response.status, response.body) == (202, b"")
    assert response.headers["content-length"] == "0"


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("missing _meta", 400, -32602),
        ("header version differs from _meta", 400, -32020),
        ("Mcp-Method differs from method", 400, -32020),
        ("unsupported version", 400, -32022),
        ("task-only tool without the extension", 400, -32021),
        ("removed method", 404, -32601),
        ("not JSON", 400, -32700),
    ],
)
async def test_json_rpc_errors_carry_their_http_status(
    client: HttpClient, case: str, status: int, code: int
) -> None:
    greet = {"name": "greet", "arguments": {"name": "x"}}
    if case == "missing _meta":
        body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": greet})
        response = await client.post(body.encode(), mcp_headers("tools/call", "greet"))
    elif case == "header version differs from _meta":
        meta = {"io.modelcontextprotocol/protocolVersion": "v999.0.0"}
        response = await call(client, "greet", {"name": "x"}, **meta)
    elif case == "Mcp-Method differs from method":
        response = await call(client, "greet", {"name": "x"}, headers=mcp_headers("tools/list"))
    elif case == "unsupported version":
        meta = {"io.modelcontextprotocol/protocolVersion": "v999.0.0"}
        headers = mcp_headers("server/discover", version="v999.0.0")
        response = await rpc(client, "server/discover", headers=headers, **meta)
        assert response.json()["error"]["data"]["requested"] == "v999.0.0"
    elif case == "task-only tool without the extension":
        response = await call(client, "failing_job", {}, caps=NO_CAPS)
    elif case == "removed method":
        response = await rpc(client, "initialize")
    else:
        response = await client.post(b"{not json", mcp_headers("tools/list"))
    assert response.status == status
    assert response.headers["content-type"] == "application/json"
    check_reply(None, response.body)
    assert response.json()["error"]["code"] == code


async def test_an_initialize_from_an_earlier_revision_opens_a_session(
    client: HttpClient,
) -> None:
    """What the TypeScript SDK client and the Inspector send first, headers and all: a 2025
    session (tests/transports/test_http_legacy.py has the rest)."""
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "ts", "version": "1"},
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    headers = [("accept", "application/json, text/event-stream")]
    response = await client.post(body.encode(), headers)
    assert response.status == 200
    assert response.json()["result"]["protocolVersion"] == "2025-06-18"
    assert response.headers["mcp-session-id"]
    # and what such a client sends next without the session's id
    later = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    old = [("mcp-protocol-version", "2025-06-18"), *headers]
    response = await client.post(later.encode(), old)
    assert_refused(response, 400, "Mcp-Session-Id")


async def test_a_modern_only_server_answers_initialize_400_naming_its_versions() -> None:
    server = JOBS.server
    kept = server.core.options
    server.core.use_options(msgspec.structs.replace(kept, legacy_sessions=False))
    try:
        async with serving(server) as bound:
            client = await HttpClient.connect(bound)
            params = {"protocolVersion": "2025-06-18", "capabilities": {}}
            body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
            headers = [("accept", "application/json, text/event-stream")]
            response = await client.post(body.encode(), headers)
            assert response.status == 400
            check_reply(None, response.body)
            error = response.json()["error"]
            assert error["code"] == -32022
            assert error["data"] == {"supported": ["2026-07-28"], "requested": "2025-06-18"}
            later = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
            old = [("mcp-protocol-version", "2025-06-18"), *headers]
            response = await client.post(later.encode(), old)
            assert response.status == 400 and response.json()["error"]["code"] == -32022
            for method in ("GET", "DELETE"):
                await client.send(method, [("accept", "text/event-stream")])
                refused = await client.response()
                assert refused.status == 405 and refused.headers["allow"] == "POST"
            await client.aclose()
    finally:
        server.core.use_options(kept)


async def test_other_paths_are_404(client: HttpClient) -> None:
    body = request("server/discover")
    response = await client.post(body, mcp_headers("server/discover"), target="/other")
    assert_refused(response, 404, "/other", "/mcp")
    response = await client.post(body, mcp_headers("server/discover"), target="/mcp?x=1")
    assert response.status == 200  # a query string does not change the path


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "HEAD"])
async def test_other_methods_on_the_endpoint_are_405_with_allow(
    client: HttpClient, method: str
) -> None:
    await client.send(method, [("accept", "text/event-stream")])
    response = await client.response()
    if method in ("GET", "DELETE"):  # a 2025 session's, without its id
        assert_refused(response, 400, "Mcp-Session-Id")
    else:
        assert response.status == 405 and response.headers["allow"] == "GET, POST, DELETE"
        if method != "HEAD":  # a HEAD answer has no body
            assert_refused(response, 405, method, "GET, POST and DELETE")
    assert (await rpc(client, "tools/list")).status == 200  # the connection stays usable


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        (None, 415),
        ("application/json; charset=utf-8", 200),
        ("Application/JSON", 200),
    ],
)
async def test_content_type_must_be_json(
    client: HttpClient, content_type: str | None, status: int
) -> None:
    headers = mcp_headers("tools/list")
    if content_type is not None:
        headers.append(("content-type", content_type))
    for _ in range(2):  # the same head again: its verdict is the same (it is read once)
        await client.send("POST", headers, request("tools/list"))
        response = await client.response()
        if status == 415:
            assert_refused(response, 415, "Content-Type", "application/json")
        else:
            assert response.status == 200
    assert (await rpc(client, "tools/list")).status == 200  # the body was read: still usable


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("http://evil.example", 403),
        ("null", 403),
        ("http://localhost.evil.example", 403),
        ("http://127.0.0.1@evil.example", 403),
        ("http://localhost:3000", 200),
        ("https://127.0.0.1", 200),
        ("http://[::1]:8080", 200),
        ("https://app.example.com", 200),  # allowed in the config below
    ],
)
async def test_origin_must_be_allowed(origin: str, status: int) -> None:
    async with serving(JOBS.server, allowed_origins=["https://APP.example.com/"]) as bound:
        client = await HttpClient.connect(bound)
        response = await rpc(
            client, "tools/list", headers=[*mcp_headers("tools/list"), ("origin", origin)]
        )
        if status == 403:
            assert_refused(response, 403, "Origin", origin)
        else:
            assert response.status == 200


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("evil.example", 421),
        ("evil.example:8000", 421),
        ("127.0.0.1.nip.io", 421),
        ("localhost", 200),
        ("localhost:8000", 200),
        ("127.0.0.1:1234", 200),
        ("[::1]:8000", 200),
        ("mcp.internal:8000", 200),  # allowed in the config below
    ],
)
async def test_a_loopback_server_refuses_foreign_hosts(host: str, status: int) -> None:
    """DNS rebinding: a page of evil.example whose name now points at 127.0.0.1."""
    async with serving(JOBS.server, allowed_hosts=["mcp.internal"]) as bound:
        client = await HttpClient.connect(bound)
        headers = [("host", host), *mcp_headers("server/discover"), ("origin", "http://localhost")]
        response = await rpc(client, "server/discover", headers=headers)
        if status == 421:
            assert_refused(response, 421, "Host", host.split(":", maxsplit=1)[0], "DNS rebinding")
        else:
            assert response.status == 200


async def test_a_body_over_the_limit_is_413_by_content_length() -> None:
    async with serving(JOBS.server, max_body_bytes=1000) as bound:
        client = await HttpClient.connect(bound)
        big = request("tools/call", {"name": "greet", "arguments": {"name": "x" * 2000}})
        response = await client.post(big, mcp_headers("tools/call", "greet"))
        assert_refused(response, 413, "too large", "1000")
        assert response.headers["connection"] == "close"
        assert await client.rest_until_closed() == b""


async def test_a_chunked_body_over_the_limit_is_413_while_counted() -> None:
    async with serving(JOBS.server, max_body_bytes=1000) as bound:
        client = await HttpClient.connect(bound)
        head = [
            ("content-type", "application/json"),
            ("accept", "application/json"),
            ("transfer-encoding", "chunked"),
        ]
        request_head = h11.Request(
            method="POST", target="/mcp", headers=[("host", "127.0.0.1"), *head]
        )
        await client.stream.send_all(client.h11.send(request_head) or b"")
        for _ in range(3):  # 1,200 bytes in all, no Content-Length to go by
            await client.stream.send_all(client.h11.send(h11.Data(data=b" " * 400)) or b"")
        response = await client.response()
        assert_refused(response, 413, "too large", "1000")
        assert response.headers["connection"] == "close"
        assert await client.rest_until_closed() == b""


async def test_a_small_chunked_body_is_read() -> None:
    async with serving(JOBS.server) as bound:
        client = await HttpClient.connect(bound)
        body = request("tools/list")
        headers = [
            ("host", "127.0.0.1"),
            ("content-type", "application/json"),
            ("transfer-encoding", "chunked"),
            *mcp_headers("tools/list"),
        ]
        data = client.h11.send(h11.Request(method="POST", target="/mcp", headers=headers)) or b""
        for piece in (body[:10], body[10:]):
            data += client.h11.send(h11.Data(data=piece)) or b""
        await client.stream.send_all(data + (client.h11.send(h11.EndOfMessage()) or b""))
        response = await client.response()
        assert response.status == 200
        check_reply("tools/list", response.body)


async def test_headers_over_the_limit_are_431_and_bad_http_is_400() -> None:
    async with serving(JOBS.server, max_header_bytes=1024) as bound:
        client = await HttpClient.connect(bound)
        await client.send_raw(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 2000)
        assert_refused(await client.response(), 431)
        assert await client.rest_until_closed() == b""
        client = await HttpClient.connect(bound)
        await client.send_raw(b"NOT HTTP AT ALL\r\n\r\n")
        response = await client.response()
        assert_refused(response, 400, "Invalid HTTP request")
        assert await client.rest_until_closed() == b""


async def test_expect_100_continue_is_honoured(client: HttpClient) -> None:
    body = request("tools/list")
    headers = [("content-type", "application/json"), ("expect", "100-continue")]
    head = client.encode("POST", [*headers, *mcp_headers("tools/list")], body)
    split = head.index(b"\r\n\r\n") + 4
    await client.stream.send_all(head[:split])
    assert isinstance(await client.next_event(), h11.InformationalResponse)
    await client.stream.send_all(head[split:])
    response = await client.response()
    assert response.status == 200


# --- Mcp-Name --------------------------------------------------------------------------


async def test_mcp_name_on_tools_call_must_match_the_tool(client: HttpClient) -> None:
    missing = await call(client, "greet", {"name": "x"}, headers=mcp_headers("tools/call"))
    assert missing.status == 400
    assert missing.json()["error"]["code"] == -32020
    assert "Mcp-Name header is missing" in missing.json()["error"]["message"]
    wrong = await call(client, "greet", {"name": "x"}, name="slow_compute")
    assert (wrong.status, wrong.json()["error"]["code"]) == (400, -32020)
    encoded = "=?base64?" + base64.b64encode(b"greet").decode() + "?="
    ok = await call(client, "greet", {"name": "x"}, name=encoded)
    assert ok.status == 200 and ok.json()["result"]["content"][0]["text"] == "Hello, x!"


async def test_mcp_name_on_tasks_get_must_be_the_task_id(client: HttpClient) -> None:
    created = await call(client, "slow_compute", {"seconds": 0.05})
    task_id = created.json()["result"]["taskId"]
    ok = await rpc(client, "tasks/get", {"taskId": task_id})
    assert ok.status == 200 and ok.json()["result"]["taskId"] == task_id
    encoded = "=?base64?" + base64.b64encode(task_id.encode()).decode() + "?="
    assert (await rpc(client, "tasks/get", {"taskId": task_id}, name=encoded)).status == 200
    for headers in (mcp_headers("tasks/get"), mcp_headers("tasks/get", "tsk_other")):
        refused = await rpc(client, "tasks/get", {"taskId": task_id}, headers=headers)
        assert (refused.status, refused.json()["error"]["code"]) == (400, -32020)
        assert "taskId" in refused.json()["error"]["message"]
    not_base64 = await rpc(client, "tasks/get", {"taskId": task_id}, name="=?base64?%%%?=")
    assert (not_base64.status, not_base64.json()["error"]["code"]) == (400, -32020)


async def test_padded_header_values_are_accepted(client: HttpClient) -> None:
    body = request("tools/call", {"name": "greet", "arguments": {"name": "pad"}}, caps=TASKS_CAPS)
    raw = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json\r\n"
        b"MCP-Protocol-Version:   2026-07-28  \r\nMcp-Method:\ttools/call \r\n"
        b"Mcp-Name:    greet    \r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    await client.send_raw(raw + body)
    response = await client.response()
    assert response.status == 200, response
    check_reply("tools/call", response.body)


async def test_raw_non_ascii_in_mcp_name_is_refused(client: HttpClient) -> None:
    body = request("tools/call", {"name": "gréet", "arguments": {}}, caps=TASKS_CAPS)
    raw = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json\r\n"
        b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
        b"Mcp-Name: "
        + "gréet".encode()
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
    )
    await client.send_raw(raw + body)
    response = await client.response()
    assert (response.status, response.json()["error"]["code"]) == (400, -32020)


async def test_the_opt_in_accepts_a_missing_task_name_but_never_a_wrong_one() -> None:
    server, _ = probe_server(ServerOptions(accept_missing_task_name_header=True))
    async with serving(server) as bound:
        client = await HttpClient.connect(bound)
        task_id = (await call(client, "job", {})).json()["result"]["taskId"]
        missing = await rpc(
            client, "tasks/get", {"taskId": task_id}, headers=mcp_headers("tasks/get")
        )
        assert missing.status == 200
        wrong = await rpc(client, "tasks/get", {"taskId": task_id}, name="tsk_other")
        assert (wrong.status, wrong.json()["error"]["code"]) == (400, -32020)
        bare_call = await call(client, "job", {}, headers=mcp_headers("tools/call"))
        assert bare_call.status == 400  # the opt-in covers tasks/* only


# --- SSE, tasks, keep-alive --------------------------------------------------------------


async def test_progress_turns_the_answer_into_sse(client: HttpClient) -> None:
    arguments = {"seconds": 0.3, "label": "sse"}
    response = await call(client, "slow_compute", arguments, caps=NO_CAPS, progressToken="p-1")
    assert response.status == 200
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert response.headers["transfer-encoding"] == "chunked"
    *notes, last = response.events()
    assert len(notes) >= 3
    assert all(note["method"] == "notifications/progress" for note in notes)
    assert all(note["params"]["progressToken"] == "p-1" for note in notes)
    progress = [note["params"]["progress"] for note in notes]
    assert progress == sorted(progress)
    check_reply("tools/call", json.dumps(last).encode())
    assert last["result"]["content"][0]["text"] == "sse done after 0.3s"
    assert (await rpc(client, "tools/list")).status == 200  # kept alive after the stream


async def test_sse_events_are_sent_as_they_happen() -> None:
    server, probe = probe_server()
    async with serving(server) as bound:
        client = await HttpClient.connect(bound)
        body = request("tools/call", {"name": "gated", "arguments": {}}, progressToken=7)
        headers = [("content-type", "application/json"), *mcp_headers("tools/call", "gated")]
        with trio.fail_after(5):
            await client.send("POST", headers, body)
            head = await client.head()
            assert head.status_code == 200
            first = await client.next_event()  # before the tool has finished
            assert isinstance(first, h11.Data) and b"notifications/progress" in first.data
            assert not probe.release.is_set()
            probe.release.set()
            rest = await client.response_rest()
        *_, last = Response(200, {"content-type": "text/event-stream"}, first.data + rest).events()
        assert last["result"]["content"][0]["text"] == "released"


async def test_a_client_that_does_not_accept_sse_gets_json_only(client: HttpClient) -> None:
    headers = [
        ("accept", "application/json"),
        ("mcp-protocol-version", VERSION),
        ("mcp-method", "tools/call"),
        ("mcp-name", "slow_compute"),
    ]
    arguments = {"seconds": 0.1}
    response = await call(
        client, "slow_compute", arguments, caps=NO_CAPS, progressToken=1, headers=headers
    )
    assert response.status == 200 and response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "job done after 0.1s"


async def test_a_whole_task_life_over_http(client: HttpClient) -> None:
    created = await call(client, "slow_compute", {"seconds": 0.2, "label": "life"})
    assert created.status == 200
    task = created.json()["result"]
    assert task["resultType"] == "task" and task["status"] == "working"
    with trio.fail_after(5):
        while task["status"] == "working":
            await trio.sleep(0.05)
            polled = await rpc(client, "tasks/get", {"taskId": task["taskId"]})
            assert polled.status == 200
            task = polled.json()["result"]
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"] == "life done after 0.2s"
    ack = await rpc(client, "tasks/cancel", {"taskId": task["taskId"]})
    assert ack.status == 200 and ack.json()["result"]["resultType"] == "complete"
    unknown = await rpc(client, "tasks/get", {"taskId": "tsk_unknown"})
    assert (unknown.status, unknown.json()["error"]["code"]) == (400, -32602)


async def test_keep_alive_serves_many_requests_on_one_connection(client: HttpClient) -> None:
    for index in range(10):
        response = await call(client, "greet", {"name": str(index)})
        assert response.status == 200 and "connection" not in response.headers
        assert response.json()["result"]["content"][0]["text"] == f"Hello, {index}!"


async def test_a_long_keep_alive_connection_keeps_working(client: HttpClient) -> None:
    """Hundreds of kilobytes through one connection: nothing in the pump accumulates."""
    for index in range(200):
        response = await call(client, "greet", {"name": f"{index}-" + "x" * 1000})
        assert response.status == 200


async def test_pipelined_requests_are_answered_in_order(client: HttpClient) -> None:
    data = b""
    for index in range(3):  # h11 clients do not pipeline: each request has an encoder of its own
        body = request("tools/call", {"name": "greet", "arguments": {"name": f"p{index}"}})
        headers = [("content-type", "application/json"), *mcp_headers("tools/call", "greet")]
        data += HttpClient(client.stream).encode("POST", headers, body)
    await client.stream.send_all(data)
    for index in range(3):
        client.encode("POST", [])  # the reading side moves on as if it had sent this one
        response = await client.response()
        assert response.json()["result"]["content"][0]["text"] == f"Hello, p{index}!"


async def test_connection_close_from_the_client_is_honoured(client: HttpClient) -> None:
    headers = [*mcp_headers("tools/list"), ("connection", "close")]
    response = await rpc(client, "tools/list", headers=headers)
    assert response.status == 200 and response.headers["connection"] == "close"
    with trio.fail_after(5):
        assert await client.rest_until_closed() == b""


@pytest.mark.parametrize(
    ("method", "head"),
    [
        ("GET", b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
        (
            "POST",
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Connection: Close, x\r\nContent-Length: 0\r\n\r\n",
        ),
    ],
)
async def test_connection_close_on_a_request_without_a_body_is_honoured(
    client: HttpClient, method: str, head: bytes
) -> None:
    # llhttp forgets `Connection` once a message without a body has ended: read too late,
    # such a request kept the connection, and the request behind it was answered too.
    behind = b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    await client.send_raw(head + behind, method=method)
    with trio.fail_after(5):
        response = await client.response()
        assert response.headers["connection"] == "close", response
        assert await client.rest_until_closed() == b""


# --- timeouts ----------------------------------------------------------------------------


async def test_a_head_that_does_not_arrive_in_time_is_408() -> None:
    async with serving(JOBS.server, header_timeout_seconds=0.2) as bound:
        client = await HttpClient.connect(bound)
        start = trio.current_time()
        await client.send_raw(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        with trio.fail_after(5):
            response = await client.response()
            assert_refused(response, 408, "request head")
            assert await client.rest_until_closed() == b""
        assert trio.current_time() - start >= 0.2
        silent = await HttpClient.connect(bound)
        with trio.fail_after(5):  # nothing sent at all: closed without a word
            assert await silent.rest_until_closed() == b""


async def test_a_body_that_does_not_arrive_in_time_is_408() -> None:
    async with serving(JOBS.server, body_timeout_seconds=0.2) as bound:
        client = await HttpClient.connect(bound)
        head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        await client.send_raw(head + b"Content-Length: 100\r\n\r\n{")
        with trio.fail_after(5):
            assert_refused(await client.response(), 408, "request body")
            assert await client.rest_until_closed() == b""


async def test_an_idle_keep_alive_connection_is_closed() -> None:
    async with serving(JOBS.server, idle_timeout_seconds=0.2) as bound:
        client = await HttpClient.connect(bound)
        asked = trio.current_time()  # before: the server's idle time starts after its answer
        assert (await rpc(client, "tools/list")).status == 200
        with trio.fail_after(5):
            assert await client.rest_until_closed() == b""
        assert trio.current_time() - asked >= 0.2


# --- cancellation and drain --------------------------------------------------------------


async def test_closing_the_connection_cancels_the_request() -> None:
    server, probe = probe_server()
    async with serving(server) as bound:
        client = await HttpClient.connect(bound)
        body = request("tools/call", {"name": "gated", "arguments": {}})
        headers = [("content-type", "application/json"), *mcp_headers("tools/call", "gated")]
        with trio.fail_after(5):
            await client.send("POST", headers, body)
            await probe.started.wait()
            await client.aclose()
            await probe.cancelled.wait()


async def test_closing_an_sse_stream_cancels_the_request() -> None:
    server, probe = probe_server()
    async with serving(server) as bound:
        client = await HttpClient.connect(bound)
        body = request("tools/call", {"name": "gated", "arguments": {}}, progressToken="t")
        headers = [("content-type", "application/json"), *mcp_headers("tools/call", "gated")]
        with trio.fail_after(5):
            await client.send("POST", headers, body)
            assert (await client.head()).headers  # the stream has begun
            await client.aclose()
            await probe.cancelled.wait()


async def test_a_request_pipelined_behind_a_slow_one_waits_its_turn() -> None:
    """The watcher of the slow request sees bytes, not end-of-file: nothing is cancelled."""
    server, probe = probe_server()
    async with serving(server) as bound:
        client = await HttpClient.connect(bound)
        gated = request("tools/call", {"name": "gated", "arguments": {}})
        headers = [("content-type", "application/json"), *mcp_headers("tools/call", "gated")]
        data = HttpClient(client.stream).encode("POST", headers, gated)
        headers = [("content-type", "application/json"), *mcp_headers("tools/list")]
        data += HttpClient(client.stream).encode("POST", headers, request("tools/list"))
        with trio.fail_after(5):
            await client.stream.send_all(data)
            await probe.started.wait()
            await trio.sleep(0.3)  # several ticks: the slow request's client is being watched
            probe.release.set()
            client.encode("POST", [])
            assert (await client.response()).json()["result"]["content"][0]["text"] == "released"
            client.encode("POST", [])
            listed = await client.response()
            assert listed.status == 200
            check_reply("tools/list", listed.body)
        assert not probe.cancelled.is_set()


@asynccontextmanager
async def stoppable(
    server: Server, **config: Any
) -> AsyncIterator[tuple[int, trio.CancelScope, trio.Event]]:
    """serve_http in a scope of its own: cancel it to drain; the event is set once it ends."""
    scope = trio.CancelScope()
    stopped = trio.Event()
    settings = {"drain_timeout_seconds": 2.0, **config}

    async def run(task_status: trio.TaskStatus[int]) -> None:
        with scope:
            await serve_http(
                server, "127.0.0.1", 0, config=HttpConfig(**settings), task_status=task_status
            )
        stopped.set()

    async with server.running(), trio.open_nursery() as nursery:
        port: int = await nursery.start(run)
        yield port, scope, stopped
        scope.cancel()


async def test_drain_finishes_requests_in_flight_and_closes_idle_connections() -> None:
    server, probe = probe_server()
    async with stoppable(server) as (bound, serve_scope, stopped):
        busy = await HttpClient.connect(bound)
        idle = await HttpClient.connect(bound)
        assert (await rpc(idle, "tools/list")).status == 200
        body = request("tools/call", {"name": "gated", "arguments": {}})
        headers = [("content-type", "application/json"), *mcp_headers("tools/call", "gated")]
        with trio.fail_after(5):
            await busy.send("POST", headers, body)
            await probe.started.wait()
            serve_scope.cancel()
            assert await idle.rest_until_closed() == b""  # closed at once
            with pytest.raises(OSError):
                await HttpClient.connect(bound)  # no longer accepting
            assert not stopped.is_set()
            probe.release.set()
            response = await busy.response()
            assert response.status == 200 and response.headers["connection"] == "close"
            assert response.json()["result"]["content"][0]["text"] == "released"
            await stopped.wait()
        assert not probe.cancelled.is_set()


async def test_drain_cancels_what_outlives_the_drain_timeout() -> None:
    server, probe = probe_server()
    async with stoppable(server, drain_timeout_seconds=0.2) as (bound, serve_scope, stopped):
        busy = await HttpClient.connect(bound)
        body = request("tools/call", {"name": "gated", "arguments": {}})
        headers = [("content-type", "application/json"), *mcp_headers("tools/call", "gated")]
        with trio.fail_after(5):
            await busy.send("POST", headers, body)
            await probe.started.wait()
            serve_scope.cancel()
            start = trio.current_time()
            await probe.cancelled.wait()
            await stopped.wait()
            assert await busy.rest_until_closed() == b""
        assert trio.current_time() - start >= 0.2


async def test_a_server_that_fails_answers_500_and_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, _ = probe_server()  # never `running()`: its handle() raises
    async with trio.open_nursery() as nursery:
        serve = partial(serve_http, server, "127.0.0.1", 0, config=HttpConfig())
        client = await HttpClient.connect(await nursery.start(serve))
        response = await rpc(client, "tools/list")
        assert response.status == 500
        check_reply(None, response.body)
        assert response.json()["error"]["code"] == -32603
        assert "Internal error" in response.json()["error"]["message"]
        assert (await rpc(client, "tools/list")).status == 500  # the connection carries on
        nursery.cancel_scope.cancel()
    assert any("failed on a request" in record.getMessage() for record in caplog.records)
    caplog.clear()


def test_the_http_benchmark_runs() -> None:
    """A smoke run of benchmarks/http.py (figures are read by people, not asserted)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "http.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    figures = json.loads(out.stdout)
    for entry in figures["workloads"].values():
        for server in ("limit", "mcp_tasks"):
            assert entry[server]["requests"] > 0 and entry[server]["failures"] == 0
        assert entry["ratio"] > 0


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("http://evil.example/mcp", 421),
        ("http://evil.example:8000/mcp", 421),
        ("http://127.0.0.1@evil.example/mcp", 421),
        ("http:///mcp", 421),
        ("http://127.0.0.1/mcp", 200),
        ("http://localhost:8000/mcp", 200),
    ],
)
async def test_an_absolute_form_target_names_a_host_that_is_checked_too(
    target: str, status: int
) -> None:
    """`POST http://evil.example/mcp` with `Host: 127.0.0.1`: the target's authority is the
    host the request is for, and a loopback server refuses a foreign one."""
    async with serving(JOBS.server) as bound:
        client = await HttpClient.connect(bound)
        body = request("server/discover")
        response = await client.post(body, mcp_headers("server/discover"), target=target)
        if status == 421:
            assert_refused(response, 421, "Request target host", "DNS rebinding")
        else:
            assert response.status == 200, response


async def test_a_full_server_answers_503_with_retry_after() -> None:
    """Over its task limit a server is busy, not broken: 503 and `Retry-After` (the seconds
    until its next task expires), with `data.retryAfterMs` in the JSON-RPC error."""
    server = Server("full", "1", tasks=TaskOptions(max_tasks=1, ttl_ms=90_000))

    @server.tool(task_support="required")
    async def wait(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with serving(server) as bound:
        client = await HttpClient.connect(bound)
        first = await rpc(client, "tools/call", {"name": "wait", "arguments": {}})
        assert first.status == 200 and first.json()["result"]["resultType"] == "task"
        refused = await rpc(client, "tools/call", {"name": "wait", "arguments": {}})
        assert refused.status == 503
        error = refused.json()["error"]
        assert error["code"] == -32603 and "limit of 1" in error["message"]
        assert 85_000 <= error["data"]["retryAfterMs"] <= 90_000
        assert int(refused.headers["retry-after"]) == -(-error["data"]["retryAfterMs"] // 1000)


async def test_a_client_that_writes_its_whole_oversize_body_first_still_reads_the_413() -> None:
    """RFC 9112 9.6: answering 413 before the body is read, the server half-closes and
    drains what the client still sends for a bounded time, so a client that writes all of
    an 8 MiB body before it reads gets the 413, not a reset connection."""
    async with serving(JOBS.server, max_body_bytes=1_000_000) as bound:

        def post_everything_then_read() -> bytes:
            body = b" " * (8 * 1024 * 1024)
            head = (
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            with socket.create_connection(("127.0.0.1", bound), timeout=10) as sock:
                sock.sendall(head + body)
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
                return answer

        answer = await trio.to_thread.run_sync(post_everything_then_read)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


@pytest.mark.parametrize(
    ("chunk_size", "status", "words"),
    [
        (b"FFFFFFFFFFFFFFFFFFFF", 400, "Invalid chunk size"),  # 20 hex digits: 2**80
        (b"200000", 413, "a chunk of 2097152 bytes"),  # 2 MiB, over a 1 MB limit
    ],
)
async def test_a_chunk_too_large_is_refused_at_once(
    chunk_size: bytes, status: int, words: str
) -> None:
    """The chunk-size line alone says the body cannot fit: refused as it arrives, not
    after `body_timeout_seconds` of waiting for a body nobody will send."""
    async with serving(JOBS.server, max_body_bytes=1_000_000, body_timeout_seconds=30) as bound:
        stream = await trio.open_tcp_stream("127.0.0.1", bound)
        head = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        await stream.send_all(head + chunk_size + b"\r\n")
        client = HttpClient(stream)
        client.h11.send(h11.Request(method="POST", target="/mcp", headers=[("host", "x")]))
        with trio.fail_after(5):  # well inside the 30 s body timeout
            response = await client.response()
        await stream.aclose()
    assert_refused(response, status, words)
