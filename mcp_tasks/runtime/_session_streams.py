"""What of each 2025 HTTP session runs in this process (`SessionsHere`, the base of
`HttpSessions`): its connection while requests are in flight, its own `GET` stream and
the events sent on it, the `GET`s that resume a POST's stream, and their end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, Final

from .._support import backend as _backend
from .._support.logs import RateLimitedLog
from ..core import Reply
from ..core._errors import INTERNAL_ERROR
from ..store import Signal, TaskStore
from ..store._sessions import SessionRecords, sessions_of
from ..transports._exchange import sse_frame
from ..transports._port import Connection, SendNotification
from ._http_session_parts import GET_STREAM, DecodedStates, HttpSessionLimits, refusal
from ._post_streams import PostStreams
from ._sessions import ANSWER_SECONDS, LegacySessions

__all__ = ["SessionsHere"]

logger = logging.getLogger("mcp_tasks.server")
_complaints = RateLimitedLog(logger)
"""Notices lost (a store or a client failing): a few lines a window, then a count."""
_LOST: Final = "a 2025 session's notice was not sent: %r"
_IDLE_KEPT: Final = 256


class _Here:
    """A session's requests and stream in this process."""

    __slots__ = ("connection", "shields", "stream", "stream_ended", "users")

    def __init__(self) -> None:
        self.connection = Connection(carries_sessions=True)
        self.users = 0
        self.shields: set[_backend.CancelScope] = set()
        """Requests of resumable streams running here, shielded from their POST's end."""
        self.stream: SendNotification | None = None
        self.stream_ended: _backend.Event | None = None


class SessionsHere:
    """The sessions with something in this process (`_Here` each), for `HttpSessions`."""

    def __init__(
        self,
        legacy: LegacySessions,
        store: Callable[[], TaskStore],
        spawn: Callable[[Callable[[], Coroutine[Any, Any, Any]]], None],
    ) -> None:
        self._legacy = legacy
        self._store = store
        self._spawn = spawn
        self.limits = HttpSessionLimits()
        self._here: dict[str, _Here] = {}
        self._idle: dict[str, _Here] = {}
        """`_Here`s of sessions with nothing here now, kept for their next request."""
        self._streams_open = 0
        self._records_of: tuple[TaskStore, SessionRecords] | None = None
        self._decoded = DecodedStates()
        self.post_streams = PostStreams(
            lambda: self._records,
            self._publish_event,
            lambda: self._store().coordination.signals is not None,
        )

    @property
    def _records(self) -> SessionRecords:
        store = self._store()
        if self._records_of is None or self._records_of[0] is not store:
            self._records_of = (store, sessions_of(store))
        return self._records_of[1]

    async def _publish_event(self, session_id: str, name: str, number: int, data: bytes) -> None:
        """An event of POST stream `name` that nobody here writes, for the process whose
        `GET` resumed that stream (an `event` signal)."""
        coordination = self._store().coordination
        if coordination.signals is not None:
            head = f"{name}:{number} ".encode()
            signal = Signal("event", session_id, coordination.origin, data=head + data)
            await coordination.signals.publish(signal)

    async def _resume(
        self, session_id: str, name: str, after: int, notify: SendNotification
    ) -> Reply | None:
        if self._streams_open >= self.limits.max_streams:
            return refusal(
                503, "Too many session streams are open here: try again later", INTERNAL_ERROR
            )
        self._streams_open += 1
        try:
            await notify(b": the stream resumed\n\n")  # opens it at once (a comment)
            streams = self.post_streams
            await streams.resume(session_id, name, after, notify, wait=ANSWER_SECONDS)
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

    def _shielded(self, session_id: str) -> _backend.CancelScope:
        """A shield for a request of `session_id` whose client may leave without
        cancelling it; `ended` cancels it (`DELETE`, the server closing)."""
        shield = _backend.cancel_scope(shield=True)
        self._enter(session_id).shields.add(shield)
        return shield

    def _unshielded(self, session_id: str, shield: _backend.CancelScope) -> None:
        here = self._here.get(session_id)
        if here is not None:
            here.shields.discard(shield)
            self._leave(session_id, here)

    def ended(self, session_id: str | None = None) -> None:
        """End what runs here for a session (all of them when None): its stream, the
        questions its requests await, and the requests (`DELETE`, the server closing)."""
        self._decoded.forget(session_id)
        self._idle.clear() if session_id is None else self._idle.pop(session_id, None)
        for key, here in list(self._here.items()):
            if session_id is not None and key != session_id:
                continue
            if here.stream_ended is not None:
                here.stream_ended.set()
            self._legacy.abandon(here.connection)
            for shield in list(here.shields):
                shield.cancel()
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
        here.users -= 1
        if here.users == 0 and self._here.get(session_id) is here:
            del self._here[session_id]
            connection = here.connection
            if not (connection.in_flight or connection.awaited or here.stream or here.shields):
                if len(self._idle) >= _IDLE_KEPT:
                    del self._idle[next(iter(self._idle))]  # the oldest
                self._idle[session_id] = here  # as good as new, for the next request
