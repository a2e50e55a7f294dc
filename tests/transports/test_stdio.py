"""stdio: `serve_stdio` driven through trio.testing memory streams on the virtual clock, the
line buffer on its own, and the real `mcp-tasks serve --stdio` process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from runtime.helpers import request
from schema_check import CORE, check, check_reply
from trio.testing import MockClock

from mcp_tasks import TASKS_EXTENSION, Server
from mcp_tasks.cli import load_server
from mcp_tasks.transports._stdio import LINE_TOO_LONG, LineBuffer, serve_stdio

ROOT = Path(__file__).parent.parent.parent
JOBS = ROOT / "examples" / "jobs.py"
TASKS_CAPS = {"extensions": {TASKS_EXTENSION: {}}}
NO_CAPS: dict[str, Any] = {}


def line(method: str, params: dict[str, Any], request_id: int | str, **meta: Any) -> bytes:
    caps = meta.pop("caps", TASKS_CAPS)
    return request(method, params, caps=caps, request_id=request_id, **meta) + b"\n"


def call(name: str, arguments: dict[str, Any], request_id: int | str, **meta: Any) -> bytes:
    return line("tools/call", {"name": name, "arguments": arguments}, request_id, **meta)


def cancelled(request_id: int | str) -> bytes:
    params = {"requestId": request_id}
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
    return json.dumps(note).encode() + b"\n"


class Peer:
    """The client's ends of the session: write stdin, read stdout line by line."""

    def __init__(
        self, stdin: trio.testing.MemorySendStream, stdout: trio.testing.MemoryReceiveStream
    ) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self.buffer = bytearray()
        self.finished = trio.Event()
        self.started_at = trio.current_time()
        self.finished_after = -1.0
        """Seconds from the start of the session to the return of `serve_stdio`."""

    async def write(self, data: bytes) -> None:
        await self.stdin.send_all(data)

    async def receive(self) -> dict[str, Any]:
        """The next message on stdout (a minute of virtual time at most)."""
        with trio.fail_after(60):
            message = await self._next_line()
        assert message is not None, "stdout ended"
        return message

    async def receive_raw(self) -> Any:
        """The next line on stdout, as JSON: a message, or a batch's array of replies."""
        with trio.fail_after(60):
            found = await self._next_line()
        assert found is not None, "stdout ended"
        return found

    async def nothing_within(self, seconds: float) -> bool:
        with trio.move_on_after(seconds):
            await self._next_line()
            return False
        return True

    async def rest(self) -> list[dict[str, Any]]:
        """Close stdin and read everything up to the end of stdout."""
        await self.stdin.aclose()
        messages = []
        with trio.fail_after(600):
            while (message := await self._next_line()) is not None:
                messages.append(message)
        return messages

    async def _next_line(self) -> dict[str, Any] | None:
        while b"\n" not in self.buffer:
            data = await self.stdout.receive_some()
            if not data:
                assert not self.buffer, f"a partial line at the end: {bytes(self.buffer)!r}"
                return None
            self.buffer += data
        raw, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer[:] = rest
        message: dict[str, Any] = json.loads(raw)  # every line is one JSON message
        for one in message if isinstance(message, list) else [message]:  # a batch's replies
            assert one["jsonrpc"] == "2.0"
        return message


@asynccontextmanager
async def stdio_session(server: Server | None = None, **options: Any) -> AsyncIterator[Peer]:
    server = load_server(str(JOBS)) if server is None else server
    stdin_send, stdin_receive = trio.testing.memory_stream_one_way_pair()
    stdout_send, stdout_receive = trio.testing.memory_stream_one_way_pair()
    peer = Peer(stdin_send, stdout_receive)

    async def run() -> None:
        await serve_stdio(server, stdin=stdin_receive, stdout=stdout_send, **options)
        peer.finished_after = trio.current_time() - peer.started_at
        peer.finished.set()
        await stdout_send.aclose()

    async with server.running(), trio.open_nursery() as nursery:
        nursery.start_soon(run)
        yield peer
        await stdin_send.aclose()  # EOF, if the test did not send it
        with trio.fail_after(600):
            await peer.finished.wait()


