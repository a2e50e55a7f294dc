"""Serve a `Server` (any `MessageHandler`) over stdio: newline-delimited JSON-RPC, stdin/stdout.

Theory of operation
-------------------
One pump loop reads stdin in chunks and cuts them into lines with `LineBuffer` (no I/O in
it), and starts each line's request at once, in the pump's own task: `handle` runs there
until it first has to wait. A request that never waits (a `greet`, a `tasks/get`: the tool and the
store answer without suspending) is answered there and then, and the pump goes on to the
next line; a whole read of such lines costs no task and no scheduler round a line. The first
request that does wait keeps the task it began in, and the pump goes on in a new one (in the
session's nursery: trio's own on trio, and on asyncio a small one of the loop's own tasks,
`_stdio_tasks`, since anyio's task group costs more per task than a stdio tool call can spare),
so a slow `tools/call` never holds up the `tasks/get` on the next line. Each request runs in
a copy of the context, as it would in a task of its own. Each of these tasks (the first
pump's too) has a cancel scope of its own, and a request that waits is the only one left in
its task: `notifications/cancelled` cancels it through that scope (`Connection.task_scope`),
so no handler needs a scope of its own (4 µs a tool call). Replies may come out in any order,
as JSON-RPC allows. Lines are started in the order they came, each once the one before has
entered `handle` (which registers a call in flight before its first `await`), so a
`notifications/cancelled` always finds the `tools/call` it names, even when both came in
one read. (This pump that moves from task to task is asyncio 3.12's eager tasks, by hand:
the benchmark `compare.py --only stdio` against the stdio echo decided it.)

One writer task owns stdout. Messages queued while it writes, or in the same scheduler round,
go out in its next `send_all`, each a whole line (message + newline): replies and progress
notifications never interleave, and a burst of answers costs one system call. Where stdout
can write without waiting (the asyncio loop's pipe, `_stdio_pipes.WritesAtOnce`), the pump
writes what its lines answered itself before it reads on or waits, with no turn of the
writer's task (about 1 us a line under a client that keeps 16 in flight); while a write is
under way, or the pipe holds the rest of one, the writer takes them instead. A reply does
not wait long behind the lines read after it: once the oldest message queued has waited
`HOLD_SECONDS` (0.15 ms, some ten tool calls), the pump lets the writer send what is queued
before it starts the next line. A client that keeps requests in flight then reads the first
replies while the rest are worked on, and both sides work at once (a read of 16 `greet`s:
52,000 to 58,000 calls a second in place of 43,000, for a write more every 0.15 ms). A
notification's sender waits until its line is written; a reply's request does not wait,
and the writer ends the request (what it holds, below) when the reply is written. Nothing
else is written there: logs go to stderr through `logging`, and when this module owns the
process's stdout it also points `sys.stdout` at stderr, so a stray `print()` in a tool
cannot corrupt the stream.

Back-pressure: the pump starts a request only while fewer than `MAX_REQUESTS_IN_FLIGHT` are
in flight (a request is in flight until its reply is written) and fewer than
`MAX_BYTES_IN_FLIGHT` are held (their lines, and the messages waiting for stdout); otherwise
it stops reading stdin until a request ends or a write goes out. So a client that never
reads stdout gets its stdin left unread once the bound is reached, and the server stays
the size it was; every request that was read is still answered when the client reads. A
notification finds a little more room (`_ROOM_FOR_NOTIFICATIONS`), so that a
`notifications/cancelled` still gets in when the requests in flight fill theirs.

A line longer than `max_line_bytes` is never held whole: as soon as the partial line passes
the limit the client gets a JSON-RPC -32600 error (without an id, since the id is somewhere
in the bytes being dropped), and the rest of the line is dropped up to its newline. A line
that is not JSON gets -32700 from the core. Either way the pump keeps reading.

Stdin EOF stops the pump (in whichever task it has reached); the nursery then waits for the
requests in flight, whose replies are still written, and `serve_stdio` returns. Tasks are not
the transport's: they live in the server, and leaving `Server.running()` gives them its
shutdown grace. If stdout breaks (the client went away) nobody can read anything more, so the
session is cancelled at once.

It runs on anyio, on asyncio (uvloop too) as on trio. The process's own stdin and stdout are
read and written by the event loop, no thread per read: on trio as `FdStream`s, on asyncio
through the loop's pipe transports (`_stdio_pipes`).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import enum
import logging
import sys
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Final, NamedTuple, TypeAlias

import anyio
import anyio.abc
import anyio.lowlevel
import trio

from .._support import backend as _backend
from ..core import (
    internal_error_reply,
)
from ..core.wire import (
    INVALID_REQUEST,
    error_body,
)
from . import _stdio_pipes
from ._port import Connection, MessageHandler
from ._stdio_tasks import RequestTasks, request_nursery
from ._stdio_writer import OutStream, StdoutWriter

__all__ = ["DEFAULT_MAX_LINE_BYTES", "serve_stdio"]

logger = logging.getLogger("mcp_tasks.transports.stdio")

DEFAULT_MAX_LINE_BYTES: Final = 4 * 1024 * 1024
MAX_REQUESTS_IN_FLIGHT: Final = 256
"""Requests from the stdio client handled at once, each until its reply is written (a
`subscriptions/listen` stream until it ends). With this many, the pump reads no more of
stdin until one of them ends."""
MAX_BYTES_IN_FLIGHT: Final = 8 * 1024 * 1024
"""Bytes held for the stdio client: the lines of its requests in flight and the messages
waiting to be written to stdout. Past it, the pump reads no more of stdin until writes go
out: a client that does not read its replies stops being read, instead of growing the
server. (A request may still overshoot it by its own line and messages.)"""
_ROOM_FOR_NOTIFICATIONS: Final = 32
"""How many more than `MAX_REQUESTS_IN_FLIGHT` may be in flight when the line is a
notification: a `notifications/cancelled` is how a client frees room, so it must get in."""
_RECEIVE_BYTES: Final = 65536
HOLD_SECONDS: Final = 0.000_15
"""How long a message may wait for the writer while the pump goes on to the next line."""
_JSON_WHITESPACE: Final = b" \t\r"
_NOTIFICATION: Final = b'"notifications/'
"""In a line, the mark of a notification (or of a request that mentions one: it only waits)."""


InStream: TypeAlias = trio.abc.ReceiveStream | anyio.abc.ByteReceiveStream
"""What `serve_stdio` reads: a trio or an anyio byte stream."""


class _Skipped(enum.Enum):
    LINE_TOO_LONG = "line too long"


LINE_TOO_LONG: Final = _Skipped.LINE_TOO_LONG
"""What `LineBuffer` gives in place of a line that passed the limit."""


class LineBuffer:
    """Cuts a byte stream into lines (without their newline), holding at most
    `max_line_bytes` of a line: a longer one is reported once, as `LINE_TOO_LONG`, the
    moment it passes the limit, and its bytes are dropped up to its newline."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self.max_line_bytes = max_line_bytes
        self._partial = bytearray()
        self._dropping = False

    def feed(self, data: bytes | bytearray) -> list[bytes | _Skipped]:
        if not self._partial and not self._dropping:  # whole lines, most often: split them
            *whole, rest = bytes(data).split(b"\n")
            if len(rest) <= self.max_line_bytes >= max(map(len, whole), default=0):
                self._partial += rest
                return list(whole)
        lines: list[bytes | _Skipped] = []
        start = 0
        while (end := data.find(b"\n", start)) != -1:
            self._take(data[start:end], lines)
            if not self._dropping:
                lines.append(bytes(self._partial))
            self._partial.clear()
            self._dropping = False
            start = end + 1
        self._take(data[start:], lines)
        return lines

    def end(self) -> list[bytes]:
        """At EOF: the last line, if it had no newline."""
        last = bytes(self._partial)
        self._partial.clear()
        return [] if self._dropping or not last else [last]

    def _take(self, piece: bytes | bytearray, lines: list[bytes | _Skipped]) -> None:
        if self._dropping:
            return
        if len(self._partial) + len(piece) > self.max_line_bytes:
            self._partial.clear()
            self._dropping = True
            lines.append(LINE_TOO_LONG)
        else:
            self._partial += piece


