"""Clients of the 2025 revisions over Streamable HTTP: `initialize` opens a session named by
`Mcp-Session-Id`, kept in the store (`runtime._http_sessions`), beside 2026-07-28 requests on
the same endpoint. The built-in server on trio and on asyncio, real sockets, a raw client
(`legacy_http`); the ASGI app is tests/asgi/test_asgi_legacy.py, the real 2025 clients are
in tests/interop.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2 as httpx
import pytest
import redis
import trio
from legacy_http import ACCEPT, LegacyHttpClient, sse_events, stream_of
from redis_server import running_redis
from test_http import serving, serving_on_asyncio
from test_stdio_legacy import MODERN_META, build_server
from test_stdio_legacy_tasks import build_server as tasks_server

from mcp_tasks import Server
from mcp_tasks.store import MemoryTaskStore, RedisTaskStore

Serving = Callable[..., AbstractAsyncContextManager[int]]
LOOPS = [pytest.param(serving, id="trio"), pytest.param(serving_on_asyncio, id="asyncio")]


@asynccontextmanager
async def session_on(
    serve: Serving, server: Server | None = None, **config: Any
) -> AsyncIterator[LegacyHttpClient]:
    """A server, and a client (its session not yet open) on its endpoint."""
    server = build_server() if server is None else server
    async with serve(server, **config) as port, httpx.AsyncClient(timeout=10) as http:
        yield LegacyHttpClient(http, f"http://127.0.0.1:{port}/mcp")


@pytest.mark.parametrize("serve", LOOPS)
async def test_initialize_opens_a_session_its_requests_name(serve: Serving) -> None:
    async with session_on(serve) as client:
        opened = await client.initialize()
        assert opened["result"]["protocolVersion"] == "2025-11-25"
        assert opened["result"]["serverInfo"]["name"] == "legacy-jobs"
        assert client.session_id is not None
        assert re.fullmatch(r"[\x21-\x7e]{16,}", client.session_id)
        listed = await client.request("tools/list")
        assert "greet" in [tool["name"] for tool in listed["result"]["tools"]]
        called = await client.request("tools/call", {"name": "greet", "arguments": {"name": "Ann"}})
        assert called["result"]["content"] == [{"type": "text", "text": "Hello, Ann!"}]
        assert "resultType" not in called["result"]
        assert (await client.request("ping"))["result"] == {}


@pytest.mark.parametrize("serve", LOOPS)
async def test_each_initialize_opens_a_session_of_its_own(serve: Serving) -> None:
    async with session_on(serve) as first:
        await first.initialize()
        second = LegacyHttpClient(first.http, first.url, version="2025-06-18")
        opened = await second.initialize()
        assert opened["result"]["protocolVersion"] == "2025-06-18"
        assert second.session_id != first.session_id


@pytest.mark.parametrize("serve", LOOPS)
async def test_a_request_without_its_session_is_400_and_an_unknown_one_404(
    serve: Serving,
) -> None:
    async with session_on(serve) as client:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        missing = await client.http.post(client.url, json=message, headers=client.headers())
        assert missing.status_code == 400
        assert "Mcp-Session-Id" in missing.json()["error"]["message"]
        assert "id" not in missing.json()
        client.session_id = "no-such-session"
        unknown = await client.http.post(client.url, json=message, headers=client.headers())
        assert unknown.status_code == 404
        assert "initialize again" in unknown.json()["error"]["message"]
        client.session_id = None
        assert (await client.request("ping"))["result"] == {}  # ping needs no session


@pytest.mark.parametrize("serve", LOOPS)
async def test_the_protocol_version_header_must_name_a_2025_revision(serve: Serving) -> None:
    async with session_on(serve) as client:
        await client.initialize()
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        wrong = client.headers(**{"mcp-protocol-version": "1999-01-01"})
        refused = await client.http.post(client.url, json=message, headers=wrong)
        assert refused.status_code == 400
        assert "1999-01-01" in refused.json()["error"]["message"]
        absent = client.headers()
        del absent["mcp-protocol-version"]  # read as the session's own
        served = await client.http.post(client.url, json=message, headers=absent)
        assert served.status_code == 200
        modern = client.headers(**{"mcp-protocol-version": "2026-07-28"})
        slip = await client.http.post(client.url, json=message, headers=modern)
        assert slip.status_code == 400  # a 2026-07-28 client without params._meta
        assert "_meta" in slip.json()["error"]["message"]


@pytest.mark.parametrize("serve", LOOPS)
async def test_delete_ends_the_session(serve: Serving) -> None:
    async with session_on(serve) as client:
        await client.initialize()
        headers = client.headers()
        ended = await client.http.delete(client.url, headers=headers)
        assert ended.status_code == 200
        again = await client.http.delete(client.url, headers=headers)
        assert again.status_code == 404
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        gone = await client.http.post(client.url, json=message, headers=headers)
        assert gone.status_code == 404
        del headers["mcp-session-id"]
        assert (await client.http.delete(client.url, headers=headers)).status_code == 400


@pytest.mark.parametrize("serve", LOOPS)
async def test_a_session_is_its_principals_only(serve: Serving) -> None:
    def authenticate(headers: Any) -> str:
        return str(headers.get("authorization", "anyone"))

    async with session_on(serve, authenticate=authenticate) as alice:
        alice.extra = {"authorization": "alice"}
        await alice.initialize()
        bob = LegacyHttpClient(alice.http, alice.url, headers={"authorization": "bob"})
        bob.session_id = alice.session_id
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        stolen = await bob.http.post(bob.url, json=message, headers=bob.headers())
        assert stolen.status_code == 404
        assert (await alice.request("tools/list"))["result"]["tools"]


@pytest.mark.parametrize("serve", LOOPS)
async def test_the_servers_questions_go_out_on_the_post_stream(serve: Serving) -> None:
    async with session_on(serve) as client:
        await client.initialize(elicitation={"form": {}}, sampling={})
        asked: list[str] = []

        async def answer(request: dict[str, Any]) -> None:
            asked.append(request["method"])
            if request["method"] == "elicitation/create":
                result: dict[str, Any] = {"action": "accept", "content": {"name": "Ann"}}
            else:
                content = {"type": "text", "text": "roses"}
                result = {"role": "assistant", "content": content, "model": "m"}
            sent = await client.respond(request["id"], result)
            assert sent.status_code == 202

        called = await client.request("tools/call", {"name": "ask"}, on_request=answer)
        assert asked == ["elicitation/create", "sampling/createMessage"]
        assert called["result"]["content"][0]["text"] == "asked Ann: roses"


@pytest.mark.parametrize("serve", LOOPS)
async def test_cancelled_from_another_post_ends_a_request_that_waits(serve: Serving) -> None:
    async with session_on(serve) as client:
        await client.initialize(elicitation={"form": {}}, sampling={})
        message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask"}}
        async with client.http.stream(
            "POST", client.url, json=message, headers=client.headers()
        ) as answer:
            events = sse_events(answer)
            priming = await anext(events)  # 2025-11-25: an id, and no data
            assert priming["data"] == "" and priming["id"]
            first = await anext(events)
            assert '"elicitation/create"' in first["data"]
            params = {"requestId": 7, "reason": "changed my mind"}
            cancelled = await client.notify("notifications/cancelled", params)
            assert cancelled.status_code == 202
            rest = [event async for event in events]
        assert all('"id":7' not in event.get("data", "") for event in rest)


@pytest.mark.parametrize("serve", LOOPS)
async def test_logs_and_progress_reach_the_post_stream(serve: Serving) -> None:
    async with session_on(serve) as client:
        await client.initialize()
        assert (await client.request("logging/setLevel", {"level": "warning"}))["result"] == {}
        params = {"name": "chatty", "_meta": {"progressToken": "p1"}}
        called = await client.request("tools/call", params)
        methods = [message["method"] for message in called["notifications"]]
        assert methods == ["notifications/message", "notifications/progress"]
        assert called["notifications"][0]["params"]["level"] == "warning"
        assert called["notifications"][1]["params"]["progressToken"] == "p1"


async def test_a_change_another_server_made_to_the_session_is_read_here() -> None:
    """Two servers on one store serve one session, one request each in turn: the log level
    set through one is the level the other logs at (a server that read the session before
    does not keep its old copy), and a change back is seen too."""
    store = MemoryTaskStore()
    one, other = build_server(), build_server()
    one.use_store(store)
    other.use_store(store)
    async with (
        serving(one) as first_port,
        serving(other) as second_port,
        httpx.AsyncClient(timeout=10) as http,
    ):
        first = LegacyHttpClient(http, f"http://127.0.0.1:{first_port}/mcp")
        await first.initialize()
        second = LegacyHttpClient(http, f"http://127.0.0.1:{second_port}/mcp")
        second.session_id = first.session_id

        async def levels_logged(client: LegacyHttpClient) -> list[str]:
            called = await client.request("tools/call", {"name": "chatty"})
            notes = called["notifications"]
            return [note["params"]["level"] for note in notes if "level" in note["params"]]

        await first.request("logging/setLevel", {"level": "warning"})
        assert await levels_logged(second) == ["warning"]
        await first.request("logging/setLevel", {"level": "debug"})
        assert await levels_logged(second) == ["debug", "warning"]
        await second.request("logging/setLevel", {"level": "warning"})
        assert await levels_logged(first) == ["warning"]


@pytest.mark.parametrize("serve", LOOPS)
async def test_the_sessions_own_stream_is_the_newest_and_ends_with_it(serve: Serving) -> None:
    async with session_on(serve) as client:
        await client.initialize()
        plain = client.headers(accept="application/json")
        del plain["content-type"]
        not_sse = await client.http.get(client.url, headers=plain)
        assert not_sse.status_code == 406
        async with stream_of(client) as first:
            assert first.status_code == 200
            assert first.headers["content-type"] == "text/event-stream"
            async with stream_of(client) as second:  # a reconnection: it takes over
                assert second.status_code == 200
                with trio.fail_after(5):
                    assert [event async for event in sse_events(first)] == []
                ended = await client.http.delete(client.url, headers=client.headers())
                assert ended.status_code == 200
                with trio.fail_after(5):
                    assert [event async for event in sse_events(second)] == []


@pytest.mark.parametrize("serve", LOOPS)
async def test_a_modern_request_beside_the_session_ignores_its_id(serve: Serving) -> None:
    async with session_on(serve) as client:
        await client.initialize()
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "greet", "arguments": {"name": "Bo"}, "_meta": MODERN_META},
        }
        headers = client.headers(**{"mcp-protocol-version": "2026-07-28"})
        headers.update({"mcp-method": "tools/call", "mcp-name": "greet"})
        modern = await client.http.post(client.url, json=message, headers=headers)
        assert modern.status_code == 200
        assert modern.json()["result"]["resultType"] == "complete"
        assert "mcp-session-id" not in modern.headers


@pytest.mark.parametrize("serve", LOOPS)
async def test_sessions_are_capped_per_principal_and_end_when_idle(serve: Serving) -> None:
    now = [1_000_000.0]
    server = build_server()
    server._shared._clock = lambda: now[0]  # the sessions' wall clock, moved by the test
    server.http_sessions.limits = type(server.http_sessions.limits)(
        idle_seconds=60, max_per_principal=2
    )
    async with session_on(serve, server) as client:
        first = client
        await first.initialize()
        second = LegacyHttpClient(client.http, client.url)
        await second.initialize()
        third = await client.http.post(
            client.url,
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}}},
            headers={"accept": ACCEPT, "content-type": "application/json"},
        )  # fmt: skip
        assert third.status_code == 429
        now[0] += 59
        assert (await first.request("ping"))["result"] == {}
        now[0] += 59  # the first was used a minute ago, the second two
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        gone = await client.http.post(client.url, json=message, headers=second.headers())
        assert gone.status_code == 404
        assert (await first.request("tools/list"))["result"]["tools"]
        third_again = LegacyHttpClient(client.http, client.url)
        await third_again.initialize()  # room again: the idle one is gone


@pytest.mark.parametrize("serve", LOOPS)
async def test_modern_only_refuses_initialize_and_get(serve: Serving) -> None:
    server = build_server(legacy_sessions=False)
    async with session_on(serve, server) as client:
        opened = await client.http.post(
            client.url,
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}}},
            headers=client.headers(),
        )  # fmt: skip
        assert opened.status_code == 400
        assert opened.json()["error"]["code"] == -32022
        headers = {"accept": "text/event-stream"}
        assert (await client.http.get(client.url, headers=headers)).status_code == 405


async def test_the_sessions_stream_numbers_its_events_and_replays_what_was_missed() -> None:
    """(On trio only: the test sends through the server's own loop.)"""
    server = build_server()
    async with session_on(serving, server) as client:
        await client.initialize()
        assert client.session_id is not None
        sent = [b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'] * 3
        async with stream_of(client) as stream:
            events = sse_events(stream)
            await server.http_sessions.send(client.session_id, sent[0])
            await server.http_sessions.send(client.session_id, sent[1])
            first, second = await anext(events), await anext(events)
        assert (first["id"], second["id"]) == ("g1", "g2")
        assert first["data"].encode() == sent[0]
        await server.http_sessions.send(client.session_id, sent[2])  # while none is open
        async with stream_of(client, **{"last-event-id": "g1"}) as resumed:
            events = sse_events(resumed)
            missed = [await anext(events), await anext(events)]
        assert [event["id"] for event in missed] == ["g2", "g3"]


async def test_a_2025_11_25_session_runs_tasks_over_http() -> None:
    """The tasks utility over HTTP: a task created with `params.task`, polled, its question
    asked on the stream of `tasks/result` and answered by another POST, its status told on
    the session's own stream, listed, and a cancelled one."""
    gate = trio.Event()
    server = tasks_server(gate)
    async with session_on(serving, server) as client:
        await client.initialize(elicitation={"form": {}})
        async with stream_of(client) as stream:
            events = sse_events(stream)
            created = await client.request(
                "tools/call", {"name": "confirm", "arguments": {}, "task": {"ttl": 60000}}
            )
            task = created["result"]["task"]
            assert task["status"] == "working"
            task_id = task["taskId"]

            async def answer(request: dict[str, Any]) -> None:
                assert request["method"] == "elicitation/create"
                related = request["params"]["_meta"]["io.modelcontextprotocol/related-task"]
                assert related == {"taskId": task_id}
                sent = await client.respond(
                    request["id"], {"action": "accept", "content": {"value": True}}
                )
                assert sent.status_code == 202

            result = await client.request("tasks/result", {"taskId": task_id}, on_request=answer)
            assert result["result"]["content"][0]["text"] == "confirmed: {'value': True}"
            got = (await client.request("tasks/get", {"taskId": task_id}))["result"]
            assert got["status"] == "completed"
            statuses = []
            with trio.fail_after(5):
                while "completed" not in statuses:
                    event = await anext(events)
                    message = json.loads(event["data"])
                    assert message["method"] == "notifications/tasks/status"
                    statuses.append(message["params"]["status"])
        # each change as the follower read it: "working" between may be passed over
        assert statuses[0] == "input_required" and statuses[-1] == "completed"
        assert set(statuses) <= {"input_required", "working", "completed"}
        slow = await client.request("tools/call", {"name": "slow", "task": {}})
        slow_id = slow["result"]["task"]["taskId"]
        cancelled = await client.request("tasks/cancel", {"taskId": slow_id})
        assert cancelled["result"]["status"] == "cancelled"
        listed = await client.request("tasks/list")
        assert [t["taskId"] for t in listed["result"]["tasks"]] == [task_id, slow_id]


async def test_session_streams_are_capped_in_a_process() -> None:
    server = build_server()
    server.http_sessions.limits = type(server.http_sessions.limits)(max_streams=1)
    async with session_on(serving, server) as first:
        await first.initialize()
        second = LegacyHttpClient(first.http, first.url)
        await second.initialize()
        async with stream_of(first) as open_one:
            assert open_one.status_code == 200
            async with stream_of(second) as refused:
                assert refused.status_code == 503
                await refused.aread()
            async with stream_of(first) as again:  # the same session's: it takes over
                assert again.status_code == 200
        with trio.fail_after(5):  # the server sees the client close them (at its next tick)
            while server.http_sessions.streams_open:
                await trio.sleep(0.01)
        async with stream_of(second) as room:  # both ended: room again
            assert room.status_code == 200


async def test_a_session_store_outage_is_a_retryable_503() -> None:
    """The sessions are in the store: while it cannot be reached, a session's request is
    503 with `Retry-After` (and the server goes on serving), not a crash."""
    with running_redis() as url:
        server = Server("outage", "1.0", store=RedisTaskStore(url))
        async with session_on(serving, server) as client:
            await client.initialize()
            redis_client = redis.Redis.from_url(url)
            await trio.to_thread.run_sync(lambda: redis_client.shutdown(nosave=True))
            message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            refused = await client.http.post(client.url, json=message, headers=client.headers())
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["data"] == {"retryAfterMs": 1000}


@pytest.mark.parametrize("serve", LOOPS)
async def test_a_2025_03_26_session_may_post_a_batch(serve: Serving) -> None:
    async with session_on(serve) as client:
        client.version = "2025-03-26"
        await client.initialize()
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "greet", "arguments": {"name": "Bo"}}},
        ]  # fmt: skip
        answered = await client.http.post(client.url, json=batch, headers=client.headers())
        assert answered.status_code == 200
        assert [reply["id"] for reply in answered.json()] == [1, 2]
        assert answered.json()[1]["result"]["content"][0]["text"] == "Hello, Bo!"
        notices = [{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}] * 2
        accepted = await client.http.post(client.url, json=notices, headers=client.headers())
        assert accepted.status_code == 202
        newer = LegacyHttpClient(client.http, client.url)
        await newer.initialize()  # 2025-11-25: no batches
        refused = await client.http.post(client.url, json=batch, headers=newer.headers())
        assert refused.status_code == 400
        assert "2025-03-26" in refused.json()["error"]["message"]
