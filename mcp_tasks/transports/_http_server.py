"""Streamable HTTP (MCP 2026-07-28) for a `Server`: h11 on trio sockets.

Theory of operation
-------------------
`serve_http` listens and runs one `_Connection` per accepted socket. A connection is one
pump loop over an `h11.Connection`, one request at a time:

    wait for a request head    idle timeout before its first byte, then the header timeout
    check the head             Host, Origin, path, method, Content-Type (421/403/404/405/415)
    read the body              counting bytes (413), under the body timeout (408)
    server.handle(body)        the core checks the MCP headers against the body
    answer                     JSON; SSE from the first notification on; 202 if no reply
    next cycle                 keep-alive, unless either side asked to close

Only the pump reads its socket, and a request pays for no timer. One task, the keeper,
looks at every connection each tick (0.1 s): a wait for the client that has passed its
deadline cancels that connection's pump (408, or a quiet close if no request had begun);
a request that has been with the server for a tick gets a watcher task, which waits for
the socket to turn readable and, at end-of-file, cancels the pump (closing the stream is
how a client cancels a request). A trio deadline per wait and a reader task per connection
were simpler, and cost more than all the rest of the transport (`benchmarks/http.py`).

What HTTP refuses on its own gets a JSON-RPC error object without an id (-32600, a
message naming the problem). Anything JSON-RPC, with the HTTP status of its errors
(`Reply.http_status`), is the core's. A refusal whose body was read keeps the connection;
one that leaves the body unread (413, 408, 100-continue) closes it, lingering briefly so
that the client reads the answer before the socket goes.

Cancelling `serve_http` drains: the listeners close, idle connections close, requests in
flight run to their end and are answered with `Connection: close`; whatever is left after
`drain_timeout_seconds` is cancelled. Connections run in a nursery shielded from that
cancellation, so only the drain deadline reaches them.
"""

from __future__ import annotations

import contextlib
import http
import inspect
import ipaddress
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Final
from urllib.parse import urlsplit

import h11
import msgspec
import trio

from ..core import INTERNAL_ERROR, INVALID_REQUEST, HttpHeaders, Reply
from ..server import Server

__all__ = ["HttpConfig", "serve_http"]

logger = logging.getLogger("mcp_tasks.transports.http")

_RECEIVE_BYTES: Final = 64 * 1024
_TICK_SECONDS: Final = 0.1  # how often deadlines are checked, at the most
_FIRST_BYTE: Final = "the first byte of a request"
_HEAD: Final = "the request head"
_BODY: Final = "the request body"
_LINGER_SECONDS: Final = 1.0
_LINGER_BYTES: Final = 1024 * 1024
_READ_HEADERS: Final = frozenset(
    {
        b"host",
        b"origin",
        b"content-type",
        b"content-length",
        b"transfer-encoding",
        b"accept",
        b"mcp-protocol-version",
        b"mcp-method",
        b"mcp-name",
    }
)
_PARAM_PREFIX: Final = b"mcp-param-"
_JSON: Final = (b"content-type", b"application/json")
_CLOSE: Final = (b"connection", b"close")
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_REASONS: Final = {status.value: status.phrase.encode() for status in http.HTTPStatus}


@dataclass(frozen=True, kw_only=True)
class HttpConfig:
    """Where the endpoint is, the limits and timeouts, and whom the server answers."""

    endpoint: str = "/mcp"
    """The one path that takes MCP messages (POST only); other paths are 404."""
    max_body_bytes: int = 4 * 1024 * 1024
    """A larger body is refused with 413, by its Content-Length or while it is counted."""
    max_header_bytes: int = 16 * 1024
    """Request line and headers together; more is 431."""
    header_timeout_seconds: float = 10.0
    """From a connection's opening, or a request's first byte, until its head is in (408)."""
    body_timeout_seconds: float = 30.0
    """From the end of the head until the whole body is in (408)."""
    idle_timeout_seconds: float = 60.0
    """How long a keep-alive connection may wait for its next request before it closes."""
    drain_timeout_seconds: float = 10.0
    """On shutdown, how long requests in flight may run before they are cancelled."""
    allowed_hosts: frozenset[str] = frozenset()
    """`Host` values accepted besides localhost, 127.0.0.1 and ::1 (a name, or name:port).
    Empty on a non-loopback bind: any Host is accepted."""
    allowed_origins: frozenset[str] = frozenset()
    """`Origin` values accepted besides loopback ones, e.g. `https://app.example.com`."""
    authenticate: Authenticator | None = None
    """Who sends each request: called with its headers (names lowercased), it returns the
    caller's principal (a non-empty string), or raises `Unauthorized` (HTTP 401). Every
    task is bound to the principal that created it. None: no authentication, every
    request is nobody's, and any task id opens its task."""

    def __post_init__(self) -> None:
        if not self.endpoint.startswith("/"):
            raise ValueError(f"endpoint must be a path starting with '/', not {self.endpoint!r}")
        for name in ("max_body_bytes", "max_header_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive number of bytes")
        for name in ("header", "body", "idle", "drain"):
            if getattr(self, f"{name}_timeout_seconds") <= 0:
                raise ValueError(f"{name}_timeout_seconds must be positive")
        object.__setattr__(self, "allowed_hosts", _lowered(self.allowed_hosts))
        origins = _lowered(origin.rstrip("/") for origin in self.allowed_origins)
        object.__setattr__(self, "allowed_origins", origins)


