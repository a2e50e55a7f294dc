"""The 2025-11-25 tasks utility over stdio: a 2025-11-25 client creates tasks with
`params.task`, polls them (`tasks/get`), reads them (`tasks/result`, which waits, and asks
a task's questions on its own stream), lists and cancels them, and hears of their status
(`notifications/tasks/status`). Every message the server sends is checked against the
official 2025-11-25 schema.

Raw JSON-RPC lines on memory streams, the server in this process (`stdio_session`), so
the tools can be held at a gate (a trio event) until the test lets them go.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from schema_check import check_legacy, check_reply
from test_stdio import Peer, Process, spawn, stdio_session
from test_stdio_legacy import MODERN_META, line
from trio.testing import MockClock

from mcp_tasks import (
    TASKS_EXTENSION,
    CallToolResult,
    Server,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.replay import replay

RELATED = "io.modelcontextprotocol/related-task"


def build_server(gate: trio.Event) -> Server:
    server = Server("legacy-tasks", "1.0")

    @server.tool(task_support="required")
    async def slow(ctx: ToolContext) -> str:
        """Waits at the test's gate."""
        await gate.wait()
        return "slow done"

    @server.tool(task_support="optional")
    async def maybe(ctx: ToolContext) -> str:
        """Says where it ran."""
        return "inside a task" if ctx.task_id is not None else "in place"

    @server.tool()
    async def plain(ctx: ToolContext) -> str:
        """Never a task."""
        return "plain"

    @server.tool(task_support="required")
    async def confirm(ctx: ToolContext) -> str:
        """Asks the user, inside its task."""
        answer = await ctx.elicit("Delete report.txt?", bool)
        return f"confirmed: {answer.content}"

    @server.tool(task_support="required")
    async def refusing(ctx: ToolContext) -> ToolOutcome:
        """A tool error (`isError`)."""
        return CallToolResult.text("no way", is_error=True)

    @server.tool(task_support="required")
    async def broken(ctx: ToolContext) -> ToolOutcome:
        """Raises."""
        raise RuntimeError("boom")

    return server


