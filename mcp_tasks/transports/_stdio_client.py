"""The client side of stdio: spawn a server command, speak JSON lines on its stdin/stdout.

Theory of operation
-------------------
`open_stdio_transport(command)` starts the process (`anyio.open_process`: under asyncio or
trio) and, in its own task group, one reader of stdout (and one of stderr, when it is
captured). Leaving the block closes the transport.

Writing: every message is one line, written whole under one lock, shielded from
cancellation (a half-written line would corrupt the stream) and bounded by
`write_timeout_seconds` (a server that reads nothing for that long ends the session).

Reading: the reader cuts stdout into lines (`LineBuffer`, shared with the server side) and
routes each one. A response goes to the request waiting for its id (by type and value: `1`
is not `"1"`); one that nobody waits for (a request cancelled meanwhile) is dropped. A
notification that carries `params.progressToken` goes to the request in flight that sent
that token, and to no other (dropped if none); any other notification goes to every request
in flight that has an `on_notification` (so to the single one, when only one has). Each
request receives its messages through its own channel and runs its callback itself, in
order, so the reader never waits for a callback; past `_MAX_QUEUED_NOTIFICATIONS` waiting
for one request, further notifications to it are dropped. An error response without an id
(the server could not read a request) goes to the one request in flight, or, with several,
fails them all: it cannot be matched.

A request from the server (a 2025 session's `elicitation/create`, `sampling/createMessage`,
`roots/list`, `ping`) goes to `on_server_request` when it is set, one at a time, in a task
of the transport's own; its answer is written back as a line. Without the handler it is a
protocol violation, as in 2026-07-28.

Failure is a state of the session: a line that is not JSON or not a JSON-RPC response or
notification, a server->client request nobody answers, a line over `max_line_bytes`,
stdout at its end or the process gone. Once failed, every waiting request raises
TransportError at once, with "server process exited with code N" and, when stderr is
captured, its last lines; so does every later call.

Cancelling a request that waits sends `notifications/cancelled {requestId}`. `aclose`
closes stdin (the server exits at EOF), waits `close_timeout_seconds`, then terminates and,
after as long again, kills.
"""

from __future__ import annotations

import logging
import math
import os
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, Final, Literal

import anyio
import msgspec
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.memory import MemoryObjectSendStream

from ..core._depth import MAX_DEPTH, too_deep
from ._client_base import (
    NotificationHandler,
    ServerRequestHandler,
    TransportError,
    preview,
    response_kind,
)
from ._stdio import LINE_TOO_LONG, LineBuffer

__all__ = ["DEFAULT_MAX_CLIENT_LINE_BYTES", "StdioClientTransport", "open_stdio_transport"]

logger = logging.getLogger("mcp_tasks.transports.stdio_client")

DEFAULT_MAX_CLIENT_LINE_BYTES: Final = 16 * 1024 * 1024
_RECEIVE_BYTES: Final = 65536
_STDERR_KEEP_BYTES: Final = 64 * 1024
_STDERR_SHOWN_LINES: Final = 10
_EXIT_WAIT_SECONDS: Final = 2.0
_MAX_QUEUED_NOTIFICATIONS: Final = 1000
_MAX_QUEUED_SERVER_REQUESTS: Final = 64

Stderr = Literal["inherit", "capture"]
_Item = dict[str, Any] | TransportError
_Key = tuple[type, str | int]
_PIPE_GONE: Final = (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError)
"""A pipe closed at either end: anyio's errors, and asyncio's own when it sees it first."""


@dataclass(eq=False)
class _Waiter:
    """A request in flight: where its messages go, and the progress token it sent."""

    inbox: MemoryObjectSendStream[_Item]
    progress_token: _Key | None
    wants_notifications: bool


