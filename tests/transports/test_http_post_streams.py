"""A 2025-11-25 session's POST streams, resumable (`runtime._post_streams`, SEP-1699): a
priming event with an id and `retry`, an id on every event, the request running on when
its client leaves, resumed with `GET` and `Last-Event-ID` (in the same process or, on
Redis, in another), `ToolContext.close_stream`. The built-in server on real sockets, on
the memory, SQLite and Redis stores; the ASGI app is tests/asgi/test_asgi_legacy.py.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import redis
import trio
from legacy_http import LegacyHttpClient, sse_events, stream_of
from redis_server import running_redis
from test_http import serving, serving_on_asyncio

from mcp_tasks import (
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    InputRequired,
    Server,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.runtime import HttpSessionLimits
from mcp_tasks.store import MemoryTaskStore, RedisTaskStore, SQLiteTaskStore, TaskStore

Store = Callable[[], TaskStore]


class Probe:
    """What the test and the tools share: `go` lets a waiting tool on, `finished` and
    `cancelled` say how it ended, `closed` what `close_stream` answered."""

    def __init__(self) -> None:
        self.go = trio.Event()
        self.finished = trio.Event()
        self.cancelled = trio.Event()
        self.closed: list[bool] = []


def build(store: TaskStore | None = None, probe: Probe | None = None) -> Server:
    server = Server("post-streams", "1.0", store=store)
    probe = probe or Probe()

    @server.tool()
    async def steps(ctx: ToolContext) -> str:
        """Reports progress twice, the test letting it on between."""
        await ctx.report_progress(1, 2, "half")
        await probe.go.wait()
        await ctx.report_progress(2, 2, "all")
        probe.finished.set()
        return "stepped"

    @server.tool()
    async def closes(ctx: ToolContext) -> ToolOutcome:
        """Reports progress, closes its stream, goes on when the test says."""
        await ctx.report_progress(1, None, "before")
        probe.closed.append(await ctx.close_stream())
        await probe.go.wait()
        await ctx.report_progress(2, None, "after")
        probe.finished.set()
        return CallToolResult.text("closed, then done")

    @server.tool()
    async def quiet_close(ctx: ToolContext) -> str:
        """Closes a stream it never started (primed first), then answers."""
        probe.closed.append(await ctx.close_stream())
        await probe.go.wait()
        return "quietly"

    @server.tool()
    async def waits(ctx: ToolContext) -> str:
        """Reports progress, then waits until cancelled."""
        await ctx.report_progress(1, None, "waiting")
        try:
            await trio.sleep_forever()
        finally:
            probe.cancelled.set()
        return "never"

    @server.tool()
    async def asks(ctx: ToolContext) -> ToolOutcome:
        """An input round: the user's name (a 2025 client is asked it on the stream)."""
        answer = ctx.elicit_response("name")
        if answer is None:
            schema = {"type": "object", "properties": {"name": {"type": "string"}}}
            params = ElicitParams(message="Your name?", mode="form", requested_schema=schema)
            return InputRequired(requests={"name": ElicitRequest(params=params)})
        return CallToolResult.text(f"Hello, {(answer.content or {}).get('name')}!")

    @server.tool()
    async def floods(ctx: ToolContext) -> str:
        """Reports progress once, waits for the test, then 40 times more."""
        await ctx.report_progress(0, 40)
        await probe.go.wait()
        for step in range(1, 41):
            await ctx.report_progress(step, 40)
        return "flooded"

    @server.tool()
    async def plain(ctx: ToolContext) -> str:
        """Answers at once (one JSON body)."""
        return "plain"

    @server.tool()
    async def chatty(ctx: ToolContext) -> str:
        """Reports progress twice, then answers."""
        await ctx.report_progress(1, 2)
        await ctx.report_progress(2, 2)
        return "said"

    return server


def _memory() -> TaskStore:
    return MemoryTaskStore()


