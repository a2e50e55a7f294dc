"""The ASGI driver of the Streamable HTTP exchange (`_exchange`): `mcp_tasks.asgi`'s app.

Theory of operation
-------------------
The application answers what the built-in server (`_http_server`) answers: the same
exchange (`_exchange`), its checks in the same order, the same answers, moved as ASGI
messages instead of parsed bytes. The probe paths first (whether the server runs or not;
readiness says "draining" from the lifespan's shutdown on); then the rules and the
authenticator; then the body (`BodyIntake`); then `handle`. Beside the exchange, the
application has what ASGI gives it to do: the lifespan (the server runs between its
startup and shutdown; a request while it does not is 503), the mount point (`root_path`),
the bound address (the Host check on loopback), and a client that disconnects.

A request pays for no task of its own: most are answered within microseconds, and a task
group with a watcher per request cost ten times what the server spends on a `tasks/get`.
One keeper task (in the server's task group) looks at the requests in flight every tick
(`exchange.keeper_tick`) and asks each one's `Keeping` what is due, as the built-in
server's keeper does (`_exchange`): one that has been with the server for a tick gets a
watcher, which waits for the ASGI server's `http.disconnect` and then cancels the request;
an SSE stream quiet for `keep_alive_comment_seconds` gets a task that writes it the
comment line `: keep-alive`.

Refused while the client still sends (413, 503, or any refusal made before the body is
read), the rest of the body is read and dropped before the answer (2 s and 64 MiB at most,
the bounds of the built-in server's lingering): an ASGI server closing a connection with
bytes unread resets it, and the client would never read why.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, MutableMapping
from contextlib import asynccontextmanager, suppress
from typing import Any, Final, TypeAlias, cast

import anyio
import trio

from .._support.backend import CancelScope, Event, cancel_scope, event
from ..core import HttpHeaders, Reply
from . import _exchange as exchange
from ._budget import LINGER_BYTES, LINGER_SECONDS, BodyIntake, ByteBudget
from ._http_access import log_access
from ._http_health import Probes
from ._http_rules import (
    HttpConfig,
    Refusal,
    RequestRules,
    declared_body_size,
    is_loopback,
    mcp_headers,
    read_headers,
    session_headers,
)
from ._port import HostedHandler, SessionHandler, SessionHeaders, serves_sessions

__all__ = ["AsgiApp", "HttpConfig", "asgi_app"]

logger = logging.getLogger("mcp_tasks.asgi")

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]

_CLIENT_GONE: Final = (
    OSError,  # uvicorn's ClientDisconnected is one
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
)
_NOT_RUNNING: Final = (
    "The MCP server is not running: serve this application with lifespan events on, or "
    "give the framework its lifespan (Starlette(lifespan=app.lifespan))"
)


def asgi_app(server: HostedHandler, config: HttpConfig | None = None) -> AsgiApp:
    """An ASGI application serving `server` (a `Server`: any `HostedHandler`) at
    `config.endpoint` (default `/mcp`, under the path it is mounted at), as `serve_http`
    does.

    Host checking (DNS rebinding protection) follows the address the ASGI server is bound
    to, as the built-in server's does: on a loopback address, or when the scope names
    none (a Unix socket), only loopback `Host` names and `config.allowed_hosts` pass.
    `max_header_bytes`, `header_timeout_seconds` and `idle_timeout_seconds` are the ASGI
    server's to enforce (uvicorn's `--h11-max-incomplete-event-size` and
    `--timeout-keep-alive`, say).
    """
    return AsgiApp(server, HttpConfig() if config is None else config)


class AsgiApp:
    """The ASGI application `asgi_app` returns: call it, or give frameworks `lifespan`."""

    def __init__(self, server: HostedHandler, config: HttpConfig) -> None:
        self.server = server
        self.config = config
        sessions = serves_sessions(server)
        self._rules = {
            True: RequestRules(config, loopback=True, sessions=sessions),
            False: RequestRules(config, loopback=False, sessions=sessions),
        }
        self._endpoint = config.endpoint.encode()
        self._probes = Probes(config)
        self._loopback_names: dict[str, bool] = {}
        self._bodies: ByteBudget | None = None  # made in the event loop that serves
        self.in_flight: set[_Answer] = set()
        self._all_answered: Event | None = None  # set while draining
        self.draining = False
        self._warned_not_running = False
        self.tick = exchange.keeper_tick(config)  # how often the keeper looks, in seconds
        self._keeper_runs = False  # in the server's task group: it ends with the server
        self._requests_came: Event | None = None  # what an idle keeper waits for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if self.config.access_log:
                await self._serve_logged(scope, receive, send)
            else:
                await self._serve_request(scope, receive, send)
        elif kind == "lifespan":
            await self._serve_lifespan(receive, send)
        else:  # a websocket: the endpoint has none
            await send({"type": "websocket.close", "code": 1000})

    # --- lifespan ------------------------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Run the server while the block runs; on leaving, drain. `app` is ignored: the
        signature is the one Starlette and FastAPI call (`lifespan=mcp.lifespan`)."""
        async with self.server.running():
            self.draining = False
            self._bodies = ByteBudget.of(self.config)
            try:
                yield
            finally:
                await self._drain()

    async def _drain(self) -> None:
        self.draining = True
        self.server.end_subscriptions()  # listen streams would otherwise hold the drain
        if self.in_flight:
            logger.info("draining %d request(s)", len(self.in_flight))
            self._all_answered = event()
            with anyio.move_on_after(self.config.drain_timeout_seconds, shield=True):
                await self._all_answered.wait()
            for answer in list(self.in_flight):
                answer.cancel()

    async def _serve_lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        started = False
        try:
            async with self.lifespan():
                started = True
                await send({"type": "lifespan.startup.complete"})
                await receive()  # lifespan.shutdown
        except BaseException as error:
            kind = "shutdown" if started else "startup"
            logger.exception("the MCP server failed at %s", kind)
            # The exception's type only: its text may name a store URL; the log has it all.
            message = f"the MCP server failed at {kind}: {type(error).__name__} (see its log)"
            await send({"type": f"lifespan.{kind}.failed", "message": message})
            if not isinstance(error, Exception):
                raise
            return
        await send({"type": "lifespan.shutdown.complete"})

    # --- a request -----------------------------------------------------------------------

    async def _serve_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = _route_path(scope)
        method = scope["method"].encode("ascii")
        if path != self._endpoint and (probe := self._probes.kind_of(path)) is not None:
            await self._answer_probe(probe, method, send)
            return
        if not self.server.is_running:
            if not self._warned_not_running:
                self._warned_not_running = True
                logger.error(_NOT_RUNNING)
            not_running = Refusal(503, _NOT_RUNNING, reason="not_running", retry_after_seconds=1)
            await _drop_body(receive)
            await self._send_refusal(send, not_running)
            return
        headers = scope["headers"]
        found, params = read_headers(headers)
        rules = self._rules[self._bound_to_loopback(scope)]
        raw_path = scope.get("raw_path")
        if raw_path and not raw_path.startswith(b"/"):
            path = raw_path  # absolute-form, as the server passed it on: its host is checked
        try:
            refusal, principal = await exchange.admit(
                rules, method, path, found, headers, authenticate=rules.authenticate
            )
        except Refusal as refused:  # framed two ways: its body is dropped all the same
            refusal, principal = refused, None
        if refusal is not None:
            await _drop_body(receive)  # refused before its body: read, or the answer is reset
            await self._send_refusal(send, refusal)
            return
        if self._bodies is None:  # running, but not through `lifespan`
            self._bodies = ByteBudget.of(self.config)
        intake = BodyIntake(self._bodies, self.config, anyio.current_time())
        try:
            try:
                body = await self._read_body(receive, found.get(b"content-length"), intake)
            except Refusal as refused:
                await self._send_refusal(send, refused, close=True)
                return
            forbidden = None if body is None else rules.forbidden(body, self.server)
            if forbidden is not None:
                await self._send_refusal(send, forbidden)
                return
            if body is not None:
                event_stream = rules.allows_event_stream(found.get(b"accept"))
                answer = _Answer(self, receive, send, event_stream)
                self._keep(answer)
                try:
                    session = session_headers(method, found, event_stream=event_stream)
                    await answer.serve(body, mcp_headers(found, params), principal, session)
                finally:
                    self._answered(answer)
        finally:
            intake.give_back()

    def _bound_to_loopback(self, scope: Scope) -> bool:
        bound = scope.get("server")
        if not bound:
            return True  # a Unix socket: checked as loopback
        name = str(bound[0])
        loopback = self._loopback_names.get(name)
        if loopback is None:
            if len(self._loopback_names) >= 16:
                self._loopback_names.clear()
            loopback = self._loopback_names[name] = is_loopback(name)
        return loopback

    async def _read_body(
        self, receive: Receive, content_length: bytes | None, intake: BodyIntake
    ) -> bytes | None:
        """The whole body, its bytes taken from the budget as they come, at the pace it
        must keep (`_budget`); None if the client left. Refused with 413 or 503, the rest
        of it is read and dropped first (`_drop_body`)."""
        try:
            declared_body_size(content_length, self.config.max_body_bytes)
        except Refusal:
            await _drop_body(receive)
            raise
        with cancel_scope(deadline=intake.deadline()) as scope:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                more = message.get("more_body", False)
                scope.deadline = math.inf  # waiting for room is not the sender's time
                try:
                    await intake.take(message.get("body", b""))
                except Refusal:
                    if more:
                        await _drop_body(receive)
                    raise
                if not more:
                    return intake.body()
                scope.deadline = intake.deadline()
        assert scope.cancelled_caught
        raise intake.late(scope.deadline)

    async def _send_refusal(self, send: Send, refusal: Refusal, *, close: bool = False) -> None:
        # close: its body was left unread
        answer = exchange.refusal_answer(refusal, self.server, close=close)
        with suppress(*_CLIENT_GONE):
            await _send_response(send, *answer, draining=False)

    async def _answer_probe(self, probe: str, method: bytes, send: Send) -> None:
        """A health probe (`_http_health`): before any rule; its body unread."""
        answer = await self._probes.answer(probe, method, self.server, draining=self.draining)
        body = b"" if method == b"HEAD" else answer.body
        headers = exchange.framed(list(answer.headers), answer.body, draining=False)
        with suppress(*_CLIENT_GONE):
            await send({"type": "http.response.start", "status": answer.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

    async def _serve_logged(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`_serve_request`, and its line in the access log (`HttpConfig.access_log`)."""
        status = 0

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        started_at = anyio.current_time()
        try:
            await self._serve_request(scope, receive, send_noting_status)
        finally:
            took = anyio.current_time() - started_at
            client = scope.get("client")
            peer = f"{client[0]}:{client[1]}" if client else None
            path = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
            method = scope["method"].encode("ascii")
            log_access(method, path, scope["headers"], status, took, client=peer)

    # --- the keeper ----------------------------------------------------------------------

    def spawn(self, function: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `function()` in the server's task group (it ends with the server)."""
        self.server.start_soon(function)

    def _keep(self, answer: _Answer) -> None:
        """Hand the keeper a request in flight (starting the keeper if the server has none:
        it has not had a request yet, or it ran again since)."""
        self.in_flight.add(answer)
        if not self._keeper_runs:
            self._keeper_runs = True
            self.spawn(self._watch_requests)
        elif self._requests_came is not None:
            self._requests_came.set()
            self._requests_came = None

    async def _watch_requests(self) -> None:
        """Every tick, give each request that has been in flight for a tick a watcher, and
        each quiet SSE stream a comment (`Keeping`). Cancelled when the server stops: the
        next request after it runs again starts another."""
        try:
            while True:
                if not self.in_flight:
                    self._requests_came = came = event()
                    await came.wait()
                await anyio.sleep(self.tick)
                now = anyio.current_time()
                for answer in list(self.in_flight):
                    if answer.keeping.watch_due(now):
                        answer.watcher = cancel_scope()
                        self.spawn(answer.watch_client)
                    if answer.keeping.comment_due(now):
                        self.spawn(answer.keep_alive)
        finally:  # runs even for a keeper the server stopped before it began: anyio starts it
            self._keeper_runs = False
            self._requests_came = None

    def _answered(self, answer: _Answer) -> None:
        self.in_flight.discard(answer)
        if self._all_answered is not None and not self.in_flight:
            self._all_answered.set()


class _Answer:
    """The answer to one request the server handles: JSON, or an SSE stream from the
    first notification on; cancelled if the client disconnects."""

    def __init__(self, app: AsgiApp, receive: Receive, send: Send, sse_allowed: bool) -> None:
        self.app = app
        self._receive = receive
        self._send = send
        self._sse_allowed = sse_allowed
        self.keeping = exchange.Keeping(app.config.keep_alive_comment_seconds, app.tick)
        self.keeping.handling(anyio.current_time())
        self.watcher: CancelScope | None = None  # given by the keeper after a tick
        self._scope: CancelScope = cancel_scope()
        self._streaming = False
        self._ended = False
        self._lock: anyio.Lock | None = None

    def cancel(self) -> None:
        self._scope.cancel()

    async def serve(
        self,
        body: bytes,
        headers: HttpHeaders,
        principal: str | None,
        session: SessionHeaders | None = None,
    ) -> None:
        reply: Reply | None = None
        try:
            with self._scope:
                reply = await self._handle(body, headers, principal, session)
            self._ended = True
            self.keeping.ended()
            if self.watcher is not None:
                self.watcher.cancel()
            if self._scope.cancelled_caught:
                return  # the client left, or the drain ran out of time
            await self._finish(reply)
        except _CLIENT_GONE:
            pass

    async def _handle(
        self,
        body: bytes,
        headers: HttpHeaders,
        principal: str | None,
        session: SessionHeaders | None,
    ) -> Reply | None:
        server = self.app.server
        try:
            if session is None:
                return await server.handle(
                    body, headers=headers, notify=self._notify, principal=principal
                )
            return await cast(SessionHandler, server).handle(  # a 2025 session's request
                body, headers=headers, notify=self._notify, principal=principal, session=session
            )
        except Exception:
            return exchange.handler_failed(body, logger)

    async def _finish(self, reply: Reply | None) -> None:
        if self._streaming:
            last = b"" if reply is None else exchange.sse_event(reply.body)
            assert self._lock is not None
            async with self._lock:
                await self._send({"type": "http.response.body", "body": last})
        else:
            await _send_response(self._send, *exchange.answer_of(reply), draining=self.app.draining)

    async def watch_client(self) -> None:
        """Cancel the request if its client disconnects (the body is read: the next
        message can only be that)."""
        assert self.watcher is not None
        with self.watcher:
            while not self._ended:
                message = await self._receive()
                if message["type"] == "http.disconnect":
                    self._scope.cancel()
                    return

    async def _notify(self, message: bytes) -> None:
        """Send a notification of the request in flight; the first one starts the SSE
        stream. A client that is gone cancels the request here."""
        if not self._sse_allowed or self._ended:
            return
        if self._lock is None:
            self._lock = anyio.Lock()
        try:
            async with self._lock:
                if not self._streaming:
                    await self._start_stream()
                await self._send_on_stream(exchange.sse_event(message))
        except _CLIENT_GONE:
            self._scope.cancel()
            await anyio.lowlevel.checkpoint()

    async def _start_stream(self) -> None:
        self._streaming = True
        headers = exchange.sse_head(draining=self.app.draining)
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        self.keeping.sent(anyio.current_time())

    async def keep_alive(self) -> None:
        """The keeper found the SSE stream quiet: a comment shows it is alive."""
        assert self._lock is not None  # the stream has begun
        try:
            async with self._lock:
                comment = self.keeping.comment(anyio.current_time())
                if comment is not None:  # still quiet, not yet ended
                    await self._send_on_stream(comment)
        except _CLIENT_GONE:
            self._scope.cancel()

    async def _send_on_stream(self, data: bytes) -> None:
        await self._send({"type": "http.response.body", "body": data, "more_body": True})
        self.keeping.sent(anyio.current_time())


# --- helpers --------------------------------------------------------------------------------


async def _drop_body(receive: Receive) -> None:
    """Read and drop the rest of a refused body (for `LINGER_SECONDS`, `LINGER_BYTES` at
    most, as the built-in server does after its answer): an ASGI server that closes a
    connection with bytes unread resets it, and the client would lose the answer."""
    dropped = 0
    with anyio.move_on_after(LINGER_SECONDS):
        while dropped < LINGER_BYTES:
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                return
            dropped += len(message.get("body", b""))


def _route_path(scope: Scope) -> bytes:
    """The request's path under the path the application is mounted at (`root_path`)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        path = path[len(root) :] or "/"
    return path.encode("utf-8", "surrogateescape")


async def _send_response(
    send: Send, status: int, headers: exchange.Headers, body: bytes, *, draining: bool
) -> None:
    exchange.framed(headers, body, draining=draining)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
