"""docs/tools.md's snippets, run as written and driven through `Server.handle`."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import trio
from doc_snippets import Page
from trio.testing import MockClock

from mcp_tasks import Server

from .helpers import Client

PAGE = Page("tools.md")


async def tools_of(client: Client) -> dict[str, Any]:
    listed = await client.send("tools/list")
    return {tool["name"]: tool for tool in listed["result"]["tools"]}


async def test_arguments_from_the_signature() -> None:
    server: Server = PAGE.run("async def greet(")["server"]
    async with server.running():
        client = Client(server)
        tools = await tools_of(client)
        assert tools["greet"]["inputSchema"]["required"] == ["name"]
        assert tools["greet"]["description"] == "Greet someone, up to five times."
        greeted = await client.call("greet", {"name": "Ada", "times": 2})
        assert greeted["result"]["content"][0]["text"] == "Hello, Ada! Hello, Ada!"
        wrong = await client.call("greet", {"name": "Ada", "times": "two"})
        message = wrong["error"]["message"]
        assert message in PAGE.path.read_text()  # the page quotes the real message
        booked = await client.call("book", {"booking": {"room": "7"}})
        assert booked["error"]["code"] == -32602  # the dataclass's fields are the arguments
        booked = await client.call("book", {"room": "7", "nights": 2})
        assert booked["result"]["content"][0]["text"] == "room 7 for 2 night(s)"
        shouted = await client.call("shout", {"text": "quiet"})
        assert shouted["result"]["content"][0]["text"] == "QUIET"


async def test_a_struct_result_under_the_output_schema() -> None:
    server: Server = PAGE.run("class Forecast")["server"]
    async with server.running():
        client = Client(server)
        tool = (await tools_of(client))["forecast"]
        assert tool["outputSchema"]["required"] == ["city", "celsius"]
        result = (await client.call("forecast", {"city": "Oslo"}))["result"]
        listed = (await tools_of(client))["warmest"]["outputSchema"]
        warmest = (await client.call("warmest", {"cities": ["Oslo", "Rome"]}))["result"]
    text = result["content"][0]["text"]
    assert result["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    assert msgspec.json.encode(result["structuredContent"]).decode() == text
    quoted = text.replace('"', '\\"')
    assert quoted in PAGE.path.read_text()
    assert listed["required"] == ["result"]
    assert listed["properties"]["result"]["type"] == "array"
    assert warmest["structuredContent"] == {
        "result": [{"city": "Oslo", "celsius": 20.0}, {"city": "Rome", "celsius": 19.0}]
    }


async def test_an_image_through_its_helper(tmp_path: Any) -> None:
    server: Server = PAGE.run("def chart(")["server"]
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(32))
    (tmp_path / "sales.png").write_bytes(png)
    async with server.running():
        client = Client(server)
        charted = await client.call("chart", {"name": str(tmp_path / "sales.png")})
    [image] = charted["result"]["content"]
    assert image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]) == png


async def test_asking_the_client_with_types(autojump_clock: MockClock) -> None:
    server: Server = PAGE.run("async def tidy(")["server"]
    answers = [
        {"action": "accept", "content": {"value": True}},
        {"action": "accept", "content": {"value": "blue"}},
        {"action": "accept", "content": {"name": "Ada", "age": 36}},
    ]
    async with server.running():
        client = Client(server)
        task_id = await client.start("tidy", {"folder": "tmp"})
        for answer in answers:
            asking = await client.wait_status(task_id, "input_required")
            (key,) = asking["inputRequests"]
            update = {"taskId": task_id, "inputResponses": {key: answer}}
            await client.send("tasks/update", update)
        done = await client.wait_status(task_id, "completed")
        declined = await client.start("tidy", {"folder": "home"})
        asking = await client.wait_status(declined, "input_required")
        (key,) = asking["inputRequests"]
        no = {"taskId": declined, "inputResponses": {key: {"action": "decline"}}}
        await client.send("tasks/update", no)
        kept = await client.wait_status(declined, "completed")
    assert done["result"]["content"][0]["text"] == "tidied tmp, labelled blue for Ada"
    assert kept["result"]["content"][0]["text"] == "kept home (decline)"


async def test_plain_functions_that_stop_when_cancelled() -> None:
    """Each of the page's plain functions answers, and a cancelled call of either gives
    its thread back (it would run for hours, or a minute, otherwise)."""
    server: Server = PAGE.run("def primes_below(")["server"]
    async with server.running():
        client = Client(server)
        counted = await client.call("primes_below", {"limit": 100})
        assert counted["result"]["content"][0]["text"] == "25"
        done = await client.call("countdown", {"seconds": 0})
        assert done["result"]["content"][0]["text"] == "lift-off"
        threads = server.tool_threads
        for name, arguments in [("primes_below", {"limit": 10**9}), ("countdown", {"seconds": 60})]:
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(client.call, name, arguments)
                    while threads.held == 0:
                        await trio.sleep(0.01)
                    nursery.cancel_scope.cancel()
                while threads.held:
                    await trio.sleep(0.01)
