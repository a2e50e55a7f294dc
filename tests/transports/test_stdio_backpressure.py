"""stdio back-pressure: a client that does not read stdout stops being read, its server
stays the size it was, and once it reads it gets every reply (issue 15, point 10).

The pump is driven with a stdin that counts the lines it handed over and a lockstep stdout,
whose writes block until the client reads them; "the server stopped" is
`wait_all_tasks_blocked`, never a sleep. Then the real `mcp-tasks serve --stdio` process,
flooded through a pipe it must stop reading."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing
from test_stdio import JOBS, NO_CAPS, call, cancelled, line, reply_ids, spawn, stdio_session
from trio.testing import MockClock

from mcp_tasks import Server
from mcp_tasks.cli import load_server
from mcp_tasks.server import MAX_QUEUED_NOTIFICATIONS
from mcp_tasks.transports._stdio import (
    MAX_BYTES_IN_FLIGHT,
    MAX_REQUESTS_IN_FLIGHT,
    serve_stdio,
)

LISTEN = "subscriptions/listen"
PAUSED = b"reading stdin paused"
"""What the server logs (at debug level) when it stops reading stdin."""


class CountedLines(trio.abc.ReceiveStream):
    """A client's stdin: one line each time the server reads, then EOF; counts the lines
    the server took."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines
        self.taken = 0

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        if self.taken == len(self._lines):
            return b""
        data = self._lines[self.taken]
        assert max_bytes is None or len(data) <= max_bytes
        self.taken += 1
        return data

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


@asynccontextmanager
async def unread_session(
    stdin: trio.abc.ReceiveStream, server: Server | None = None
) -> AsyncIterator[trio.abc.ReceiveStream]:
    """Serve `stdin`; yield the client's end of a stdout that nobody reads until the test
    does (a write waits for the read)."""
    server = load_server(str(JOBS)) if server is None else server
    stdout_send, stdout_receive = trio.testing.lockstep_stream_one_way_pair()

    async def run() -> None:
        await serve_stdio(server, stdin=stdin, stdout=stdout_send)
        await stdout_send.aclose()

    async with server.running(), trio.open_nursery() as nursery:
        nursery.start_soon(run)
        yield stdout_receive


async def read_to_the_end(stdout: trio.abc.ReceiveStream) -> list[dict[str, Any]]:
    output = bytearray()
    with trio.fail_after(60):
        while data := await stdout.receive_some():
            output += data
    assert output.endswith(b"\n")
    return [json.loads(raw) for raw in output.splitlines()]


def greeting(request_id: int, name_bytes: int) -> bytes:
    return call("greet", {"name": "x" * name_bytes}, request_id)


# --- the pump, in memory -------------------------------------------------------------------


async def test_a_client_that_does_not_read_stops_being_read_and_loses_nothing() -> None:
    count = 4 * MAX_REQUESTS_IN_FLIGHT
    stdin = CountedLines([greeting(n, 100) for n in range(count)])
    async with unread_session(stdin) as stdout:
        await trio.testing.wait_all_tasks_blocked()  # nothing moves until the client reads
        assert stdin.taken <= MAX_REQUESTS_IN_FLIGHT + 1  # and one that waits for room
        messages = await read_to_the_end(stdout)
    assert stdin.taken == count
    assert sorted(reply_ids(messages)) == list(range(count))


async def test_large_replies_stop_the_reading_at_the_byte_bound() -> None:
    """60 KB requests, 60 KB replies: the bytes held, not the count, stop the reading."""
    count = 400  # 24 MB of replies
    requests = [greeting(n, 60_000) for n in range(count)]
    stdin = CountedLines(requests)
    async with unread_session(stdin) as stdout:
        await trio.testing.wait_all_tasks_blocked()
        assert stdin.taken <= MAX_BYTES_IN_FLIGHT // len(requests[0]) + 1
        assert stdin.taken < MAX_REQUESTS_IN_FLIGHT
        messages = await read_to_the_end(stdout)
    assert sorted(reply_ids(messages)) == list(range(count))
    assert all(len(m["result"]["content"][0]["text"]) == 60_008 for m in messages)


