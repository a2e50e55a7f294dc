"""One connection of the built-in HTTP server (`_http_server`): its pump, its answers,
the client watched while the server answers. The theory of operation is `_http_server`'s."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

from .._support import backend as _backend
from ..core import Reply
from ._budget import LINGER_BYTES, LINGER_SECONDS, BodyIntake, slow_body
from ._exchange import (
    CLOSE,
    Headers,
    Keeping,
    admit,
    answer_of,
    framed,
    handler_failed,
    refusal_answer,
    sse_event,
    sse_head,
)
from ._http_access import log_access
from ._http_rules import (
    Refusal,
    declared_body_size,
    mcp_headers,
    session_headers,
    target_path,
)
from ._http_wire import (
    LAST_CHUNK,
    RequestHead,
    RequestInput,
    chunk,
    json_answer_bytes,
    response_bytes,
    stream_head,
)
from ._port import PostAnswer

if TYPE_CHECKING:
    from ._http_server import _Serving

logger = logging.getLogger("mcp_tasks.transports.http")

_RECEIVE_BYTES: Final = 64 * 1024
_FIRST_BYTE: Final = "the first byte of a request"
_HEAD: Final = "the request head"
_BODY: Final = "the request body"
_SLOW_BODY: Final = "the request body (at its minimum rate)"
_GONE: Final = (anyio.BrokenResourceError, anyio.ClosedResourceError)


class _ClientLeft(Exception):
    """The client closed the connection in the middle of a request."""


class HttpConnection:
    """One client's connection: what it sent (`RequestInput`), its deadlines, the request
    in flight."""

    def __init__(self, serving: _Serving, stream: anyio.abc.SocketStream) -> None:
        self.serving = serving
        self.config = serving.config
        self.stream = stream
        self.input = RequestInput(self.config.max_header_bytes)
        self._now = _backend.clock()
        self.opened_at = self._now()
        self.answered = 0
        self._scope = _backend.cancel_scope()  # the pump's: client deadlines, client gone, drain
        self._waiting_for: str | None = None  # what the pump waits for from the client
        self._deadline = math.inf  # until when it waits
        self._keeping = Keeping(self.config.keep_alive_comment_seconds, serving.tick)
        self._watch: tuple[_backend.CancelScope, _backend.Event] | None = None  # scope, ended
        self._nursery: anyio.abc.TaskGroup | None = None
        self._peer_closed = False
        self._linger = False
        self._method = b""  # of the request being answered
        self._client_keeps = True  # the client keeps the connection after the request
        self._chunked = True  # a stream is sent in chunks (not to an HTTP/1.0 client)
        self._responding = False  # an answer to the request has begun
        self._closing = False  # an answer said `Connection: close`
        self._streaming = False  # the answer in flight is an SSE stream
        self._sse_allowed = True
        self._send_lock = anyio.Lock()
        self._status = 0  # of the answer sent last
        self._logged: RequestHead | None = None  # the request to log, with access_log on
        self._logged_at = 0.0
        self._peer: str | None = None
        self._post = _PostAnswer(self)  # the notify of a 2025 session's requests

    async def serve(self) -> None:
        try:
            async with anyio.create_task_group() as self._nursery:
                with self._scope:
                    await self._pump_until_closed()
                self._nursery.cancel_scope.cancel()
            waited = self._waiting_for
            if self._scope.cancelled_caught and waited in (_HEAD, _BODY, _SLOW_BODY):
                message = f"Request timeout: {waited} did not arrive in time"
                timeout = (
                    slow_body() if waited is _SLOW_BODY else Refusal(408, message, reason="timeout")
                )
                await self._refuse(timeout, close=True)
            if self._linger and not self._peer_closed:
                await self._linger_then_close()
            if self._logged is not None:  # answered by a refusal that closes, or never
                self._log_access()
        finally:
            await anyio.aclose_forcefully(self.stream)

    def close_if_idle(self) -> None:
        if self._waiting_for is _FIRST_BYTE:
            self._scope.cancel()

    def check_time(self, now: float) -> None:
        """The keeper's tick: end a wait for the client past its deadline; ask the request
        in flight's `Keeping` whether to watch its client, or to comment on its stream."""
        if self._waiting_for is not None and now >= self._deadline:
            self._scope.cancel()
        elif self._keeping.watch_due(now):
            assert self._nursery is not None
            self._watch = (_backend.cancel_scope(), _backend.event())
            self._nursery.start_soon(self._watch_client, *self._watch)
        if self._keeping.comment_due(now):
            assert self._nursery is not None
            self._nursery.start_soon(self._keep_alive)

    # --- the pump ------------------------------------------------------------------------

    async def _pump_until_closed(self) -> None:
        try:
            await self._pump()
        except Refusal as refusal:  # bad HTTP, a size limit, 100-continue: answer, then close
            await self._refuse(refusal, close=True)
        except (_ClientLeft, *_GONE):
            pass  # the client went away mid-request, or while we wrote

    async def _pump(self) -> None:
        while True:
            request = await self._next_request()
            if request is None:
                return
            await self._answer(request)
            self.answered += 1
            if self._logged is not None:
                self._log_access()
            if self._post.ended:
                return  # answered before its request ended: the client resumes elsewhere
            if not self._client_keeps or self._closing or self.input.reading_body:
                return  # a side asked to close, or the body was left unread
            self._method = b""  # a refusal of the next head must not answer it as a HEAD
            self._responding = False

    async def _next_request(self) -> RequestHead | None:
        """The next request's head; None to close quietly (the client closed, or sent
        nothing in time, or the server drains). A head that is not one is a `Refusal`."""
        first = self.answered == 0
        if not self.input.buffered:  # nothing of the next request has arrived yet
            if self._peer_closed or self.serving.draining:
                return None
            if first:
                deadline = self.opened_at + self.config.header_timeout_seconds
            else:
                deadline = self._now() + self.config.idle_timeout_seconds
            await self._receive(_FIRST_BYTE, deadline)
        started_at = self.opened_at if first else self._now()
        deadline = started_at + self.config.header_timeout_seconds
        while (head := self.input.next_head()) is None:
            if self._peer_closed:
                return None  # closed before its head was whole
            await self._receive(_HEAD, deadline)
        self._client_keeps = head.keep_alive and head.http_version == "1.1"
        self._chunked = head.http_version == "1.1"
        return head

    async def _receive(self, what: str, deadline: float) -> None:
        """Read the next bytes; waiting past `deadline` cancels `_scope` (a timeout)."""
        self._waiting_for = what
        self._deadline = deadline
        try:
            data = await self.stream.receive(_RECEIVE_BYTES)
        except (anyio.EndOfStream, *_GONE):
            data = b""
        self._waiting_for = None
        self._peer_closed = not data
        self.input.receive(data)

    async def _answer(self, request: RequestHead) -> None:
        self._method = method = request.method
        if self.config.access_log:
            self._start_access(request)
        serving = self.serving
        rules = serving.rules
        if request.target != rules.endpoint:
            kind = serving.probes.kind_of(target_path(request.target))
            if kind is not None:
                await self._answer_probe(kind)
                return
        found = request.found
        if request.passed:  # a repeated head, let through before (`RequestHead.passed`)
            refusal, principal = None, None
        elif rules.authenticate is None:  # the verdict needs no wait
            refusal, principal = rules.refusal_for(method, request.target, found), None
            request.passed = refusal is None and method == b"POST"
        else:
            refusal, principal = await admit(
                rules,
                method,
                request.target,
                found,
                request.headers,
                authenticate=rules.authenticate,
            )
        size = self.input.whole_body_size(self.config.max_body_bytes)
        if size is not None and serving.bodies.take_now(size):  # here already, and room
            try:
                body = self.input.take_whole_body()
                if request.passed:  # no refusal, and no authenticator: no scopes to check
                    await self._call_server(request, body, None)
                else:
                    await self._answer_body(request, refusal, body, principal)
            finally:
                serving.bodies.give_back(size)
            return
        if request.expects_continue and not self.input.buffered:
            if refusal is not None:
                raise refusal  # the body is not on its way: answer and close
            await self.stream.send(response_bytes(100, [], b"", head_only=True))
        intake = BodyIntake(serving.bodies, self.config, self._now())
        try:
            try:
                body = await self._read_body(found.get(b"content-length"), intake)
            except Refusal:
                if refusal is not None:
                    raise refusal from None
                raise
            await self._answer_body(request, refusal, body, principal)
        finally:
            intake.give_back()  # read and answered: its bytes are free for the next

    async def _answer_body(
        self, request: RequestHead, refusal: Refusal | None, body: bytes, principal: str | None
    ) -> None:
        """The answer to a request whose body was read whole: its refusal, if the head
        or the body's operation has one (the connection is kept), or the server's."""
        if refusal is None:
            refusal = self.serving.rules.forbidden(body, self.serving.server)
        if refusal is not None:
            await self._refuse(refusal, close=False)
        else:
            await self._call_server(request, body, principal)

    async def _read_body(self, content_length: bytes | None, intake: BodyIntake) -> bytes:
        """The body, its bytes taken from the budget as they come, at the pace it must
        keep (`_budget`); a `Content-Length` over the limit is 413 before a byte is read."""
        limit = self.config.max_body_bytes
        declared_body_size(content_length, limit)
        while True:
            data = self.input.next_body(intake.size, limit)
            if data is None:
                if self._peer_closed:
                    raise _ClientLeft
                deadline = intake.deadline()
                await self._receive(_BODY if deadline >= intake.end else _SLOW_BODY, deadline)
            elif data:
                await intake.take(data)
            else:
                return intake.body()

    async def _answer_probe(self, kind: str) -> None:
        """A health probe: answered before any rule, its body (if any) left unread."""
        serving = self.serving
        answer = await serving.probes.answer(
            kind, self._method, serving.server, draining=serving.draining
        )
        headers = list(answer.headers)
        if not self.input.end_if_no_body():  # its body is left unread: close after
            headers.append(CLOSE)
            self._linger = True
        await self._send_response(answer.status, headers, answer.body)

    # --- the server's answer -------------------------------------------------------------

    async def _call_server(self, request: RequestHead, body: bytes, principal: str | None) -> None:
        found, method = request.found, request.method
        headers = request.mcp
        if headers is None:  # made once a head: a repeated one is read once (`RequestInput`)
            headers = request.mcp = mcp_headers(found, request.params)
        if request.event_stream is None:
            request.event_stream = self.serving.rules.allows_event_stream(found.get(b"accept"))
        self._sse_allowed = request.event_stream
        if b"mcp-session-id" not in found and method == b"POST":
            session = None  # what every 2026-07-28 request is (`session_headers`)
        else:
            session = session_headers(method, found, event_stream=self._sse_allowed)
        self._streaming = False
        self._post.next_request()
        self._keeping.handling(self._now())
        try:
            server = self.serving.server
            if session is None:
                reply = await server.handle(
                    body, headers=headers, notify=self._notify, principal=principal
                )
            else:  # a 2025 session's request (`_port.SessionHandler`)
                reply = await self.serving.session_server.handle(
                    body,
                    headers=headers,
                    notify=self._post,
                    principal=principal,
                    session=session,
                )
        except Exception:
            reply = handler_failed(body, logger)
        finally:
            self._keeping.ended()
            watch, self._watch = self._watch, None
            if watch is not None:
                watch[0].cancel()  # the pump reads this socket next, once the watcher ended
        if watch is not None:
            await watch[1].wait()
        if self._post.ended:
            return  # `_PostAnswer.end` ended it, or the client left: nothing more to send
        if self._streaming:
            async with self._send_lock:
                last = b"" if reply is None else self._stream_bytes(sse_event(reply.body))
                await self.stream.send(last + self._stream_end())
        elif reply is not None and _bare_json(reply) and self._plain_post():
            self._status, self._responding = reply.http_status, True
            await self.stream.send(json_answer_bytes(reply.http_status, reply.body))
        else:
            await self._send_response(*answer_of(reply))

    async def _notify(self, message: bytes) -> None:
        """Send a notification of the request in flight; the first one turns the answer
        into an SSE stream. A client that is gone cancels the request here."""
        if not self._sse_allowed or self._keeping.since == math.inf:  # ended
            return
        try:
            async with self._send_lock:
                event = self._stream_bytes(sse_event(message))
                if not self._streaming:
                    self._streaming, self._status = True, 200
                    event = self._stream_head() + event
                await self.stream.send(event)
                self._keeping.sent(self._now())
        except _GONE:
            self._peer_closed = True
            if not self._post.let_go():
                self._scope.cancel()
                await anyio.lowlevel.checkpoint()

    async def _keep_alive(self) -> None:
        """The keeper found the SSE answer in flight quiet: a comment shows it is alive."""
        try:
            async with self._send_lock:
                comment = self._keeping.comment(self._now())
                if comment is not None:  # still quiet, not yet ended
                    await self.stream.send(self._stream_bytes(comment))
                    self._keeping.sent(self._now())
        except _GONE:
            self._peer_closed = True
            if not self._post.let_go():
                self._scope.cancel()

    # --- noticing a client that leaves mid-request ----------------------------------------

    async def _watch_client(self, scope: _backend.CancelScope, ended: _backend.Event) -> None:
        """Cancel the request in flight if the client closes the connection: end-of-file (or
        an error) cancels the pump's scope; bytes of a next request are kept for the pump."""
        try:
            with scope:  # cancelled before this task ran: nothing is read
                try:
                    data = await self.stream.receive(_RECEIVE_BYTES)
                except (anyio.EndOfStream, *_GONE):
                    data = b""
                if data:
                    self.input.receive(data)
                    await anyio.sleep_forever()  # until the request ends
                self._peer_closed = True
                if not self._post.let_go():
                    self._scope.cancel()
        finally:
            ended.set()

    # --- the access log (`HttpConfig.access_log`) ---------------------------------------

    def _start_access(self, request: RequestHead) -> None:
        self._logged, self._logged_at, self._status = request, self._now(), 0
        if self._peer is None:
            with contextlib.suppress(OSError, anyio.TypedAttributeLookupError):
                address = self.stream.extra(SocketAttribute.remote_address)
                if isinstance(address, tuple):
                    self._peer = f"{address[0]}:{address[1]}"

    def _log_access(self) -> None:
        request, self._logged = self._logged, None
        assert request is not None
        took = self._now() - self._logged_at
        log_access(
            request.method, request.target, request.headers, self._status, took, client=self._peer
        )

    # --- writing -------------------------------------------------------------------------

    async def _refuse(self, refusal: Refusal, *, close: bool) -> None:
        if self._responding:
            return  # an answer has begun already: nothing more can be said
        answer = refusal_answer(refusal, self.serving.server, close=close)
        self._linger = self._linger or close
        with contextlib.suppress(*_GONE):
            await self._send_response(*answer)

    async def _send_response(self, status: int, headers: Headers, body: bytes) -> None:
        self._status = status
        framed(headers, body, draining=self.serving.draining)
        self._will_close(headers)
        head_only = self._method == b"HEAD"  # its answer has headers only
        await self.stream.send(response_bytes(status, headers, body, head_only=head_only))

    def _plain_post(self) -> bool:
        """The answer in flight is to a `POST`, and says nothing of closing."""
        return self._method == b"POST" and self._client_keeps and not self.serving.draining

    def _will_close(self, headers: Headers) -> None:
        """Note the answer begun; say `Connection: close` if either side closes after it."""
        self._responding = True
        if CLOSE in headers:
            self._closing = True
        elif not self._client_keeps:
            headers.append(CLOSE)

    def _stream_head(self) -> bytes:
        headers = sse_head(draining=self.serving.draining)
        self._will_close(headers)
        return stream_head(200, headers, chunked=self._chunked)

    def _stream_bytes(self, data: bytes) -> bytes:
        return chunk(data) if self._chunked else data

    def _stream_end(self) -> bytes:
        return LAST_CHUNK if self._chunked else b""

    async def _linger_then_close(self) -> None:
        """Half-close, and drop what the client still sends for a moment: closing a socket
        with unread bytes resets it, and the client could lose the answer just sent."""
        gone = (anyio.EndOfStream, OSError, *_GONE)  # OSError: a reset before shutdown
        with anyio.move_on_after(LINGER_SECONDS), contextlib.suppress(*gone):
            await self.stream.send_eof()
            dropped = 0
            while dropped < LINGER_BYTES:
                dropped += len(await self.stream.receive(_RECEIVE_BYTES))


