"""The port: what a transport needs of the server it serves, and nothing more.

Theory of operation
-------------------
Transports are typed against these protocols, never against `Server`: a module under
`mcp_tasks/transports/` (the ASGI app's driver too, and its face `mcp_tasks.asgi`) imports
the core, the backend helpers and this port, and no part of `mcp_tasks.runtime`, which
implements it. So anything that answers messages this way can be served (a test double,
another runtime), and a test (`tests/test_imports.py`) keeps the dependency pointing that
way.

`MessageHandler`, what `serve_stdio` and `serve_http` use:

    handle(data, *, headers, notify, connection, principal)   the reply to one message
    end_subscriptions(connection=None)        end listen streams (all, or a connection's)
    readiness(timeout_seconds)                what the ready probe answers (None: ready)
    telemetry                                 where a request HTTP refused is reported

`HostedHandler`, a `MessageHandler` the transport also runs (the ASGI app, from its
lifespan):

    running()                 an async context manager: the handler runs inside it
    is_running                inside `running()`: `handle` may be called
    start_soon(function)      run `function()` in the handler's task group, ending with it

`Connection` and `SendNotification` are what a transport hands `handle` beside the
message: the client connection the message came on, and how to send that client a
notification (`Notify` is its name of before, kept one release: the core's `Notify` is a
command). A transport whose `notify` is a `PostAnswer` lets a request outlive its POST
while it runs in the POST's own task (a 2025-11-25 session's resumable stream); with any
other `notify`, the handler runs such a request in a task of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import msgspec

from ..core import (
    HttpHeaders,
    Reply,
)
from ..core.legacy import LegacySession
from ..core.wire import (
    RequestId,
)
from ._telemetry import Telemetry

__all__ = [
    "Cancellable",
    "Connection",
    "HostedHandler",
    "MessageHandler",
    "Notify",
    "PostAnswer",
    "SendNotification",
    "SessionHandler",
    "SessionHeaders",
    "SessionReply",
    "serves_sessions",
]

SendNotification = Callable[[bytes], Awaitable[None]]
"""Send one notification (its encoded JSON-RPC message) to the client of a request."""
Notify = SendNotification
"""The name of `SendNotification` before issue 28: kept one release."""


class PostAnswer:
    """A transport's `notify` for a 2025 session's POST whose request may outlive it: the
    handler runs the request in the POST's own task (no task of its own to pay for) and
    asks the transport to let go of it only when it must."""

    __slots__ = ()

    async def __call__(self, message: bytes) -> None:
        """Send `message` on the POST's answer (`SendNotification`)."""
        raise NotImplementedError

    def outlive_client(self, gone: Callable[[], None]) -> None:
        """The request in flight outlives its client: if the client goes away, call
        `gone()` (and drop what is sent after) instead of cancelling the request."""
        raise NotImplementedError

    async def end(self) -> None:
        """End the POST's answer now, while its request runs on in this task; the
        connection closes when the request ends, so its client resumes on another."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Cancel the request in flight (`notifications/cancelled`, `DELETE`): it runs in
        the POST's task, so its connection closes with it."""
        raise NotImplementedError


class Cancellable(Protocol):
    """What `Connection.in_flight` holds for a request: a cancel scope, or a `PostAnswer`."""

    def cancel(self) -> None: ...


class SessionHeaders(msgspec.Struct, frozen=True, kw_only=True):
    """What an HTTP request says of a 2025 client's session, beside its MCP headers: given
    to `handle` (as `session=`) only when there is something to say, so a handler that
    serves no sessions never sees it."""

    method: str = "POST"
    """`GET` opens the session's own SSE stream, `DELETE` ends the session."""
    session_id: str | None = None
    """The `Mcp-Session-Id` header."""
    protocol_version: str | None = None
    """The `MCP-Protocol-Version` header."""
    last_event_id: str | None = None
    """The `Last-Event-ID` header (a `GET` resuming a stream)."""
    event_stream: bool = True
    """The client accepts an SSE answer (`Accept`): a POST's answer may become a stream."""


