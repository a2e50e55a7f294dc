"""Clients of the 2025 revisions over Streamable HTTP: sessions named by `Mcp-Session-Id`,
kept in the task store so that every process on it serves every session.

Theory of operation
-------------------
A claim-less `initialize` opens a session: the legacy front answers it, a random id is
minted, and the session (what `initialize` negotiated) becomes a record of the store's
sessions half (`store.sessions`), bound to the principal that opened it, live for
`HttpSessionLimits.idle_seconds` after its last use, at most `max_per_principal` a
principal. The answer carries the id (`SessionReply`: the transports send it as
`Mcp-Session-Id`). Every later request names the session: its record is read (400 with no
id, 404 when it is gone or another principal's, 400 for an `MCP-Protocol-Version` that is no
2025 revision) and the request is answered as over stdio (`LegacySessions`: by the session
itself, or rewritten for the core and its reply turned back), the session saved back when
it changed (`logging/setLevel`, `notifications/initialized`).

A request of the server's own (an input round's question: `elicitation/create`...) goes
out on the SSE stream of the POST it serves; the client answers with a POST of its own,
which a balancer may send to another process. A process that does not await that answer
passes it on as a `session` signal of the store, and the one that awaits it takes it
(`delivered`); `notifications/cancelled` travels the same way. The questions' ids are
unique to the process (`LegacySessions`), so no other process takes an answer for one.

`GET` opens the session's own SSE stream (one per session and process: a newer one takes
over, as a client that reconnects opens it again before this side noticed it left),
for what the server sends outside any request; its events carry ids (`g1`, `g2`...) and
are kept with the session (`append_event`), so a client that reconnects with
`Last-Event-ID`, to any process, gets what it missed. `DELETE` ends the session: its
record and events go, and here its requests and stream end.

A 2025-11-25 session's request that may stream runs apart from its POST, and its SSE stream
carries ids and is kept in the store, so a client that lost it (or that the server closed
it on: `ToolContext.close_stream`) resumes it with `GET` and `Last-Event-ID`: see
`_post_streams`. Such a GET does not touch the session's own stream.

Each process keeps a `Connection` for a session while it has requests in flight or a
stream open here (the questions awaited, the requests cancellable), and drops it after.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, Final

import msgspec
from msgspec import UNSET

from .._support import backend as _backend
from .._support.logs import RateLimitedLog
from ..core import HttpHeaders, ProtocolError, Reply
from ..core._envelope import decode_message, message_of
from ..core._wire import META_PROTOCOL_VERSION
from ..core.legacy import LEGACY_VERSIONS, LegacyAnswer, LegacySession
from ..core.wire import SUPPORTED_VERSIONS, IncomingMessage
from ..store import Signal, TaskStore
from ..store._sessions import SessionRecord, SessionRecords, sessions_of
from ..transports._exchange import sse_frame
from ..transports._port import Connection, PostAnswer, SendNotification, SessionHeaders
from ._http_session_parts import (
    GET_STREAM,
    MAX_SESSION_ID,
    DecodedStates,
    HttpSessionLimits,
    Observed,
    open_session,
    param,
    refusal,
    replay,
    save_change,
    too_many_streams,
    unavailable_reply,
)
from ._post_streams import PostStreams, post_event_id, runs_apart
from ._sessions import BATCH_VERSION, LegacySessions, batch_reply

__all__ = ["HttpSessionLimits", "HttpSessions", "unavailable_reply"]

logger = logging.getLogger("mcp_tasks.server")
_complaints = RateLimitedLog(logger)
"""Notices lost (a store or a client failing): a few lines a window, then a count."""
_LOST: Final = "a 2025 session's notice was not sent: %r"

_SAVE_TRIES: Final = 4
_IDLE_KEPT: Final = 256
_CLAIM: Final = META_PROTOCOL_VERSION.encode()


class _Here:
    """A session's requests and stream in this process."""

    __slots__ = ("connection", "stream", "stream_ended", "users")

    def __init__(self) -> None:
        self.connection = Connection(carries_sessions=True)
        self.users = 0
        self.stream: SendNotification | None = None
        self.stream_ended: _backend.Event | None = None


