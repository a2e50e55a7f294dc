"""Streamable HTTP (MCP 2026-07-28) for a `Server` (any `MessageHandler`), h11 on anyio sockets.

Theory of operation
-------------------
`serve_http` listens and runs one `_Connection` per accepted socket. A connection is one
pump loop over an `h11.Connection`, one request at a time, the h11 driver of the exchange
the ASGI app drives too (`_exchange`: the verdict on a head, the body's intake, the shape
and framing of each answer):

    wait for a request head    idle timeout before its first byte, then the header timeout
    a probe?                   `/healthz`, `/readyz` answered at once (`_http_health`)
    check the head             Host, Origin, path, method, Content-Type... (`_http_rules`)
    read the body              counting bytes (413, `_budget`), at its pace (408)
    server.handle(body)        the core checks the MCP headers against the body
    answer                     JSON; SSE from the first notification on; 202 if no reply
    next cycle                 keep-alive, unless either side asked to close

Only the pump reads its socket, and a request pays for no timer. One task, the keeper,
looks at every connection each tick (`_exchange.keeper_tick`: 0.1 s, or less): a wait for
the client that has passed its deadline cancels that connection's pump (408, or a quiet
close if no request had begun); for the request in flight, it asks the connection's
`Keeping` (`_exchange`, the ASGI app's keeper asks the same): one that has been with the
server for a tick gets a watcher task, which reads the socket (the pump does not while the
server answers) and, at end-of-file, cancels the pump (closing the stream is how a client
cancels a request; bytes of a next request go to h11, and the watcher stops); an SSE
answer quiet for `keep_alive_comment_seconds` gets a task that writes it the comment line
`: keep-alive`. A trio deadline per wait and a reader task per connection were simpler,
and cost more than all the rest of the transport (`benchmarks/http.py`).

It runs on anyio: on asyncio (uvloop too) as on trio, the loop the server's tools are written
for; its cancel scopes and events are that loop's own (`_backend`), and on asyncio each
connection is a `ProtocolStream` (`_asyncio_stream`: anyio's asyncio stream cost more).

What HTTP refuses on its own gets a JSON-RPC error object without an id (-32600, a
message naming the problem), and a rate-limited log line (`_http_access`). Anything
JSON-RPC, with the HTTP status of its errors (`Reply.http_status`), is the core's. A
refusal whose body was read keeps the connection; one that leaves the body unread (413,
408, 100-continue) closes it, lingering briefly so that the client reads the answer first.

Cancelling `serve_http` drains: the listeners close, idle connections close, requests in
flight run to their end and are answered with `Connection: close` (a probe on a connection
that had begun it: 503 "draining"); what is left after `drain_timeout_seconds` is
cancelled. Connections run in a nursery shielded from that cancellation, so only the drain
deadline reaches them.
"""

from __future__ import annotations

import contextlib
import logging
import math
from typing import Final, cast

import anyio
import anyio.abc
import h11
from anyio.abc import SocketAttribute

from .._support import backend as _backend
from ._budget import LINGER_BYTES, LINGER_SECONDS, BodyIntake, ByteBudget, slow_body
from ._exchange import (
    CLOSE,
    REASONS,
    Headers,
    Keeping,
    admit,
    answer_of,
    framed,
    handler_failed,
    keeper_tick,
    refusal_answer,
    sse_event,
    sse_head,
)
from ._http_accept import accept, listen
from ._http_access import log_access
from ._http_health import Probes
from ._http_rules import (
    Authenticator,
    HttpConfig,
    Refusal,
    RequestRules,
    Unauthorized,
    declared_body_size,
    is_loopback,
    mcp_headers,
    read_head,
    session_headers,
    target_path,
)
from ._port import MessageHandler, SessionHandler, serves_sessions

__all__ = ["Authenticator", "HttpConfig", "Unauthorized", "serve_http"]

logger = logging.getLogger("mcp_tasks.transports.http")