class SessionReply(Reply, frozen=True, kw_only=True):
    """A reply that opened a session (`initialize`): sent with `Mcp-Session-Id`."""

    session_id: str


class Connection:
    """One client connection's requests in flight, so `notifications/cancelled` can stop
    the one it names. Request ids are only unique per connection."""

    def __init__(self, *, carries_sessions: bool = False) -> None:
        self.in_flight: dict[RequestId, Cancellable] = {}
        self.closing = False
        """Set by a transport whose client is gone (stdio EOF): listen streams end."""
        self.carries_sessions = carries_sessions
        """A client of the 2025 revisions may open a session on it (stdio: the process)."""
        self.session: LegacySession | None = None
        """That session once its `initialize` is answered (the handler keeps it here)."""
        self.awaited: dict[RequestId, object] = {}
        """The server's requests to that client awaiting its answers, by id (the handler's)."""
        self.notices: SendNotification | None = None
        """Where the session hears what changes outside its requests (the handler's)."""
        self.core_way: tuple[object, Callable[..., Awaitable[Reply | None]]] | None = None
        """The handler's: how the session's rewritten requests reach the core, made once
        a connection (with the `notify` it was made for)."""
        self.task_scope: Callable[[], Cancellable | None] | None = None
        """The transport's, when each request it runs keeps a task of its own once it
        waits (stdio): the cancel scope of the running task, which cancels the request
        running in it (None: not a task of the transport's). Without it, the handler of
        each call runs in a scope of its own, a few microseconds more a call."""

    def cancel(self, request_id: RequestId) -> None:
        """Cancel the request `request_id` of this connection, if it is in flight."""
        scope = self.in_flight.get(request_id)
        if scope is not None:
            scope.cancel()


class MessageHandler(Protocol):
    """What `serve_stdio` and `serve_http` need of the server they serve (`Server` is one)."""

    async def handle(
        self,
        data: bytes,
        *,
        headers: HttpHeaders | None = None,
        notify: SendNotification | None = None,
        connection: Connection | None = None,
        principal: str | None = None,
    ) -> Reply | None:
        """The reply to one incoming message, or None (a notification, a cancelled request)."""
        ...

    def end_subscriptions(self, connection: Connection | None = None) -> None:
        """End the listen streams (all of them, or those of `connection`) gracefully."""
        ...

    async def readiness(self, timeout_seconds: float) -> str | None:
        """None if requests may be sent now; otherwise why not, in a few words."""
        ...

    @property
    def telemetry(self) -> Telemetry:
        """Where the transport reports what it refuses by itself (`refused(reason)`)."""
        ...


class SessionHandler(MessageHandler, Protocol):
    """A `MessageHandler` that also serves 2025 clients' HTTP sessions (`Server` is one):
    `serves_sessions` says whether it does now, and `handle` takes `session=` (a request
    naming a session, a `GET`, a `DELETE`)."""

    @property
    def serves_sessions(self) -> bool:
        """2025 clients get sessions now (`GET` and `DELETE` are allowed)."""
        ...

    async def handle(
        self,
        data: bytes,
        *,
        headers: HttpHeaders | None = None,
        notify: SendNotification | None = None,
        connection: Connection | None = None,
        principal: str | None = None,
        session: SessionHeaders | None = None,
    ) -> Reply | None:
        """`MessageHandler.handle`, and what the request says of a session."""
        ...


def serves_sessions(handler: MessageHandler) -> Callable[[], bool]:
    """Whether `handler` serves 2025 sessions now (False for a handler that never does)."""
    return lambda: bool(getattr(handler, "serves_sessions", False))


class HostedHandler(MessageHandler, Protocol):
    """A `MessageHandler` that its transport also runs: what the ASGI app needs of a server."""

    def running(self) -> AbstractAsyncContextManager[object]:
        """Run the handler while the block runs; leaving it stops the handler."""
        ...

    @property
    def is_running(self) -> bool:
        """True inside `running()`, where `handle` may be called."""
        ...

    def start_soon(self, function: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `function()` in the handler's task group: it is cancelled when the handler
        stops. Only inside `running()`."""
        ...