class Client:
    """A 2025-11-25 client on the peer's lines: its requests' replies, the server's
    requests and notifications kept apart; everything schema-checked."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.statuses: list[dict[str, Any]] = []
        self.asked: list[dict[str, Any]] = []
        self.replies: dict[Any, dict[str, Any]] = {}
        self.methods: dict[Any, str] = {}
        self.capabilities: dict[str, Any] = {}
        self.modern: dict[Any, str] = {}
        """Requests sent as a 2026-07-28 client: their replies are checked against its schema."""

    async def send(self, message: dict[str, Any]) -> None:
        await self.peer.write(line({"jsonrpc": "2.0", **message}))

    async def start(self, method: str, params: dict[str, Any], request_id: Any) -> None:
        self.methods[request_id] = method
        await self.send({"id": request_id, "method": method, "params": params})

    async def _next(self) -> None:
        message = await self.peer.receive()
        if "method" not in message:
            if message["id"] in self.modern:
                check_reply(self.modern[message["id"]], json.dumps(message).encode())
            else:
                check_legacy(self.methods[message["id"]], message)
            self.replies[message["id"]] = message
            return
        check_legacy(None, message)
        if message["method"] == "notifications/tasks/status":
            assert RELATED not in message["params"].get("_meta", {})
            self.statuses.append(message["params"])
        else:
            self.asked.append(message)

    async def reply(self, request_id: Any) -> dict[str, Any]:
        while request_id not in self.replies:
            await self._next()
        return self.replies.pop(request_id)

    async def call(self, method: str, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
        await self.start(method, params, request_id)
        return await self.reply(request_id)

    async def server_request(self) -> dict[str, Any]:
        while not self.asked:
            await self._next()
        return self.asked.pop(0)

    async def status(self, task_id: str, status: str) -> dict[str, Any]:
        """The status notification saying `task_id` is `status` (waiting for it)."""
        while True:
            for task in self.statuses:
                if task["taskId"] == task_id and task["status"] == status:
                    return task
            await self._next()

    async def create(self, tool: str, request_id: Any, **params: Any) -> str:
        created = await self.call(
            "tools/call",
            {"name": tool, "arguments": {}, "task": {"ttl": 60000}, **params},
            request_id,
        )
        task = created["result"]["task"]
        assert task["status"] == "working" and set(created["result"]) == {"task"}
        return str(task["taskId"])


async def opened(peer: Peer, version: str = "2025-11-25", **capabilities: Any) -> Client:
    client = Client(peer)
    initialized = await client.call(
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": capabilities,
            "clientInfo": {"name": "tasks-test", "version": "0.1"},
        },
        0,
    )
    assert initialized["result"]["protocolVersion"] == version
    client.capabilities = initialized["result"]["capabilities"]
    await client.send({"method": "notifications/initialized"})
    return client


async def test_tools_say_how_they_run_as_tasks() -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer)
        tools = (await client.call("tools/list", {}, 1))["result"]["tools"]
        support = {tool["name"]: tool.get("execution", {}).get("taskSupport") for tool in tools}
        assert support["slow"] == "required" and support["maybe"] == "optional"
        assert support["plain"] is None  # forbidden, the default


async def test_a_task_is_created_polled_and_read_when_it_ends() -> None:
    gate = trio.Event()
    async with stdio_session(build_server(gate)) as peer:
        client = await opened(peer)
        task_id = await client.create("slow", 1)
        got = (await client.call("tasks/get", {"taskId": task_id}, 2))["result"]
        assert got["taskId"] == task_id and got["status"] == "working"
        assert got["ttl"] == 600_000 and "ttlMs" not in got and "resultType" not in got
        assert {"createdAt", "lastUpdatedAt", "pollInterval"} <= set(got)
        await client.start("tasks/result", {"taskId": task_id}, 3)
        assert await peer.nothing_within(0.1)  # it waits for the end
        gate.set()
        result = (await client.reply(3))["result"]
        assert result["content"] == [{"type": "text", "text": "slow done"}]
        assert result["_meta"] == {RELATED: {"taskId": task_id}}
        assert "resultType" not in result
        done = await client.status(task_id, "completed")
        assert done["taskId"] == task_id and done["ttl"] == 600_000
        again = await client.call("tasks/result", {"taskId": task_id}, 4)  # at once now
        assert again["result"]["content"][0]["text"] == "slow done"


async def test_how_each_tool_takes_params_task() -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer)
        task_id = await client.create("maybe", 1)  # optional: a task when asked for one
        result = (await client.call("tasks/result", {"taskId": task_id}, 2))["result"]
        assert result["content"][0]["text"] == "inside a task"
        in_place = await client.call("tools/call", {"name": "maybe", "arguments": {}}, 3)
        assert in_place["result"]["content"][0]["text"] == "in place"
        forbidden = await client.call(
            "tools/call", {"name": "plain", "arguments": {}, "task": {}}, 4
        )
        assert forbidden["error"]["code"] == -32601 and "plain" in forbidden["error"]["message"]
        required = await client.call("tools/call", {"name": "slow", "arguments": {}}, 5)
        assert required["error"]["code"] == -32601
        bad = await client.call("tools/call", {"name": "slow", "arguments": {}, "task": 5}, 6)
        assert bad["error"]["code"] == -32602


async def test_unknown_task_ids_are_invalid_params() -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer)
        for number, method in enumerate(("tasks/get", "tasks/result", "tasks/cancel"), 1):
            reply = await client.call(method, {"taskId": "tsk_nope"}, number)
            assert reply["error"]["code"] == -32602, method
        missing = await client.call("tasks/get", {}, 9)
        assert missing["error"]["code"] == -32602


async def test_a_cancelled_task_stays_cancelled_and_has_no_result() -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer)
        task_id = await client.create("slow", 1)
        cancelled = (await client.call("tasks/cancel", {"taskId": task_id}, 2))["result"]
        assert cancelled["taskId"] == task_id and cancelled["status"] == "cancelled"
        again = await client.call("tasks/cancel", {"taskId": task_id}, 3)
        assert again["error"]["code"] == -32602 and "cancelled" in again["error"]["message"]
        result = await client.call("tasks/result", {"taskId": task_id}, 4)
        assert "error" in result and "cancelled" in result["error"]["message"]
        await client.status(task_id, "cancelled")


async def test_tool_errors_and_failures_fail_the_task() -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer)
        refusing = await client.create("refusing", 1)
        result = (await client.call("tasks/result", {"taskId": refusing}, 2))["result"]
        assert result["isError"] is True and result["content"][0]["text"] == "no way"
        got = (await client.call("tasks/get", {"taskId": refusing}, 3))["result"]
        assert got["status"] == "failed"  # isError: failed in 2025-11-25 (completed in 2026)
        broken = await client.create("broken", 4)
        error = (await client.call("tasks/result", {"taskId": broken}, 5))["error"]
        assert error["code"] == -32603 and "broken" in error["message"]
        cancel = await client.call("tasks/cancel", {"taskId": broken}, 6)
        assert cancel["error"]["code"] == -32602  # ended already


async def test_a_tasks_question_is_asked_on_the_stream_of_tasks_result() -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer, elicitation={"form": {}})
        task_id = await client.create("confirm", 1)
        waiting = await client.status(task_id, "input_required")
        assert waiting["taskId"] == task_id
        got = (await client.call("tasks/get", {"taskId": task_id}, 2))["result"]
        assert got["status"] == "input_required" and "inputRequests" not in got
        await client.start("tasks/result", {"taskId": task_id}, 3)
        asked = await client.server_request()
        assert asked["method"] == "elicitation/create"
        assert asked["params"]["_meta"] == {RELATED: {"taskId": task_id}}
        assert asked["params"]["message"] == "Delete report.txt?"
        answer = {"action": "accept", "content": {"value": True}, "_meta": asked["params"]["_meta"]}
        await client.send({"id": asked["id"], "result": answer})
        result = (await client.reply(3))["result"]
        assert result["content"][0]["text"] == "confirmed: {'value': True}"
        assert result["_meta"] == {RELATED: {"taskId": task_id}}
        await client.status(task_id, "completed")


async def test_tasks_list_pages_through_the_sessions_own_tasks(autojump_clock: MockClock) -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer)
        created = [await client.create("slow", f"c{n}") for n in range(55)]
        first = (await client.call("tasks/list", {}, 1))["result"]
        assert [task["taskId"] for task in first["tasks"]] == created[:50]
        second = (await client.call("tasks/list", {"cursor": first["nextCursor"]}, 2))["result"]
        assert [task["taskId"] for task in second["tasks"]] == created[50:]
        assert "nextCursor" not in second
        bad = await client.call("tasks/list", {"cursor": "not-ours"}, 3)
        assert bad["error"]["code"] == -32602


async def test_a_task_is_seen_only_by_the_era_that_made_it(autojump_clock: MockClock) -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer)
        legacy_task = await client.create("slow", 1)
        modern_meta = {
            **MODERN_META,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
        }
        modern_get = {"taskId": legacy_task, "_meta": modern_meta}
        client.modern.update({2: "tasks/get", 3: "tools/call"})
        await client.send({"id": 2, "method": "tasks/get", "params": modern_get})
        assert (await client.reply(2))["error"]["code"] == -32602
        call = {"name": "slow", "arguments": {}, "_meta": modern_meta}
        await client.send({"id": 3, "method": "tools/call", "params": call})
        modern_task = (await client.reply(3))["result"]["taskId"]
        legacy_get = await client.call("tasks/get", {"taskId": modern_task}, 4)
        assert legacy_get["error"]["code"] == -32602


async def test_a_cancelled_tasks_result_gets_no_response(autojump_clock: MockClock) -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer)
        task_id = await client.create("slow", 1)
        await client.start("tasks/result", {"taskId": task_id}, 2)
        await client.send({"method": "notifications/cancelled", "params": {"requestId": 2}})
        assert (await client.call("ping", {}, 3))["result"] == {}
        assert await peer.nothing_within(5)
        assert 2 not in client.replies
        still = (await client.call("tasks/get", {"taskId": task_id}, 4))["result"]
        assert still["status"] == "working"  # the task is the client's to cancel, not the wait


async def test_a_client_that_leaves_ends_the_wait(autojump_clock: MockClock) -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer)
        task_id = await client.create("slow", 1)
        await client.start("tasks/result", {"taskId": task_id}, 2)
        assert await peer.nothing_within(1)
        await peer.stdin.aclose()
        await peer.finished.wait()
        assert peer.finished_after < 5


async def test_older_revisions_have_no_tasks() -> None:
    async with stdio_session(build_server(trio.Event())) as peer:
        client = await opened(peer, "2025-06-18")
        assert "tasks" not in client.capabilities
        reply = await client.call("tools/call", {"name": "maybe", "arguments": {}, "task": {}}, 1)
        assert reply["result"]["content"][0]["text"] == "in place"  # params.task ignored
        tasks_get = await client.call("tasks/get", {"taskId": "x"}, 2)
        assert tasks_get["error"]["code"] == -32601


async def test_a_recorded_session_with_tasks_replays(tmp_path: Path) -> None:
    journal = tmp_path / "legacy-tasks.jsonl"
    gate = trio.Event()
    server = build_server(gate)
    server.record(journal)
    async with stdio_session(server) as peer:
        client = await opened(peer, elicitation={})
        slow_id = await client.create("slow", 1)
        confirm_id = await client.create("confirm", 2)
        await client.status(confirm_id, "input_required")
        await client.start("tasks/result", {"taskId": confirm_id}, 3)
        asked = await client.server_request()
        await client.send({"id": asked["id"], "result": {"action": "decline"}})
        assert "confirmed" in (await client.reply(3))["result"]["content"][0]["text"]
        gate.set()
        await client.call("tasks/result", {"taskId": slow_id}, 4)
        await client.call("tasks/list", {}, 5)
        await client.call("tasks/cancel", {"taskId": slow_id}, 6)
    result = replay(journal)
    assert result.calls > 10 and {slow_id, confirm_id} <= result.tasks


class _ProcessLines:
    """A real server process's pipes, read and written as `Client` reads a `Peer`."""

    def __init__(self, process: Process) -> None:
        self.process = process

    async def write(self, data: bytes) -> None:
        await self.process.stdin.send_all(data)

    async def receive(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(await self.process.read_line())
        return message


async def test_a_real_serve_process_runs_2025_tasks_and_their_questions() -> None:
    async with spawn("serve", "examples/jobs.py", "--stdio") as child:
        client = await opened(_ProcessLines(child), elicitation={})  # type: ignore[arg-type]
        computed = await client.create("slow_compute", 1, arguments={"seconds": 0.2})
        result = (await client.call("tasks/result", {"taskId": computed}, 2))["result"]
        assert result["content"][0]["text"] == "job done after 0.2s"
        deleting = await client.create("confirm_delete", 3, arguments={"filename": "report.txt"})
        waiting = await client.status(deleting, "input_required")
        assert waiting["statusMessage"] == "Waiting for yes/no"
        await client.start("tasks/result", {"taskId": deleting}, 4)
        asked = await client.server_request()
        assert asked["params"]["_meta"] == {RELATED: {"taskId": deleting}}
        answer = {"action": "accept", "content": {"confirm": True}}
        await client.send({"id": asked["id"], "result": answer})
        deleted = (await client.reply(4))["result"]
        assert deleted["content"][0]["text"] == "Deleted report.txt"
        listed = (await client.call("tasks/list", {}, 5))["result"]["tasks"]
        assert [task["taskId"] for task in listed] == [computed, deleting]
        assert await child.close_and_wait() == 0
