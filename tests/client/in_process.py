"""A client transport that hands each message straight to a running `Server.handle`, with
the HTTP headers the client built, `Mcp-Param-*` included (so the server checks them as on
HTTP): `mcp_tasks.testing.InProcessTransport`, noting every message it sends."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp_tasks import CallToolResult, Server, TextContent, testing


class InProcessTransport(testing.InProcessTransport):
    def __init__(self, server: Server) -> None:
        super().__init__(server)
        self.sent: list[bytes] = []

    async def request(
        self,
        message: bytes,
        *,
        request_id: str | int,
        headers: Mapping[str, str],
        on_notification: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        self.sent.append(message)
        return await super().request(
            message, request_id=request_id, headers=headers, on_notification=on_notification
        )

    async def notify(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        self.sent.append(message)
        await super().notify(message, headers=headers)


def text_result(text: str) -> CallToolResult:
    """A text result as the client returns it: `is_error` False where the server left it out."""
    return CallToolResult(content=[TextContent(text=text)], is_error=False)