async def test_a_listen_stream_of_a_client_that_does_not_read_ends_at_its_own_limit() -> None:
    """The listen stream holds one request's room; its notifications queue in the server
    up to MAX_QUEUED_NOTIFICATIONS, then the stream ends, and the session goes on."""
    server = load_server(str(JOBS))
    stdin_send, stdin_receive = trio.testing.memory_stream_one_way_pair()
    async with unread_session(stdin_receive, server) as stdout:
        await stdin_send.send_all(line(LISTEN, {"notifications": {"toolsListChanged": True}}, "L"))
        await trio.testing.wait_all_tasks_blocked()  # its acknowledgement waits for the client
        for _ in range(2 * MAX_QUEUED_NOTIFICATIONS):
            server.notify_list_changed("tools")
        await stdin_send.send_all(call("greet", {"name": "after"}, "after"))
        await stdin_send.aclose()
        messages = await read_to_the_end(stdout)
    notes = [m for m in messages if m.get("method") == "notifications/tools/list_changed"]
    assert 0 < len(notes) <= MAX_QUEUED_NOTIFICATIONS + 1
    assert sorted(reply_ids(messages)) == ["L", "after"]  # L's closing response, and a reply


async def test_a_cancel_gets_in_while_the_requests_in_flight_fill_the_room(
    autojump_clock: MockClock,
) -> None:
    """With as many 10-second calls in flight as there is room for, the client cancels one:
    the cancel is read at once, which makes room for the request after it."""
    calls = [
        call("slow_compute", {"seconds": 10}, n, caps=NO_CAPS)
        for n in range(MAX_REQUESTS_IN_FLIGHT)
    ]
    async with stdio_session() as peer:
        await peer.write(b"".join(calls) + cancelled(0) + call("greet", {"name": "next"}, "g"))
        with trio.fail_after(1):  # virtual time: long before any call ends by itself
            assert (await peer.receive())["id"] == "g"
        messages = await peer.rest()  # the calls end after their 10 s
    assert sorted(reply_ids(messages)) == list(range(1, MAX_REQUESTS_IN_FLIGHT))


# --- the real process ----------------------------------------------------------------------


async def test_the_real_process_stops_reading_a_client_that_does_not_read() -> None:
    """8 MB of requests with 4 KB replies, and stdout not read: the server takes a few
    hundred and says it paused; the client's writes block. Then it reads every reply."""
    count, name_bytes = 2000, 4000
    written = 0
    settled = trio.Event()  # the server paused, or (without back-pressure) took everything
    paused = False

    async with spawn("serve", "examples/jobs.py", "--stdio", "--log-level", "debug") as child:
        stderr = child.process.stderr
        assert stderr is not None

        async def flood() -> None:
            nonlocal written
            for n in range(count):
                await child.stdin.send_all(greeting(n, name_bytes))
                written += 1
            settled.set()

        async def watch_stderr() -> None:
            nonlocal paused
            tail = b""
            while data := await stderr.receive_some():
                tail = tail[-len(PAUSED) :] + data
                if PAUSED in tail:
                    paused = True
                    settled.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flood)
            nursery.start_soon(watch_stderr)
            with trio.fail_after(60):
                await settled.wait()
            assert written < count, "the server read every request: its stdout is not read"
            assert paused
            # beyond the requests in flight, at most: a full read chunk, a full stdin pipe,
            # and the requests whose replies fit in the stdout pipe (they ended: written)
            assert written <= MAX_REQUESTS_IN_FLIGHT + 3 * 65536 // name_bytes + 2
            for _ in range(count):  # now the client reads: every request gets its reply
                reply = json.loads(await child.read_line())
                assert reply["result"]["content"][0]["text"] == f"Hello, {'x' * name_bytes}!"
            assert sorted(json.loads(raw)["id"] for raw in child.lines) == list(range(count))
            assert written == count
            assert await child.close_and_wait() == 0
