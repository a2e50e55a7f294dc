"""`subscriptions/listen` streams: each one a queue its request task drains to the client.

The core words every message (`list_changed`, `resource_updated`, `task_changed`); a
`Listener` queues what its stream asked for, and `carry` sends the acknowledgement, then
the queue, until the client closes the stream or the server ends it.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

import trio

from ..core import Reply, RequestId, ServerCore, Subscription, TaskRecord

logger = logging.getLogger("mcp_tasks.server")

Notify = Callable[[bytes], Awaitable[None]]
MAX_QUEUED_NOTIFICATIONS: Final = 1024
"""Notifications a `subscriptions/listen` stream may have waiting for its client; a client
that falls further behind gets its stream ended (it may listen again and re-read)."""


class Connection:
    """One client connection's requests in flight, so `notifications/cancelled` can stop
    the one it names. Request ids are only unique per connection."""

    def __init__(self) -> None:
        self.in_flight: dict[RequestId, trio.CancelScope] = {}
        self.closing = False
        """Set by a transport whose client is gone (stdio EOF): listen streams end."""

    def cancel(self, request_id: RequestId) -> None:
        scope = self.in_flight.get(request_id)
        if scope is not None:
            scope.cancel()


@dataclass(eq=False)  # hashed by identity: the server keeps a set of them
class Listener:
    subscription: Subscription
    connection: Connection | None
    wake: trio.Event = field(default_factory=trio.Event)
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


class Listeners:
    def __init__(self, core: ServerCore) -> None:
        self._core = core
        self._open: set[Listener] = set()

    def __len__(self) -> int:
        return len(self._open)

    async def carry(
        self,
        subscription: Subscription,
        notify: Notify | None,
        connection: Connection | None,
        *,
        closing: bool,
    ) -> Reply | None:
        """Carry one listen stream until the client closes it (no reply: it is gone) or
        the server ends it (the closing response)."""
        if notify is None:
            return self._core.subscription_ended(subscription)  # nowhere to send anything
        listener = Listener(subscription, connection)
        if closing or (connection is not None and connection.closing):
            listener.end()
        self._open.add(listener)
        scope = trio.CancelScope()
        if connection is not None:
            connection.in_flight[subscription.request_id] = scope
        try:
            with scope:
                await notify(self._core.subscription_acknowledged(subscription))
                while listener.queued or not listener.ended:  # what was queued goes out first
                    if not listener.queued:
                        await listener.wake.wait()
                        listener.wake = trio.Event()
                        continue
                    await notify(listener.queued.popleft())
        finally:
            self._open.discard(listener)
            if connection is not None:
                connection.in_flight.pop(subscription.request_id, None)
        if scope.cancelled_caught:
            return None
        return self._core.subscription_ended(subscription)

    def end(self, connection: Connection | None = None) -> None:
        """End the streams (all, or those of `connection`) after what they have queued."""
        if connection is not None:
            connection.closing = True
        for listener in self._open:
            if connection is None or listener.connection is connection:
                listener.end()

    def list_changed(self, kind: str) -> None:
        for listener in self._open:
            listener.push(self._core.list_changed(listener.subscription, kind))

    def resource_updated(self, uri: str) -> None:
        for listener in self._open:
            listener.push(self._core.resource_updated(listener.subscription, uri))

    def task_changed(self, record: TaskRecord) -> None:
        for listener in self._open:
            try:
                message = self._core.task_changed(listener.subscription, record)
            except Exception:  # a notification must never cost the task its own work
                logger.exception("notifications/tasks for %r failed", record.task_id)
                continue
            listener.push(message)

    def wants_task(self, task_id: str) -> bool:
        return any(
            task_id in (listener.subscription.notifications.task_ids or ())
            for listener in self._open
        )