@asynccontextmanager
async def open_stdio_transport(
    command: Sequence[str],
    *,
    stderr: Stderr = "inherit",
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    max_line_bytes: int = DEFAULT_MAX_CLIENT_LINE_BYTES,
    close_timeout_seconds: float = 5.0,
    write_timeout_seconds: float = 10.0,
) -> AsyncIterator[StdioClientTransport]:
    """Spawn `command` (e.g. `[sys.executable, "-m", "mcp_tasks.cli", "serve", "app.py",
    "--stdio"]`) and yield its transport; leaving the block closes it (`aclose`).

    `stderr="inherit"` passes the server's stderr through; `"capture"` keeps its last
    64 KiB in `stderr_tail` and shows the last lines in the error when the server dies.
    Raises TransportError if the command cannot be started."""
    if not command:
        raise ValueError("command must name a program")
    if stderr not in ("inherit", "capture"):
        raise ValueError(f"stderr must be 'inherit' or 'capture', not {stderr!r}")
    try:
        process = await anyio.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr == "capture" else None,
            env=None if env is None else dict(env),
            cwd=cwd,
        )
    except OSError as error:
        raise TransportError(f"cannot start the server {command[0]!r}: {error}") from error
    transport = StdioClientTransport(
        process,
        max_line_bytes=max_line_bytes,
        close_timeout_seconds=close_timeout_seconds,
        write_timeout_seconds=write_timeout_seconds,
    )
    try:
        async with anyio.create_task_group() as readers:
            readers.start_soon(transport._read_stdout)
            readers.start_soon(transport._answer_server_requests)
            if stderr == "capture":
                readers.start_soon(transport._read_stderr)
            try:
                yield transport
            finally:
                with anyio.CancelScope(shield=True):
                    await transport.aclose()
                readers.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:  # the readers never raise: this is the caller's own
            raise group.exceptions[0] from None
        raise
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.aclose()  # reaps it, and closes the pipes (asyncio holds them open)


