"""A client of the 2025 revisions over stdio: it opens with `initialize`, and the process is
its session (`core.legacy`, `runtime._sessions`). The same process answers 2026-07-28
requests statelessly beside it.

Raw JSON-RPC lines on memory streams (`stdio_session`); the real legacy clients are in
tests/interop.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from schema_check import check_legacy
from test_stdio import Peer, stdio_session
from trio.testing import MockClock

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    CreateMessageParams,
    CreateMessageRequest,
    ElicitParams,
    ElicitRequest,
    InputRequired,
    SamplingMessage,
    Server,
    ServerOptions,
    ToolContext,
    ToolOutcome,
)

MODERN_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
MODERN_ONLY_KEYS = {"resultType", "ttlMs", "cacheScope", "_meta"}
LEGACY_CHECKED = {"initialize", "ping", "logging/setLevel", "tools/list", "tools/call"}
"""Requests whose replies are checked against the 2025-11-25 schema (the others of these
tests are 2026-07-28 requests, or refused)."""


def build_server(**options: Any) -> Server:
    server = Server("legacy-jobs", "1.0", options=ServerOptions(**options))

    @server.tool()
    async def greet(ctx: ToolContext, name: str) -> str:
        """Says hello."""
        return f"Hello, {name}!"

    @server.tool()
    async def chatty(ctx: ToolContext) -> str:
        """Logs at two levels and reports progress."""
        await ctx.log("debug", "a detail")
        await ctx.log("warning", "a warning")
        await ctx.report_progress(1, 2, "half")
        return "said"

    @server.tool()
    async def ask(ctx: ToolContext) -> ToolOutcome:
        """Asks the user (an input round), then the model; the name kept in its state."""
        poem = ctx.sample_response("poem")
        if poem is not None:
            return CallToolResult.text(f"asked {ctx.handler_state}: {poem.content['text']}")
        name = ctx.elicit_response("name")
        if name is None:
            schema = {"type": "object", "properties": {"name": {"type": "string"}}}
            params = ElicitParams(message="Your name?", mode="form", requested_schema=schema)
            return InputRequired(requests={"name": ElicitRequest(params=params)})
        assert name.content is not None
        ask_model = CreateMessageParams(
            messages=[SamplingMessage(role="user", content={"type": "text", "text": "A poem"})],
            max_tokens=50,
        )
        requests = {"poem": CreateMessageRequest(params=ask_model)}
        return InputRequired(requests=requests, state=str(name.content["name"]))

    @server.tool(task_support="required")
    async def only_as_task(ctx: ToolContext) -> ToolOutcome:
        """Runs only as a task."""
        return START_TASK

    @server.tool(task_support="optional")
    async def maybe_task(ctx: ToolContext) -> ToolOutcome:
        """A task for a client that holds one, in place otherwise."""
        if not ctx.in_task:
            return START_TASK
        return "done in place"  # type: ignore[return-value]

    return server


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


async def request(
    peer: Peer, method: str, params: dict[str, Any] | None = None, request_id: Any = 1
) -> dict[str, Any]:
    """Send a request; the notifications before its reply are in `["notifications"]`."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    await peer.write(line(message))
    before = []
    while True:
        got = await peer.receive()
        if got.get("id") == request_id and "method" not in got:
            if method in LEGACY_CHECKED:
                check_legacy(method, got)
            got["notifications"] = before
            return got
        check_legacy(None, got)
        before.append(got)


async def server_message(peer: Peer) -> dict[str, Any]:
    """The next message, a request or notification of the server's own (schema-checked)."""
    got = await peer.receive()
    check_legacy(None, got)
    return got


async def initialize(
    peer: Peer, version: str = "2025-11-25", **capabilities: Any
) -> dict[str, Any]:
    reply = await request(
        peer,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": capabilities,
            "clientInfo": {"name": "legacy-test", "version": "0.1"},
        },
        request_id=0,
    )
    await peer.write(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    return reply


async def test_initialize_opens_a_session_with_what_the_server_offers() -> None:
    async with stdio_session(build_server(instructions="Be nice.")) as peer:
        reply = await initialize(peer)
        result = reply["result"]
        assert result["protocolVersion"] == "2025-11-25"
        assert result["serverInfo"] == {"name": "legacy-jobs", "version": "1.0"}
        assert result["instructions"] == "Be nice."
        assert result["capabilities"]["tools"] == {"listChanged": True}
        assert "logging" in result["capabilities"]
        assert result["capabilities"]["tasks"] == {  # the 2025 tasks utility
            "list": {},
            "cancel": {},
            "requests": {"tools": {"call": {}}},
        }
        assert not MODERN_ONLY_KEYS & set(result)


@pytest.mark.parametrize(
    ("asked", "given"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
        ("banana", "2025-11-25"),
    ],
)
async def test_the_version_is_echoed_when_served_and_counter_offered_otherwise(
    asked: str, given: str
) -> None:
    async with stdio_session(build_server()) as peer:
        assert (await initialize(peer, asked))["result"]["protocolVersion"] == given


async def test_tools_are_listed_and_called_in_the_sessions_wire() -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer)
        listed = (await request(peer, "tools/list", {}))["result"]
        assert not MODERN_ONLY_KEYS & set(listed)
        names = {tool["name"] for tool in listed["tools"]}
        assert {"greet", "chatty", "ask"} <= names
        for tool in listed["tools"]:
            assert tool["inputSchema"]["type"] == "object"
        called = await request(peer, "tools/call", {"name": "greet", "arguments": {"name": "A"}})
        assert called["result"] == {"content": [{"type": "text", "text": "Hello, A!"}]}
        in_place = await request(peer, "tools/call", {"name": "maybe_task", "arguments": {}})
        assert in_place["result"]["content"][0]["text"] == "done in place"


