"""A 2025-11-25 session's POST streams, resumable (`runtime/_post_streams.py`): the priming
event, ids on every event, a request that outlives its POST, `GET` with `Last-Event-ID`,
`ToolContext.close_stream`. The built-in server on trio, real sockets, a raw client.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2 as httpx
import trio
from legacy_http import LegacyHttpClient, sse_events, stream_of
from test_http import serving

from mcp_tasks import Server, ToolContext


class Gates:
    """What the tools wait on, and what they say they did."""

    def __init__(self) -> None:
        self.go_on = trio.Event()
        self.finished = trio.Event()
        self.cancelled = trio.Event()
        self.closed: bool | None = None


def resumable_server(gates: Gates) -> Server:
    server = Server("resumable", "1.0")

    @server.tool()
    async def closes_early(ctx: ToolContext) -> str:
        """Ends its POST's stream, then answers once let go."""
        gates.closed = await ctx.close_stream()
        await gates.go_on.wait()
        return "answered after the stream closed"

    @server.tool()
    async def speaks_twice(ctx: ToolContext) -> str:
        """Logs, waits to be let go, logs again, answers; says if it was cancelled."""
        try:
            await ctx.log("warning", "first")
            await gates.go_on.wait()
            await ctx.log("warning", "second")
        except anyio.get_cancelled_exc_class():
            gates.cancelled.set()
            raise
        gates.finished.set()
        return "spoke twice"

    return server


@asynccontextmanager
async def session(gates: Gates, version: str = "2025-11-25") -> AsyncIterator[LegacyHttpClient]:
    async with serving(resumable_server(gates)) as port, httpx.AsyncClient(timeout=10) as http:
        client = LegacyHttpClient(http, f"http://127.0.0.1:{port}/mcp", version=version)
        await client.initialize()
        await client.request("logging/setLevel", {"level": "warning"})
        yield client


def call(name: str, request_id: int = 9) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name}}


async def resumed(client: LegacyHttpClient, last_event_id: str) -> list[dict[str, str]]:
    """The events a `GET` resuming after `last_event_id` gets, until it ends."""
    async with stream_of(client, **{"last-event-id": last_event_id}) as answer:
        assert answer.status_code == 200
        return [event async for event in sse_events(answer)]


async def test_the_tool_closes_its_stream_and_the_result_comes_on_the_get() -> None:
    gates = Gates()
    async with session(gates) as client:
        with trio.fail_after(10):
            async with client.http.stream(
                "POST", client.url, json=call("closes_early"), headers=client.headers()
            ) as answer:
                events = [event async for event in sse_events(answer)]  # it ends early
            assert gates.closed is True
            assert len(events) == 1  # the priming event alone: an id, a delay, no data
            priming = events[0]
            assert priming["data"] == "" and priming["retry"] == "1000"
            stream, _, number = priming["id"].rpartition("-")
            assert stream.startswith("p") and number.isdigit()

            async with trio.open_nursery() as nursery:
                got: list[dict[str, str]] = []

                async def resume() -> None:
                    got.extend(await resumed(client, priming["id"]))

                nursery.start_soon(resume)
                await trio.sleep(0.05)  # let the GET take the stream: the rest is live
                gates.go_on.set()
        data = [json.loads(event["data"]) for event in got if event.get("data")]
        assert [message["id"] for message in data] == [9]
        assert data[0]["result"]["content"][0]["text"] == "answered after the stream closed"
        assert got[-1]["id"].startswith(stream + "-")
        assert int(got[-1]["id"].rpartition("-")[2]) > int(number)


async def test_a_client_that_leaves_does_not_cancel_and_resumes_what_it_missed() -> None:
    gates = Gates()
    async with session(gates) as client:
        with trio.fail_after(10):
            async with client.http.stream(
                "POST", client.url, json=call("speaks_twice"), headers=client.headers()
            ) as answer:
                events = sse_events(answer)
                priming = await anext(events)
                first = await anext(events)
                assert priming["data"] == "" and '"first"' in first["data"]
            # the client left mid-call: the call runs on
            gates.go_on.set()
            await gates.finished.wait()
            assert not gates.cancelled.is_set()
            rest = await resumed(client, first["id"])  # after "first": the rest, kept
        data = [json.loads(event["data"]) for event in rest if event.get("data")]
        assert [message.get("method") for message in data] == ["notifications/message", None]
        assert data[0]["params"]["data"] == "second"
        assert data[1]["result"]["content"][0]["text"] == "spoke twice"
        again = await resumed(client, priming["id"])  # from the start: all of it, once
        assert [event["id"] for event in again if event.get("data")] == [
            first["id"],
            *(event["id"] for event in rest if event.get("data")),
        ]


async def test_cancelled_still_ends_a_call_its_client_left() -> None:
    gates = Gates()
    async with session(gates) as client:
        with trio.fail_after(10):
            async with client.http.stream(
                "POST", client.url, json=call("speaks_twice", 11), headers=client.headers()
            ) as answer:
                events = sse_events(answer)
                await anext(events)
                await anext(events)
            sent = await client.notify("notifications/cancelled", {"requestId": 11})
            assert sent.status_code == 202
            await gates.cancelled.wait()
        assert not gates.finished.is_set()


async def test_an_older_revisions_post_stream_has_no_ids() -> None:
    gates = Gates()
    gates.go_on.set()
    async with session(gates, version="2025-06-18") as client:
        with trio.fail_after(10):
            async with client.http.stream(
                "POST", client.url, json=call("speaks_twice"), headers=client.headers()
            ) as answer:
                events = [event async for event in sse_events(answer)]
        assert [("id" in event, bool(event["data"])) for event in events] == [(False, True)] * 3


async def test_a_stream_nobody_ran_resumes_nothing_and_ends() -> None:
    gates = Gates()
    async with session(gates) as client:
        with trio.fail_after(10):
            assert await resumed(client, "p0000-99") == []