class StdioClientTransport:
    """A `ClientTransport` over a server process's stdin and stdout. Made by
    `open_stdio_transport`, which runs its reader."""

    sends_headers = False
    """stdio has no headers: the client need not learn which arguments they would mirror."""

    def __init__(
        self,
        process: Process,
        *,
        max_line_bytes: int,
        close_timeout_seconds: float,
        write_timeout_seconds: float,
    ) -> None:
        assert process.stdin is not None and process.stdout is not None
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self._process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._max_line_bytes = max_line_bytes
        self._close_timeout_seconds = close_timeout_seconds
        self._write_timeout_seconds = write_timeout_seconds
        self._write_lock = anyio.Lock()
        self._pending: dict[_Key, _Waiter] = {}
        self._failure: str | None = None
        self._failed = anyio.Event()
        self._closing = False
        self._closed = anyio.Event()
        self._stderr = bytearray()
        self._stderr_done = anyio.Event()
        if process.stderr is None:
            self._stderr_done.set()
        self.on_server_request: ServerRequestHandler | None = None
        """Answers the requests a 2025 server sends (None: they are a protocol violation)."""
        self._asked, self._to_answer = anyio.create_memory_object_stream[dict[str, Any]](
            _MAX_QUEUED_SERVER_REQUESTS
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The server's exit code, once it has exited (negative: killed by that signal)."""
        return self._process.returncode

    @property
    def stderr_tail(self) -> str:
        """The last 64 KiB the server wrote to stderr (when captured; else empty)."""
        return self._stderr.decode("utf-8", "replace")

    # --- the ClientTransport calls ---------------------------------------------------------

    async def request(
        self,
        message: bytes,
        *,
        request_id: str | int,
        headers: Mapping[str, str],
        on_notification: NotificationHandler | None = None,
    ) -> dict[str, Any]:
        """Write the request line; its response, once the reader routes it here."""
        self._raise_if_failed()
        key = _key(request_id)
        if key is None:
            raise ValueError(f"a request id is a string or an integer, not {request_id!r}")
        if key in self._pending:
            raise ValueError(f"request id {request_id!r} is already in flight")
        inbox, messages = anyio.create_memory_object_stream[_Item](math.inf)
        waiter = _Waiter(inbox, _progress_token(message), on_notification is not None)
        self._pending[key] = waiter
        written = False
        try:
            await self._write(message)
            written = True
            while True:
                item = await messages.receive()
                if isinstance(item, TransportError):
                    raise TransportError(str(item))
                if "method" not in item:
                    return item
                if on_notification is not None:
                    await on_notification(item)
        except BaseException:  # cancelled, or on_notification raised: the caller has left
            if written and self._pending.get(key) is waiter:  # unanswered: tell the server
                del self._pending[key]
                with anyio.CancelScope(shield=True):
                    await self._send_cancelled(request_id)
            raise
        finally:
            if self._pending.get(key) is waiter:
                del self._pending[key]
            inbox.close()  # nobody routes to it once it is out of _pending
            messages.close()

    async def notify(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        """Write the notification line."""
        self._raise_if_failed()
        await self._write(message)

    async def aclose(self) -> None:
        """Close stdin and let the server exit; terminate it after `close_timeout_seconds`,
        kill it after as long again. Requests still waiting fail as the process goes."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        try:
            with suppress(*_PIPE_GONE):
                await self._stdin.aclose()
            for stop in (None, self._process.terminate, self._process.kill):
                if stop is not None:
                    stop()
                with anyio.move_on_after(self._close_timeout_seconds):
                    await self._process.wait()
                    break
            self._fail(await self._exit_message("the transport was closed"))
        finally:
            self._closed.set()

    # --- writing ---------------------------------------------------------------------------

    async def _write(self, message: bytes) -> None:
        if b"\n" in message:  # JSON from an encoder escapes newlines in strings: layout only
            message = message.replace(b"\r\n", b" ").replace(b"\n", b" ")
        async with self._write_lock:
            self._raise_if_failed()
            with anyio.move_on_after(self._write_timeout_seconds, shield=True) as scope:
                try:
                    await self._stdin.send(message + b"\n")
                except _PIPE_GONE:
                    with anyio.move_on_after(_EXIT_WAIT_SECONDS):
                        await self._failed.wait()  # the reader is about to say why
                    self._fail("the server process closed its stdin")
            if scope.cancelled_caught:
                seconds = self._write_timeout_seconds
                self._fail(f"the server read nothing of its stdin for {seconds:g} seconds")
        self._raise_if_failed()

    async def _send_cancelled(self, request_id: str | int) -> None:
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id},
        }
        with suppress(TransportError):
            await self._write(msgspec.json.encode(note))

    # --- reading ---------------------------------------------------------------------------

    async def _read_stdout(self) -> None:
        lines = LineBuffer(self._max_line_bytes)
        try:
            while data := await _receive(self._stdout):
                for line in lines.feed(data):
                    if line is LINE_TOO_LONG:
                        limit = self._max_line_bytes
                        self._fail(f"the server wrote a line longer than {limit} bytes")
                        return
                    assert isinstance(line, bytes)
                    self._route(line)
            for line in lines.end():
                self._route(line)
        except _PIPE_GONE:
            pass
        if self._failure is None:
            self._fail(await self._exit_message("the server process closed its stdout"))

    async def _answer_server_requests(self) -> None:
        async for message in self._to_answer:
            assert self.on_server_request is not None
            answer = await self.on_server_request(message)
            with suppress(TransportError):  # (the session failed: the requests waiting say so)
                await self._write(answer)

    async def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        try:
            while data := await _receive(self._process.stderr):
                self._stderr += data
                del self._stderr[:-_STDERR_KEEP_BYTES]
        except _PIPE_GONE:
            pass
        finally:
            self._stderr_done.set()

    def _route(self, line: bytes) -> None:
        if self._failure is not None or not line.strip():
            return
        if too_deep(line):
            self._fail(f"the server wrote a line nested more than {MAX_DEPTH} levels deep")
            return
        try:
            message: Any = msgspec.json.decode(line)
        except msgspec.DecodeError:
            self._fail(f"the server wrote a line that is not JSON on stdout: {preview(line)}")
            return
        kind = response_kind(message)
        if kind == "response":
            self._route_response(message)
        elif kind == "notification":
            self._route_notification(message)
        elif kind == "request" and self.on_server_request is not None:
            try:
                self._asked.send_nowait(message)
            except anyio.WouldBlock:
                limit = _MAX_QUEUED_SERVER_REQUESTS
                self._fail(f"the server sent more than {limit} requests not yet answered")
        elif kind == "request":
            method = message["method"]
            self._fail(f"the server sent a request ({method!r}): protocol violation")
        else:
            self._fail(f"the server wrote a line that is not JSON-RPC: {preview(line)}")

    def _route_response(self, message: dict[str, Any]) -> None:
        if "id" not in message:
            if len(self._pending) == 1:
                only = next(iter(self._pending))
                self._pending.pop(only).inbox.send_nowait(message)
            else:
                error = preview(msgspec.json.encode(message["error"]))
                self._fail_pending(f"the server answered an error without an id: {error}")
            return
        key = _key(message["id"])
        waiter = None if key is None else self._pending.pop(key, None)
        if waiter is None:
            logger.debug("dropped a response to %r: no such request in flight", message["id"])
            return
        waiter.inbox.send_nowait(message)

    def _route_notification(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        token = params.get("progressToken") if isinstance(params, dict) else None
        waiters = [w for w in self._pending.values() if w.wants_notifications]
        if token is not None:
            token_key = _key(token)
            waiters = [w for w in waiters if w.progress_token == token_key]
        if not waiters:
            logger.debug("dropped a %s notification: no request in flight wants it", token)
        for waiter in waiters:
            if waiter.inbox.statistics().current_buffer_used < _MAX_QUEUED_NOTIFICATIONS:
                waiter.inbox.send_nowait(message)

    # --- failure ---------------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        """The session is over: say why to every request waiting, and to every later call."""
        if self._failure is None:
            logger.debug("stdio session failed: %s", reason)
            self._failure = reason
            self._failed.set()
        self._fail_pending(self._failure)

    def _fail_pending(self, reason: str) -> None:
        pending = list(self._pending.values())
        self._pending.clear()
        for waiter in pending:
            waiter.inbox.send_nowait(TransportError(reason))

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise TransportError(self._failure)

    async def _exit_message(self, otherwise: str) -> str:
        """Why the session ended, once the process has exited (bounded wait)."""
        with anyio.move_on_after(_EXIT_WAIT_SECONDS):
            await self._process.wait()
            await self._stderr_done.wait()
        code = self._process.returncode
        reason = otherwise if code is None else f"server process exited with code {code}"
        lines = self.stderr_tail.rstrip("\n").splitlines()[-_STDERR_SHOWN_LINES:]
        return reason + ("; the last lines of its stderr:\n" + "\n".join(lines) if lines else "")


async def _receive(pipe: ByteReceiveStream) -> bytes:
    """What the process wrote next to `pipe`; b"" at its end."""
    try:
        return await pipe.receive(_RECEIVE_BYTES)
    except anyio.EndOfStream:
        return b""


def _key(request_id: object) -> _Key | None:
    """A dict key for an id that tells `1` from `"1"`; None for what is no id."""
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return (type(request_id), request_id)


class _Meta(msgspec.Struct):
    progress_token: Any = msgspec.field(default=None, name="progressToken")


class _Params(msgspec.Struct):
    meta: _Meta | None = msgspec.field(default=None, name="_meta")


class _RequestParams(msgspec.Struct):
    params: _Params | None = None


def _progress_token(message: bytes) -> _Key | None:
    """The `params._meta.progressToken` of an encoded request, if it has one."""
    try:
        request = msgspec.json.decode(message, type=_RequestParams)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    meta = None if request.params is None else request.params.meta
    return None if meta is None else _key(meta.progress_token)
