"""A tool whose `x-mcp-header` marks are invalid is never called (SEP-2243): `list_tools`
leaves it out and `call_tool` refuses it with `ToolRejected`, whatever the caller does;
the valid tools beside it are listed and called as usual.

The server here is a scripted Streamable HTTP peer (an ASGI app under hypercorn on a
loopback socket): our own `Server` refuses such tools when they are registered, so it
cannot serve them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from mcp_tasks.client import Client, ToolRejected, connect_http
from mcp_tasks.core._client import ToolHeaders, header_marks
from mcp_tasks.core.wire import Tool

TIMEOUT = 30


def tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object", "properties": properties}}


def marked(header: Any, kind: Any = "string") -> dict[str, Any]:
    return {"type": kind, "x-mcp-header": header}


VALID = [
    tool("valid_tool", {"region": marked("Region")}),
    tool("unmarked", {"query": {"type": "string"}}),
    tool(
        "every_primitive",
        {f"a{n}": marked(f"H{n}", kind) for n, kind in enumerate(["string", "integer", "boolean"])},
    ),
]
INVALID = {
    "empty": tool("empty", {"value": marked("")}),
    "on_object": tool("on_object", {"data": marked("Data", "object")}),
    "on_array": tool("on_array", {"items": {**marked("Items", "array"), "items": {}}}),
    "on_null": tool("on_null", {"nil": marked("Nil", "null")}),
    "on_number": tool("on_number", {"score": marked("Score", "number")}),
    "untyped": tool("untyped", {"value": {"x-mcp-header": "Value"}}),
    "type_list": tool("type_list", {"value": marked("Value", ["string", "null"])}),
    "nested": tool(
        "nested", {"outer": {"type": "object", "properties": {"inner": marked("Inner")}}}
    ),
    "in_items": tool("in_items", {"list": {"type": "array", "items": marked("Item")}}),
    "twice": tool("twice", {"a": marked("Region"), "b": marked("Region")}),
    "twice_in_any_case": tool(
        "twice_in_any_case", {"a": marked("MyField"), "b": marked("myfield")}
    ),
    "space": tool("space", {"value": marked("My Region")}),
    "colon": tool("colon", {"value": marked("Region:Primary")}),
    "non_ascii": tool("non_ascii", {"value": marked("Région")}),
    "control": tool("control", {"value": marked("Region\t1")}),
    "not_text": tool("not_text", {"value": marked(7)}),
}


def as_tool(raw: dict[str, Any]) -> Tool:
    return Tool(name=raw["name"], input_schema=raw["inputSchema"])


@pytest.mark.parametrize("name", sorted(INVALID))
def test_an_invalid_mark_says_what_is_wrong(name: str) -> None:
    why = header_marks(as_tool(INVALID[name]))
    assert isinstance(why, str), why
    assert "x-mcp-header" in why


def test_valid_marks_are_kept_by_argument() -> None:
    assert header_marks(as_tool(VALID[0])) == {"region": "Region"}
    assert header_marks(as_tool(VALID[1])) == {}
    assert header_marks(as_tool(VALID[2])) == {"a0": "H0", "a1": "H1", "a2": "H2"}


def test_learning_a_list_keeps_the_callable_tools_and_names_the_others() -> None:
    headers = ToolHeaders()
    tools = [as_tool(raw) for raw in [*VALID, *INVALID.values()]]
    kept = headers.learn(tools, ttl_ms=60_000, now=0.0)
    assert [found.name for found in kept] == [raw["name"] for raw in VALID]
    assert set(headers.rejected) == set(INVALID)
    assert headers.headers_for("valid_tool", {"region": "eu"}) == {"Mcp-Param-Region": "eu"}
    headers.learn([as_tool(VALID[0])], ttl_ms=60_000, now=1.0)  # the server fixed its tools
    assert headers.rejected == {}


def test_a_schema_too_big_to_look_through_is_not_called() -> None:
    deep: dict[str, Any] = {"type": "string"}
    wide = {"type": "object", "properties": {f"p{n}": {"type": "string"} for n in range(20_000)}}
    assert isinstance(header_marks(as_tool(tool("wide", {"outer": wide}))), str)
    assert header_marks(as_tool(tool("fine", {"outer": deep}))) == {}


class ScriptedPeer:
    """A 2026-07-28 Streamable HTTP server that lists `tools` and answers every call with
    its tool's name, noting each `tools/call` it gets."""

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self.tools = tools
        self.called: list[str] = []

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] == "lifespan":
            while (event := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        request = json.loads(body)
        method, params = request["method"], request.get("params", {})
        if method == "tools/list":
            result: dict[str, Any] = {"tools": self.tools, "ttlMs": 60_000, "cacheScope": "private"}
        elif method == "tools/call":
            self.called.append(params["name"])
            result = {"content": [{"type": "text", "text": params["name"]}]}
        else:
            result = {}
        answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


@asynccontextmanager
async def peer_client(peer: ScriptedPeer) -> AsyncIterator[Client]:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(serve, peer, config)
            async with connect_http(f"{binds[0]}/mcp") as client:
                yield client
            nursery.cancel_scope.cancel()


async def test_the_client_never_calls_a_tool_with_invalid_marks() -> None:
    peer = ScriptedPeer([*VALID, *INVALID.values()])
    async with peer_client(peer) as client:
        listed = await client.list_tools()
        assert [found.name for found in listed] == [raw["name"] for raw in VALID]
        for name in INVALID:
            with pytest.raises(ToolRejected) as refused:
                await client.call_tool(name, {"value": "x"})
            assert refused.value.name == name
        result = await client.call_tool("valid_tool", {"region": "eu"})
    assert result.content[0].text == "valid_tool"  # type: ignore[union-attr]
    assert peer.called == ["valid_tool"]


async def test_a_call_before_any_list_is_refused_all_the_same() -> None:
    peer = ScriptedPeer([*VALID, INVALID["nested"]])
    async with peer_client(peer) as client:
        with pytest.raises(ToolRejected, match="below the top level"):
            await client.call_tool("nested", {"outer": {"inner": "x"}})
    assert peer.called == []
