"""The pieces of a 2025 client's HTTP session that hold no state (`_http_sessions`): its
limits, how it is stored (`encode`, `decode`) and merged (`changed_by`), its stream's
events replayed, and the refusals HTTP sends for it.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import msgspec
from msgspec import UNSET

from ..core import HttpHeaders, Reply, VersionConflict
from ..core._encode import error_body
from ..core._errors import INTERNAL_ERROR, INVALID_REQUEST
from ..core.legacy import LegacyAnswer, LegacySession
from ..core.wire import IncomingMessage
from ..store import StoreFull
from ..store._sessions import SessionLimits, SessionRecord, SessionRecords
from ..transports._exchange import sse_frame
from ..transports._port import Connection, SendNotification, SessionReply

logger = logging.getLogger("mcp_tasks.server")

__all__ = [
    "GET_STREAM",
    "MAX_SESSION_ID",
    "Answer",
    "DecodedStates",
    "HttpSessionLimits",
    "Observed",
    "changed_by",
    "decode",
    "encode",
    "open_session",
    "param",
    "refusal",
    "replay",
    "save_change",
    "too_many_streams",
    "unavailable_reply",
]

SAVE_TRIES: Final = 4
"""Times a request's change of its session is merged and saved again after a conflict."""
GET_STREAM: Final = "g"
"""The name of a session's own stream in its event ids (`g1`, `g2`...) and in the store."""
MAX_SESSION_ID: Final = 128
"""A longer `Mcp-Session-Id` names no session of ours (ours are 32 characters), and is
never looked up in the store."""


class Answer(Protocol):
    """The core's way: a message, the headers the core checks, how to notify its client,
    the connection it came on."""

    def __call__(
        self,
        data: bytes | IncomingMessage,
        headers: HttpHeaders | None,
        notify: SendNotification | None,
        connection: Connection | None,
    ) -> Awaitable[Reply | None]: ...


class Observed(Protocol):
    """The server's way to the core (`Server._observed`): a message, its headers, how to
    notify its client, its connection, its principal, and whether a session rewrote it."""

    def __call__(
        self,
        data: bytes | IncomingMessage,
        headers: HttpHeaders | None,
        notify: SendNotification | None,
        connection: Connection | None,
        principal: str | None,
        *,
        routed: bool,
    ) -> Awaitable[Reply | None]: ...


class HttpSessionLimits(msgspec.Struct, frozen=True, kw_only=True):
    """How long a 2025 client's HTTP session lives unused, and how many there may be."""

    idle_seconds: float = 1800.0
    """A session not used for this long is gone (its client gets 404, and starts again)."""
    max_sessions: int = 10_000
    """Sessions the store holds at once; one more `initialize` is refused (503)."""
    max_per_principal: int | None = 64
    """Sessions one principal holds at once (None: no such limit); past it, 429."""
    max_streams: int = 1024
    """Sessions' own `GET` streams open at once in this process (each holds a connection);
    one more is refused with 503 (a principal holds at most one a session); a `GET`
    resuming a POST's stream counts too."""
    reconnect_ms: int = 1000
    """How long a 2025-11-25 client waits before it reconnects to a POST's SSE stream that
    ended before its response (the `retry:` field of the stream's priming event)."""

    def __post_init__(self) -> None:
        if not self.idle_seconds > 0:
            raise ValueError("idle_seconds must be positive")
        if not self.reconnect_ms > 0:
            raise ValueError("reconnect_ms must be positive")
        if min(self.max_sessions, self.max_per_principal or 1, self.max_streams) < 1:
            raise ValueError("max_sessions, max_per_principal and max_streams must be at least 1")


def changed_by(stored: LegacySession, before: LegacySession, after: LegacySession) -> LegacySession:
    """`stored` (the session as saved now) with what one request changed of it, from
    `before` to `after`: its log level, `initialized`, its subscriptions, the tasks it
    created. What another process changed meanwhile is kept."""
    merged = msgspec.structs.replace(
        stored,
        log_level=after.log_level if after.log_level != before.log_level else stored.log_level,
        initialized=stored.initialized or after.initialized,
        subscriptions=(stored.subscriptions - (before.subscriptions - after.subscriptions))
        | (after.subscriptions - before.subscriptions),
    )
    for task_id in [task for task in after.task_ids if task not in before.task_ids]:
        merged = merged.remembered(task_id)
    return merged


