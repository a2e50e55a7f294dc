"""`subscriptions/listen` over real transports: SSE streams on 127.0.0.1 (the raw h11 client of
test_http), the stdio pump and the real `mcp-tasks serve --stdio` process; and the
`Mcp-Param-*` header checks over HTTP.

Every message is checked against the schemas. Waits are on events, on what the stream
carries and on end-of-file, each under `fail_after`; never a sleep that hopes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import h11
import pytest
import trio
import trio.testing
from runtime.helpers import check_message, check_notification, request
from schema_check import check_reply
from test_http import (
    TASKS_CAPS,
    HttpClient,
    Response,
    call,
    mcp_headers,
    rpc,
    serving,
    stoppable,
)
from test_stdio import cancelled, reply_ids, spawn, stdio_session
from test_stdio import line as stdio_line
from trio.testing import MockClock

from mcp_tasks import START_TASK, RequestContext, Server, ToolContext, ToolOutcome
from mcp_tasks.server import MAX_QUEUED_NOTIFICATIONS, Connection

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
LISTEN = "subscriptions/listen"


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """A client that goes away, or a stream the server ends, is no error."""
    yield
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [record.getMessage() for record in errors]


# --- servers -------------------------------------------------------------------------------


@dataclass
class Gates:
    step: trio.Event
    release: trio.Event


def listen_server() -> tuple[Server, Gates]:
    """Tools, a prompt and a resource, so every list kind is on offer."""
    server = Server("listen", "1.0", shutdown_grace_seconds=0.5)
    gates = Gates(trio.Event(), trio.Event())

    @server.tool()
    async def change_lists(ctx: ToolContext) -> str:
        server.notify_list_changed("prompts")
        server.notify_list_changed("resources")
        server.notify_list_changed("tools")
        return "changed"

    @server.tool(task_support="required")
    async def gated_job(ctx: ToolContext) -> ToolOutcome | str:
        if not ctx.in_task:
            return START_TASK
        await gates.step.wait()
        await ctx.set_status_message("halfway")
        await gates.release.wait()
        return "finished"

    @server.tool(task_support="required")
    async def quick_job(ctx: ToolContext) -> ToolOutcome | str:
        return "quick" if ctx.in_task else START_TASK

    @server.prompt()
    async def hello(ctx: RequestContext) -> str:
        return "hello"

    @server.resource("notes://today")
    async def today(ctx: RequestContext) -> str:
        return "today's notes"

    return server, gates


def tools_only_server() -> Server:
    server = Server("bare", "1.0", shutdown_grace_seconds=0.5)

    @server.tool()
    async def noop(ctx: ToolContext) -> str:
        return "ok"

    return server


# --- an SSE stream, read as it comes ---------------------------------------------------------


class Stream:
    """The answer to a listen request: its SSE events one at a time, as they arrive."""

    def __init__(self, client: HttpClient, request_id: str) -> None:
        self.client = client
        self.request_id = request_id
        self.buffer = b""
        self.ended = False

    async def next(self) -> dict[str, Any] | None:
        """The next message (None once the response has ended), schema-checked."""
        with trio.fail_after(5):
            while b"\n\n" not in self.buffer:
                if self.ended:
                    assert self.buffer == b"", f"a partial event at the end: {self.buffer!r}"
                    return None
                event = await self.client.next_event()
                if isinstance(event, h11.EndOfMessage):
                    self.ended = True
                else:
                    assert isinstance(event, h11.Data), event
                    self.buffer += event.data
        block, _, self.buffer = self.buffer.partition(b"\n\n")
        assert block.startswith(b"data: "), block
        message: dict[str, Any] = json.loads(block.removeprefix(b"data: "))
        if "method" in message:
            check_notification(message)
            assert message["params"]["_meta"][SUBSCRIPTION_ID] == self.request_id
        else:
            check_message(LISTEN, block.removeprefix(b"data: "))
        return message

    async def rest(self) -> list[dict[str, Any]]:
        """Every message up to the end of the response."""
        messages = []
        while (message := await self.next()) is not None:
            messages.append(message)
        return messages


async def listen(
    client: HttpClient,
    request_id: str,
    notifications: dict[str, Any],
    caps: dict[str, Any] | None = None,
) -> tuple[Stream, dict[str, Any]]:
    """Open a listen stream; its head and first event (the acknowledgement) are checked."""
    body = request(
        LISTEN, {"notifications": notifications}, caps=caps or TASKS_CAPS, request_id=request_id
    )
    headers = [("content-type", "application/json"), *mcp_headers(LISTEN)]
    with trio.fail_after(5):
        await client.send("POST", headers, body)
        head = await client.head()
    assert head.status_code == 200
    assert dict(head.headers)[b"content-type"] == b"text/event-stream"
    stream = Stream(client, request_id)
    ack = await stream.next()
    assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged"
    agreed: dict[str, Any] = ack["params"]["notifications"]
    return stream, agreed


def closing_response(message: dict[str, Any] | None, request_id: str) -> None:
    """The response that ends a stream gracefully."""
    assert message is not None and message["id"] == request_id, message
    assert message["result"]["resultType"] == "complete"
    assert message["result"]["_meta"][SUBSCRIPTION_ID] == request_id


async def until(predicate: Any) -> None:
    """Wait, checkpoint by checkpoint, until `predicate()` holds (5 s at most)."""
    with trio.fail_after(5):
        while not predicate():
            await trio.lowlevel.checkpoint()


# --- the stream over HTTP ------------------------------------------------------------------


async def test_listen_answers_with_an_sse_stream_that_starts_with_the_acknowledgement() -> None:
    server, _ = listen_server()
    async with serving(server) as port:
        client = await HttpClient.connect(port)
        wanted = {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": False,
            "resourceSubscriptions": ["notes://today", "notes://unknown", "notes://today"],
        }
        stream, agreed = await listen(client, "listen-1", wanted)
        assert agreed == {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourceSubscriptions": ["notes://today"],  # what exists, once
        }
        assert server.subscription_count == 1
        server.notify_resource_updated("notes://unknown")
        server.notify_resource_updated("notes://today")
        server.notify_list_changed("resources")  # not asked for
        server.end_subscriptions()
        *notes, last = await stream.rest()
        assert [(n["method"], n["params"].get("uri")) for n in notes] == [
            ("notifications/resources/updated", "notes://today")
        ]
        closing_response(last, "listen-1")
        assert server.subscription_count == 0
        assert (await rpc(client, "tools/list")).status == 200  # the connection carries on


async def test_only_the_kinds_the_server_offers_are_agreed() -> None:
    server = tools_only_server()
    async with serving(server) as port:
        client = await HttpClient.connect(port)
        wanted = {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": True,
        }
        stream, agreed = await listen(client, "listen-bare", wanted)
        assert agreed == {"toolsListChanged": True}
        server.notify_list_changed("prompts")
        server.end_subscriptions()
        (last,) = await stream.rest()
        closing_response(last, "listen-bare")


async def test_listening_for_tasks_needs_the_tasks_extension() -> None:
    server, _ = listen_server()
    async with serving(server) as port:
        client = await HttpClient.connect(port)
        params = {"notifications": {"taskIds": ["tsk_x"]}}
        response = await rpc(client, LISTEN, params, caps={})
        assert response.status == 400 and response.headers["content-type"] == "application/json"
        assert response.json()["error"]["code"] == -32021
        assert server.subscription_count == 0


async def test_a_list_change_made_on_another_connection_reaches_the_listener() -> None:
    server, _ = listen_server()
    async with serving(server) as port:
        listener, caller = await HttpClient.connect(port), await HttpClient.connect(port)
        stream, agreed = await listen(listener, "listen-tools", {"toolsListChanged": True})
        assert agreed == {"toolsListChanged": True}
        changed = await call(caller, "change_lists", {})
        assert changed.json()["result"]["content"][0]["text"] == "changed"
        first = await stream.next()  # prompts and resources changed first: not asked for
        assert first is not None and first["method"] == "notifications/tools/list_changed"

        @server.tool()
        async def added(ctx: ToolContext) -> str:
            return "new"

        added_note = await stream.next()
        assert added_note is not None
        assert added_note["method"] == "notifications/tools/list_changed"
        server.remove_prompt("hello")  # not asked for
        server.remove_tool("added")
        removed_note = await stream.next()
        assert removed_note is not None
        assert removed_note["method"] == "notifications/tools/list_changed"
        server.end_subscriptions()
        (last,) = await stream.rest()
        closing_response(last, "listen-tools")
        assert (await rpc(listener, "tools/list")).status == 200


async def start_and_listen(
    caller: HttpClient, listener: HttpClient, request_id: str
) -> tuple[str, Stream]:
    """Start `gated_job` and listen for it."""
    task_id: str = (await call(caller, "gated_job", {})).json()["result"]["taskId"]
    stream, agreed = await listen(listener, request_id, {"taskIds": [task_id]})
    assert agreed == {"taskIds": [task_id]}
    return task_id, stream


async def test_a_task_listener_sees_its_task_change_and_no_other() -> None:
    server, gates = listen_server()
    async with serving(server) as port:
        caller, listener = await HttpClient.connect(port), await HttpClient.connect(port)
        task_id, stream = await start_and_listen(caller, listener, "listen-tasks")
        other_id = (await call(caller, "quick_job", {})).json()["result"]["taskId"]
        with trio.fail_after(5):
            while True:  # each poll is a round trip: no sleep needed
                other = await rpc(caller, "tasks/get", {"taskId": other_id})
                if other.json()["result"]["status"] == "completed":
                    break
        gates.step.set()
        working = await stream.next()
        assert working is not None and working["method"] == "notifications/tasks"
        assert working["params"]["taskId"] == task_id  # the other task's changes were not sent
        assert working["params"]["status"] == "working"
        assert working["params"]["statusMessage"] == "halfway"
        assert "resultType" not in working["params"]
        polled = (await rpc(caller, "tasks/get", {"taskId": task_id})).json()["result"]
        assert {k: v for k, v in working["params"].items() if k != "_meta"} == {
            k: v for k, v in polled.items() if k not in ("_meta", "resultType")
        }
        await rpc(caller, "tasks/cancel", {"taskId": task_id})
        ended = await stream.next()
        assert ended is not None and ended["params"]["taskId"] == task_id
        assert ended["params"]["status"] == "cancelled"
        server.end_subscriptions()
        (last,) = await stream.rest()
        closing_response(last, "listen-tasks")


async def test_a_task_listener_is_told_when_its_task_completes() -> None:
    server, gates = listen_server()
    async with serving(server) as port:
        caller, listener = await HttpClient.connect(port), await HttpClient.connect(port)
        task_id, stream = await start_and_listen(caller, listener, "listen-done")
        gates.step.set()
        working = await stream.next()
        assert working is not None and working["params"]["status"] == "working"
        gates.release.set()
        done = await stream.next()
        assert done is not None and done["params"]["taskId"] == task_id
        assert done["params"]["status"] == "completed"
        assert done["params"]["result"]["content"] == [{"type": "text", "text": "finished"}]
        server.end_subscriptions()
        (last,) = await stream.rest()
        closing_response(last, "listen-done")


async def test_closing_the_listen_connection_removes_the_subscription() -> None:
    server, _ = listen_server()
    async with serving(server) as port:
        client = await HttpClient.connect(port)
        await listen(client, "listen-gone", {"toolsListChanged": True})
        assert server.subscription_count == 1
        await client.aclose()
        await until(lambda: server.subscription_count == 0)
        server.notify_list_changed("tools")  # nobody to tell: no error
        again = await HttpClient.connect(port)
        stream, _ = await listen(again, "listen-again", {"toolsListChanged": True})
        assert server.subscription_count == 1
        server.notify_list_changed("tools")
        note = await stream.next()
        assert note is not None and note["method"] == "notifications/tools/list_changed"
        assert note["params"]["_meta"][SUBSCRIPTION_ID] == "listen-again"


async def test_draining_ends_open_streams_with_the_closing_response_at_once() -> None:
    server, _ = listen_server()
    async with stoppable(server, drain_timeout_seconds=10.0) as (port, serve_scope, stopped):
        first, second = await HttpClient.connect(port), await HttpClient.connect(port)
        stream_one, _ = await listen(first, "drain-1", {"toolsListChanged": True})
        stream_two, _ = await listen(second, "drain-2", {"promptsListChanged": True})
        start = trio.current_time()
        serve_scope.cancel()
        closing_response((await stream_one.rest())[-1], "drain-1")
        closing_response((await stream_two.rest())[-1], "drain-2")
        with trio.fail_after(5):
            assert await first.rest_until_closed() == b""  # and the connection closes
            assert await second.rest_until_closed() == b""
            await stopped.wait()
        assert trio.current_time() - start < 2  # not the 10 s drain timeout
        assert server.subscription_count == 0


async def test_leaving_running_ends_the_streams_in_process() -> None:
    server, _ = listen_server()
    replies: list[Any] = []
    acknowledged = trio.Event()

    async def notify(body: bytes) -> None:
        check_notification(json.loads(body))
        acknowledged.set()

    async def listen_in_process() -> None:
        data = request(LISTEN, {"notifications": {"toolsListChanged": True}}, request_id="in")
        replies.append(await server.handle(data, notify=notify, connection=Connection()))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery, server.running():
            nursery.start_soon(listen_in_process)
            await acknowledged.wait()
    (reply,) = replies
    check_message(LISTEN, reply.body)
    closing_response(json.loads(reply.body), "in")


async def test_what_is_queued_before_the_end_goes_out_before_the_closing_response() -> None:
    server, _ = listen_server()
    sent: list[dict[str, Any]] = []
    gate = trio.Event()
    replies: list[Any] = []

    async def slow_notify(body: bytes) -> None:
        message = json.loads(body)
        check_notification(message)
        sent.append(message)
        if len(sent) == 2:  # the first list change takes a while to write
            await gate.wait()

    async def listen_in_process() -> None:
        data = request(LISTEN, {"notifications": {"toolsListChanged": True}}, request_id="q")
        replies.append(await server.handle(data, notify=slow_notify, connection=Connection()))

    with trio.fail_after(5):
        async with server.running(), trio.open_nursery() as nursery:
            nursery.start_soon(listen_in_process)
            await until(lambda: len(sent) == 1)
            server.notify_list_changed("tools")
            await until(lambda: len(sent) == 2)  # being written
            server.notify_list_changed("tools")  # queued while the first is written
            server.end_subscriptions()
            gate.set()
    closing_response(json.loads(replies[0].body), "q")
    assert [m["method"] for m in sent] == [
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
        "notifications/tools/list_changed",
    ]


async def test_a_listener_too_far_behind_has_its_stream_ended(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, _ = listen_server()
    sent: list[dict[str, Any]] = []
    gate = trio.Event()
    replies: list[Any] = []

    async def slow_notify(body: bytes) -> None:
        sent.append(json.loads(body))
        if len(sent) == 2:  # the client stops reading after the first list change
            await gate.wait()

    async def listen_in_process() -> None:
        data = request(LISTEN, {"notifications": {"toolsListChanged": True}}, request_id="slow")
        replies.append(await server.handle(data, notify=slow_notify, connection=Connection()))

    with trio.fail_after(5):
        async with server.running(), trio.open_nursery() as nursery:
            nursery.start_soon(listen_in_process)
            await until(lambda: len(sent) == 1)
            server.notify_list_changed("tools")
            await until(lambda: len(sent) == 2)  # being sent, and stuck there
            for _ in range(MAX_QUEUED_NOTIFICATIONS):
                server.notify_list_changed("tools")
            assert server.subscription_count == 1  # at the limit: still open
            assert not any("behind" in r.getMessage() for r in caplog.records)
            server.notify_list_changed("tools")  # one past it
            gate.set()
    (reply,) = replies
    assert reply is not None
    closing_response(json.loads(reply.body), "slow")
    assert server.subscription_count == 0
    assert any("fell" in r.getMessage() and "behind" in r.getMessage() for r in caplog.records)
    assert len(sent) <= 2 + MAX_QUEUED_NOTIFICATIONS


# --- Mcp-Param-* headers over HTTP ---------------------------------------------------------

REGIONAL_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
        "note": {"type": "string"},
    },
}


def regional_server() -> Server:
    server = Server("regional", "1.0", shutdown_grace_seconds=0.5)

    @server.tool(input_schema=REGIONAL_SCHEMA)
    async def regional(ctx: ToolContext, args: dict[str, Any]) -> str:
        return f"region={args.get('region')}"

    return server


@pytest.mark.parametrize(
    ("arguments", "params", "status", "words"),
    [
        ({"region": "eu-west"}, [("Mcp-Param-Region", "eu-west")], 200, []),
        (
            {"region": "eu", "count": 5, "dry": True, "note": "free"},
            [("Mcp-Param-Region", "eu"), ("Mcp-Param-Count", "5"), ("Mcp-Param-Dry-Run", "true")],
            200,
            [],
        ),
        ({"region": "Zürich"}, [("Mcp-Param-Region", "=?base64?WsO8cmljaA==?=")], 200, []),
        ({"region": "eu"}, [("MCP-PARAM-REGION", "eu")], 200, []),
        ({"note": "no header needed"}, [], 200, []),
        ({"region": "eu"}, [], 400, ["Mcp-Param-Region", "missing"]),
        ({"region": "eu"}, [("Mcp-Param-Region", "us")], 400, ["does not match"]),
        ({"region": "eu", "count": 5}, [("Mcp-Param-Region", "eu")], 400, ["Mcp-Param-Count"]),
        (
            {"region": "eu", "count": 5},
            [("Mcp-Param-Region", "eu"), ("Mcp-Param-Count", "6")],
            400,
            ["Mcp-Param-Count", "does not match"],
        ),
        ({"region": "eu"}, [("Mcp-Param-Region", "=?base64?!!!?=")], 400, ["invalid"]),
        ({}, [("Mcp-Param-Region", "eu")], 400, ["is sent but"]),
        ({"region": "Zürich"}, [("Mcp-Param-Region", "Zürich")], 400, ["does not match"]),
    ],
)
async def test_mcp_param_headers_must_mirror_their_arguments(
    arguments: dict[str, Any], params: list[tuple[str, str]], status: int, words: list[str]
) -> None:
    async with serving(regional_server()) as port:
        client = await HttpClient.connect(port)
        if any(not value.isascii() for _, value in params):  # raw UTF-8 bytes in a header
            response = await raw_call(client, arguments, params)
        else:
            headers = [*mcp_headers("tools/call", "regional"), *params]
            response = await call(client, "regional", arguments, headers=headers)
        assert response.status == status, response
        message = response.json()
        if status == 200:
            assert message["result"]["content"][0]["text"] == f"region={arguments.get('region')}"
        else:
            check_reply("tools/call", response.body)
            assert message["error"]["code"] == -32020
            for word in words:
                assert word in message["error"]["message"], message
        assert (await rpc(client, "tools/list")).status == 200  # the connection carries on


async def raw_call(
    client: HttpClient, arguments: dict[str, Any], params: list[tuple[str, str]]
) -> Response:
    body = request("tools/call", {"name": "regional", "arguments": arguments}, caps={})
    head = "".join(f"{name}: {value}\r\n" for name, value in mcp_headers("tools/call", "regional"))
    head += "".join(f"{name}: {value}\r\n" for name, value in params)
    data = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + head.encode()
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await client.send_raw(data)
    return await client.response()


# --- stdio -----------------------------------------------------------------------------------


async def test_stdio_cancelled_notification_ends_a_listen_without_a_reply(
    autojump_clock: MockClock,
) -> None:
    server, _ = listen_server()
    async with stdio_session(server) as peer:
        await peer.write(stdio_line(LISTEN, {"notifications": {"toolsListChanged": True}}, "L"))
        ack = await peer.receive()
        check_notification(ack)
        assert ack["params"]["_meta"][SUBSCRIPTION_ID] == "L"
        server.notify_list_changed("tools")
        note = await peer.receive()
        assert note["method"] == "notifications/tools/list_changed"
        await peer.write(cancelled("L"))
        await until(lambda: server.subscription_count == 0)
        server.notify_list_changed("tools")  # no longer listening: nothing is written
        await peer.write(stdio_line("tools/list", {}, "after"))
        assert (await peer.receive())["id"] == "after"
        assert await peer.rest() == []  # no reply to L, ever


async def test_stdio_eof_ends_an_open_listen(autojump_clock: MockClock) -> None:
    server, _ = listen_server()
    async with stdio_session(server) as peer:
        await peer.write(stdio_line(LISTEN, {"notifications": {"toolsListChanged": True}}, "L"))
        check_notification(await peer.receive())
        await peer.stdin.aclose()
        with trio.move_on_after(60):
            await peer.finished.wait()
        assert peer.finished.is_set(), "serve_stdio still waits on the listen stream"
        assert reply_ids(await peer.rest()) in ([], ["L"])  # a closing response at most


async def test_the_real_process_ends_a_listen_on_cancelled_without_a_reply() -> None:
    async with spawn("serve", "examples/jobs.py", "--stdio") as child:
        listen_line = stdio_line(LISTEN, {"notifications": {"toolsListChanged": True}}, "L")
        await child.stdin.send_all(listen_line)
        ack = json.loads(await child.read_line())
        check_notification(ack)
        assert ack["params"] == {
            "_meta": {SUBSCRIPTION_ID: "L"},
            "notifications": {"toolsListChanged": True},
        }
        greet = stdio_line("tools/call", {"name": "greet", "arguments": {}}, 2)
        reply = await child.exchange(cancelled("L") + greet, "tools/call")
        assert reply["id"] == 2 and reply["result"]["content"][0]["text"] == "Hello, world!"
        assert await child.close_and_wait() == 0  # nothing more was written: no reply to L