def _bare_json(reply: Reply) -> bool:
    """Whether `reply` is a JSON body and nothing more to say: nearly every answer, written
    in one step (`json_answer_bytes`; what `answer_of` and `framed` would make)."""
    return type(reply) is Reply and reply.retry_after_seconds is None and bool(reply.body)


class _PostAnswer(PostAnswer):
    """A connection's notify for a 2025 session's requests (`PostAnswer`): a request that
    outlives its client is told when the client leaves, not cancelled; one whose answer
    ends early runs on in the pump's task, and the connection closes after it."""

    __slots__ = ("_connection", "_gone", "ended")

    def __init__(self, connection: HttpConnection) -> None:
        self._connection = connection
        self._gone: Callable[[], None] | None = None  # `outlive_client`'s
        self.ended = False
        """The answer ended before the request (`end`, or its client left)."""

    def next_request(self) -> None:
        self._gone, self.ended = None, False

    async def __call__(self, message: bytes) -> None:
        await self._connection._notify(message)

    def outlive_client(self, gone: Callable[[], None]) -> None:
        self._gone = gone

    def let_go(self) -> bool:
        """The client went away: True if the request in flight outlives it (it is told,
        and runs on); False if it is to be cancelled."""
        if self.ended:
            return True  # answered already: its request runs on
        gone, self._gone = self._gone, None
        if gone is None:
            return False
        self.ended = True
        self._connection._keeping.ended()  # nothing more is written, nor watched
        gone()
        return True

    def cancel(self) -> None:
        self._connection._scope.cancel()

    async def end(self) -> None:
        connection = self._connection
        async with connection._send_lock:
            if self.ended:
                return
            self.ended, self._gone = True, None
            connection._keeping.ended()
            with contextlib.suppress(OSError, *_GONE):
                if connection._streaming:
                    await connection.stream.send(connection._stream_end())
                else:
                    await connection._send_response(*answer_of(None))
                await connection.stream.send_eof()