async def test_ping_is_answered_before_and_after_initialize() -> None:
    async with stdio_session(build_server()) as peer:
        assert (await request(peer, "ping"))["result"] == {}
        await initialize(peer)
        assert (await request(peer, "ping", request_id="p"))["result"] == {}


async def test_logs_follow_the_sessions_level_and_progress_its_token() -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer)
        quiet = await request(
            peer, "tools/call", {"name": "chatty", "arguments": {}, "_meta": {"progressToken": 7}}
        )
        assert [n["method"] for n in quiet["notifications"]] == ["notifications/progress"]
        assert quiet["notifications"][0]["params"]["progressToken"] == 7
        assert (await request(peer, "logging/setLevel", {"level": "info"}, 2))["result"] == {}
        loud = await request(peer, "tools/call", {"name": "chatty", "arguments": {}}, 3)
        logs = [
            n["params"] for n in loud["notifications"] if n["method"] == "notifications/message"
        ]
        assert [(log["level"], log["data"]) for log in logs] == [("warning", "a warning")]
        bad = await request(peer, "logging/setLevel", {"level": "loud"}, 4)
        assert bad["error"]["code"] == -32602


async def send(peer: Peer, message: dict[str, Any]) -> None:
    await peer.write(line({"jsonrpc": "2.0", **message}))


async def test_an_input_round_is_asked_as_the_servers_own_requests() -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer, elicitation={}, sampling={})
        await send(peer, {"id": 5, "method": "tools/call", "params": {"name": "ask"}})
        asked = await server_message(peer)
        assert asked["method"] == "elicitation/create"
        assert asked["params"]["message"] == "Your name?" and asked["params"]["mode"] == "form"
        await send(
            peer, {"id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
        )
        sampled = await server_message(peer)
        assert sampled["method"] == "sampling/createMessage" and sampled["id"] != asked["id"]
        poem = {"role": "assistant", "content": {"type": "text", "text": "roses"}, "model": "m"}
        await send(peer, {"id": sampled["id"], "result": poem})
        reply = await peer.receive()
        check_legacy("tools/call", reply)
        assert reply["id"] == 5
        assert reply["result"] == {"content": [{"type": "text", "text": "asked Ada: roses"}]}


async def test_a_2025_06_18_client_gets_form_elicitation_without_a_mode() -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer, "2025-06-18", elicitation={})
        await send(peer, {"id": 5, "method": "tools/call", "params": {"name": "ask"}})
        asked = await peer.receive()
        assert asked["method"] == "elicitation/create" and "mode" not in asked["params"]


async def test_an_error_answer_fails_the_call_naming_what_was_asked() -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer, elicitation={})
        await send(peer, {"id": 5, "method": "tools/call", "params": {"name": "ask"}})
        asked = await peer.receive()
        await send(peer, {"id": asked["id"], "error": {"code": -1, "message": "user refused"}})
        reply = await peer.receive()
        assert reply["result"]["isError"] is True
        text = reply["result"]["content"][0]["text"]
        assert "elicitation/create" in text and "user refused" in text


async def test_a_request_cancelled_while_it_asks_gets_no_response() -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer, elicitation={})
        await send(peer, {"id": 5, "method": "tools/call", "params": {"name": "ask"}})
        asked = await peer.receive()
        cancel = {"method": "notifications/cancelled", "params": {"requestId": 5}}
        await send(peer, cancel)
        assert (await request(peer, "ping", request_id=6))["notifications"] == []
        late = {"id": asked["id"], "result": {"action": "accept", "content": {"name": "x"}}}
        await send(peer, late)  # too late: nobody waits for it, and nothing answers it
        assert (await request(peer, "ping", request_id=7))["notifications"] == []
        assert await peer.nothing_within(0.2)


