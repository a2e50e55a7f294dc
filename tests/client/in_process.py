"""A client transport that hands each message straight to a running `Server.handle`, with
the HTTP headers the client built, `Mcp-Param-*` included (so the server checks them as on
HTTP)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from mcp_tasks import CallToolResult, HttpHeaders, Server, TextContent
from mcp_tasks.server import Connection

PARAM = "Mcp-Param-"


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
        reply = await self.server.handle(
            message, headers=_http(headers), notify=notify, connection=self.connection
        )
        assert reply is not None, "the server sent no reply"
        decoded: dict[str, Any] = msgspec.json.decode(reply.body)
        return decoded

    async def notify(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        self.sent.append(message)
        await self.server.handle(message, headers=_http(headers), connection=self.connection)

    async def aclose(self) -> None:
        pass


def _http(headers: Mapping[str, str]) -> HttpHeaders:
    params = {
        key[len(PARAM) :].lower(): value
        for key, value in headers.items()
        if key.lower().startswith(PARAM.lower())
    }
    return HttpHeaders(
        protocol_version=headers.get("MCP-Protocol-Version"),
        method=headers.get("Mcp-Method"),
        name=headers.get("Mcp-Name"),
        params=params or None,
    )


def text_result(text: str) -> CallToolResult:
    """A text result as the client returns it: `is_error` False where the server left it out."""
    return CallToolResult(content=[TextContent(text=text)], is_error=False)
