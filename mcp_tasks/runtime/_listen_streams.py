"""`subscriptions/listen` streams: each one a queue its request task drains to the client.

The core words every message (`ListChanged`, `ResourceUpdated`, `TaskChanged`); a
`ListenStream` queues what its stream asked for, and `carry` sends the acknowledgement, then
the queue, until the client closes the stream or the server ends it.

`ListenStreams` counts the open streams, in all and per principal, against the limits the
core's `Listen` carries (one too many gets the core's `ListenRefused`), and indexes them
by the task ids and resource uris they agreed to: a task write, or a resource update,
costs as much as the streams watching that task or uri, whatever the number of others.
List changes (a tool registered or removed: rare) go through every open stream.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Protocol

from .._support.backend import Event, cancel_scope, event
from ..core import Listen, Reply, Subscription, TaskRecord
from ..core._compat import message_of
from ..core.inputs import (
    ListChanged,
    ListenEnded,
    ListenRefused,
    ListenStarted,
    ResourceUpdated,
    TaskChanged,
)
from ..transports._port import Connection, Notify
from ..transports._telemetry import Telemetry
from ._shared import Shared

logger = logging.getLogger("mcp_tasks.server")


class SessionsTold(Protocol):
    """What tells 2025 sessions of a change (`_legacy_notices.LegacyNotices`)."""

    def list_changed(self, kind: str) -> None: ...

    def resource_updated(self, uri: str) -> None: ...


MAX_QUEUED_NOTIFICATIONS: Final = 1024
"""Notifications a `subscriptions/listen` stream may have waiting for its client; a client
that falls further behind gets its stream ended (it may listen again and re-read)."""


@dataclass(eq=False)  # hashed by identity: the server keeps a set of them
class ListenStream:
    subscription: Subscription
    connection: Connection | None
    wake: Event = field(default_factory=event)
    queued: collections.deque[bytes] = field(default_factory=collections.deque)
    ended: bool = False

    def push(self, message: bytes | None) -> None:
        if message is None or self.ended:
            return
        if len(self.queued) >= MAX_QUEUED_NOTIFICATIONS:
            logger.warning(
                "subscription %r: its client fell %d notifications behind; ending it",
                self.subscription.request_id,
                len(self.queued),
            )
            self.end()
            return
        self.queued.append(message)
        self.wake.set()

    def end(self) -> None:
        self.ended = True
        self.wake.set()


class ListenStreams:
    """The open `subscriptions/listen` streams; each message worded by `shared.decide`,
    counted in `shared.telemetry`."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._open: set[ListenStream] = set()
        self._per_principal: collections.Counter[str | None] = collections.Counter()
        self._by_task = _Index()
        self._by_uri = _Index()
        self.sessions_told: SessionsTold | None = None
        """Told of each list change and resource update too: the 2025 sessions'."""

    def __len__(self) -> int:
        return len(self._open)

    @property
    def telemetry(self) -> Telemetry:
        """Where the open streams are counted: the server's telemetry, as it is now."""
        return self._shared.telemetry

    def open_for(self, principal: str | None) -> int:
        """How many streams `principal` holds open."""
        return self._per_principal[principal]

    async def carry(
        self,
        listen: Listen,
        notify: Notify | None,
        connection: Connection | None,
        *,
        closing: bool,
    ) -> Reply | None:
        """Carry one listen stream until the client closes it (no reply: it is gone) or
        the server ends it (the closing response); or refuse it, when `listen`'s limits
        are reached."""
        subscription = listen.subscription
        if notify is None:
            return self._ended(subscription)  # nowhere to send anything
        refusal = self._refusal(listen)
        if refusal is not None:
            return refusal
        listener = ListenStream(subscription, connection)
        if closing or (connection is not None and connection.closing):
            listener.end()
        self._add(listener)
        scope = cancel_scope()
        if connection is not None:
            connection.in_flight[subscription.request_id] = scope
        try:
            with scope:
                acknowledgement = message_of(self._shared.decide(ListenStarted(subscription)))
                if acknowledgement is not None:
                    await notify(acknowledgement)
                while listener.queued or not listener.ended:  # what was queued goes out first
                    if not listener.queued:
                        await listener.wake.wait()
                        listener.wake = event()
                        continue
                    await notify(listener.queued.popleft())
        finally:
            self._remove(listener)
            if connection is not None:
                connection.in_flight.pop(subscription.request_id, None)
        if scope.cancelled_caught:
            return None
        return self._ended(subscription)

    def _ended(self, subscription: Subscription) -> Reply | None:
        return self._shared.decide(ListenEnded(subscription)).reply

    def end(self, connection: Connection | None = None) -> None:
        """End the streams (all, or those of `connection`) after what they have queued."""
        if connection is not None:
            connection.closing = True
        for listener in self._open:
            if connection is None or listener.connection is connection:
                listener.end()

    def _refusal(self, listen: Listen) -> Reply | None:
        most = listen.max_streams_per_principal
        if most is not None and self._per_principal[listen.subscription.principal] >= most:
            return self._shared.decide(ListenRefused(listen, per_principal=True)).reply
        if listen.max_streams is not None and len(self._open) >= listen.max_streams:
            return self._shared.decide(ListenRefused(listen, per_principal=False)).reply
        return None

    def _add(self, listener: ListenStream) -> None:
        self._open.add(listener)
        if self.telemetry.enabled:
            self.telemetry.listen_changed(1)
        self._per_principal[listener.subscription.principal] += 1
        wanted = listener.subscription.notifications
        self._by_task.add(wanted.task_ids or (), listener)
        self._by_uri.add(wanted.resource_subscriptions or (), listener)

    def _remove(self, listener: ListenStream) -> None:
        self._open.discard(listener)
        if self.telemetry.enabled:
            self.telemetry.listen_changed(-1)
        principal = listener.subscription.principal
        self._per_principal[principal] -= 1
        if not self._per_principal[principal]:
            del self._per_principal[principal]
        wanted = listener.subscription.notifications
        self._by_task.discard(wanted.task_ids or (), listener)
        self._by_uri.discard(wanted.resource_subscriptions or (), listener)

    def list_changed(self, kind: str) -> None:
        if self.sessions_told is not None:
            self.sessions_told.list_changed(kind)
        for listener in self._open:
            listener.push(message_of(self._shared.decide(ListChanged(listener.subscription, kind))))

    def resource_updated(self, uri: str) -> None:
        if self.sessions_told is not None:
            self.sessions_told.resource_updated(uri)
        for listener in self._by_uri.get(uri):
            updated = ResourceUpdated(listener.subscription, uri)
            listener.push(message_of(self._shared.decide(updated)))

    def task_changed(self, record: TaskRecord) -> None:
        for listener in self._by_task.get(record.task_id):
            try:
                message = message_of(
                    self._shared.decide(TaskChanged(listener.subscription, record))
                )
            except Exception:  # a notification must never cost the task its own work
                logger.exception(
                    "task %s: notifications/tasks failed",
                    record.task_id,
                    extra={"task_id": record.task_id},
                )
                continue
            listener.push(message)

    def wants_task(self, task_id: str) -> bool:
        """Whether a stream watches `task_id` (a change made elsewhere is worth a read)."""
        return task_id in self._by_task


class _Index:
    """The listeners of each key (a task id, a resource uri). Most keys have one: it is kept
    bare, and a set only for a key two or more share. (A set for every key cost 80 KiB per
    stream of 256 task ids, and made the garbage collector's rounds longer.)"""

    def __init__(self) -> None:
        self._by_key: dict[str, ListenStream | set[ListenStream]] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def get(self, key: str) -> Iterable[ListenStream]:
        found = self._by_key.get(key)
        if found is None:
            return ()
        return found if isinstance(found, set) else (found,)

    def add(self, keys: Iterable[str], listener: ListenStream) -> None:
        by_key = self._by_key
        for key in keys:
            found = by_key.setdefault(key, listener)
            if isinstance(found, set):
                found.add(listener)
            elif found is not listener:
                by_key[key] = {found, listener}

    def discard(self, keys: Iterable[str], listener: ListenStream) -> None:
        by_key = self._by_key
        for key in keys:
            found = by_key.get(key)
            if found is listener:
                del by_key[key]
            elif isinstance(found, set):
                found.discard(listener)
                if len(found) == 1:
                    by_key[key] = found.pop()