def reply_ids(messages: list[dict[str, Any]]) -> list[Any]:
    return [m.get("id") for m in messages if "method" not in m]


# --- the pump, on memory streams ----------------------------------------------------------


async def test_a_slow_call_does_not_hold_up_a_poll_on_the_next_line(
    autojump_clock: MockClock,
) -> None:
    async with stdio_session() as peer:
        await peer.write(call("slow_compute", {"seconds": 30}, "create"))
        created = await peer.receive()
        check_reply("tools/call", json.dumps(created).encode())
        task_id = created["result"]["taskId"]
        # a 10 s call in place (no tasks extension), then a poll of the task
        slow = call("slow_compute", {"seconds": 10}, "slow", caps=NO_CAPS)
        poll = line("tasks/get", {"taskId": task_id}, "poll")
        start = trio.current_time()
        await peer.write(slow + poll)
        first = await peer.receive()
        assert first["id"] == "poll" and first["result"]["status"] == "working"
        assert trio.current_time() - start < 0.1
        second = await peer.receive()
        assert second["id"] == "slow"
        assert second["result"]["content"][0]["text"] == "job done after 10s"
        assert trio.current_time() - start == pytest.approx(10, abs=0.1)
        check_reply("tools/call", json.dumps(second).encode())
        check_reply("tasks/get", json.dumps(first).encode())
        await peer.write(line("tasks/cancel", {"taskId": task_id}, "cancel"))
        assert (await peer.receive())["id"] == "cancel"
        assert await peer.rest() == []


async def test_a_task_runs_its_whole_life_over_stdio(autojump_clock: MockClock) -> None:
    async with stdio_session() as peer:
        await peer.write(call("slow_compute", {"seconds": 2, "label": "sum"}, 1))
        task_id = (await peer.receive())["result"]["taskId"]
        for poll in range(2, 100):
            await peer.write(line("tasks/get", {"taskId": task_id}, poll))
            reply = await peer.receive()
            check_reply("tasks/get", json.dumps(reply).encode())
            if reply["result"]["status"] == "completed":
                break
            await trio.sleep(0.5)
        assert reply["result"]["result"]["content"][0]["text"] == "sum done after 2s"
        assert await peer.rest() == []