async def serve_stdio(
    server: MessageHandler,
    *,
    stdin: InStream | None = None,
    stdout: OutStream | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> None:
    """Answer newline-delimited JSON-RPC from `stdin` on `stdout` until stdin ends.

    Call it inside `async with server.running():`. Without streams it serves the process's
    fd 0 and 1 (duplicated, so they stay open afterwards; Unix only) and points `sys.stdout`
    at stderr while it runs. Returns once stdin is at EOF and every request in flight is
    answered, or at once if stdout breaks. The streams are trio's or anyio's byte streams;
    it runs on asyncio (uvloop too) and on trio.
    """
    lines = LineBuffer(max_line_bytes)
    async with contextlib.AsyncExitStack() as stack:
        if stdin is None:
            stdin = await stack.enter_async_context(_stdio_pipes.open_stdin())
        if stdout is None:
            sys.stdout.flush()
            stdout = await stack.enter_async_context(_stdio_pipes.open_stdout())
            stack.enter_context(contextlib.redirect_stdout(sys.stderr))
        async with anyio.create_task_group() as session_nursery:
            writer = StdoutWriter(stdout, session_nursery.cancel_scope)
            session_nursery.start_soon(writer.run)
            async with request_nursery() as tasks:
                session = _Session(server, writer, tasks, max_line_bytes)
                await tasks.run_here(session.pump, _receiver(stdin), lines)
            await writer.flush()
            session_nursery.cancel_scope.cancel()  # every reply is out: stop the writer


class _Session:
    """One stdio client: the pump, its requests in flight, and what they hold."""

    def __init__(
        self,
        server: MessageHandler,
        writer: StdoutWriter,
        tasks: RequestTasks,
        max_line_bytes: int,
    ) -> None:
        self._server = server
        self._writer = writer
        writer.on_written = self._written
        self._start_task = tasks.start_soon
        self._in_flight = 0
        self._bytes_in_flight = 0
        """The lines of the requests in flight and the messages waiting for stdout."""
        self._room: _backend.Event | None = None
        self._connection = Connection(carries_sessions=True)  # the process is a 2025 session
        self._connection.task_scope = tasks.running_scope
        self._max_line_bytes = max_line_bytes
        self._ready: collections.deque[bytes | _Skipped] = collections.deque()
        """Lines read and not started yet: where the pump goes on from in its next task."""
        self._at_eof = False
        self._too_long = error_body(
            None,
            INVALID_REQUEST,
            f"Invalid request: a message line is longer than {max_line_bytes} bytes, the limit "
            "of this stdio server (max_line_bytes); it was skipped",
        )

    async def pump(self, receive: Callable[[], Awaitable[bytes]], lines: LineBuffer) -> None:
        """Start the requests of stdin's lines until EOF, or until one waits: then the pump
        goes on in a task of its own, and this one sees that request to its end."""
        while True:
            while self._ready:
                line = self._ready.popleft()
                waiting = None
                if isinstance(line, _Skipped):
                    await self._skipped()
                elif line.strip(_JSON_WHITESPACE):  # not a blank line: a message
                    if not self._has_room(MAX_REQUESTS_IN_FLIGHT):
                        await self._wait_for_room(_most_in_flight(line))
                    waiting = self._start(line)
                if waiting is not None:
                    self._writer.release()
                    self._start_task(self.pump, receive, lines)
                    await self._go_on(waiting)
                    return
                queued_at = self._writer.queued_at
                if (
                    queued_at is not None
                    and time.perf_counter() - queued_at >= HOLD_SECONDS
                    and not self._writer.release()
                ):
                    await self._writer.let_out()
            self._writer.release()
            if self._at_eof:
                break
            if data := await receive():
                self._ready.extend(lines.feed(data))
            else:
                logger.debug("stdin is at EOF; finishing the requests in flight")
                self._at_eof = True
                self._ready.extend(lines.end())
        self._server.end_subscriptions(self._connection)  # nobody will cancel them now

    async def _skipped(self) -> None:
        """A line over the limit was skipped: its -32600 error, once there is room for it."""
        logger.warning("skipped a line longer than %d bytes", self._max_line_bytes)
        if not self._has_room(MAX_REQUESTS_IN_FLIGHT):
            await self._wait_for_room(MAX_REQUESTS_IN_FLIGHT)
        self._in_flight += 1
        self._answered(b"", self._too_long, released=True)

    async def _wait_for_room(self, most_in_flight: int) -> None:
        """Wait, reading nothing more, while `most_in_flight` requests are in flight or
        `MAX_BYTES_IN_FLIGHT` are held (the client is not reading, or is slow to)."""
        logger.debug(
            "%d requests in flight, %d bytes held: reading stdin paused until replies go out",
            self._in_flight,
            self._bytes_in_flight,
        )
        self._writer.release()
        while not self._has_room(most_in_flight):
            self._room = _backend.event()
            await self._room.wait()

    def _has_room(self, most_in_flight: int) -> bool:
        return self._in_flight < most_in_flight and self._bytes_in_flight < MAX_BYTES_IN_FLIGHT

    def _start(self, line: bytes) -> _Waiting | None:
        """Run `line`'s request, in a context of its own, until it is answered or waits."""
        self._in_flight += 1
        self._bytes_in_flight += len(line)
        context = contextvars.copy_context()
        request = self._answer(line)
        try:
            waits_on = context.run(request.send, None)
        except StopIteration as answered:
            self._answered(line, answered.value, released=True)
            return None
        except BaseException:
            self._answered(line, None)
            raise
        return _Waiting(line, request, waits_on, context)

    async def _go_on(self, waiting: _Waiting) -> None:
        """See a request that waits to its end; its reply goes to the writer."""
        body = None
        try:
            body = await _resumed(waiting)
        finally:
            self._answered(waiting.line, body)

    def _answered(self, line: bytes, body: bytes | None, *, released: bool = False) -> None:
        """A request has its reply (`body`), which the writer ends once written (`_written`);
        a request without one ends here. `released`: the pump lets the reply out before it
        next waits (`StdoutWriter.release`)."""
        if body is None:
            self._in_flight -= 1
            self._release(len(line))
        else:
            self._bytes_in_flight += len(body)
            self._writer.reply(body, len(line) + len(body), released=released)

    def _written(self, replies: int, held: int) -> None:
        self._in_flight -= replies
        self._release(held)

    async def _send(self, body: bytes) -> None:
        """Write one message (the `notify` of every request), counting it while it waits."""
        self._bytes_in_flight += len(body)
        try:
            await self._writer.send(body)
        finally:
            self._release(len(body))

    def _release(self, size: int) -> None:
        self._bytes_in_flight -= size
        if self._room is not None:
            self._room.set()

    async def _answer(self, line: bytes) -> bytes | None:
        try:
            reply = await self._server.handle(line, notify=self._send, connection=self._connection)
            body = None if reply is None else reply.body
        except Exception:  # a bug behind handle() costs this request, not the whole session
            logger.exception("handling a message failed")
            failed = internal_error_reply(line)  # the core's, as every transport sends it
            body = None if failed.request_id is None else failed.body  # none to a notification
        return body


def _most_in_flight(line: bytes) -> int:
    """How many requests may be in flight when `line` starts: a notification finds a
    little more room, as it may free some (`notifications/cancelled`)."""
    if _NOTIFICATION in line:
        return MAX_REQUESTS_IN_FLIGHT + _ROOM_FOR_NOTIFICATIONS
    return MAX_REQUESTS_IN_FLIGHT


class _Waiting(NamedTuple):
    """A request that had to wait: its line, its coroutine, what it waits on (what it gave
    the loop), and its context."""

    line: bytes
    request: Coroutine[Any, Any, bytes | None]
    waits_on: Any
    context: contextvars.Context


@types.coroutine
def _resumed(waiting: _Waiting) -> Generator[Any, Any, bytes | None]:
    """Await a request's coroutine that has already run up to its first wait (`waits_on`,
    not yet given to the loop): what `await` does with it from there, each step in its own
    context."""
    request, waits_on, run = waiting.request, waiting.waits_on, waiting.context.run
    step: Callable[[Any], Any]
    while True:
        try:
            sent = yield waits_on
        except GeneratorExit:
            request.close()
            raise
        except BaseException as thrown:  # a cancellation, delivered to the request
            step, value = request.throw, thrown
        else:
            step, value = request.send, sent
        try:
            waits_on = run(step, value)
        except StopIteration as answered:
            body: bytes | None = answered.value
            return body


def _receiver(stdin: InStream) -> Callable[[], Awaitable[bytes]]:
    """The next bytes of `stdin`, or b"" at its end (or if reading it fails)."""
    if isinstance(stdin, trio.abc.ReceiveStream):
        receive_some = stdin.receive_some

        async def receive() -> bytes:
            try:
                return bytes(await receive_some(_RECEIVE_BYTES))
            except trio.BrokenResourceError:
                logger.warning("reading stdin failed; treating it as EOF", exc_info=True)
                return b""

        return receive

    async def receive_anyio() -> bytes:
        try:
            return await stdin.receive(_RECEIVE_BYTES)
        except anyio.EndOfStream:
            return b""
        except anyio.BrokenResourceError:
            logger.warning("reading stdin failed; treating it as EOF", exc_info=True)
            return b""

    return receive_anyio
