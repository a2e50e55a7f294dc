"""stdio batching, on asyncio and on trio: the requests of one read that never wait are
answered in the pump's own task (no task a line) and their replies go out in one write; a
request that waits keeps its task while the pump goes on in a new one, so later lines are
not held up; each request sees a context of its own; a line that waits at EOF is still
answered. A stub handler stands in for the server: what is asserted is the transport's."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import os
import time
from typing import Any

import anyio
import anyio.abc
import pytest
import trio
from on_asyncio import on_each_loop, run_asyncio

from mcp_tasks.core import Reply
from mcp_tasks.transports import _stdio, _stdio_pipes, serve_stdio

_seen_by_request: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="")


def current_task() -> object:
    return trio.lowlevel.current_task() if trio.lowlevel.in_trio_task() else asyncio.current_task()


def request(request_id: int, method: str = "quick") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method}).encode() + b"\n"


class Handler:
    """Answers `quick` at once, `wait` once `released` is set; notes each request's task
    and the context variable it found (each sets it, and would leak it to the next)."""

    def __init__(self) -> None:
        self.released = anyio.Event()
        self.tasks: dict[int, object] = {}
        self.found: dict[int, str] = {}
        self.order: list[tuple[str, int]] = []

    async def handle(self, data: bytes, **_: Any) -> Reply | None:
        message = json.loads(data)
        request_id = message["id"]
        self.tasks[request_id] = current_task()
        self.found[request_id] = _seen_by_request.get()
        _seen_by_request.set(f"set by {request_id}")
        if message["method"] == "wait":
            await self.released.wait()
        if message["method"] == "slow":  # works (without waiting) past the writer's hold
            self.order.append(("handled", request_id))
            started = time.perf_counter()
            while time.perf_counter() - started < _stdio.HOLD_SECONDS:
                pass
        return Reply(body=json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {}}).encode())

    def end_subscriptions(self, connection: object = None) -> None:
        pass


class Stdin(anyio.abc.ByteReceiveStream):
    """Gives each of `reads` in one receive, then waits for `more` (if set), then EOF."""

    def __init__(self, reads: list[bytes], more: anyio.Event | None = None) -> None:
        self.reads, self.more = list(reads), more

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()
        if self.reads:
            return self.reads.pop(0)
        if self.more is not None:
            await self.more.wait()
        raise anyio.EndOfStream

    async def aclose(self) -> None:
        pass


class Stdout(anyio.abc.ByteSendStream):
    """Keeps each write apart, and sets `replied` once `expected` replies are in."""

    def __init__(self, expected: int) -> None:
        self.writes: list[bytes] = []
        self.expected = expected
        self.replied = anyio.Event()

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()
        self.writes.append(item)
        if sum(write.count(b"\n") for write in self.writes) >= self.expected:
            self.replied.set()

    def ids(self) -> list[int]:
        return [json.loads(line)["id"] for line in b"".join(self.writes).splitlines()]

    async def aclose(self) -> None:
        pass


def test_the_quick_requests_of_one_read_run_in_the_pump_and_go_out_in_one_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_stdio, "HOLD_SECONDS", 60.0)  # none waits long enough to be sent early

    async def main() -> None:
        handler, stdout = Handler(), Stdout(expected=20)
        stdin = Stdin([b"".join(request(n) for n in range(20))])
        await serve_stdio(handler, stdin=stdin, stdout=stdout)  # type: ignore[arg-type]
        assert stdout.ids() == list(range(20))
        assert len(stdout.writes) == 1
        assert len(set(handler.tasks.values())) == 1 and current_task() in handler.tasks.values()
        assert set(handler.found.values()) == {""}  # each request in a context of its own

    on_each_loop(main)


def test_a_reply_goes_out_once_it_has_waited_the_hold_while_later_lines_work() -> None:
    """Lines of one read that each work (without waiting) past `HOLD_SECONDS`: the pump
    lets the writer send what has waited that long before it starts the next line, so the
    first replies are out while the later requests still work."""

    async def main() -> None:
        handler, stdout = Handler(), Stdout(expected=4)
        original_send = stdout.send

        async def noting_send(item: bytes) -> None:
            for line in item.splitlines():
                handler.order.append(("written", json.loads(line)["id"]))
            await original_send(item)

        stdout.send = noting_send  # type: ignore[method-assign]
        stdin = Stdin([b"".join(request(n, "slow") for n in range(4))])
        await serve_stdio(handler, stdin=stdin, stdout=stdout)  # type: ignore[arg-type]
        assert stdout.ids() == [0, 1, 2, 3]
        assert len(stdout.writes) > 1
        # each reply is written before the line after the next one is handled
        for n in range(2):
            assert handler.order.index(("written", n)) < handler.order.index(("handled", n + 2))

    on_each_loop(main)


def test_a_request_that_waits_keeps_its_task_and_the_pump_goes_on_beside_it() -> None:
    async def main() -> None:
        handler, stdout, more = Handler(), Stdout(expected=3), anyio.Event()
        stdin = Stdin([request(1) + request(2, "wait") + request(3) + request(4)], more)
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_stdio(handler, stdin=stdin, stdout=stdout))  # type: ignore[arg-type]
            await stdout.replied.wait()  # 1, 3 and 4 while 2 waits
            assert sorted(stdout.ids()) == [1, 3, 4]
            assert handler.tasks[3] is handler.tasks[4] is not handler.tasks[2]
            assert handler.tasks[1] is handler.tasks[2]  # the pump's task, until 2 waited
            handler.released.set()
            more.set()  # EOF: serve_stdio returns once 2 is answered
        assert sorted(stdout.ids()) == [1, 2, 3, 4]
        assert set(handler.found.values()) == {""}

    on_each_loop(main)


def test_a_last_line_that_waits_at_eof_is_answered_before_serve_stdio_returns() -> None:
    async def main() -> None:
        handler, stdout = Handler(), Stdout(expected=2)
        stdin = Stdin([request(1), request(2, "wait").rstrip(b"\n")])  # no newline: at EOF

        async def release_once_waiting() -> None:
            while 2 not in handler.tasks:
                await anyio.sleep(0.001)
            handler.released.set()

        async with anyio.create_task_group() as group:
            group.start_soon(release_once_waiting)
            await serve_stdio(handler, stdin=stdin, stdout=stdout)  # type: ignore[arg-type]
        assert stdout.ids() == [1, 2]

    on_each_loop(main)


# --- replies written at once, by the pump (a stdout that can: the asyncio loop's pipe) ---


class AtOnceStdout(_stdio_pipes.WritesAtOnce):
    """A stdout that writes without waiting, as the loop's pipe does: notes each write and
    how it came. The write at index `holding` leaves a rest, out once `drain` is set."""

    def __init__(self, holding: int | None = None) -> None:
        self.writes: list[tuple[str, list[int]]] = []
        self.holding = holding
        self.drain = anyio.Event()
        self.broken = False

    def write_at_once(self, item: bytes) -> bool:
        if self.broken:
            raise anyio.BrokenResourceError("the reader is gone")
        self.writes.append(("at once", _ids(item)))
        return len(self.writes) - 1 != self.holding

    async def drained(self) -> None:
        await self.drain.wait()

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()
        self.writes.append(("send", _ids(item)))

    async def aclose(self) -> None:
        pass


def _ids(item: bytes) -> list[int]:
    return [json.loads(line)["id"] for line in item.splitlines()]


def test_each_read_s_replies_are_written_at_once_by_the_pump(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_stdio, "HOLD_SECONDS", 60.0)

    async def main() -> None:
        stdout = AtOnceStdout()
        stdin = Stdin([request(1) + request(2) + request(3), request(4) + request(5)])
        await serve_stdio(Handler(), stdin=stdin, stdout=stdout)  # type: ignore[arg-type]
        assert stdout.writes == [("at once", [1, 2, 3]), ("at once", [4, 5])]

    on_each_loop(main)


def test_nothing_more_is_written_until_the_rest_of_a_write_is_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first read's write leaves a rest: the second read's replies wait for it (the
    writer sees it out, then writes them), not written at once beside it."""
    monkeypatch.setattr(_stdio, "HOLD_SECONDS", 60.0)

    async def main() -> None:
        stdout, more = AtOnceStdout(holding=0), anyio.Event()
        stdin = Stdin([request(1) + request(2), request(3) + request(4)], more)
        writes_when_waiting: list[list[tuple[str, list[int]]]] = []
        receive = stdin.receive

        async def noting_receive(max_bytes: int = 65536) -> bytes:
            if not stdin.reads:  # both reads answered: the pump waits for more
                writes_when_waiting.append(list(stdout.writes))
                stdout.drain.set()
                more.set()
            return await receive(max_bytes)

        stdin.receive = noting_receive  # type: ignore[method-assign]
        await serve_stdio(Handler(), stdin=stdin, stdout=stdout)  # type: ignore[arg-type]
        assert writes_when_waiting == [[("at once", [1, 2])]]
        assert stdout.writes == [("at once", [1, 2]), ("send", [3, 4])]

    on_each_loop(main)