class HttpSessions:
    """The sessions of 2025 clients over HTTP, for one `Server` (theory of operation)."""

    def __init__(
        self,
        legacy: LegacySessions,
        store: Callable[[], TaskStore],
        now: Callable[[], float],
        spawn: Callable[[Callable[[], Coroutine[Any, Any, Any]]], None],
    ) -> None:
        self._legacy = legacy
        self._store = store
        self._now = now
        self._spawn = spawn
        self.serving: Callable[[], bool] = lambda: True
        """Whether 2025 sessions are served now (`ServerOptions.legacy_sessions`)."""
        self.limits = HttpSessionLimits()
        self._here: dict[str, _Here] = {}
        self._streams_open = 0
        self._records_of: tuple[TaskStore, SessionRecords] | None = None
        self._decoded = DecodedStates()
        self._idle: dict[str, _Here] = {}  # sessions with nothing here now: kept for a while
        self._posts = PostStreams(
            lambda: self._records, store, spawn, lambda: self.limits.reconnect_ms
        )

    @property
    def _records(self) -> SessionRecords:
        store = self._store()
        if self._records_of is None or self._records_of[0] is not store:
            self._records_of = (store, sessions_of(store))
        return self._records_of[1]

    # --- answering -----------------------------------------------------------------------

    async def answer(
        self,
        data: bytes | IncomingMessage,
        *,
        headers: HttpHeaders | None,
        session: SessionHeaders | None,
        notify: SendNotification | None,
        principal: str | None,
        answer: Observed,
    ) -> Reply | None:
        """An HTTP request without the 2026-07-28 claim, or naming a session: a 2025
        session's, or, with the claim or while 2025 sessions are not served, the core's as
        it is. `answer` is the server's way to the core. Raises `StoreUnavailable` when
        the sessions' store cannot be reached (the server answers 503)."""
        claimed = isinstance(data, bytes) and data.find(_CLAIM) >= 0 and data[:1] != b"["
        if (session is not None and session.method == "POST" and claimed) or not self.serving():
            return await answer(data, headers, notify, None, principal, routed=False)  # modern
        if session is not None and session.method != "POST":
            if session.method == "GET":
                return await self._stream(session, principal, notify)
            return await self._end(session, principal)
        if (
            session is not None
            and session.session_id is not None
            and isinstance(data, bytes)
            and data.lstrip()[:1] == b"["  # `is_batch`
        ):
            # a JSON array, which only a 2025-03-26 session may send: each message
            # answered as if it came alone, the replies in one array
            found = await self._session(session.session_id, principal, session.protocol_version)
            if isinstance(found, Reply):
                return found
            if found[1].version != BATCH_VERSION:
                return refusal(400, f"Invalid request: a batch is {BATCH_VERSION}'s only")
            one = partial(
                self.answer,
                headers=headers,
                session=session,
                notify=notify,
                principal=principal,
                answer=answer,
            )
            return await batch_reply(data, one)
        try:
            message = decode_message(data) if isinstance(data, bytes) else message_of(data)
        except ProtocolError:
            return await answer(data, headers, notify, None, principal, routed=True)
        version = None if session is None else session.protocol_version
        if version is None and headers is not None:
            version = headers.protocol_version
        if version is not None and version.strip() in SUPPORTED_VERSIONS:
            # a 2026-07-28 client's slip
            return await answer(message, headers, notify, None, principal, routed=True)
        if message.method == "initialize" and message.id is not UNSET:
            opened = self._legacy.front.route(message, None, claimless=True)
            if isinstance(opened, LegacyAnswer):
                limits, now = self.limits, self._now()
                return await open_session(self._records, opened, principal, limits, now=now)
            # not JSON-RPC: the core says
            return await answer(message, headers, notify, None, principal, routed=True)
        session_id = None if session is None else session.session_id
        if session_id is None:
            opened = self._legacy.front.route(message, None, claimless=True)
            if isinstance(opened, LegacyAnswer):
                return opened.reply  # `ping` needs no session
            if message.method is UNSET and message.id is UNSET:
                # neither a request nor a response: the core says what is wrong
                return await answer(message, headers, notify, None, principal, routed=True)
            return refusal(
                400,
                "Bad Request: the Mcp-Session-Id header is required; send initialize first "
                "(a 2026-07-28 client sends params._meta in every request instead)",
            )
        found = await self._session(session_id, principal, version)
        if isinstance(found, Reply):
            return found
        record, state = found
        if message.method is UNSET:  # a response: the answer to a question of ours
            await self._deliver(session_id, message)
            return None
        if message.method == "notifications/cancelled":
            await self._deliver(session_id, message)
            return None
        serve = partial(  # positional: a partial's keywords cost a dict at each call
            self._serve, record, state, message, answer, principal, isinstance(data, bytes)
        )
        if notify is not None and runs_apart(message, state.version, session):
            if isinstance(notify, PostAnswer):  # its transport lets it outlive the POST
                return await self._posts.run_inline(session_id, message.id, notify, serve)
            return await self._posts.run_apart(session_id, message.id, notify, serve)
        return await serve(notify)

    async def _serve(  # noqa: PLR0917 - bound positionally by one partial a request
        self,
        record: SessionRecord,
        state: LegacySession,
        message: IncomingMessage,
        answer: Observed,
        principal: str | None,
        claimless: bool,
        notify: SendNotification | None,
    ) -> Reply | None:
        """Answer `message` in its session, reaching the core through `answer` (`claimless`:
        the bytes it came in lack the claim's key); `notify` last, as the POST streams give
        it."""
        here = self._enter(record.session_id)
        connection = here.connection
        connection.session = state
        to_core = partial(
            answer,
            headers=None,
            notify=notify,
            connection=connection,
            principal=principal,
            routed=True,
        )
        try:
            reply = await self._legacy.serve(
                message, connection, to_core, notify, claimless=claimless
            )
        finally:
            changed = connection.session
            self._leave(record.session_id, here)
        if changed is not None and changed is not state and changed != state:
            idle = self.limits.idle_seconds
            await save_change(self._records, record, state, changed, idle=idle, now=self._now)
            if changed.subscriptions != state.subscriptions:
                await self._tell_others(record.session_id, message)
        return reply

    async def _session(
        self, session_id: str, principal: str | None, version: str | None
    ) -> tuple[SessionRecord, LegacySession] | Reply:
        """The live session `session_id` of `principal`, or the refusal to send."""
        if version is not None and version.strip() not in LEGACY_VERSIONS:
            return refusal(
                400,
                f"Bad Request: unsupported MCP-Protocol-Version {version.strip()[:64]!r}; "
                f"this session speaks one of {', '.join(LEGACY_VERSIONS)}",
            )
        record = None
        if len(session_id) <= MAX_SESSION_ID and session_id.isascii():  # else none is ours
            record = await self._records.get_session(
                session_id, idle_seconds=self.limits.idle_seconds, now=self._now()
            )
        if record is None or record.principal != principal:
            return refusal(
                404,
                "Session not found: it ended or expired; send initialize again, without "
                "Mcp-Session-Id",
            )
        return record, self._decoded.state(session_id, record.state)

    # --- answers and cancellations, wherever they are awaited -------------------------------

    async def _deliver(self, session_id: str, message: IncomingMessage) -> None:
        """Hand `message` (a response, or `notifications/cancelled`) to the request here
        that awaits it, or to every process on the store (a `session` signal)."""
        if not self.delivered(session_id, message):
            await self._tell_others(session_id, message)

    async def _tell_others(self, session_id: str, message: IncomingMessage) -> None:
        """Pass `message` on to the other processes on the store (a `session` signal)."""
        coordination = self._store().coordination
        signals = coordination.signals
        if signals is None:
            return  # nobody else: an answer too late, or a request already answered
        raw = msgspec.json.encode(message)
        await signals.publish(Signal("session", session_id, coordination.origin, data=raw))

    def delivered(self, session_id: str, message: IncomingMessage) -> bool:
        """Hand `message` to what awaits it here; False if nothing does."""
        here = self._here.get(session_id)
        if here is None:
            return False
        connection = here.connection
        if message.method is UNSET:
            return self._legacy.take_answer(message, connection)
        if message.method in ("resources/subscribe", "resources/unsubscribe"):
            # served by another process: the copy the notices read here follows it
            uri = param(message, "uri")
            held = connection.session
            if isinstance(uri, str) and held is not None:
                kept = held.subscriptions
                kept = kept | {uri} if message.method == "resources/subscribe" else kept - {uri}
                connection.session = msgspec.structs.replace(held, subscriptions=kept)
            return True
        request_id = param(message, "requestId")
        if request_id is None or request_id not in connection.in_flight:
            return False
        connection.cancel(request_id)
        return True

    def on_signal(self, signal: Signal) -> None:
        """A `session` or `event` signal from another process (the background's loop)."""
        if signal.data is None:
            return
        if signal.kind == "event":  # for the session's stream or a POST's, if open here
            number, _, event = signal.data.partition(b" ")
            if not number.isdigit():  # a POST stream's: `<stream> <number> <message>`
                self._posts.on_event(signal.task_id, number, event)
                return
            here = self._here.get(signal.task_id)
            if here is not None and here.stream is not None:
                self._spawn(partial(self._write_event, signal.task_id, int(number), event))
            return
        try:
            message = message_of(signal.data)
        except ProtocolError:
            return
        self.delivered(signal.task_id, message)

    # --- the session's own stream, and its end --------------------------------------------

    async def _stream(
        self, session: SessionHeaders, principal: str | None, notify: SendNotification | None
    ) -> Reply | None:
        if session.session_id is None:
            return refusal(400, "Bad Request: the Mcp-Session-Id header is required")
        found = await self._session(session.session_id, principal, session.protocol_version)
        if isinstance(found, Reply):
            return found
        if notify is None:
            return refusal(406, "Not acceptable: the session's stream is text/event-stream")
        session_id = session.session_id
        resumed = post_event_id(session.last_event_id)
        if resumed is not None:  # a POST's stream, not the session's own
            return await self._resume(session_id, *resumed, notify)
        here = self._here.get(session_id)
        taking_over = here is not None and here.stream_ended is not None
        if not taking_over and self._streams_open >= self.limits.max_streams:
            return too_many_streams()
        here = self._enter(session_id)
        here.connection.session = found[1]  # what the notices read (its subscriptions)
        if here.stream_ended is not None:
            here.stream_ended.set()  # a client reconnecting: the newer stream takes over
        else:
            self._streams_open += 1
        ended = here.stream_ended = _backend.event()
        here.stream = notify
        try:
            await notify(b": the session's stream\n\n")  # opens it at once (a comment)
            await replay(self._records, session_id, session.last_event_id, notify)
            await ended.wait()
        finally:
            if here.stream_ended is ended:
                here.stream = here.stream_ended = None
                self._streams_open -= 1
            self._leave(session_id, here)
        return None

    async def _resume(
        self, session_id: str, name: str, after: int, notify: SendNotification
    ) -> Reply | None:
        """A GET with a POST stream's `Last-Event-ID`: the rest of that stream."""
        if self._streams_open >= self.limits.max_streams:
            return too_many_streams()
        self._streams_open += 1
        try:
            await notify(b": the request's stream, resumed\n\n")  # opens it at once
            await self._posts.resume(session_id, name, after, notify)
        finally:
            self._streams_open -= 1
        return None

    @property
    def streams_open(self) -> int:
        """How many sessions' own streams are open in this process."""
        return self._streams_open

    def streams(self, *, subscribed_to: str | None = None) -> list[str]:
        """The sessions whose own stream is open here (subscribed to `subscribed_to`)."""
        return [
            session_id
            for session_id, here in self._here.items()
            if here.stream is not None
            and (
                subscribed_to is None
                or (
                    here.connection.session is not None
                    and subscribed_to in here.connection.session.subscriptions
                )
            )
        ]

    async def send(self, session_id: str, message: bytes) -> None:
        """Send `message` on the session's own stream (kept for a client that
        reconnects); nothing is lost while no stream is open, up to the events kept. The
        stream may be open in another process: the event goes there as a signal."""
        try:
            number = await self._records.append_event(session_id, GET_STREAM, message)
            if not number:
                return  # the session is gone
            if not await self._write_event(session_id, number, message):
                coordination = self._store().coordination
                if coordination.signals is not None:
                    data = b"%d " % number + message
                    signal = Signal("event", session_id, coordination.origin, data=data)
                    await coordination.signals.publish(signal)
        except Exception as error:  # the store or the client failed: this notice is lost
            _complaints.log(logging.WARNING, "session-notice", _LOST, error)

    async def _write_event(self, session_id: str, number: int, message: bytes) -> bool:
        """Write event `number` on the session's stream if it is open here."""
        here = self._here.get(session_id)
        if here is None or here.stream is None:
            return False
        await here.stream(sse_frame(message, f"{GET_STREAM}{number}"))
        return True

    async def _end(self, session: SessionHeaders, principal: str | None) -> Reply:
        if session.session_id is None:
            return refusal(400, "Bad Request: the Mcp-Session-Id header is required")
        found = await self._session(session.session_id, principal, session.protocol_version)
        if isinstance(found, Reply):
            return found
        await self._records.close_session(session.session_id)
        self.ended(session.session_id)
        return Reply(body=b"", http_status=200)

    def ended(self, session_id: str | None = None) -> None:
        """End what runs here for a session (all of them when None): its stream, the
        questions its requests await, and the requests (`DELETE`, the server closing)."""
        self._decoded.forget(session_id)
        self._posts.ended(session_id)
        self._idle.clear() if session_id is None else self._idle.pop(session_id, None)
        for key, here in list(self._here.items()):
            if session_id is not None and key != session_id:
                continue
            if here.stream_ended is not None:
                here.stream_ended.set()
            self._legacy.abandon(here.connection)
            if session_id is not None:
                for scope in list(here.connection.in_flight.values()):
                    scope.cancel()

    def _enter(self, session_id: str) -> _Here:
        here = self._here.get(session_id)
        if here is None:
            here = self._idle.pop(session_id, None)
            if here is None:
                here = _Here()
                here.connection.notices = partial(self.send, session_id)  # its stream
            self._here[session_id] = here
        here.users += 1
        return here

    def _leave(self, session_id: str, here: _Here) -> None:
        """`here` has one user fewer. With none left, it is kept for the session's next
        request if nothing of it is left running (at most `_IDLE_KEPT` sessions', the
        oldest dropped)."""
        here.users -= 1
        if here.users == 0 and self._here.get(session_id) is here:
            del self._here[session_id]
            connection, idle = here.connection, self._idle
            if not (connection.in_flight or connection.awaited or here.stream):
                if len(idle) >= _IDLE_KEPT:
                    del idle[next(iter(idle))]
                idle[session_id] = here  # as good as new
