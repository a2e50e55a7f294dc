"""Cancelling a stdio call, on asyncio and on trio: a call's handler runs in no cancel scope
of its own; a call that waits keeps the task it waited in, and `notifications/cancelled`
cancels that task's scope (`Connection.task_scope`). What must hold: the call it names
stops and gets no reply; the other calls waiting beside it, and the pump, go on; a cancel
naming a call already answered in the pump's task stops nothing; a handler's shielded
section still runs to its end."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from on_asyncio import on_each_loop

from mcp_tasks import CallToolResult, Server, ToolContext, ToolOutcome
from mcp_tasks.core.wire import PROTOCOL_VERSION
from mcp_tasks.transports import _stdio, serve_stdio
from mcp_tasks.transports._port import Connection

_META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(request_id: int, name: str) -> bytes:
    params = {"name": name, "arguments": {}, "_meta": _META}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message).encode() + b"\n"


def cancelled(request_id: int) -> bytes:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    return json.dumps({**note, "params": {"requestId": request_id}}).encode() + b"\n"


class Stdin(anyio.abc.ByteReceiveStream):
    """What the test writes, read by the server as it is written; EOF once closed."""

    def __init__(self) -> None:
        self.send, self._receive = anyio.create_memory_object_stream[bytes](16)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        pass


class Stdout(anyio.abc.ByteSendStream):
    """The replies, by id; `arrived` is set on each write."""

    def __init__(self) -> None:
        self.replies: dict[int, dict[str, Any]] = {}
        self.arrived = anyio.Event()

    async def send(self, item: bytes) -> None:
        for line in item.splitlines():
            message = json.loads(line)
            self.replies[message["id"]] = message
        self.arrived.set()
        self.arrived = anyio.Event()

    async def until(self, *ids: int) -> None:
        while not all(request_id in self.replies for request_id in ids):
            await self.arrived.wait()

    async def aclose(self) -> None:
        pass


def test_a_cancel_stops_the_call_it_names_and_nothing_else() -> None:
    async def main() -> None:
        server = Server("cancel-scopes", "1.0.0")
        entered: dict[str, anyio.Event] = {"hold": anyio.Event(), "shielded": anyio.Event()}
        release = anyio.Event()
        seen: list[str] = []

        @server.tool()
        async def hold(ctx: ToolContext) -> ToolOutcome:
            """Waits until released; notes a cancellation."""
            entered["hold"].set()
            try:
                await release.wait()
            except anyio.get_cancelled_exc_class():
                seen.append("hold cancelled")
                raise
            return CallToolResult.text("held")

        @server.tool()
        async def shielded(ctx: ToolContext) -> ToolOutcome:
            """Waits in a shielded section until released."""
            with anyio.CancelScope(shield=True):
                entered["shielded"].set()
                await release.wait()
                seen.append("shielded section done")
            await anyio.lowlevel.checkpoint()
            seen.append("went on after the shield")
            return CallToolResult.text("shielded")

        @server.tool()
        async def greet(ctx: ToolContext) -> ToolOutcome:
            """Answers at once, in the pump's task."""
            return CallToolResult.text("hello")

        stdin, stdout = Stdin(), Stdout()
        async with server.running(), anyio.create_task_group() as session:
            session.start_soon(lambda: serve_stdio(server, stdin=stdin, stdout=stdout))
            # answered in the pump's task; cancelling it afterwards must not stop the pump
            await stdin.send.send(call(1, "greet") + cancelled(1) + call(2, "greet"))
            await stdout.until(1, 2)
            await stdin.send.send(call(3, "hold") + call(4, "hold") + call(5, "shielded"))
            await entered["hold"].wait()
            await entered["shielded"].wait()
            await stdin.send.send(cancelled(3) + cancelled(5) + call(6, "greet"))
            await stdout.until(6)
            release.set()
            await stdout.until(4, 6)
            await stdin.send.aclose()
        assert sorted(stdout.replies) == [1, 2, 4, 6]  # no reply to 3 nor to 5
        assert all("result" in reply for reply in stdout.replies.values())
        assert stdout.replies[4]["result"]["content"][0]["text"] == "held"
        assert seen.count("hold cancelled") == 1
        assert "shielded section done" in seen
        assert "went on after the shield" not in seen  # cancelled at its next wait

    on_each_loop(main)


def test_a_call_that_waits_is_cancelled_through_the_scope_of_the_task_it_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a call waits, what is in flight for it is the scope of the task it kept (none
    was made for its handler); once it is answered, nothing is left in flight."""

    async def main() -> None:
        server = Server("cancel-scopes", "1.0.0")
        connections: list[Connection] = []
        release = anyio.Event()
        found: dict[str, object] = {}

        def noted(**options: Any) -> Connection:
            connections.append(Connection(**options))
            return connections[-1]

        monkeypatch.setattr(_stdio, "Connection", noted)

        @server.tool()
        async def hold(ctx: ToolContext) -> ToolOutcome:
            """Notes its task's scope and what is in flight for it, then waits."""
            (connection,) = connections
            assert connection.task_scope is not None
            found["task's scope"] = connection.task_scope()
            found["in flight"] = connection.in_flight.get(1)
            await release.wait()
            return CallToolResult.text("held")

        stdin, stdout = Stdin(), Stdout()
        async with server.running(), anyio.create_task_group() as session:
            session.start_soon(lambda: serve_stdio(server, stdin=stdin, stdout=stdout))
            await stdin.send.send(call(1, "hold"))
            with anyio.fail_after(10):
                while "in flight" not in found:
                    await anyio.sleep(0)
            release.set()
            await stdout.until(1)
            assert connections[0].in_flight == {}
            await stdin.send.aclose()
        assert found["in flight"] is not None
        assert found["in flight"] is found["task's scope"]

    on_each_loop(main)