async def test_a_line_that_is_not_json_gets_parse_error_and_reading_goes_on(
    autojump_clock: MockClock,
) -> None:
    async with stdio_session() as peer:
        await peer.write(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        await peer.write(call("greet", {"name": "after"}, 2))
        # Requests run side by side: their replies may come in either order.
        messages = [await peer.receive(), await peer.receive()]
        error = next(message for message in messages if "error" in message)
        check_reply(None, json.dumps(error).encode())
        assert error["error"]["code"] == -32700 and "id" not in error
        greeting = next(message for message in messages if "result" in message)
        assert greeting["id"] == 2 and greeting["result"]["content"][0]["text"] == "Hello, after!"
        assert await peer.rest() == []


async def test_an_initialize_to_a_modern_only_server_names_the_versions(
    autojump_clock: MockClock,
) -> None:
    """(A server that serves 2025 clients opens a session: test_stdio_legacy.py.)"""
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x"}}
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    server = load_server(str(JOBS))
    server.use_options(msgspec.structs.replace(server.core.options, legacy_sessions=False))
    async with stdio_session(server) as peer:
        await peer.write(json.dumps(message).encode() + b"\n")
        reply = await peer.receive()
        check_reply(None, json.dumps(reply).encode())
        assert reply["id"] == 0 and reply["error"]["code"] == -32022
        assert reply["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-06-18"}
        assert await peer.rest() == []


async def test_an_over_long_line_is_refused_before_its_end_arrives_and_skipped(
    autojump_clock: MockClock,
) -> None:
    async with stdio_session(max_line_bytes=1024) as peer:
        start = b'{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"pad": "'
        await peer.write(start + b"x" * (1024 - len(start)))  # exactly the limit, no newline
        assert await peer.nothing_within(1)
        await peer.write(b"x")  # one byte past it: refused now, with no newline in sight
        error = await peer.receive()
        check_reply(None, json.dumps(error).encode())
        assert error["error"]["code"] == -32600 and "id" not in error
        assert "1024 bytes" in error["error"]["message"]
        await peer.write(b"x" * 100_000)  # the rest of the line is dropped as it comes
        assert await peer.nothing_within(1)
        await peer.write(b'x"}}\n' + call("greet", {"name": "next"}, 10))
        assert (await peer.receive())["id"] == 10
        assert await peer.rest() == []  # the skipped request (id 9) never gets an answer


async def test_a_line_at_the_limit_is_served(autojump_clock: MockClock) -> None:
    greet = call("greet", {"name": "fits"}, 3)
    async with stdio_session(max_line_bytes=len(greet) - 1) as peer:  # without its newline
        await peer.write(greet)
        assert (await peer.receive())["id"] == 3


async def test_blank_lines_are_ignored(autojump_clock: MockClock) -> None:
    async with stdio_session() as peer:
        await peer.write(b"\n\r\n   \n\t\n" + call("greet", {"name": "b"}, 4) + b"\n\n")
        assert reply_ids(await peer.rest()) == [4]


async def test_crlf_lines_and_a_last_line_without_newline_are_served(
    autojump_clock: MockClock,
) -> None:
    async with stdio_session() as peer:
        await peer.write(call("greet", {"name": "crlf"}, 5).replace(b"\n", b"\r\n"))
        await peer.write(call("greet", {"name": "last"}, 6).rstrip(b"\n"))
        assert reply_ids(await peer.rest()) == [5, 6]


async def test_cancelled_notification_stops_the_call_it_names_and_no_reply_is_sent(
    autojump_clock: MockClock,
) -> None:
    async with stdio_session() as peer:
        slow = call("slow_compute", {"seconds": 60}, "c1", caps=NO_CAPS, progressToken="t")
        await peer.write(slow)
        progress = await peer.receive()
        assert progress["method"] == "notifications/progress"  # it is running
        await peer.write(cancelled("c1") + call("greet", {"name": "still here"}, "g"))
        assert (await peer.receive())["id"] == "g"
        assert await peer.rest() == []  # no reply to c1, and no more progress from it
    assert peer.finished_after < 1


async def test_a_cancel_in_the_same_read_as_its_request_still_finds_it(
    autojump_clock: MockClock,
) -> None:
    async with stdio_session() as peer:
        slow = call("slow_compute", {"seconds": 60}, 77, caps=NO_CAPS)
        await peer.write(slow + cancelled(77))
        assert await peer.rest() == []
    assert peer.finished_after < 1


async def test_many_calls_and_their_cancels_in_one_read_are_all_cancelled(
    autojump_clock: MockClock,
) -> None:
    """Requests start without waiting for each other; a notification still waits until every
    request read before it has begun, so each cancel finds its call."""
    async with stdio_session() as peer:
        burst = b"".join(
            call("slow_compute", {"seconds": 60}, n, caps=NO_CAPS) + cancelled(n) for n in range(40)
        )
        await peer.write(burst + call("greet", {"name": "after"}, "g"))
        assert reply_ids(await peer.rest()) == ["g"]
    assert peer.finished_after < 1


async def test_a_burst_of_requests_is_answered_whole_lines_each_once(
    autojump_clock: MockClock,
) -> None:
    """Answers that come out together share one write, each still a line of its own."""
    async with stdio_session() as peer:
        await peer.write(b"".join(call("greet", {"name": f"n{n}"}, n) for n in range(200)))
        messages = await peer.rest()
    assert sorted(reply_ids(messages)) == list(range(200))
    for message in messages:
        assert message["result"]["content"][0]["text"] == f"Hello, n{message['id']}!"


async def test_eof_lets_the_requests_in_flight_finish_and_be_written(
    autojump_clock: MockClock,
) -> None:
    async with stdio_session() as peer:
        await peer.write(call("slow_compute", {"seconds": 3}, "e", caps=NO_CAPS))
        messages = await peer.rest()  # stdin closes at once
        assert reply_ids(messages) == ["e"]
        assert messages[0]["result"]["content"][0]["text"] == "job done after 3s"
    assert peer.finished_after == pytest.approx(3, abs=0.1)


async def test_progress_notifications_go_to_stdout_when_the_request_asks(
    autojump_clock: MockClock,
) -> None:
    async with stdio_session() as peer:
        await peer.write(call("slow_compute", {"seconds": 0.3}, "p", caps=NO_CAPS, progressToken=8))
        await peer.write(call("slow_compute", {"seconds": 0.3}, "q", caps=NO_CAPS))
        messages = await peer.rest()
    notes = [m for m in messages if "method" in m]
    for note in notes:
        check(CORE, "ProgressNotification", note)
    assert [n["params"]["progress"] for n in notes] == [0, 1, 2]
    assert {n["params"]["progressToken"] for n in notes} == {8}
    assert sorted(reply_ids(messages)) == ["p", "q"]
    p_reply = next(i for i, m in enumerate(messages) if m.get("id") == "p")
    assert p_reply > max(i for i, m in enumerate(messages) if "method" in m)


async def test_concurrent_writes_never_interleave(autojump_clock: MockClock) -> None:
    lines = [call("greet", {"name": f"n{i}"}, i) for i in range(50)]
    lines += [
        call("slow_compute", {"seconds": 0.5}, f"s{i}", caps=NO_CAPS, progressToken=i)
        for i in range(10)
    ]
    async with stdio_session() as peer:
        await peer.write(b"".join(lines))
        messages = await peer.rest()  # each line parses: a mixed-up write would not
    assert len(reply_ids(messages)) == 60
    assert len(messages) == 60 + 10 * 5


async def test_a_closed_stdout_ends_the_session_without_an_error(autojump_clock: MockClock) -> None:
    async with stdio_session() as peer:
        await peer.write(call("slow_compute", {"seconds": 60}, 1, caps=NO_CAPS))
        await peer.stdout.aclose()  # the client stopped reading
        await peer.write(call("greet", {"name": "gone"}, 2))  # its reply cannot be written
        with trio.fail_after(1):
            await peer.finished.wait()  # stdin is still open: the broken stdout ended it
    assert peer.finished_after < 1


async def test_a_failure_inside_handle_is_an_internal_error_reply(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    server = load_server(str(JOBS))
    handle = server.handle

    async def failing(data: bytes, **kw: Any) -> Any:
        if b"boom" in data:
            raise RuntimeError("a bug")
        return await handle(data, **kw)

    monkeypatch.setattr(server, "handle", failing)
    async with stdio_session(server) as peer:
        await peer.write(call("greet", {"name": "boom"}, 1))
        await peer.write(b'{"jsonrpc": "2.0", "method": "notifications/boom"}\n')
        await peer.write(call("greet", {"name": "fine"}, 2))
        messages = await peer.rest()
    error = {"code": -32603, "message": "Internal error"}
    assert messages[0] == {"jsonrpc": "2.0", "id": 1, "error": error}
    check_reply("tools/call", json.dumps(messages[0]).encode())
    assert reply_ids(messages) == [1, 2]


# --- the line buffer ----------------------------------------------------------------------


def test_line_buffer_cuts_lines_and_refuses_one_past_the_limit() -> None:
    lines = LineBuffer(max_line_bytes=3)
    assert lines.feed(b"abc\nab") == [b"abc"]
    assert lines.feed(b"cd") == [LINE_TOO_LONG]
    assert lines.feed(b"efgh\n\nxyz\nq") == [b"", b"xyz"]
    assert lines.end() == [b"q"]
    assert lines.end() == []


def test_line_buffer_holds_no_more_than_the_limit_of_a_long_line() -> None:
    lines = LineBuffer(max_line_bytes=10)
    assert lines.feed(b"x" * 5) == []
    assert lines.feed(b"x" * 1000) == [LINE_TOO_LONG]
    assert len(lines._partial) == 0
    assert lines.feed(b"x" * 1000) == []
    assert lines.end() == []  # a dropped line at EOF is not a line
    with pytest.raises(ValueError, match="at least 1"):
        LineBuffer(max_line_bytes=0)


@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_line_buffer_gives_the_same_lines_however_the_stream_is_cut(
    lines: list[bytes], cuts: list[int]
) -> None:
    limit = 20
    stream = b"".join(line + b"\n" for line in lines)
    buffer = LineBuffer(max_line_bytes=limit)
    got: list[Any] = []
    previous = 0
    for cut in [*sorted(c % (len(stream) + 1) for c in cuts), len(stream)]:
        got += buffer.feed(stream[previous:cut])
        previous = cut
    got += buffer.end()
    assert got == [line if len(line) <= limit else LINE_TOO_LONG for line in lines]


# --- the real process ---------------------------------------------------------------------


class Process:
    """A child process spoken to over its stdin and stdout, one JSON line at a time."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin and process.stdout
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.buffer = bytearray()
        self.lines: list[bytes] = []

    async def exchange(self, data: bytes, method: str) -> dict[str, Any]:
        await self.stdin.send_all(data)
        body = await self.read_line()
        check_reply(method, body)
        reply: dict[str, Any] = json.loads(body)
        return reply

    async def read_line(self) -> bytes:
        with trio.fail_after(20):
            while b"\n" not in self.buffer:
                data = await self.stdout.receive_some()
                assert data, "the server closed stdout"
                self.buffer += data
        raw, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer[:] = rest
        self.lines.append(raw)
        return raw

    async def read_stderr(self) -> str:
        assert self.process.stderr is not None
        text = b""
        with trio.fail_after(20):
            while data := await self.process.stderr.receive_some():
                text += data
        return text.decode()

    async def close_and_wait(self) -> int:
        await self.stdin.aclose()
        with trio.fail_after(20):
            rest = b""
            while data := await self.stdout.receive_some():
                rest += data
            assert rest == b"", f"output after EOF: {rest!r}"
            return await self.process.wait()


@asynccontextmanager
async def spawn(*args: str, cwd: Path = ROOT) -> AsyncIterator[Process]:
    command = [sys.executable, "-m", "mcp_tasks.cli", *args]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    run = partial(trio.run_process, command, check=False, cwd=cwd, **pipes)
    async with trio.open_nursery() as nursery:
        process = await nursery.start(run)
        try:
            yield Process(process)
        finally:
            if process.returncode is None:
                process.kill()


async def test_the_real_process_runs_a_task_life_and_exits_0_on_eof() -> None:
    async with spawn("serve", "examples/jobs.py", "--stdio", "--log-level", "debug") as child:
        created = await child.exchange(call("slow_compute", {"seconds": 0.3}, 1), "tools/call")
        task_id = created["result"]["taskId"]
        for poll in range(2, 200):
            task = await child.exchange(line("tasks/get", {"taskId": task_id}, poll), "tasks/get")
            if task["result"]["status"] == "completed":
                break
            await trio.sleep(0.05)
        assert task["result"]["result"]["content"][0]["text"] == "job done after 0.3s"
        assert (await child.exchange(b"not json\n", "tools/call"))["error"]["code"] == -32700
        assert await child.close_and_wait() == 0
        errors = await child.read_stderr()
    assert all(json.loads(raw)["jsonrpc"] == "2.0" for raw in child.lines)
    assert "serving jobs 0.1.0 on stdio" in errors and "Traceback" not in errors
