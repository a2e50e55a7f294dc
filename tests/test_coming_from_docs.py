"""docs/coming-from.md's snippets, run as written: the ported server, and its test run
against it in process on asyncio and on trio."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from doc_snippets import Page

from mcp_tasks.client import RpcError
from mcp_tasks.testing import connect_in_process

PAGE = Page("coming-from.md")


def ported() -> dict[str, Any]:
    """The server snippet's names, with the test snippet run among them."""
    names = PAGE.run("class Order(")
    [test_code] = [text for text in PAGE.snippets if "async def test_the_kitchen" in text]
    exec(compile(test_code, str(PAGE.path), "exec"), names)
    return names


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_pages_own_test_passes(backend: str) -> None:
    anyio.run(ported()["test_the_kitchen"], backend=backend)


def test_the_ported_server_is_what_the_page_says() -> None:
    server = ported()["server"]

    async def check() -> None:
        async with connect_in_process(server) as client:
            tools = {tool.name: tool for tool in await client.list_tools()}
            menu = await client.call_tool("menu")
            with pytest.raises(RpcError, match=r"`arguments.portions`") as refused:
                await client.call_tool_or_task("cook", {"dish": "soup", "portions": 9})
        assert refused.value.code == -32602  # pydantic's le=8, at the call: no task made
        assert menu.structured_content == {"result": ["soup", "stew"]}
        price = tools["price"]
        assert price.input_schema["properties"]["dish"]["description"] == "A dish from the menu"
        assert price.output_schema["properties"]["result"] == {"type": "number"}
        assert tools["cook"].input_schema["required"] == ["dish"]
        assert tools["menu"].description == "What the kitchen cooks today."

    anyio.run(check, backend="trio")
