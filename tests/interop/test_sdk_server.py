"""Our client against an official SDK server (`mcp` 2.3.0 `MCPServer`), over HTTP and stdio.

The server (peers/sdk_server.py) runs in the peers' python, in its own process; our client
runs here. Over HTTP the SDK refuses a call of a tool with an `x-mcp-header` argument unless
the `Mcp-Param-*` header mirrors it, so our client must learn the marks from `tools/list`.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx2
import pytest

from mcp_tasks import ElicitParams, ElicitResult, TextContent
from mcp_tasks.client import connect_http, connect_stdio

from .processes import Connect, bounded, peer_script, peers_python, serving_peer


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with serving_peer("sdk_server.py") as url:
        yield url


@pytest.fixture(params=["http", "stdio"])
def connect(request: pytest.FixtureRequest) -> Connect:
    """Open our client to the SDK server: its HTTP endpoint, or a process of its own on stdio."""
    if request.param == "http":
        return bounded(partial(connect_http, request.getfixturevalue("sdk_url")))
    command = [peers_python(), peer_script("sdk_server.py"), "stdio"]
    return bounded(partial(connect_stdio, command, stderr="capture"))


def text_of(result: Any) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


async def accept(params: ElicitParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


async def test_tools_are_listed_and_called(connect: Connect) -> None:
    async with connect() as client:
        assert [tool.name for tool in await client.list_tools()] == ["greet", "lookup", "confirm"]
        result = await client.call_tool("greet", {"name": "Ada"})
    assert text_of(result) == ["Hello, Ada!"] and result.is_error is False


@pytest.mark.parametrize("region", ["eu-west", "Zürich"])
async def test_an_x_mcp_header_argument_is_mirrored_in_its_header(
    connect: Connect, region: str
) -> None:
    """Called first (the client learns the marks on the SDK's -32020 and sends again), then
    after a `tools/list`; a non-ASCII value goes in the header's base64 form."""
    async with connect() as client:
        first = await client.call_tool("lookup", {"region": region})
        await client.list_tools()
        listed = await client.call_tool("lookup", {"region": region})
    assert text_of(first) == text_of(listed) == [f"region: {region}"]


def test_the_sdk_server_does_refuse_a_call_without_the_header(sdk_url: str) -> None:
    """What makes the test above mean something: without `Mcp-Param-Region`, -32020."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "lookup",
            "arguments": {"region": "eu-west"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "lookup",
    }
    response = httpx2.post(sdk_url, json=body, headers=headers, timeout=30)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32020 and "Mcp-Param-Region header is missing" in error["message"]


async def test_an_input_round_is_answered(connect: Connect) -> None:
    async with connect(on_elicit=accept) as client:
        result = await client.call_tool("confirm", {"action": "deploy"})
    assert text_of(result) == ["deploy: done"]


async def test_prompts_are_listed_and_got(connect: Connect) -> None:
    async with connect() as client:
        assert [prompt.name for prompt in await client.list_prompts()] == ["summarize"]
        prompt = await client.get_prompt("summarize", {"topic": "interop"})
    (message,) = prompt.messages
    assert message.role == "user"
    assert isinstance(message.content, TextContent)
    assert message.content.text == "Summarize interop in one line."


async def test_resources_and_templates_are_listed_and_read(connect: Connect) -> None:
    async with connect() as client:
        assert [resource.uri for resource in await client.list_resources()] == ["note://hello"]
        templates = await client.list_resource_templates()
        assert [template.uri_template for template in templates] == ["note://{name}"]
        static = await client.read_resource("note://hello")
        templated = await client.read_resource("note://abc")
    assert [(c.uri, c.text) for c in static.contents] == [("note://hello", "hello from the SDK")]
    assert [(c.uri, c.text) for c in templated.contents] == [("note://abc", "note abc")]