async def serve_http(
    server: Server,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    config: HttpConfig | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `server` over Streamable HTTP until cancelled, then drain.

    Run it inside `async with server.running():`, under `nursery.start` to learn the bound
    port (`port=0` picks a free one). Bound to loopback (the default), requests whose `Host`
    is not a loopback name are refused: DNS rebinding protection.
    """
    config = HttpConfig() if config is None else config
    listeners = await trio.open_tcp_listeners(port, host=host)
    addresses = [listener.socket.getsockname() for listener in listeners]
    serving = _Serving(server, config, loopback=all(_is_loopback(a[0]) for a in addresses))
    async with trio.open_nursery() as nursery:
        connections = await nursery.start(serving.hold_connections)
        serve = partial(trio.serve_listeners, handler_nursery=connections)
        await nursery.start(serve, serving.serve_connection, listeners)
        bound: int = addresses[0][1]
        logger.info("Streamable HTTP on %s port %d, endpoint %s", host, bound, config.endpoint)
        task_status.started(bound)
        try:
            await trio.sleep_forever()
        finally:
            serving.start_drain()


class Unauthorized(Exception):
    """Raise in an authenticator: the request is answered 401 with `message` and a
    `WWW-Authenticate: challenge` header, and its body is never read."""

    def __init__(self, message: str, *, challenge: str = 'Bearer realm="mcp"') -> None:
        super().__init__(message)
        self.message = message
        self.challenge = challenge


Authenticator = Callable[[Mapping[str, str]], "str | Awaitable[str]"]


class _Refusal(Exception):
    """An answer HTTP gives by itself, instead of the server's. Raised, it also closes."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        allow: bytes | None = None,
        challenge: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra_headers = [] if allow is None else [(b"allow", allow)]
        if challenge is not None:
            self.extra_headers.append((b"www-authenticate", challenge.encode("latin-1")))


class _Serving:
    """What the connections of one `serve_http` share: the server, the rules, the drain."""

    def __init__(self, server: Server, config: HttpConfig, *, loopback: bool) -> None:
        self.server = server
        self.config = config
        self.endpoint = config.endpoint.encode()
        self.check_host = loopback or bool(config.allowed_hosts)
        self.draining = False
        self.connections: set[_Connection] = set()
        shortest = min(
            config.header_timeout_seconds,
            config.body_timeout_seconds,
            config.idle_timeout_seconds,
        )
        self.tick = min(_TICK_SECONDS, shortest / 4)
        self._host_verdicts: dict[bytes | None, bool] = {}
        self._json_verdicts: dict[bytes, bool] = {}
        self._accept_verdicts: dict[bytes, bool] = {}
        self.event_stream_verdicts: dict[bytes, bool] = {}
        self._connected = trio.Event()
        self._drain_started = trio.Event()
        self._hold = trio.CancelScope(shield=True)

    async def hold_connections(
        self, task_status: trio.TaskStatus[trio.Nursery] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The connections' nursery (and the keeper of their time), open until a drain
        ends and shielded from the cancellation of `serve_http`: only the drain deadline
        cancels the requests in flight."""
        with self._hold:
            async with trio.open_nursery() as keeper:
                keeper.start_soon(self._keep_time)
                async with trio.open_nursery() as connections:
                    task_status.started(connections)
                    await self._drain_started.wait()
                keeper.cancel_scope.cancel()

    async def _keep_time(self) -> None:
        """Every `tick`, let each connection compare its deadlines with the time (the
        theory of operation says why); a timeout fires up to one tick late."""
        while True:
            if not self.connections:
                self._connected = trio.Event()
                await self._connected.wait()
            await trio.sleep(self.tick)
            now = trio.current_time()
            for connection in list(self.connections):
                connection.check_time(now)

    def start_drain(self) -> None:
        logger.info("draining %d connection(s)", len(self.connections))
        self.draining = True
        self.server.end_subscriptions()  # listen streams would otherwise hold the drain
        self._hold.deadline = trio.current_time() + self.config.drain_timeout_seconds
        self._drain_started.set()
        for connection in list(self.connections):
            connection.close_if_idle()

    async def serve_connection(self, stream: trio.SocketStream) -> None:
        connection = _Connection(self, stream)
        self.connections.add(connection)
        self._connected.set()
        try:
            await connection.serve()
        except Exception:
            logger.exception("an HTTP connection failed")
        finally:
            self.connections.discard(connection)

    def refusal_for(self, request: h11.Request, found: dict[bytes, bytes]) -> _Refusal | None:
        """Why the head of this request is refused, in the order the checks run."""
        host = found.get(b"host")
        if self.check_host and not self._host_allowed_cached(host):
            shown = "is missing" if host is None else f"{_shown(host)} is not allowed"
            return _Refusal(421, f"Host header {shown} (DNS rebinding protection)")
        origin = found.get(b"origin")
        if origin is not None and not self._origin_allowed(origin):
            return _Refusal(403, f"Origin {_shown(origin)} is not allowed")
        if request.target != self.endpoint and _path(request.target) != self.endpoint:
            endpoint = self.config.endpoint
            return _Refusal(404, f"Not found: {_shown(request.target)}; the endpoint is {endpoint}")
        if request.method != b"POST":
            method = _shown(request.method)
            message = f"Method {method} is not allowed: the MCP endpoint takes POST only"
            return _Refusal(405, message, allow=b"POST")
        content_type = found.get(b"content-type")
        if content_type is None or not _remembered(self._json_verdicts, content_type, _is_json):
            shown = "none" if content_type is None else _shown(content_type)
            return _Refusal(415, f"Unsupported Content-Type {shown}: send application/json")
        accept = found.get(b"accept")
        if accept is None or not _remembered(self._accept_verdicts, accept, _accepts_json):
            shown = "none" if accept is None else _shown(accept)
            return _Refusal(
                406, f"Not acceptable: Accept {shown}; send application/json, text/event-stream"
            )
        if b"transfer-encoding" in found and b"content-length" in found:
            # Framed two ways (a request-smuggling pattern): answered, then closed.
            raise _Refusal(400, "Content-Length and Transfer-Encoding together: refused")
        return None

    def _host_allowed_cached(self, host: bytes | None) -> bool:
        """`_host_allowed`, remembered for the few Host values a server sees."""
        allowed = self._host_verdicts.get(host)
        if allowed is None:
            if len(self._host_verdicts) >= 64:
                self._host_verdicts.clear()
            allowed = self._host_verdicts[host] = self._host_allowed(host)
        return allowed

    def _host_allowed(self, host: bytes | None) -> bool:
        if host is None:
            return False
        text = host.decode("latin-1").strip().lower()
        name = _host_name(text)
        allowed = self.config.allowed_hosts
        return text in allowed or name in allowed or _is_loopback(name)

    def _origin_allowed(self, origin: bytes) -> bool:
        text = origin.decode("latin-1").strip().lower().rstrip("/")
        if text in self.config.allowed_origins:
            return True
        try:
            parts = urlsplit(text)
            name = parts.hostname
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and name is not None and _is_loopback(name)


class _Connection:
    """One client's connection: its h11 state, its deadlines, the request in flight."""

    def __init__(self, serving: _Serving, stream: trio.SocketStream) -> None:
        self.serving = serving
        self.config = serving.config
        self.stream = stream
        self.h11 = h11.Connection(
            h11.SERVER, max_incomplete_event_size=self.config.max_header_bytes
        )
        self.opened_at = trio.current_time()
        self.answered = 0
        self._scope = trio.CancelScope()  # the pump's: client deadlines, client gone, drain
        self._waiting_for: str | None = None  # what the pump waits for from the client
        self._deadline = math.inf  # until when it waits
        self._handling_since = math.inf  # when the request in flight went to the server
        self._watch: trio.CancelScope | None = None  # a watcher of the client, if any
        self._nursery: trio.Nursery | None = None
        self._peer_closed = False
        self._read_for_request = 0  # bytes read since the current request's head began
        self._linger = False
        self._method = b""  # of the request being answered
        self._streaming = False  # the answer in flight is an SSE stream
        self._sse_allowed = True
        self._send_lock = trio.StrictFIFOLock()

    async def serve(self) -> None:
        try:
            async with trio.open_nursery() as self._nursery:
                with self._scope:
                    await self._pump_until_closed()
                self._nursery.cancel_scope.cancel()
            if self._scope.cancelled_caught and self._waiting_for in (_HEAD, _BODY):
                message = f"Request timeout: {self._waiting_for} did not arrive in time"
                await self._refuse(_Refusal(408, message), close=True)
            if self._linger and not self._peer_closed:
                await self._linger_then_close()
        finally:
            await trio.aclose_forcefully(self.stream)

    def close_if_idle(self) -> None:
        if self._waiting_for is _FIRST_BYTE:
            self._scope.cancel()

    def check_time(self, now: float) -> None:
        """The keeper's tick: end a wait for the client past its deadline; watch the
        client of a request that has been with the server for a tick or more."""
        if self._waiting_for is not None and now >= self._deadline:
            self._scope.cancel()
        elif now - self._handling_since >= self.serving.tick and self._watch is None:
            assert self._nursery is not None
            self._watch = trio.CancelScope()
            self._nursery.start_soon(self._watch_client, self._watch)

    # --- the pump ------------------------------------------------------------------------

    async def _pump_until_closed(self) -> None:
        try:
            await self._pump()
        except _Refusal as refusal:  # a size limit or 100-continue: answer, then close
            await self._refuse(refusal, close=True)
        except h11.RemoteProtocolError as error:
            if not self._peer_closed:
                message = f"Invalid HTTP request: {error}"
                await self._refuse(_Refusal(error.error_status_hint, message), close=True)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away while we wrote

    async def _pump(self) -> None:
        while True:
            request = await self._next_request()
            if request is None:
                return
            await self._answer(request)
            self.answered += 1
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
                deadline = trio.current_time() + self.config.idle_timeout_seconds
            await self._receive(_FIRST_BYTE, deadline)
        self._read_for_request = len(self.h11.trailing_data[0])
        started_at = self.opened_at if first else trio.current_time()
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
            raise _Refusal(431, f"Request head too large: {size} bytes, at most {limit}")
        return event

    async def _next_event(self, what: str, deadline: float) -> h11.Event:
        """The next event h11 parses, reading more until `deadline` if it needs to."""
        while True:
            event = self.h11.next_event()
            if not isinstance(event, type):
                return event
            assert event is h11.NEED_DATA, "h11 paused: the pump read past its request"
            await self._receive(what, deadline)

    async def _receive(self, what: str, deadline: float) -> None:
        """Feed h11 the next bytes; waiting past `deadline` cancels `_scope` (a timeout)."""
        self._waiting_for = what
        self._deadline = deadline
        try:
            data = await self.stream.receive_some(_RECEIVE_BYTES)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        self._waiting_for = None
        self._read_for_request += len(data)
        self._peer_closed = not data
        self.h11.receive_data(data)

    async def _answer(self, request: h11.Request) -> None:
        self._method = request.method
        found: dict[bytes, bytes] = {}
        params: dict[str, str] = {}
        for raw_name, value in request.headers.raw_items():  # cheaper than iterating
            name = raw_name.lower()
            if name in _READ_HEADERS:
                found[name] = found[name] + b", " + value if name in found else value
            elif name.startswith(_PARAM_PREFIX):  # few: h11 bounds the head's size
                key = name[len(_PARAM_PREFIX) :].decode("ascii", "surrogateescape")
                text = value.decode("ascii", "surrogateescape")
                params[key] = params[key] + ", " + text if key in params else text
        refusal = self.serving.refusal_for(request, found)
        principal = None
        authenticate = self.config.authenticate
        if refusal is None and authenticate is not None:
            try:
                principal = await _principal_of(authenticate, request)
            except _Refusal as unauthorized:
                refusal = unauthorized
        if self.h11.they_are_waiting_for_100_continue:
            if refusal is not None:
                raise refusal  # the body is not on its way: answer and close
            await self._send(h11.InformationalResponse(status_code=100, headers=[]))
        try:
            body = await self._read_body(found.get(b"content-length"))
        except _Refusal:
            if refusal is not None:
                raise refusal from None
            raise
        if refusal is not None:
            await self._refuse(refusal, close=False)  # the body was read: keep the connection
            return
        await self._call_server(found, body, params, principal)

    async def _read_body(self, content_length: bytes | None) -> bytes:
        limit = self.config.max_body_bytes
        if content_length is not None and content_length.isdigit() and int(content_length) > limit:
            raise _Refusal(
                413, f"Request body too large: {int(content_length)} bytes, at most {limit}"
            )
        deadline = trio.current_time() + self.config.body_timeout_seconds
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await self._next_event(_BODY, deadline)
            if isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            assert isinstance(event, h11.Data), event
            size += len(event.data)
            if size > limit:
                raise _Refusal(413, f"Request body too large: more than {limit} bytes")
            chunks.append(event.data)

    # --- the server's answer -------------------------------------------------------------

    async def _call_server(
        self,
        found: dict[bytes, bytes],
        body: bytes,
        params: dict[str, str],
        principal: str | None,
    ) -> None:
        headers = HttpHeaders(
            protocol_version=_text(found.get(b"mcp-protocol-version")),
            method=_text(found.get(b"mcp-method")),
            name=_text(found.get(b"mcp-name")),
            params=params or None,
        )
        self._streaming = False
        accept = found.get(b"accept")
        self._sse_allowed = accept is None or _remembered(
            self.serving.event_stream_verdicts, accept, _accepts_event_stream
        )
        self._handling_since = trio.current_time()
        try:
            reply = await self.serving.server.handle(
                body, headers=headers, notify=self._notify, principal=principal
            )
        except Exception:
            logger.exception("the server failed on a request")
            message = "Internal error: the server failed on this request"
            reply = Reply(body=_error_body(INTERNAL_ERROR, message), http_status=500)
        finally:
            self._handling_since = math.inf
            if self._watch is not None:
                self._watch.cancel()  # at once: the pump reads this socket next
                self._watch = None
        if self._streaming:
            async with self._send_lock:
                last = [] if reply is None else [_sse_event(reply.body)]
                await self._send(*last, h11.EndOfMessage())
        elif reply is None:
            await self._send_response(202, [], b"")  # a notification (or a response) accepted
        else:
            answer = [_JSON]
            if reply.retry_after_seconds is not None:
                answer.append((b"retry-after", str(reply.retry_after_seconds).encode()))
            await self._send_response(reply.http_status, answer, reply.body)

    async def _notify(self, message: bytes) -> None:
        """Send a notification of the request in flight; the first one turns the answer
        into an SSE stream. A client that is gone cancels the request here."""
        if not self._sse_allowed or self._handling_since == math.inf:
            return
        try:
            async with self._send_lock:
                if self._streaming:
                    await self._send(_sse_event(message))
                else:
                    self._streaming = True
                    headers = _SSE_HEADERS + ([_CLOSE] if self.serving.draining else [])
                    await self._send(h11.Response(status_code=200, headers=headers, reason=b"OK"))
                    await self._send(_sse_event(message))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._peer_closed = True
            self._scope.cancel()
            await trio.lowlevel.checkpoint()

    # --- noticing a client that leaves mid-request ----------------------------------------

    async def _watch_client(self, scope: trio.CancelScope) -> None:
        """Cancel the request in flight if the client closes the connection: wait for its
        socket to turn readable; end-of-file (or an error) cancels the pump's scope, bytes
        of a next request mean the client is still there."""
        with scope:
            if scope.cancel_called:
                return  # the request ended before this task ran: the pump reads the socket
            await trio.lowlevel.wait_readable(self.stream.socket)
            if await self._peer_has_closed():
                self._peer_closed = True
                self._scope.cancel()
                return
            await trio.sleep_forever()  # until the request ends

    async def _peer_has_closed(self) -> bool:
        try:
            return not await self.stream.socket.recv(1, trio.socket.MSG_PEEK)
        except OSError:
            return True

    # --- writing -------------------------------------------------------------------------

    async def _refuse(self, refusal: _Refusal, *, close: bool) -> None:
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return  # an answer has begun already: nothing more can be said
        logger.debug("HTTP %d: %s", refusal.status, refusal.message)
        headers = [_JSON, *refusal.extra_headers]
        if close:
            headers.append(_CLOSE)
            self._linger = True
        body = _error_body(INVALID_REQUEST, refusal.message)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._send_response(refusal.status, headers, body)

    async def _send_response(
        self, status: int, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> None:
        headers.append((b"content-length", str(len(body)).encode()))
        if self.serving.draining:
            headers.append(_CLOSE)
        reason = _REASONS.get(status, b"")
        response = h11.Response(status_code=status, headers=headers, reason=reason)
        if self._method == b"HEAD":  # its answer has headers only
            await self._send(response, h11.EndOfMessage())
        else:
            await self._send(response, h11.Data(data=body), h11.EndOfMessage())

    async def _send(self, *events: h11.Event) -> None:
        data = b"".join(self.h11.send(event) or b"" for event in events)
        await self.stream.send_all(data)

    async def _linger_then_close(self) -> None:
        """Half-close, and drop what the client still sends for a moment: closing a socket
        with unread bytes resets it, and the client could lose the answer just sent."""
        gone = (trio.BrokenResourceError, trio.ClosedResourceError)
        with trio.move_on_after(_LINGER_SECONDS), contextlib.suppress(*gone):
            await self.stream.send_eof()
            dropped = 0
            while dropped < _LINGER_BYTES:
                data = await self.stream.receive_some(_RECEIVE_BYTES)
                if not data:
                    return
                dropped += len(data)


# --- helpers --------------------------------------------------------------------------------


async def _principal_of(authenticate: Authenticator, request: h11.Request) -> str:
    """The authenticator's principal for `request`; `_Refusal` 401 when it refuses (or
    fails: a broken authenticator lets nobody in)."""
    headers = {
        name.decode("ascii", "replace").lower(): value.decode("latin-1")
        for name, value in request.headers.raw_items()
    }
    try:
        found = authenticate(headers)
        principal = await found if inspect.isawaitable(found) else found
    except Unauthorized as refused:
        message = f"Unauthorized: {refused.message}"
        raise _Refusal(401, message, challenge=refused.challenge) from None
    except Exception:
        logger.exception("the authenticator failed")
        raise _Refusal(401, "Unauthorized: the credentials could not be checked") from None
    if not isinstance(principal, str) or not principal:
        logger.error("the authenticator returned %r, not a principal (a non-empty str)", principal)
        raise _Refusal(401, "Unauthorized: the credentials could not be checked")
    return principal


def _lowered(values: Iterable[str]) -> frozenset[str]:
    if isinstance(values, str):
        raise TypeError("give a collection of strings, not one string")
    return frozenset(value.strip().lower() for value in values)


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str:
    """The name in a Host value `name[:port]`, without the brackets of an IPv6 literal."""
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def _path(target: bytes) -> bytes:
    if not target.startswith(b"/"):  # absolute-form, as sent to proxies
        return urlsplit(target).path or b"/"
    return target.split(b"?", 1)[0]


def _is_json(content_type: bytes) -> bool:
    if content_type == b"application/json":
        return True
    return content_type.split(b";", 1)[0].strip().lower() == b"application/json"


def _accepts_json(accept: bytes) -> bool:
    """Whether an Accept header admits application/json (named, or by a wildcard)."""
    for media_range in accept.lower().split(b","):
        kind, *parameters = media_range.split(b";")
        if kind.strip() in (b"application/json", b"application/*", b"*/*") and not any(
            _is_q_zero(parameter) for parameter in parameters
        ):
            return True
    return False


def _is_q_zero(parameter: bytes) -> bool:
    name, _, value = parameter.strip().partition(b"=")
    try:
        return name == b"q" and float(value) == 0
    except ValueError:
        return False


def _remembered(verdicts: dict[bytes, bool], value: bytes, judge: Callable[[bytes], bool]) -> bool:
    """`judge(value)`, remembered: a server sees few distinct values of a header (bounded
    all the same, against a client that sends a new one each time)."""
    verdict = verdicts.get(value)
    if verdict is None:
        if len(verdicts) >= 64:
            verdicts.clear()
        verdict = verdicts[value] = judge(value)
    return verdict


def _accepts_event_stream(accept: bytes) -> bool:
    accept = accept.lower()
    return b"text/event-stream" in accept or b"*/*" in accept or b"text/*" in accept


def _shown(value: bytes) -> str:
    """A value the client sent, quoted and cut short, for an error message."""
    text = value.decode("latin-1")
    return repr(text if len(text) <= 100 else text[:100] + "...")


def _text(value: bytes | None) -> str | None:
    """A header value for the core; bytes beyond ASCII become lone surrogates, which can
    equal nothing a JSON body holds, so the core refuses them (-32020)."""
    return None if value is None else value.decode("ascii", "surrogateescape")


def _error_body(code: int, message: str) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", "error": {"code": code, "message": message}})


def _sse_event(message: bytes) -> h11.Data:
    return h11.Data(data=b"data: " + message + b"\n\n")