def test_a_stdout_that_breaks_as_the_pump_writes_ends_the_session() -> None:
    async def main() -> None:
        stdout, never = AtOnceStdout(), anyio.Event()
        stdout.broken = True
        with anyio.fail_after(10):  # stdin stays open: only the broken stdout ends it
            await serve_stdio(Handler(), stdin=Stdin([request(1)], never), stdout=stdout)  # type: ignore[arg-type]
        assert stdout.writes == []

    on_each_loop(main)


def test_replies_larger_than_the_pipe_arrive_whole_through_the_loop_s_pipe() -> None:
    """A real pipe on asyncio: a read's replies, a megabyte each, are more than the pipe
    holds; the loop's transport keeps the rest of the write, the writer waits it out, and
    a reader in a thread gets every reply whole, in order."""
    size = 1024 * 1024

    class Big:
        async def handle(self, data: bytes, **_: Any) -> Reply | None:
            request_id = json.loads(data)["id"]
            result = {"text": "x" * size}
            body = {"jsonrpc": "2.0", "id": request_id, "result": result}
            return Reply(body=json.dumps(body).encode())

        def end_subscriptions(self, connection: object = None) -> None:
            pass

    def read_lines(fd: int, count: int) -> list[bytes]:
        data = b""
        while data.count(b"\n") < count:
            chunk = os.read(fd, 65536)
            assert chunk, "stdout closed early"
            data += chunk
        return data.splitlines()

    async def main() -> None:
        read_end, write_end = os.pipe()
        try:
            async with await _stdio_pipes._PipeWriter.open(write_end) as stdout:
                left: list[bool] = []
                write_at_once = stdout.write_at_once

                def noting(item: bytes) -> bool:
                    left.append(not write_at_once(item))
                    return left[-1]

                stdout.write_at_once = noting  # type: ignore[method-assign]
                stdin = Stdin([request(1) + request(2) + request(3)])
                async with anyio.create_task_group() as group:
                    serving = functools.partial(serve_stdio, stdin=stdin, stdout=stdout)
                    group.start_soon(serving, Big())
                    lines = await anyio.to_thread.run_sync(read_lines, read_end, 3)
        finally:
            os.close(read_end)
        assert [json.loads(line)["id"] for line in lines] == [1, 2, 3]
        assert all(len(json.loads(line)["result"]["text"]) == size for line in lines)
        assert True in left  # the pipe took part of a write: the rest was waited out

    run_asyncio(main)
