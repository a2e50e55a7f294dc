"""What a 2025 session hears outside its requests: `list_changed` when a list changes, and
`notifications/resources/updated` for a resource it subscribed to (`runtime._legacy_notices`);
`resources/subscribe` and `unsubscribe`; -32002 for a resource nothing names. Over stdio (the
process's stdout) and HTTP (the session's own `GET` stream).
"""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import trio
from legacy_http import LegacyHttpClient, sse_events, stream_of
from test_http import serving
from test_stdio import stdio_session
from test_stdio_legacy import initialize, line, request, server_message
from trio.testing import MockClock

from mcp_tasks import RequestContext, Server, ToolContext


def build_server() -> Server:
    server = Server("notices", "1.0")

    @server.resource("memo://watched", mime_type="text/plain")
    async def watched(ctx: RequestContext) -> str:
        return "now"

    @server.resource_template("memo://notes/{name}")
    async def note(ctx: RequestContext, name: str) -> str:
        return f"note {name}"

    @server.tool()
    async def greet(ctx: ToolContext, name: str) -> str:
        return f"Hello, {name}!"

    return server


async def test_a_session_declares_what_it_will_be_told() -> None:
    async with stdio_session(build_server()) as peer:
        opened = await initialize(peer)
        capabilities = opened["result"]["capabilities"]
        assert capabilities["tools"] == {"listChanged": True}
        assert capabilities["resources"] == {"subscribe": True, "listChanged": True}


async def test_a_subscribed_resource_is_told_of_until_unsubscribed(
    autojump_clock: MockClock,
) -> None:
    server = build_server()
    async with stdio_session(server) as peer:
        await initialize(peer)
        subscribed = await request(peer, "resources/subscribe", {"uri": "memo://watched"})
        assert subscribed["result"] == {}
        on_template = await request(peer, "resources/subscribe", {"uri": "memo://notes/a"}, 2)
        assert on_template["result"] == {}
        server.notify_resource_updated("memo://watched")
        told = await server_message(peer)
        assert told == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "memo://watched"},
        }
        server.notify_resource_updated("memo://elsewhere")  # not subscribed: nothing
        assert (await request(peer, "resources/unsubscribe", {"uri": "memo://watched"}, 3))[
            "result"
        ] == {}
        server.notify_resource_updated("memo://watched")
        assert await peer.nothing_within(1.0)


async def test_an_unknown_resource_is_32002_to_subscribe_and_to_read() -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer)
        refused = await request(peer, "resources/subscribe", {"uri": "memo://nothing"})
        assert refused["error"]["code"] == -32002
        assert refused["error"]["data"] == {"uri": "memo://nothing"}
        read = await request(peer, "resources/read", {"uri": "memo://nothing"}, 2)
        assert read["error"]["code"] == -32002
        assert "memo://nothing" in read["error"]["message"]


async def test_a_new_tool_is_told_as_a_list_change() -> None:
    server = build_server()
    async with stdio_session(server) as peer:
        await initialize(peer)

        @server.tool()
        async def farewell(ctx: ToolContext, name: str) -> str:
            return f"Bye, {name}!"

        told = await server_message(peer)
        assert told == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


async def test_nothing_is_told_before_initialize(autojump_clock: MockClock) -> None:
    server = build_server()
    async with stdio_session(server) as peer:
        await peer.write(line({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        assert (await peer.receive())["result"] == {}
        server.notify_list_changed("tools")
        assert await peer.nothing_within(1.0)


async def test_the_http_sessions_stream_carries_its_notices() -> None:
    server = build_server()
    async with serving(server) as port, httpx.AsyncClient(timeout=10) as http:
        client = LegacyHttpClient(http, f"http://127.0.0.1:{port}/mcp")
        await client.initialize()
        other = LegacyHttpClient(http, client.url)
        await other.initialize()
        assert (await client.request("resources/subscribe", {"uri": "memo://watched"}))[
            "result"
        ] == {}
        async with stream_of(client) as stream, stream_of(other) as quiet:
            events = sse_events(stream)
            server.notify_resource_updated("memo://watched")
            server.notify_list_changed("prompts")
            got: list[dict[str, Any]] = [await anext(events), await anext(events)]
            heard: list[dict[str, str]] = []
            with trio.move_on_after(0.5):  # the other session hears the list change only
                async for event in sse_events(quiet):
                    heard.append(event)
        assert [event["id"] for event in got] == ["g1", "g2"]
        assert '"notifications/resources/updated"' in got[0]["data"]
        assert '"notifications/prompts/list_changed"' in got[1]["data"]
        assert ['"notifications/prompts/list_changed"' in event["data"] for event in heard] == [
            True
        ]
