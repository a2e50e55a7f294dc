"""The dual-era client (issue 30, point 1), HTTP: it opens with a 2026-07-28 request; a
server of the 2025 revisions refuses that as a request outside a session, and the client
opens one (`initialize`, the version checked, `notifications/initialized`), sends the
request again in the 2025 form, keeps `Mcp-Session-Id` and `MCP-Protocol-Version` on every
later request, opens a new session after a 404, and DELETEs it on close. A modern error
code never makes it fall back. Scripted peers on loopback sockets (trio), then our own
dual-era server (the real peers: tests/interop/test_client_on_2025_servers.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
import trio
from runtime.test_jobs_example import load_jobs

from mcp_tasks.client import Client, PollPolicy, RpcError, connect_http
from mcp_tasks.core import LocalProtocolError, RemoteProtocolError
from mcp_tasks.core._client_era import LegacySession, augments, falls_back, legacy_task
from mcp_tasks.core._wire import (
    CancelledTask,
    ClientCapabilities,
    CompletedTask,
    FailedTask,
    Implementation,
    InputRequiredTask,
    WorkingTask,
)
from mcp_tasks.transports import HttpClientTransport, serve_http

CLAIM = "io.modelcontextprotocol/protocolVersion"
FAST = PollPolicy(min_interval_ms=10, default_interval_ms=50, max_interval_ms=50)


@dataclass
class Seen:
    """One request the peer read: its method, headers (lower-case) and JSON body."""

    method: str
    headers: dict[str, str]
    body: Any


def reply(status: str, body: Any = None, **headers: str) -> bytes:
    data = b"" if body is None else json.dumps(body).encode()
    lines = [f"HTTP/1.1 {status}", f"content-length: {len(data)}", "connection: close"]
    if body is not None:
        lines.append("content-type: application/json")
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


@dataclass
class Peer:
    answer: Callable[[Seen], bytes]
    seen: list[Seen] = field(default_factory=list)

    async def handle(self, stream: trio.SocketStream) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            received += await stream.receive_some()
        head, _, body = received.partition(b"\r\n\r\n")
        first, *lines = head.decode().split("\r\n")
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines)
        }
        while len(body) < int(headers.get("content-length", "0")):
            body += await stream.receive_some()
        seen = Seen(first.split()[0], headers, json.loads(body) if body else None)
        self.seen.append(seen)
        await stream.send_all(self.answer(seen))
        await stream.aclose()


@asynccontextmanager
async def peer(answer: Callable[[Seen], bytes]) -> AsyncIterator[tuple[Peer, str]]:
    serving = Peer(answer)
    async with trio.open_nursery() as nursery:
        on_loopback = partial(trio.serve_tcp, host="127.0.0.1")
        listeners = await nursery.start(on_loopback, serving.handle, 0)
        yield serving, f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"
        nursery.cancel_scope.cancel()


OUTSIDE = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "No session"}}
TOOLS = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}


class Server2025:
    """A server of 2025-06-18 only: sessions `s1`, `s2`... (`forget()` drops them)."""

    def __init__(self) -> None:
        self.sessions: list[str] = []
        self.live: set[str] = set()

    def forget(self) -> None:
        self.live.clear()

    def __call__(self, seen: Seen) -> bytes:
        body = seen.body if isinstance(seen.body, dict) else {}
        if seen.method == "DELETE":
            self.live.discard(seen.headers.get("mcp-session-id", ""))
            return reply("200 OK")
        if seen.method == "GET":  # (a server without the session's own stream)
            return reply("405 Method Not Allowed")
        if body.get("method") == "initialize":
            session = f"s{len(self.sessions) + 1}"
            self.sessions.append(session)
            self.live.add(session)
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "old", "version": "1"},
            }
            answer = {"jsonrpc": "2.0", "id": body["id"], "result": result}
            return reply("200 OK", answer, mcp_session_id=session)
        session = seen.headers.get("mcp-session-id")
        if session is None:
            return reply("400 Bad Request", OUTSIDE)
        if session not in self.live:
            return reply("404 Not Found", {**OUTSIDE, "error": {"code": -32001, "message": "?"}})
        if "id" not in body:
            return reply("202 Accepted")
        results = {"tools/list": TOOLS, "ping": {}}
        return reply(
            "200 OK", {"jsonrpc": "2.0", "id": body["id"], "result": results[body["method"]]}
        )


async def test_a_2025_server_gets_a_session_and_every_request_goes_in_it() -> None:
    old = Server2025()
    async with peer(old) as (served, url):
        with trio.fail_after(10):
            async with connect_http(url) as client:
                assert [tool.name for tool in await client.list_tools()] == ["echo"]
                await client.ping()
                assert (client.era, client.session.version) == ("legacy", "2025-06-18")
                assert (await client.discover())["serverInfo"] == {"name": "old", "version": "1"}
    listening = [seen for seen in served.seen if seen.method == "GET"]
    assert [seen.headers["mcp-session-id"] for seen in listening] == ["s1"]  # asked once
    assert listening[0].headers["accept"] == "text/event-stream"
    served.seen = [seen for seen in served.seen if seen.method != "GET"]
    methods = [(seen.method, (seen.body or {}).get("method")) for seen in served.seen]
    assert methods == [
        ("POST", "tools/list"),  # 2026-07-28: refused outside a session
        ("POST", "initialize"),
        ("POST", "notifications/initialized"),
        ("POST", "tools/list"),
        ("POST", "ping"),
        ("DELETE", None),
    ]
    first, initialize, *in_session = served.seen
    assert CLAIM in first.body["params"]["_meta"]
    assert initialize.body["params"]["protocolVersion"] == "2025-11-25"
    assert "extensions" not in initialize.body["params"]["capabilities"]
    assert "mcp-session-id" not in initialize.headers
    for seen in in_session:
        assert seen.headers["mcp-session-id"] == "s1"
        assert seen.headers.get("mcp-protocol-version", "2025-06-18") == "2025-06-18"
        assert CLAIM not in json.dumps(seen.body or {})
    assert old.live == set()  # the DELETE ended it


async def test_the_next_client_at_the_url_opens_its_session_without_asking() -> None:
    old = Server2025()
    async with peer(old) as (served, url):
        with trio.fail_after(10):
            async with connect_http(url) as client:
                await client.list_tools()
            served.seen.clear()
            async with connect_http(url) as again:
                await again.list_tools()
                assert again.era == "legacy"
    posts = [seen.body["method"] for seen in served.seen if seen.method == "POST"]
    assert posts == ["initialize", "notifications/initialized", "tools/list"]


async def test_a_remembered_era_the_server_no_longer_speaks_is_asked_anew() -> None:
    old = Server2025()
    async with peer(old) as (_, url):
        with trio.fail_after(10):
            async with connect_http(url) as client:
                await client.list_tools()  # (remembered: "legacy")

    def modern(seen: Seen) -> bytes:  # the same URL, now a 2026-07-28 server
        body = seen.body if isinstance(seen.body, dict) else {}
        if body.get("method") == "initialize":
            error = {"code": -32022, "message": "Unsupported protocol version"}
            return reply("400 Bad Request", {"jsonrpc": "2.0", "id": body["id"], "error": error})
        result = {**TOOLS, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
        return reply("200 OK", {"jsonrpc": "2.0", "id": body["id"], "result": result})

    served = Peer(modern)
    async with trio.open_nursery() as nursery:
        host, port = url.removeprefix("http://").removesuffix("/mcp").split(":")
        await nursery.start(partial(trio.serve_tcp, host=host), served.handle, int(port))
        with trio.fail_after(10):
            async with connect_http(url) as client:
                assert [tool.name for tool in await client.list_tools()] == ["echo"]
                assert client.era == "modern"
        nursery.cancel_scope.cancel()
    methods = [seen.body["method"] for seen in served.seen]
    assert methods == ["initialize", "tools/list"]


async def test_a_session_the_server_forgot_is_opened_again() -> None:
    old = Server2025()
    async with peer(old) as (_, url):
        with trio.fail_after(10):
            async with connect_http(url) as client:
                await client.list_tools()
                old.forget()
                assert [tool.name for tool in await client.list_tools()] == ["echo"]
    assert old.sessions == ["s1", "s2"]


async def test_a_server_that_refuses_initialize_too_gives_its_first_error() -> None:
    async with peer(lambda _: reply("400 Bad Request", OUTSIDE)) as (served, url):
        with trio.fail_after(10), pytest.raises(RpcError, match="No session") as raised:
            async with connect_http(url) as client:
                await client.list_tools()
    assert raised.value.code == -32000 and len(served.seen) == 2  # the request, initialize


@pytest.mark.parametrize("code", [-32020, -32021, -32022, -32601])
async def test_a_modern_error_code_never_opens_a_session(code: int) -> None:
    modern = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": "fix it"}}
    async with (
        peer(lambda _: reply("400 Bad Request", modern)) as (served, url),
        connect_http(url) as client,
    ):
        with trio.fail_after(10), pytest.raises(RpcError, match="fix it"):
            await client.list_tools()
        assert client.era == "modern"  # (the code says the server knows 2026-07-28)
    assert len(served.seen) == 1


async def test_a_version_the_client_does_not_speak_is_refused() -> None:
    def answer(seen: Seen) -> bytes:
        if seen.body.get("method") != "initialize":
            return reply("400 Bad Request", OUTSIDE)
        result = {"protocolVersion": "2024-11-05", "capabilities": {}, "serverInfo": {}}
        return reply("200 OK", {"jsonrpc": "2.0", "id": seen.body["id"], "result": result})

    async with peer(answer) as (_, url), connect_http(url) as client:
        with trio.fail_after(10), pytest.raises(RpcError, match="No session"):
            await client.list_tools()
    session = LegacySession(
        info=Implementation(name="c", version="1"), capabilities=ClientCapabilities()
    )
    with pytest.raises(RemoteProtocolError, match="'2024-11-05'"):
        session.accept({"protocolVersion": "2024-11-05"})


def test_only_an_id_less_error_with_a_code_that_is_not_modern_falls_back() -> None:
    assert falls_back(OUTSIDE)
    assert falls_back({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": ""}})
    assert not falls_back({**OUTSIDE, "id": 1})
    assert not falls_back({"jsonrpc": "2.0", "id": None, "result": {}})
    for code in (-32020, -32021, -32022, -32601):
        assert not falls_back({"jsonrpc": "2.0", "id": None, "error": {"code": code}})


def test_a_session_sends_the_version_header_from_2025_06_18_on() -> None:
    session = LegacySession(
        info=Implementation(name="c", version="1"), capabilities=ClientCapabilities()
    )
    for version, headers in [
        ("2025-11-25", {"MCP-Protocol-Version": "2025-11-25"}),
        ("2025-06-18", {"MCP-Protocol-Version": "2025-06-18"}),
        ("2025-03-26", {}),
    ]:
        session.accept({"protocolVersion": version})
        assert session.request(7, "tools/list", None)[1] == headers


# --- our own server serves both: no fallback; or a session when asked ---------------------------


async def test_our_dual_era_server_is_modern_or_a_session_as_the_client_asks() -> None:
    server = load_jobs()
    with trio.fail_after(20):
        async with server.running(), trio.open_nursery() as nursery:
            port = await nursery.start(serve_http, server, "127.0.0.1", 0)
            url = f"http://127.0.0.1:{port}/mcp"
            async with connect_http(url) as client:
                assert (await client.call_tool("greet", {"name": "M"})).content[
                    0
                ].text == "Hello, M!"  # type: ignore[union-attr]
                assert client.era == "modern"
                await client.ping()
            async with HttpClientTransport(url) as transport:
                client = Client(transport, era="legacy")
                result = await client.call_tool("greet", {"name": "L"})
                await client.ping()
                assert result.content[0].text == "Hello, L!"  # type: ignore[union-attr]
                assert client.session.version == "2025-11-25" and transport.session_id
            assert transport.session_id is None  # ended (DELETE) on close
            nursery.cancel_scope.cancel()


# --- 2025-11-25 tasks in a session -------------------------------------------------------------


async def test_a_session_runs_tool_calls_as_2025_tasks_and_cancels_a_wait_it_leaves() -> None:
    """On our server's 2025 session: an optional-task tool runs as a task (`params.task`),
    its status shown, its result read from `tasks/result`; a wait that is cancelled cancels
    the task (`tasks/cancel`); `update_task` has no 2025-11-25 counterpart."""
    server = load_jobs()
    statuses: list[str] = []
    with trio.fail_after(20):
        async with server.running(), trio.open_nursery() as nursery:
            port = await nursery.start(serve_http, server, "127.0.0.1", 0)
            async with HttpClientTransport(f"http://127.0.0.1:{port}/mcp") as transport:
                client = Client(transport, era="legacy", poll=FAST)
                done = await client.call_tool(
                    "slow_compute", {"seconds": 0.2}, on_status=lambda t: statuses.append(t.status)
                )
                assert client.task_support["slow_compute"] == "optional"
                long = await client.call_tool_or_task("slow_compute", {"seconds": 30})
                assert isinstance(long, WorkingTask)
                with trio.move_on_after(0.3):
                    await client.await_task(long)
                assert isinstance(await client.get_task(long.task_id), CancelledTask)
                with pytest.raises(LocalProtocolError, match="no tasks/update"):
                    await client.update_task(long.task_id, {})
            nursery.cancel_scope.cancel()
    assert done.content[0].text == "job done after 0.2s"  # type: ignore[union-attr]
    assert statuses[0] == "working" and statuses[-1] == "completed"


def test_a_2025_task_reads_as_the_clients_task_classes() -> None:
    base = {"taskId": "t1", "createdAt": "2025-12-01T12:00:00Z", "ttl": 60000}
    working = legacy_task({**base, "status": "working", "pollInterval": 500, "lastUpdatedAt": "x"})
    assert isinstance(working, WorkingTask)
    assert (working.ttl_ms, working.poll_interval_ms, working.last_updated_at) == (60000, 500, "x")
    asked = legacy_task({**base, "status": "input_required"})
    assert isinstance(asked, InputRequiredTask) and asked.input_requests == {}
    result = {"content": [{"type": "text", "text": "ok"}]}
    done = legacy_task({**base, "status": "completed"}, result=result)
    assert isinstance(done, CompletedTask) and done.result.is_error is False
    failed = legacy_task({**base, "status": "failed", "statusMessage": "broke"})
    assert isinstance(failed, FailedTask) and failed.error.message == "broke"
    unlimited = legacy_task({"taskId": "t2", "createdAt": "z", "status": "cancelled"})
    assert isinstance(unlimited, CancelledTask) and unlimited.ttl_ms is None
    with pytest.raises(RemoteProtocolError, match="malformed task"):
        legacy_task({"status": "working"})


@pytest.mark.parametrize(
    ("capabilities", "support", "expected"),
    [
        ({"tasks": {"requests": {"tools": {"call": {}}}}}, "optional", True),
        ({"tasks": {"requests": {"tools": {"call": {}}}}}, "required", True),
        ({"tasks": {"requests": {"tools": {"call": {}}}}}, "forbidden", False),
        ({"tasks": {"requests": {"tools": {"call": {}}}}}, None, False),  # absent: forbidden
        ({"tasks": {"requests": {"sampling": {}}}}, "required", False),
        ({"tasks": {}}, "required", False),
        ({}, "required", False),
    ],
)
def test_a_call_is_a_task_only_when_server_and_tool_allow(
    capabilities: dict[str, Any], support: str | None, expected: bool
) -> None:
    assert augments(capabilities, support) is expected
