"""2025 sessions over HTTP on two real `mcp-tasks serve` processes sharing one Redis, or one
SQLite file opened shared, with nothing in front: a session opened on one is used on the
other, a question one process asks is answered by a POST to the other, and a session ended
on one is gone on both.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import trio
from legacy_http import LegacyHttpClient, sse_events

from .served import serving


@pytest.fixture(params=["redis", "sqlite"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}?shared=true"
    else:
        yield f"{request.getfixturevalue('redis_url')}?prefix=t{secrets.token_hex(4)}"


async def test_a_session_opened_on_one_process_is_served_by_the_other(shared_url: str) -> None:
    async with (
        serving(shared_url) as a,
        serving(shared_url) as b,
        httpx.AsyncClient(timeout=15) as http,
    ):
        on_a = LegacyHttpClient(http, a.url)
        await on_a.initialize(elicitation={"form": {}})
        on_b = LegacyHttpClient(http, b.url)
        on_b.session_id = on_a.session_id
        listed = await on_b.request("tools/list")
        assert "greets_in_place" in [tool["name"] for tool in listed["result"]["tools"]]

        # A asks on its POST stream; the answer goes to B, and reaches A through the store.
        message: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "greets_in_place"},
        }
        with trio.fail_after(15):
            async with http.stream("POST", a.url, json=message, headers=on_a.headers()) as answer:
                events = sse_events(answer)
                priming = await anext(events)  # 2025-11-25: an id, a retry, no data
                assert priming["data"] == "" and "retry" in priming
                asked = (await anext(events))["data"]
                assert '"elicitation/create"' in asked
                request_id = json.loads(asked)["id"]
                sent = await on_b.respond(
                    request_id, {"action": "accept", "content": {"name": "Kai"}}
                )
                assert sent.status_code == 202
                final = [event["data"] async for event in events if event.get("data")]
        assert len(final) == 1 and '"Hello, Kai!"' in final[0]

        ended = await http.delete(b.url, headers=on_b.headers())
        assert ended.status_code == 200
        gone = await http.post(
            a.url, json={"jsonrpc": "2.0", "id": 6, "method": "ping"}, headers=on_a.headers()
        )
        assert gone.status_code == 404
