"""What a 2025 session is told outside any request: `notifications/{tools,prompts,resources}/
list_changed` when a list changes, `notifications/resources/updated` for a resource it
subscribed to.

A 2026-07-28 client hears of these on a `subscriptions/listen` stream; a 2025 client on its
connection (stdio: the process's stdout) or its session's own stream (HTTP: the `GET`,
`HttpSessions.send`, which keeps each event for a client that reconnects). The server tells
`ListenStreams` of a change, and they tell this, which sends to the sessions this process
holds: the stdio connections whose session is open, and the HTTP sessions whose stream is
open here. Each send is a task of the server's (a slow client holds up nobody), and a
client that is gone costs nothing more.
"""

from __future__ import annotations

import collections
import logging
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any, Final

import msgspec

from ..transports._port import Connection, SendNotification
from ._http_sessions import HttpSessions

__all__ = ["LegacyNotices"]

logger = logging.getLogger("mcp_tasks.server")

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], None]


MAX_WAITING: Final = 256
"""Notices one session may have waiting to be sent; past it the oldest is dropped."""

Send = Callable[[], Awaitable[None]]


class _Outbox:
    """Each session's notices, sent in the order they were told, one at a time (by one
    task of the server's while any wait)."""

    def __init__(self, spawn: Spawn) -> None:
        self._spawn = spawn
        self._waiting: dict[object, collections.deque[Send]] = {}

    def put(self, key: object, send: Send) -> None:
        waiting = self._waiting.get(key)
        if waiting is not None:
            if len(waiting) >= MAX_WAITING:
                waiting.popleft()
                logger.warning("a 2025 session fell %d notices behind: one dropped", MAX_WAITING)
            waiting.append(send)
            return
        self._waiting[key] = collections.deque([send])
        self._spawn(partial(self._drain, key))

    async def _drain(self, key: object) -> None:
        waiting = self._waiting[key]
        try:
            while waiting:
                try:
                    await waiting.popleft()()
                except Exception as error:  # the client went away: nothing more to tell it
                    logger.debug("a 2025 session's notice was not sent: %r", error)
        finally:
            del self._waiting[key]


class LegacyNotices:
    def __init__(self, http: HttpSessions, spawn: Spawn) -> None:
        self._http = http
        self._outbox = _Outbox(spawn)
        self._stdio: weakref.WeakSet[Connection] = weakref.WeakSet()

    def saw(self, connection: Connection, notify: SendNotification | None) -> None:
        """A message came on `connection` (stdio): once its session is open, notices go
        to it through `notify` (a look at one attribute for every later message)."""
        if connection.notices is None and notify is not None and connection.session is not None:
            connection.notices = notify
            self._stdio.add(connection)

    def gone(self, connection: Connection) -> None:
        self._stdio.discard(connection)

    def list_changed(self, kind: str) -> None:
        message = _notification(f"notifications/{kind}/list_changed", None)
        for connection in list(self._stdio):
            if connection.notices is not None and not connection.closing:
                self._outbox.put(connection, partial(connection.notices, message))
        for session_id in self._http.streams():
            self._outbox.put(session_id, partial(self._http.send, session_id, message))

    def resource_updated(self, uri: str) -> None:
        message = _notification("notifications/resources/updated", {"uri": uri})
        for connection in list(self._stdio):
            session, notify = connection.session, connection.notices
            wanted = session is not None and uri in session.subscriptions
            if wanted and notify is not None and not connection.closing:
                self._outbox.put(connection, partial(notify, message))
        for session_id in self._http.streams(subscribed_to=uri):
            self._outbox.put(session_id, partial(self._http.send, session_id, message))


def _notification(method: str, params: dict[str, Any] | None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return msgspec.json.encode(message)