STORES = ["memory", "sqlite", "redis"]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return MemoryTaskStore
    if request.param == "sqlite":
        return lambda: SQLiteTaskStore(tmp_path / "tasks.db")
    url = request.getfixturevalue("redis_url")
    prefix = f"t{secrets.token_hex(4)}"
    return lambda: RedisTaskStore(f"{url}?prefix={prefix}")


@asynccontextmanager
async def client_of(
    server: Server, serve: Callable[..., AbstractAsyncContextManager[int]] = serving
) -> AsyncIterator[LegacyHttpClient]:
    async with serve(server) as port, httpx.AsyncClient(timeout=10) as http:
        client = LegacyHttpClient(http, f"http://127.0.0.1:{port}/mcp")
        await client.initialize()
        yield client


def call(name: str, request_id: int = 7, progress: bool = True) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if progress:
        params["_meta"] = {"progressToken": "p"}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def events_until_end(answer: httpx.Response) -> list[dict[str, str]]:
    with trio.fail_after(10):
        return [event async for event in sse_events(answer)]


async def until_the_server_saw_the_post_end(server: Server) -> None:
    """Wait until the server noticed that every POST streaming a request has ended (a
    peek inside: the streams' writers are gone)."""
    posts = server.http_sessions._posts
    with trio.fail_after(10):
        while any(
            stream._writer is not None for live in posts._live.values() for stream in live.values()
        ):
            await trio.sleep(0.01)


