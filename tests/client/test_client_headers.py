"""`Mcp-Param-*` headers from the client, against a real server on a loopback socket: the
`x-mcp-header` marks learned from `tools/list` and sent with the encoding the server
checks; listed again when the list's `ttlMs` has run out, after `tools/list_changed`, and
once when a call is refused with -32020 naming an `Mcp-Param` header. Over stdio, which has
no headers, nothing is listed for them."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from mcp_tasks import CallToolResult, Server, ToolContext, ToolOutcome
from mcp_tasks.client import Client, RpcError, connect_stdio
from mcp_tasks.core import SubscriptionFilter
from mcp_tasks.transports import ClientTransport, HttpClientTransport, serve_http

from .in_process import text_result

ROOT = Path(__file__).parent.parent.parent
TIMEOUT = 30


class EchoArgs(msgspec.Struct):
    region: str | dict[str, str]
    count: int = 0
    loud: bool = False
    note: str = ""


def add_echo(server: Server, header: str) -> None:
    """`echo`, whose `region` is mirrored in `Mcp-Param-{header}` (and `count`, `loud` in
    `Mcp-Param-Count`, `Mcp-Param-Loud`); it answers with its arguments as JSON."""
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": header},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "loud": {"type": "boolean", "x-mcp-header": "Loud"},
            "note": {"type": "string"},
        },
        "required": ["region"],
    }

    @server.tool(input_schema=schema)
    async def echo(ctx: ToolContext, args: EchoArgs) -> ToolOutcome:
        return CallToolResult.text(msgspec.json.encode(args).decode())


class Recording:
    """A `ClientTransport` that hands every request to a real one and notes its method and
    headers on the way."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sends_headers = getattr(inner, "sends_headers", True)
        self.methods: list[str] = []
        self.headers: list[dict[str, str]] = []

    async def request(
        self,
        message: bytes,
        *,
        request_id: str | int,
        headers: Mapping[str, str],
        on_notification: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        self.methods.append(headers["Mcp-Method"])
        self.headers.append(dict(headers))
        answer: dict[str, Any] = await self.inner.request(
            message, request_id=request_id, headers=headers, on_notification=on_notification
        )
        return answer

    async def notify(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        await self.inner.notify(message, headers=headers)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def sent(self, method: str) -> list[dict[str, str]]:
        return [h for m, h in zip(self.methods, self.headers, strict=True) if m == method]


@asynccontextmanager
async def echo_server(**client_options: Any) -> AsyncIterator[tuple[Server, Client, Recording]]:
    server = Server("echo", "1.0")
    add_echo(server, "Region")
    with trio.fail_after(TIMEOUT):
        async with server.running(), trio.open_nursery() as nursery:
            port = await nursery.start(serve_http, server, "127.0.0.1", 0)
            async with HttpClientTransport(f"http://127.0.0.1:{port}/mcp") as http:
                recording = Recording(http)
                yield server, Client(recording, **client_options), recording
            nursery.cancel_scope.cancel()


def echoed(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error is False, result
    text = result.content[0].text  # type: ignore[union-attr]
    decoded: dict[str, Any] = msgspec.json.decode(text)
    return decoded


@pytest.mark.parametrize(
    "arguments",
    [
        {"region": "eu-west", "count": 42, "loud": True},
        {"region": "zürich", "count": -7, "loud": False},  # not ASCII: base64
        {"region": " padded ", "note": "not mirrored"},  # surrounding spaces: base64
        {"region": "=?base64?ZXU=?=", "count": 0},  # looks like the wrapping: base64
        {"region": "line\nbreak"},  # a control character: base64
    ],
)
async def test_each_marked_argument_travels_in_its_header(arguments: dict[str, Any]) -> None:
    async with echo_server() as (_, client, recording):
        result = await client.call_tool("echo", arguments)
    assert echoed(result) == {"count": 0, "loud": False, "note": "", **arguments}
    (headers,) = recording.sent("tools/call")
    assert "Mcp-Param-Region" in headers
    assert ("Mcp-Param-Count" in headers) == ("count" in arguments)
    assert "Mcp-Param-Note" not in headers


async def test_the_marks_are_listed_once_and_kept_for_the_lists_ttl() -> None:
    now = [1000.0]
    async with echo_server(clock=lambda: now[0]) as (_, client, recording):
        await client.call_tool("echo", {"region": "a"})
        await client.call_tool("echo", {"region": "b"})
        assert recording.methods == ["tools/list", "tools/call", "tools/call"]
        now[0] += 61  # the server's lists are fresh for 60 s
        await client.call_tool("echo", {"region": "c"})
    assert recording.methods[3:] == ["tools/list", "tools/call"]


async def test_a_changed_mark_is_learned_again_once_from_the_refusal() -> None:
    async with echo_server() as (server, client, recording):
        await client.list_tools()
        server.remove_tool("echo")
        add_echo(server, "Zone")  # the same argument, now mirrored in another header
        result = await client.call_tool("echo", {"region": "eu"})
        assert echoed(result)["region"] == "eu"
    assert recording.methods == ["tools/list", "tools/call", "tools/list", "tools/call"]
    refused, accepted = recording.sent("tools/call")
    assert "Mcp-Param-Region" in refused and "Mcp-Param-Zone" in accepted


async def test_a_refusal_that_listing_again_does_not_cure_is_raised() -> None:
    async with echo_server() as (_, client, recording):
        with pytest.raises(RpcError) as refused:
            await client.call_tool("echo", {"region": {"an": "object"}})  # no header carries it
    assert refused.value.code == -32020 and "Mcp-Param-Region" in refused.value.message
    assert recording.methods == ["tools/list", "tools/call", "tools/list", "tools/call"]


async def test_tools_list_changed_makes_the_next_call_list_again() -> None:
    arrived, notifications = trio.open_memory_channel[dict[str, Any]](100)
    async with echo_server() as (server, client, recording), trio.open_nursery() as nursery:
        await client.list_tools()
        wanted = SubscriptionFilter(tools_list_changed=True)
        nursery.start_soon(client.listen, wanted, arrived.send)
        first = await notifications.receive()
        assert first["method"] == "notifications/subscriptions/acknowledged"
        server.remove_tool("echo")
        add_echo(server, "Zone")
        methods = set()
        while "notifications/tools/list_changed" not in methods:  # one per change: 2 at most
            methods.add((await notifications.receive())["method"])
        start = len(recording.methods)
        result = await client.call_tool("echo", {"region": "eu"})
        assert echoed(result)["region"] == "eu"
        assert recording.methods[start:] == ["tools/list", "tools/call"]  # no refusal
        nursery.cancel_scope.cancel()


async def test_over_stdio_nothing_is_listed_for_headers() -> None:
    jobs = str(ROOT / "examples" / "jobs.py")
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", jobs, "--stdio"]
    with trio.fail_after(TIMEOUT):
        async with connect_stdio(command, stderr="capture") as connected:
            transport: ClientTransport = connected.transport
            recording = Recording(transport)
            client = Client(recording)
            assert await client.call_tool("greet", {"name": "W"}) == text_result("Hello, W!")
    assert recording.methods == ["tools/call"]