async def test_what_a_session_cannot_do_yet_is_said_plainly() -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer)  # no elicitation: the core refuses to ask, as for any client
        asked = await request(peer, "tools/call", {"name": "ask", "arguments": {}})
        assert "error" in asked or asked["result"]["isError"] is True
        task_only = await request(peer, "tools/call", {"name": "only_as_task", "arguments": {}}, 2)
        assert task_only["error"]["code"] == -32601
        unknown = await request(peer, "tasks/get", {"taskId": "x"}, 3)
        assert unknown["error"]["code"] == -32602 and "Unknown task" in unknown["error"]["message"]
        again = await request(peer, "initialize", {"protocolVersion": "2025-11-25"}, 4)
        assert again["error"]["code"] == -32600


async def test_modern_requests_are_served_statelessly_beside_the_session() -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer)
        modern = await request(
            peer, "tools/call", {"name": "greet", "arguments": {"name": "B"}, "_meta": MODERN_META}
        )
        assert modern["result"]["resultType"] == "complete"  # the modern wire, untouched


async def test_without_initialize_a_claimless_request_gets_the_modern_answer() -> None:
    async with stdio_session(build_server()) as peer:
        reply = await request(peer, "tools/call", {"name": "greet", "arguments": {"name": "C"}})
        assert reply["error"]["code"] == -32602
        assert "_meta" in reply["error"]["message"]


async def test_a_modern_only_server_refuses_initialize_naming_its_versions() -> None:
    async with stdio_session(build_server(legacy_sessions=False)) as peer:
        reply = await request(peer, "initialize", {"protocolVersion": "2025-11-25"})
        assert reply["error"]["code"] == -32022
        assert reply["error"]["data"]["supported"] == ["2026-07-28"]


async def test_a_client_that_leaves_while_asked_ends_the_wait(autojump_clock: MockClock) -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer, elicitation={})
        await send(peer, {"id": 5, "method": "tools/call", "params": {"name": "ask"}})
        await server_message(peer)
        await peer.stdin.aclose()  # EOF: nobody is left to answer
        reply = await peer.receive()
        assert reply["result"]["isError"] is True
        assert "the client went away" in reply["result"]["content"][0]["text"]
        await peer.finished.wait()
        assert peer.finished_after < 1  # not the ten minutes a question may wait


async def test_a_request_that_asks_without_end_is_refused_after_sixteen_rounds() -> None:
    server = build_server()

    @server.tool()
    async def insatiable(ctx: ToolContext) -> ToolOutcome:
        """Asks again, whatever the answer."""
        round_ = int(ctx.handler_state or 0) + 1
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        params = ElicitParams(message=f"Round {round_}?", mode="form", requested_schema=schema)
        return InputRequired(requests={"name": ElicitRequest(params=params)}, state=str(round_))

    async with stdio_session(server) as peer:
        await initialize(peer, elicitation={"form": {}})
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "insatiable"}}
        await peer.write(line(call))
        rounds = 0
        while True:
            got = await peer.receive()
            if got.get("id") == 5 and "method" not in got:
                break
            assert got["method"] == "elicitation/create"
            rounds += 1
            answer = {"action": "accept", "content": {"name": "Ann"}}
            await send(peer, {"jsonrpc": "2.0", "id": got["id"], "result": answer})
        assert rounds == 16
        assert got["result"]["isError"] is True
        assert "more than 16 rounds" in got["result"]["content"][0]["text"]


async def test_a_2025_03_26_session_may_send_a_batch() -> None:
    """2025-03-26 (and it alone) lets a client send a JSON array of messages: each is
    answered as if it came alone, the replies in one array (none for notifications)."""
    async with stdio_session(build_server()) as peer:
        await initialize(peer, version="2025-03-26")
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "greet", "arguments": {"name": "Bo"}}},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": MODERN_META}},
        ]  # fmt: skip
        await peer.write(json.dumps(batch).encode() + b"\n")
        replies = await peer.receive_raw()
        assert [reply.get("id") for reply in replies] == [1, 2, None]
        assert replies[0]["result"] == {}
        assert replies[1]["result"]["content"] == [{"type": "text", "text": "Hello, Bo!"}]
        assert replies[2]["error"]["code"] == -32600  # a 2026-07-28 request is never batched
        assert "batch" in replies[2]["error"]["message"]


async def test_only_a_2025_03_26_session_may_batch() -> None:
    async with stdio_session(build_server()) as peer:
        await initialize(peer)  # 2025-11-25
        await peer.write(
            json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]).encode() + b"\n"
        )
        refused = await peer.receive()
        assert refused["error"]["code"] == -32600
