"""What a transport needs of a server: `MessageHandler`, a small protocol.

The stdio and HTTP transports are typed against it, not against `Server`, so anything
that answers messages this way can be served (a test double, another runtime).
"""

from __future__ import annotations

from typing import Protocol

from ..core import HttpHeaders, Reply
from ._listeners import Connection, Notify


class MessageHandler(Protocol):
    async def handle(
        self,
        data: bytes,
        *,
        headers: HttpHeaders | None = None,
        notify: Notify | None = None,
        connection: Connection | None = None,
        principal: str | None = None,
    ) -> Reply | None:
        """The reply to one incoming message, or None (a notification, a cancelled request)."""
        ...

    def end_subscriptions(self, connection: Connection | None = None) -> None:
        """End the listen streams (all of them, or those of `connection`) gracefully."""
        ...
