"""2025 sessions over HTTP through the ASGI app, in real uvicorn, hypercorn (trio) and a
Starlette mount (`asgi` fixture), answered as the built-in server answers them
(tests/transports/test_http_legacy.py has every rule; these are the ones that cross the
ASGI driver: the session header out, `GET` and `DELETE` in, questions on the POST stream).
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2 as httpx
import trio
from legacy_http import LegacyHttpClient, sse_events, stream_of

from .processes import Served

ALICE = {"authorization": "Bearer alice-token"}


async def test_a_session_opens_calls_asks_and_ends(asgi: Served) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        client = LegacyHttpClient(http, asgi.url, headers=ALICE)
        await client.initialize(elicitation={"form": {}})
        called = await client.request("tools/call", {"name": "greet", "arguments": {"name": "A"}})
        assert called["result"]["content"] == [{"type": "text", "text": "Hello, A!"}]
        params = {"name": "steps", "arguments": {"count": 2}, "_meta": {"progressToken": 5}}
        stepped = await client.request("tools/call", params)
        assert [n["params"]["progress"] for n in stepped["notifications"]] == [1, 2]

        async def answer(request: dict[str, Any]) -> None:
            assert request["method"] == "elicitation/create"
            sent = await client.respond(
                request["id"], {"action": "accept", "content": {"name": "Bo"}}
            )
            assert sent.status_code == 202

        asked = await client.request("tools/call", {"name": "ask_name"}, on_request=answer)
        assert asked["result"]["content"][0]["text"] == "Hello, Bo!"
        async with stream_of(client) as stream:
            assert stream.status_code == 200
            ended = await http.delete(asgi.url, headers=client.headers())
            assert ended.status_code == 200
            with trio.fail_after(5):
                assert [event async for event in sse_events(stream)] == []
        message = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
        gone = await http.post(asgi.url, json=message, headers=client.headers())
        assert gone.status_code == 404


async def test_a_session_is_its_principals_only(asgi: Served) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        alice = LegacyHttpClient(http, asgi.url, headers=ALICE)
        await alice.initialize()
        bob = LegacyHttpClient(http, asgi.url, headers={"authorization": "Bearer bob-token"})
        bob.session_id = alice.session_id
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert (await http.post(asgi.url, json=message, headers=bob.headers())).status_code == 404
        assert (await alice.request("tools/list"))["result"]["tools"]


async def test_a_closed_post_stream_is_resumed_with_get(asgi: Served) -> None:
    """A 2025-11-25 POST's stream: primed with an id and `retry`, closed by the tool
    (`close_stream`), the rest (the result) on a GET with `Last-Event-ID`."""
    async with httpx.AsyncClient(timeout=10) as http:
        client = LegacyHttpClient(http, asgi.url, headers=ALICE)
        await client.initialize()
        message = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "closes_stream", "_meta": {"progressToken": 1}},
        }
        with trio.fail_after(10):
            async with http.stream(
                "POST", asgi.url, json=message, headers=client.headers()
            ) as answer:
                on_post = [event async for event in sse_events(answer)]
            assert on_post[0]["data"] == "" and on_post[0]["retry"] == "1000"
            assert re.fullmatch(r"p[0-9a-f]{4}\.0-\d+", on_post[0]["id"])
            assert [json.loads(e["data"])["method"] for e in on_post[1:]] == [
                "notifications/progress"
            ]
            async with stream_of(client, **{"last-event-id": on_post[-1]["id"]}) as resumed:
                rest = [event async for event in sse_events(resumed)]
        (result,) = [json.loads(event["data"]) for event in rest]
        assert result["id"] == 3
        assert result["result"]["content"][0]["text"] == "closed: True"