def data_of(events: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [json.loads(event["data"]) for event in events if event.get("data")]


@pytest.mark.parametrize("serve", [serving, serving_on_asyncio], ids=["trio", "asyncio"])
async def test_the_stream_is_primed_and_every_event_has_an_id(serve: Any) -> None:
    async with client_of(build(), serve) as client:
        async with client.http.stream(
            "POST", client.url, json=call("chatty"), headers=client.headers()
        ) as answer:
            assert answer.headers["content-type"] == "text/event-stream"
            events = await events_until_end(answer)
        priming, *rest = events
        assert priming["data"] == "" and priming["retry"] == "1000"
        stream, _, number = priming["id"].rpartition("-")
        assert stream.startswith("p") and number.isdigit()
        ids = [event["id"] for event in rest]
        assert ids == [f"{stream}-{int(number) + n}" for n in (1, 2, 3)]
        assert [m.get("method") for m in data_of(rest)] == [
            "notifications/progress",
            "notifications/progress",
            None,
        ]
        assert data_of(rest)[-1]["result"]["content"][0]["text"] == "said"
        # an answer that never streamed is one JSON body, as before
        assert (await client.request("tools/call", {"name": "plain"}))["notifications"] == []


async def test_reconnect_ms_sets_the_retry_field_and_must_be_positive() -> None:
    with pytest.raises(ValueError, match="reconnect_ms"):
        HttpSessionLimits(reconnect_ms=0)
    server = build()
    server.http_sessions.limits = HttpSessionLimits(reconnect_ms=2500)
    async with client_of(server) as client:
        async with client.http.stream(
            "POST", client.url, json=call("chatty"), headers=client.headers()
        ) as answer:
            priming = (await events_until_end(answer))[0]
        assert priming["retry"] == "2500"


async def test_a_client_that_leaves_resumes_the_rest_with_get(store: Store) -> None:
    probe = Probe()
    server = build(store(), probe)
    async with client_of(server) as client:
        async with client.http.stream(
            "POST", client.url, json=call("steps"), headers=client.headers()
        ) as answer:
            events = sse_events(answer)
            with trio.fail_after(10):
                await anext(events)  # priming
                half = await anext(events)
        # the client left mid-call, and the server saw it: the tool goes on all the same
        await until_the_server_saw_the_post_end(server)
        assert json.loads(half["data"])["params"]["message"] == "half"
        probe.go.set()
        with trio.fail_after(10):
            await probe.finished.wait()
        async with stream_of(client, **{"last-event-id": half["id"]}) as resumed:
            assert resumed.status_code == 200
            rest = await events_until_end(resumed)
        stream, _, number = half["id"].rpartition("-")
        assert [event["id"] for event in rest] == [f"{stream}-{int(number) + n}" for n in (1, 2)]
        final = data_of(rest)
        assert final[0]["params"]["message"] == "all"
        assert final[1]["id"] == 7 and final[1]["result"]["content"][0]["text"] == "stepped"


async def test_close_stream_ends_the_post_and_the_get_gets_the_rest(store: Store) -> None:
    probe = Probe()
    async with client_of(build(store(), probe)) as client:
        async with client.http.stream(
            "POST", client.url, json=call("closes"), headers=client.headers()
        ) as answer:
            on_post = await events_until_end(answer)  # the server ended it
        assert probe.closed == [True]
        assert [m["params"]["message"] for m in data_of(on_post)] == ["before"]
        last = on_post[-1]["id"]
        async with stream_of(client, **{"last-event-id": last}) as resumed:
            events = sse_events(resumed)
            probe.go.set()  # live now: what comes next is written as it comes
            with trio.fail_after(10):
                rest = [event async for event in events]
        assert [m.get("method") for m in data_of(rest)] == ["notifications/progress", None]
        assert data_of(rest)[1]["result"]["content"][0]["text"] == "closed, then done"


async def test_close_stream_closes_the_connection_while_the_call_runs_on() -> None:
    """The built-in server runs the call in the POST's own task: once its answer ended
    early, the connection is half-closed at once (a client must not send its GET there)
    and closed when the call ends."""
    probe = Probe()
    async with client_of(build(probe=probe)) as client:
        port = int(client.url.split(":")[2].split("/")[0])
        body = json.dumps(call("closes")).encode()
        head = "".join(f"{name}: {value}\r\n" for name, value in client.headers().items())
        request = (
            f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{head}"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body
        socket = await trio.open_tcp_stream("127.0.0.1", port)
        async with socket:
            await socket.send_all(request)
            received = b""
            with trio.fail_after(10):
                while chunk := await socket.receive_some():
                    received += chunk  # until the server half-closes
            assert received.endswith(b"\r\n0\r\n\r\n")  # the answer, whole
            assert not probe.finished.is_set()  # and the call runs on
            probe.go.set()
            with trio.fail_after(10):
                await probe.finished.wait()
        ids = [line for line in received.splitlines() if line.startswith(b"id: ")]
        last = ids[-1].removeprefix(b"id: ").decode()
        async with stream_of(client, **{"last-event-id": last}) as resumed:
            rest = data_of(await events_until_end(resumed))
        assert rest[-1]["result"]["content"][0]["text"] == "closed, then done"


async def test_close_stream_primes_a_stream_not_started() -> None:
    probe = Probe()
    async with client_of(build(probe=probe)) as client:
        async with client.http.stream(
            "POST", client.url, json=call("quiet_close", progress=False), headers=client.headers()
        ) as answer:
            assert answer.headers["content-type"] == "text/event-stream"
            (priming,) = await events_until_end(answer)
        assert priming["data"] == "" and priming["retry"] == "1000"
        probe.go.set()
        async with stream_of(client, **{"last-event-id": priming["id"]}) as resumed:
            (result,) = data_of(await events_until_end(resumed))
        assert result["result"]["content"][0]["text"] == "quietly"


async def test_a_resume_on_another_process_gets_the_result(redis_url: str) -> None:
    """Two servers on one Redis (each its own store connection and signals): the request
    runs on the first, the client resumes on the second."""
    url = f"{redis_url}?prefix=t{secrets.token_hex(4)}"
    probe = Probe()
    first, second = build(RedisTaskStore(url), probe), build(RedisTaskStore(url))
    async with (
        serving(first) as port_a,
        serving(second) as port_b,
        httpx.AsyncClient(timeout=10) as http,
    ):
        on_a = LegacyHttpClient(http, f"http://127.0.0.1:{port_a}/mcp")
        await on_a.initialize()
        on_b = LegacyHttpClient(http, f"http://127.0.0.1:{port_b}/mcp")
        on_b.session_id = on_a.session_id
        async with http.stream("POST", on_a.url, json=call("closes"), headers=on_a.headers()) as a:
            last = (await events_until_end(a))[-1]["id"]
        async with stream_of(on_b, **{"last-event-id": last}) as resumed:
            events = sse_events(resumed)
            with trio.fail_after(10):
                while not second.http_sessions.streams_open:
                    await trio.sleep(0.01)  # B's GET is registered before A goes on
                probe.go.set()
                rest = [event async for event in events]
        assert [m.get("method") for m in data_of(rest)] == ["notifications/progress", None]
        assert data_of(rest)[1]["result"]["content"][0]["text"] == "closed, then done"


async def test_cancelled_still_cancels_a_request_whose_client_left() -> None:
    probe = Probe()
    server = build(probe=probe)
    async with client_of(server) as client:
        async with client.http.stream(
            "POST", client.url, json=call("waits"), headers=client.headers()
        ) as answer:
            events = sse_events(answer)
            with trio.fail_after(10):
                await anext(events)
                await anext(events)
        await until_the_server_saw_the_post_end(server)
        assert not probe.cancelled.is_set()
        sent = await client.notify("notifications/cancelled", {"requestId": 7})
        assert sent.status_code == 202
        with trio.fail_after(10):
            await probe.cancelled.wait()


async def test_delete_ends_a_detached_request_and_its_resumed_get() -> None:
    probe = Probe()
    async with client_of(build(probe=probe)) as client:
        async with client.http.stream(
            "POST", client.url, json=call("waits"), headers=client.headers()
        ) as answer:
            events = sse_events(answer)
            with trio.fail_after(10):
                await anext(events)
                waiting = await anext(events)
        async with stream_of(client, **{"last-event-id": waiting["id"]}) as resumed:
            ended = await client.http.delete(client.url, headers=client.headers())
            assert ended.status_code == 200
            assert await events_until_end(resumed) == []
        with trio.fail_after(10):
            await probe.cancelled.wait()


async def test_a_2025_06_18_session_gets_no_ids() -> None:
    async with serving(build()) as port, httpx.AsyncClient(timeout=10) as http:
        client = LegacyHttpClient(http, f"http://127.0.0.1:{port}/mcp", version="2025-06-18")
        await client.initialize()
        async with http.stream(
            "POST", client.url, json=call("chatty"), headers=client.headers()
        ) as a:
            events = await events_until_end(a)
        assert all("id" not in event and "retry" not in event for event in events)
        assert len(data_of(events)) == 3


async def test_a_client_that_accepts_only_json_gets_json() -> None:
    async with client_of(build()) as client:
        headers = client.headers(accept="application/json")
        answer = await client.http.post(client.url, json=call("chatty"), headers=headers)
        assert answer.headers["content-type"] == "application/json"
        assert answer.json()["result"]["content"][0]["text"] == "said"


POST_IDS = ["p-1", "p0000.0-99", "pabcd.63-0"]
"""Ids of a POST stream's shape that name nothing kept: the GET ends at once."""


@pytest.mark.parametrize(
    "last_event_id", [*POST_IDS, "p", "pzz.0-x", "p&.0-1", "p.0-" + "9" * 40, "garbled", "g9"]
)
async def test_an_unknown_or_garbled_last_event_id_is_harmless(last_event_id: str) -> None:
    async with client_of(build()) as client:
        with trio.fail_after(10):
            async with stream_of(client, **{"last-event-id": last_event_id}) as resumed:
                assert resumed.status_code == 200
                if last_event_id in POST_IDS:
                    assert await events_until_end(resumed) == []  # nothing kept: it ends
        called = await client.request("tools/call", {"name": "plain"})
        assert called["result"]["content"][0]["text"] == "plain"


async def test_a_question_is_asked_again_on_the_resumed_stream_and_answered() -> None:
    async with serving(build()) as port, httpx.AsyncClient(timeout=10) as http:
        client = LegacyHttpClient(http, f"http://127.0.0.1:{port}/mcp")
        await client.initialize(elicitation={"form": {}})
        async with http.stream(
            "POST", client.url, json=call("asks"), headers=client.headers()
        ) as a:
            events = sse_events(a)
            with trio.fail_after(10):
                priming = await anext(events)
                asked = await anext(events)
        assert asked["id"] != priming["id"] and "elicitation/create" in asked["data"]
        async with stream_of(client, **{"last-event-id": priming["id"]}) as resumed:
            events = sse_events(resumed)
            with trio.fail_after(10):
                again = await anext(events)  # the question, replayed with its id
                assert again["id"] == asked["id"]
                question = json.loads(again["data"])
                sent = await client.respond(
                    question["id"], {"action": "accept", "content": {"name": "Ann"}}
                )
                assert sent.status_code == 202
                rest = [event async for event in events]
        (result,) = data_of(rest)
        assert result["id"] == 7 and result["result"]["content"][0]["text"] == "Hello, Ann!"


async def test_the_server_stopping_ends_a_request_whose_client_left() -> None:
    probe = Probe()
    server = build(probe=probe)
    async with client_of(server) as client:
        async with client.http.stream(
            "POST", client.url, json=call("waits"), headers=client.headers()
        ) as answer:
            events = sse_events(answer)
            with trio.fail_after(10):
                await anext(events)
                await anext(events)
        await until_the_server_saw_the_post_end(server)
        assert not probe.cancelled.is_set()
    assert probe.cancelled.is_set()  # the server stopped: the request ended with it


async def test_a_resume_elsewhere_while_the_post_still_streams_gets_the_rest(
    redis_url: str,
) -> None:
    """The first server still writes on the POST (its client went away unnoticed, say):
    its response is announced by number to the second, whose GET reads what it missed
    from the store."""
    url = f"{redis_url}?prefix=t{secrets.token_hex(4)}"
    probe = Probe()
    first, second = build(RedisTaskStore(url), probe), build(RedisTaskStore(url))
    async with (
        serving(first) as port_a,
        serving(second) as port_b,
        httpx.AsyncClient(timeout=10) as http,
    ):
        on_a = LegacyHttpClient(http, f"http://127.0.0.1:{port_a}/mcp")
        await on_a.initialize()
        on_b = LegacyHttpClient(http, f"http://127.0.0.1:{port_b}/mcp")
        on_b.session_id = on_a.session_id
        async with http.stream("POST", on_a.url, json=call("steps"), headers=on_a.headers()) as a:
            on_post = sse_events(a)
            with trio.fail_after(10):
                await anext(on_post)
                half = await anext(on_post)
            async with stream_of(on_b, **{"last-event-id": half["id"]}) as resumed:
                with trio.fail_after(10):
                    while not second.http_sessions.streams_open:
                        await trio.sleep(0.01)  # B's GET is registered
                    probe.go.set()
                    rest = [event async for event in sse_events(resumed)]
                    still = [event async for event in on_post]
        assert [m.get("method") for m in data_of(rest)] == ["notifications/progress", None]
        assert data_of(rest)[1]["result"]["content"][0]["text"] == "stepped"
        assert [event["id"] for event in rest] == [event["id"] for event in still]


async def test_a_store_outage_mid_stream_is_logged_a_few_times_not_once_an_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Redis goes away while a call streams: its events go on the POST without ids, the
    response too, and the log says they were not kept a few times, not forty."""
    probe = Probe()
    with running_redis() as url:
        async with (
            client_of(build(RedisTaskStore(url), probe)) as client,
            client.http.stream(
                "POST", client.url, json=call("floods"), headers=client.headers()
            ) as answer,
        ):
            events = sse_events(answer)
            with trio.fail_after(10):
                await anext(events)  # priming
                assert "id" in await anext(events)  # kept while the store was there
            redis_client = redis.Redis.from_url(url)
            await trio.to_thread.run_sync(lambda: redis_client.shutdown(nosave=True))
            probe.go.set()
            with trio.fail_after(10):
                rest = [event async for event in events]
    assert len(rest) == 41 and all("id" not in event for event in rest)
    assert data_of(rest)[-1]["result"]["content"][0]["text"] == "flooded"
    lines = [r for r in caplog.records if "stream event was not kept" in r.getMessage()]
    assert 1 <= len(lines) <= 5