_RECEIVE_BYTES: Final = 64 * 1024
_FIRST_BYTE: Final = "the first byte of a request"
_HEAD: Final = "the request head"
_BODY: Final = "the request body"
_SLOW_BODY: Final = "the request body (at its minimum rate)"
_MAX_CHUNK_SIZE: Final = 2**63 - 1
"""A chunk declared larger than any length HTTP implementations hold is malformed (400)."""
_GONE: Final = (anyio.BrokenResourceError, anyio.ClosedResourceError)


async def serve_http(
    server: MessageHandler,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    config: HttpConfig | None = None,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `server` over Streamable HTTP until cancelled, then drain.

    Run it inside `async with server.running():`, under `nursery.start` to learn the bound
    port (`port=0` picks a free one). Bound to loopback (the default), requests whose `Host`
    is not a loopback name are refused: DNS rebinding protection. Runs on asyncio or trio.
    """
    config = HttpConfig() if config is None else config
    listeners = await listen(host, port)
    addresses = [listener.extra(SocketAttribute.local_address) for listener in listeners]
    serving = _Serving(server, config, loopback=all(is_loopback(str(a[0])) for a in addresses))
    async with anyio.create_task_group() as nursery:
        connections = await nursery.start(serving.hold_connections)
        for listener in listeners:
            nursery.start_soon(accept, listener, serving.serve_connection, connections)
        bound = int(addresses[0][1])
        logger.info("Streamable HTTP on %s port %d, endpoint %s", host, bound, config.endpoint)
        task_status.started(bound)
        try:
            await anyio.sleep_forever()
        finally:
            serving.start_drain()


class _Serving:
    """What the connections of one `serve_http` share: the server, the rules, the drain."""

    def __init__(self, server: MessageHandler, config: HttpConfig, *, loopback: bool) -> None:
        self.server = server
        self.config = config
        self.rules = RequestRules(config, loopback=loopback, sessions=serves_sessions(server))
        self.probes = Probes(config)
        self.bodies = ByteBudget.of(config)
        self.draining = False
        self.connections: set[_Connection] = set()
        self.tick = keeper_tick(config)
        self._connected = _backend.event()
        self._drain_started = _backend.event()
        self._hold = anyio.CancelScope(shield=True)

    async def hold_connections(
        self,
        task_status: anyio.abc.TaskStatus[anyio.abc.TaskGroup] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The connections' nursery (and the keeper of their time), open until a drain
        ends and shielded from the cancellation of `serve_http`: only the drain deadline
        cancels the requests in flight."""
        with self._hold:
            async with anyio.create_task_group() as keeper:
                keeper.start_soon(self._keep_time)
                async with anyio.create_task_group() as connections:
                    task_status.started(connections)
                    await self._drain_started.wait()
                keeper.cancel_scope.cancel()

    async def _keep_time(self) -> None:
        """Every `tick`, let each connection compare its deadlines with the time (the
        theory of operation says why); a timeout fires up to one tick late."""
        while True:
            if not self.connections:
                self._connected = _backend.event()
                await self._connected.wait()
            await anyio.sleep(self.tick)
            now = anyio.current_time()
            for connection in list(self.connections):
                connection.check_time(now)

    def start_drain(self) -> None:
        logger.info("draining %d connection(s)", len(self.connections))
        self.draining = True
        self.server.end_subscriptions()  # listen streams would otherwise hold the drain
        self._hold.deadline = anyio.current_time() + self.config.drain_timeout_seconds
        self._drain_started.set()
        for connection in list(self.connections):
            connection.close_if_idle()

    async def serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        connection = _Connection(self, stream)
        self.connections.add(connection)
        self._connected.set()
        try:
            await connection.serve()
        except Exception:
            logger.exception("an HTTP connection failed")
        finally:
            self.connections.discard(connection)


class _Connection:
    """One client's connection: its h11 state, its deadlines, the request in flight."""

    def __init__(self, serving: _Serving, stream: anyio.abc.SocketStream) -> None:
        self.serving = serving
        self.config = serving.config
        self.stream = stream
        self.h11 = h11.Connection(
            h11.SERVER, max_incomplete_event_size=self.config.max_header_bytes
        )
        self.opened_at = anyio.current_time()
        self.answered = 0
        self._scope = _backend.cancel_scope()  # the pump's: client deadlines, client gone, drain
        self._waiting_for: str | None = None  # what the pump waits for from the client
        self._deadline = math.inf  # until when it waits
        self._keeping = Keeping(self.config.keep_alive_comment_seconds, serving.tick)
        self._watch: tuple[_backend.CancelScope, _backend.Event] | None = None  # scope, ended
        self._nursery: anyio.abc.TaskGroup | None = None
        self._peer_closed = False
        self._read_for_request = 0  # bytes read since the current request's head began
        self._linger = False
        self._method = b""  # of the request being answered
        self._streaming = False  # the answer in flight is an SSE stream
        self._sse_allowed = True
        self._send_lock = anyio.Lock()
        self._status = 0  # of the answer sent last
        self._logged: h11.Request | None = None  # the request to log, with access_log on
        self._logged_at = 0.0
        self._peer: str | None = None

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
        except Refusal as refusal:  # a size limit or 100-continue: answer, then close
            await self._refuse(refusal, close=True)
        except h11.RemoteProtocolError as error:
            if not self._peer_closed:
                message = f"Invalid HTTP request: {error}"
                invalid = Refusal(error.error_status_hint, message, reason="bad_request")
                await self._refuse(invalid, close=True)
        except _GONE:
            pass  # the client went away while we wrote

    async def _pump(self) -> None:
        while True:
            request = await self._next_request()
            if request is None:
                return
            await self._answer(request)
            self.answered += 1
            if self._logged is not None:
                self._log_access()
            if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
                return  # a side asked to close
            self.h11.start_next_cycle()
            self._method = b""  # a refusal of the next head must not answer it as a HEAD

    async def _next_request(self) -> h11.Request | None:
        """The next request's head; None to close quietly (the client closed, or sent
        nothing in time, or the server drains)."""
        first = self.answered == 0
        if not self.h11.trailing_data[0]:  # nothing of the next request has arrived yet
            if self._peer_closed or self.serving.draining:
                return None
            if first:
                deadline = self.opened_at + self.config.header_timeout_seconds
            else:
                deadline = anyio.current_time() + self.config.idle_timeout_seconds
            await self._receive(_FIRST_BYTE, deadline)
        self._read_for_request = len(self.h11.trailing_data[0])
        started_at = self.opened_at if first else anyio.current_time()
        event = await self._next_event(_HEAD, started_at + self.config.header_timeout_seconds)
        if isinstance(event, h11.ConnectionClosed):
            return None
        assert isinstance(event, h11.Request), event
        # h11 bounds a head that arrives in pieces; one that came whole in a single read is
        # measured here, so the limit holds however the bytes were cut.
        if self._read_for_request <= self.config.max_header_bytes:
            return event  # the head is inside what was read: it cannot be longer
        size = len(event.method) + len(event.target) + 12  # the request line
        size += sum(len(name) + len(value) + 4 for name, value in event.headers.raw_items())
        if size > self.config.max_header_bytes:
            limit = self.config.max_header_bytes
            message = f"Request head too large: {size} bytes, at most {limit}"
            raise Refusal(431, message, reason="head_too_large")
        return event

    async def _next_event(
        self, what: str, deadline: float, *, body_so_far: int | None = None
    ) -> h11.Event:
        """The next event h11 parses, reading more until `deadline` if it needs to. Reading
        a body (`body_so_far` bytes of it in), a chunk declared too large for the limit is
        refused before any more of it is waited for."""
        while True:
            event = self.h11.next_event()
            if not isinstance(event, type):
                return event
            assert event is h11.NEED_DATA, "h11 paused: the pump read past its request"
            if body_so_far is not None:
                self._check_declared_chunk(body_so_far)
            await self._receive(what, deadline)

    def _check_declared_chunk(self, body_so_far: int) -> None:
        # h11 keeps the size of the chunk it is reading to itself; without it (another h11)
        # the body is still counted as it arrives.
        pending = getattr(getattr(self.h11, "_reader", None), "_bytes_in_chunk", 0)
        if not isinstance(pending, int) or not pending:
            return
        if pending > _MAX_CHUNK_SIZE:
            message = f"Invalid chunk size: {pending} bytes overflows what HTTP carries"
            raise Refusal(400, message, reason="bad_request")
        limit = self.config.max_body_bytes
        if body_so_far + pending > limit:
            message = f"Request body too large: a chunk of {pending} bytes, at most {limit} in all"
            raise Refusal(413, message, reason="too_large")

    async def _receive(self, what: str, deadline: float) -> None:
        """Feed h11 the next bytes; waiting past `deadline` cancels `_scope` (a timeout)."""
        self._waiting_for = what
        self._deadline = deadline
        try:
            data = await self.stream.receive(_RECEIVE_BYTES)
        except (anyio.EndOfStream, *_GONE):
            data = b""
        self._waiting_for = None
        self._read_for_request += len(data)
        self._peer_closed = not data
        self.h11.receive_data(data)

    async def _answer(self, request: h11.Request) -> None:
        self._method = request.method
        if self.config.access_log:
            self._start_access(request)
        if request.target != self.serving.rules.endpoint:
            kind = self.serving.probes.kind_of(target_path(request.target))
            if kind is not None:
                await self._answer_probe(kind)
                return
        found, params = read_head(request)
        refusal, principal = await admit(
            self.serving.rules,
            request.method,
            request.target,
            found,
            request.headers,
            authenticate=self.config.authenticate,
        )
        if self.h11.they_are_waiting_for_100_continue:
            if refusal is not None:
                raise refusal  # the body is not on its way: answer and close
            await self._send(h11.InformationalResponse(status_code=100, headers=[]))
        intake = BodyIntake(self.serving.bodies, self.config, anyio.current_time())
        try:
            try:
                body = await self._read_body(found.get(b"content-length"), intake)
            except Refusal:
                if refusal is not None:
                    raise refusal from None
                raise
            if refusal is not None:
                await self._refuse(refusal, close=False)  # the body was read: keep the connection
                return
            await self._call_server(found, body, params, principal, request.method)
        finally:
            intake.give_back()  # read and answered: its bytes are free for the next

    async def _read_body(self, content_length: bytes | None, intake: BodyIntake) -> bytes:
        """The body, its bytes taken from the budget as they come, at the pace it must
        keep (`_budget`); a `Content-Length` over the limit is 413 before a byte is read."""
        declared_body_size(content_length, self.config.max_body_bytes)
        while True:
            deadline = intake.deadline()
            what = _BODY if deadline >= intake.end else _SLOW_BODY
            event = await self._next_event(what, deadline, body_so_far=intake.size)
            if isinstance(event, h11.EndOfMessage):
                return intake.body()
            assert isinstance(event, h11.Data), event
            await intake.take(event.data)

    async def _answer_probe(self, kind: str) -> None:
        """A health probe: answered before any rule, its body (if any) left unread."""
        serving = self.serving
        answer = await serving.probes.answer(
            kind, self._method, serving.server, draining=serving.draining
        )
        headers = list(answer.headers)
        if not isinstance(self.h11.next_event(), h11.EndOfMessage):  # it has a body
            headers.append(CLOSE)
            self._linger = True
        await self._send_response(answer.status, headers, answer.body)

    # --- the server's answer -------------------------------------------------------------

    async def _call_server(
        self,
        found: dict[bytes, bytes],
        body: bytes,
        params: dict[str, str],
        principal: str | None,
        method: bytes,
    ) -> None:
        headers = mcp_headers(found, params)
        session = session_headers(method, found)
        self._streaming = False
        self._sse_allowed = self.serving.rules.allows_event_stream(found.get(b"accept"))
        self._keeping.handling(anyio.current_time())
        try:
            server = self.serving.server
            if session is None:
                reply = await server.handle(
                    body, headers=headers, notify=self._notify, principal=principal
                )
            else:  # a 2025 session's request (`_port.SessionHandler`)
                reply = await cast(SessionHandler, server).handle(
                    body, headers=headers, notify=self._notify, principal=principal, session=session
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
        if self._streaming:
            async with self._send_lock:
                last = [] if reply is None else [h11.Data(data=sse_event(reply.body))]
                await self._send(*last, h11.EndOfMessage())
        else:
            await self._send_response(*answer_of(reply))

    async def _notify(self, message: bytes) -> None:
        """Send a notification of the request in flight; the first one turns the answer
        into an SSE stream. A client that is gone cancels the request here."""
        if not self._sse_allowed or self._keeping.since == math.inf:  # ended
            return
        try:
            async with self._send_lock:
                event = h11.Data(data=sse_event(message))
                if self._streaming:
                    await self._send(event)
                else:
                    self._streaming, self._status = True, 200
                    headers = sse_head(draining=self.serving.draining)
                    await self._send(h11.Response(status_code=200, headers=headers, reason=b"OK"))
                    await self._send(event)
                self._keeping.sent(anyio.current_time())
        except _GONE:
            self._peer_closed = True
            self._scope.cancel()
            await anyio.lowlevel.checkpoint()

    async def _keep_alive(self) -> None:
        """The keeper found the SSE answer in flight quiet: a comment shows it is alive."""
        try:
            async with self._send_lock:
                comment = self._keeping.comment(anyio.current_time())
                if comment is not None:  # still quiet, not yet ended
                    await self._send(h11.Data(data=comment))
                    self._keeping.sent(anyio.current_time())
        except _GONE:
            self._peer_closed = True
            self._scope.cancel()

    # --- noticing a client that leaves mid-request ----------------------------------------

    async def _watch_client(self, scope: _backend.CancelScope, ended: _backend.Event) -> None:
        """Cancel the request in flight if the client closes the connection: end-of-file (or
        an error) cancels the pump's scope; bytes of a next request go to h11, for the pump."""
        try:
            with scope:  # cancelled before this task ran: nothing is read
                try:
                    data = await self.stream.receive(_RECEIVE_BYTES)
                except (anyio.EndOfStream, *_GONE):
                    data = b""
                if data:
                    self.h11.receive_data(data)
                    await anyio.sleep_forever()  # until the request ends
                self._peer_closed = True
                self._scope.cancel()
        finally:
            ended.set()

    # --- the access log (`HttpConfig.access_log`) ---------------------------------------

    def _start_access(self, request: h11.Request) -> None:
        self._logged, self._logged_at, self._status = request, anyio.current_time(), 0
        if self._peer is None:
            with contextlib.suppress(OSError, anyio.TypedAttributeLookupError):
                address = self.stream.extra(SocketAttribute.remote_address)
                if isinstance(address, tuple):
                    self._peer = f"{address[0]}:{address[1]}"

    def _log_access(self) -> None:
        request, self._logged = self._logged, None
        assert request is not None
        took = anyio.current_time() - self._logged_at
        headers = request.headers.raw_items()
        log_access(request.method, request.target, headers, self._status, took, client=self._peer)

    # --- writing -------------------------------------------------------------------------

    async def _refuse(self, refusal: Refusal, *, close: bool) -> None:
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return  # an answer has begun already: nothing more can be said
        answer = refusal_answer(refusal, self.serving.server, close=close)
        self._linger = self._linger or close
        with contextlib.suppress(*_GONE):
            await self._send_response(*answer)

    async def _send_response(self, status: int, headers: Headers, body: bytes) -> None:
        self._status = status
        framed(headers, body, draining=self.serving.draining)
        reason = REASONS.get(status, b"")
        response = h11.Response(status_code=status, headers=headers, reason=reason)
        if self._method == b"HEAD":  # its answer has headers only
            await self._send(response, h11.EndOfMessage())
        else:
            await self._send(response, h11.Data(data=body), h11.EndOfMessage())

    async def _send(self, *events: h11.Event) -> None:
        data = b"".join(self.h11.send(event) or b"" for event in events)
        await self.stream.send(data)

    async def _linger_then_close(self) -> None:
        """Half-close, and drop what the client still sends for a moment: closing a socket
        with unread bytes resets it, and the client could lose the answer just sent."""
        gone = (anyio.EndOfStream, OSError, *_GONE)  # OSError: a reset before shutdown
        with anyio.move_on_after(LINGER_SECONDS), contextlib.suppress(*gone):
            await self.stream.send_eof()
            dropped = 0
            while dropped < LINGER_BYTES:
                dropped += len(await self.stream.receive(_RECEIVE_BYTES))