async def replay(
    records: SessionRecords, session_id: str, last_event_id: str | None, notify: SendNotification
) -> None:
    """The events of the session's stream after `last_event_id` (what a reconnecting
    client missed, as far as they are kept)."""
    if last_event_id is None or not last_event_id.startswith(GET_STREAM):
        return
    try:
        after = int(last_event_id[len(GET_STREAM) :])
    except ValueError:
        return
    for number, data in await records.events_after(session_id, GET_STREAM, after) or ():
        await notify(sse_frame(data, f"{GET_STREAM}{number}"))


class DecodedStates:
    """Sessions' states as last read in this process, decoded: a state read again
    unchanged (most requests change nothing) is not decoded again."""

    KEPT: Final = 4096

    def __init__(self) -> None:
        self._states: dict[str, tuple[bytes, LegacySession]] = {}

    def state(self, session_id: str, state: bytes) -> LegacySession:
        known = self._states.get(session_id)
        if known is not None and (known[0] is state or known[0] == state):
            return known[1]
        if len(self._states) >= self.KEPT:
            self._states.clear()
        decoded = self._states[session_id] = (state, decode(state))
        return decoded[1]

    def forget(self, session_id: str | None) -> None:
        """Forget a session's state (every one's when None)."""
        self._states.clear() if session_id is None else self._states.pop(session_id, None)


def encode(session: LegacySession) -> bytes:
    return msgspec.json.encode(session)


def decode(state: bytes) -> LegacySession:
    return msgspec.json.decode(state, type=LegacySession)


def param(message: IncomingMessage, name: str) -> Any:
    if message.params is UNSET:
        return None
    try:
        params = msgspec.json.decode(message.params)
    except msgspec.DecodeError:
        return None
    return params.get(name) if isinstance(params, dict) else None


def unavailable_reply() -> Reply:
    """What a session's request gets while the store cannot be reached: 503, try again."""
    body = error_body(
        None,
        INTERNAL_ERROR,
        "The server cannot reach its session store right now: try again shortly",
        {"retryAfterMs": 1000},
    )
    return Reply(body=body, http_status=503, error_code=INTERNAL_ERROR, retry_after_seconds=1)


def too_many_streams() -> Reply:
    """A `GET` past `HttpSessionLimits.max_streams`: 503, try again later."""
    why = "Too many session streams are open here: try again later"
    return refusal(503, why, INTERNAL_ERROR)


def refusal(status: int, message: str, code: int = INVALID_REQUEST) -> Reply:
    """An id-less JSON-RPC error with HTTP `status`: what HTTP says of the session."""
    return Reply(body=error_body(None, code, message), http_status=status, error_code=code)


async def save_change(
    records: SessionRecords,
    record: SessionRecord,
    before: LegacySession,
    after: LegacySession,
    *,
    idle: float,
    now: Callable[[], float],
) -> None:
    """Save what one request changed of the session `record` (from `before` to `after`);
    another process may have changed it too since it was read: its change is kept."""
    for _ in range(SAVE_TRIES):
        merged = changed_by(decode(record.state), before, after)
        new = msgspec.structs.replace(record, state=encode(merged), version=record.version + 1)
        try:
            await records.save_session(new, record.version, idle_seconds=idle, now=now())
            return
        except VersionConflict:
            again = await records.get_session(record.session_id, idle_seconds=idle, now=now())
            if again is None:
                return  # ended meanwhile
            record = again
    logger.warning("a session's change was not saved: it kept changing meanwhile")


async def open_session(
    records: SessionRecords,
    opened: LegacyAnswer,
    principal: str | None,
    limits: HttpSessionLimits,
    *,
    now: float,
) -> Reply | None:
    """The front's answer to an `initialize`: the session it opened stored (a new random
    id, bound to `principal`, under `limits`), the id sent with the reply."""
    reply = opened.reply
    if opened.session is None or reply is None or reply.error_code is not None:
        return reply
    session_id = secrets.token_urlsafe(24)  # visible ASCII, as the 2025 revisions ask
    record = SessionRecord(session_id=session_id, principal=principal, state=encode(opened.session))
    capped = SessionLimits(
        max_sessions=limits.max_sessions, max_per_principal=limits.max_per_principal
    )
    try:
        await records.open_session(record, limits=capped, idle_seconds=limits.idle_seconds, now=now)
    except StoreFull as full:
        if full.per_principal:
            return refusal(429, f"Too many sessions: this principal holds {full.limit}")
        return refusal(503, "Too many sessions: the server holds its limit", INTERNAL_ERROR)
    return SessionReply(body=reply.body, request_id=reply.request_id, session_id=session_id)
