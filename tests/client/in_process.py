"""A client transport that hands each message straight to a running `Server.handle`, with
the HTTP headers the client built (so the server checks them as on HTTP)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from mcp_tasks import HttpHeaders, Server
from mcp_tasks.server import Connection


class InProcessTransport:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.connection = Connection()
        self.sent: list[bytes] = []

    async def request(
        self,
        message: bytes,
        *,
        request_id: str | int,
        headers: Mapping[str, str],
        on_notification: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        async def notify(body: bytes) -> None:
            if on_notification is not None:
                await on_notification(msgspec.json.decode(body))

        self.sent.append(message)
        http = HttpHeaders(
            protocol_version=headers.get("MCP-Protocol-Version"),
            method=headers.get("Mcp-Method"),
            name=headers.get("Mcp-Name"),
        )
        reply = await self.server.handle(
            message, headers=http, notify=notify, connection=self.connection
        )
        assert reply is not None, "the server sent no reply"
        decoded: dict[str, Any] = msgspec.json.decode(reply.body)
        return decoded

    async def aclose(self) -> None:
        pass
