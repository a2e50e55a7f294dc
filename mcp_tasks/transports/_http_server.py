"""Streamable HTTP (MCP 2026-07-28) for a `Server` (any `MessageHandler`) on anyio sockets.

Theory of operation
-------------------
`serve_http` listens and runs one `HttpConnection` (`_http_connection`) per accepted
socket. A connection is one pump loop over its `RequestInput` (`_http_wire`: heads parsed
by httptools, bodies framed there), one request at a time, the built-in driver of the
exchange the ASGI app drives too (`_exchange`: the verdict on a head, the body's intake,
the shape and framing of each answer):

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
cancels a request; bytes of a next request are kept for the pump, and the watcher stops); an SSE
answer quiet for `keep_alive_comment_seconds` gets a task that writes it the comment line
`: keep-alive`. A trio deadline per wait and a reader task per connection were simpler,
and cost more than all the rest of the transport (`benchmarks/http.py`).

A 2025 session's request is sent a `PostAnswer` as its notify: a request that may outlive
its POST (a 2025-11-25 resumable stream) runs in the pump's task all the same. When its
client goes, it is told so instead of being cancelled; when its answer ends early
(`PostAnswer.end`), the answer is finished and the socket half-closed, the request runs
on, and the connection closes after it (a client resumes on another connection).

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
deadline reaches them. On `sockets` shared with other processes (the workers of `mcp-tasks
serve --workers N`), where the port lives on after this process, idle connections are
closed `_SHARED_FIRST_REQUEST_SECONDS` into the drain, not at once: one accepted just before
would otherwise be closed with its first request unread (a failed request, where another
worker would have answered it).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from typing import Final, cast

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

from .._support import backend as _backend
from ._budget import ByteBudget
from ._exchange import keeper_tick
from ._http_accept import accept, adopt, listen
from ._http_connection import HttpConnection
from ._http_health import Probes
from ._http_rules import (
    Authenticator,
    HttpConfig,
    RequestRules,
    Unauthorized,
    is_loopback,
)
from ._port import MessageHandler, SessionHandler, serves_sessions

__all__ = ["Authenticator", "HttpConfig", "Unauthorized", "serve_http"]

logger = logging.getLogger("mcp_tasks.transports.http")

_SHARED_FIRST_REQUEST_SECONDS: Final = 0.25
"""On shared sockets, how long a drain waits before it closes the idle connections (the
theory of operation says why)."""


async def serve_http(
    server: MessageHandler,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    config: HttpConfig | None = None,
    sockets: Sequence[socket.socket] = (),
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `server` over Streamable HTTP until cancelled, then drain.

    Run it inside `async with server.running():`, under `nursery.start` to learn the bound
    port (`port=0` picks a free one). Bound to loopback (the default), requests whose `Host`
    is not a loopback name are refused: DNS rebinding protection. Runs on asyncio or trio.
    `sockets`, bound and listening already (shared with other processes, say), are served
    instead of binding `host:port`; they are closed when serving stops.
    """
    config = HttpConfig() if config is None else config
    listeners = await adopt(sockets) if sockets else await listen(host, port)
    addresses = [listener.extra(SocketAttribute.local_address) for listener in listeners]
    loopback = all(is_loopback(str(a[0])) for a in addresses)
    serving = _Serving(server, config, loopback=loopback, shared=bool(sockets))
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

    def __init__(
        self, server: MessageHandler, config: HttpConfig, *, loopback: bool, shared: bool = False
    ) -> None:
        self.server = server
        self.session_server = cast(SessionHandler, server)
        """`server`, as a 2025 session's request is handed to it (`session=`)."""
        self.config = config
        self.rules = RequestRules(config, loopback=loopback, sessions=serves_sessions(server))
        self.probes = Probes(config)
        self.bodies = ByteBudget.of(config)
        self.draining = False
        self.shared = shared
        """Serving sockets shared with other processes: idle connections close a little
        into the drain."""
        self.connections: set[HttpConnection] = set()
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
                    if self.shared:
                        await anyio.sleep(_SHARED_FIRST_REQUEST_SECONDS)
                        self._close_idle()
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
        if not self.shared:
            self._close_idle()

    def _close_idle(self) -> None:
        for connection in list(self.connections):
            connection.close_if_idle()

    async def serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        connection = HttpConnection(self, stream)
        self.connections.add(connection)
        self._connected.set()
        try:
            await connection.serve()
        except Exception:
            logger.exception("an HTTP connection failed")
        finally:
            self.connections.discard(connection)
