"""A raw client of the 2025-11-25 Streamable HTTP transport, for the tests of 2025 sessions
over HTTP (the built-in server on both loops, the ASGI app in real servers): it sends what a
2025 client sends, reads JSON and SSE answers, and hands the server's own requests to the
test. Every server message it reads is checked against the 2025-11-25 schema.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2 as httpx
from schema_check import check_legacy

ACCEPT = "application/json, text/event-stream"
CHECKED = {"initialize", "ping", "logging/setLevel", "tools/list", "tools/call"}

ServerRequest = Callable[[dict[str, Any]], Awaitable[None]]


class LegacyHttpClient:
    """One 2025 client's session on `url`, once `initialize` opened it."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        *,
        version: str = "2025-11-25",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.http = http
        self.url = url
        self.version = version
        self.extra = headers or {}
        self.session_id: str | None = None
        self.next_id = 1

    def headers(self, **more: str) -> dict[str, str]:
        found = {"accept": ACCEPT, "content-type": "application/json", **self.extra}
        if self.session_id is not None:
            found["mcp-session-id"] = self.session_id
            found["mcp-protocol-version"] = self.version
        found.update(more)
        return found

    async def initialize(self, **capabilities: Any) -> dict[str, Any]:
        reply = await self.http.post(
            self.url,
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": self.version,
                    "capabilities": capabilities,
                    "clientInfo": {"name": "legacy-http-test", "version": "0.1"},
                },
            },
            headers=self.headers(),
        )
        assert reply.status_code == 200, reply.text
        body = reply.json()
        check_legacy("initialize", body)
        self.session_id = reply.headers["mcp-session-id"]
        sent = await self.notify("notifications/initialized")
        assert sent.status_code == 202, sent.text
        return body

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return await self.http.post(self.url, json=message, headers=self.headers())

    async def respond(self, request_id: Any, result: dict[str, Any]) -> httpx.Response:
        """POST the answer to a request of the server's."""
        message = {"jsonrpc": "2.0", "id": request_id, "result": result}
        return await self.http.post(self.url, json=message, headers=self.headers())

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_request: ServerRequest | None = None,
        request_id: Any = None,
    ) -> dict[str, Any]:
        """Send a request; its response, the notifications before it in `notifications`
        (each request of the server's goes to `on_request` as it arrives)."""
        if request_id is None:
            request_id, self.next_id = self.next_id, self.next_id + 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        async with self.http.stream(
            "POST", self.url, json=message, headers=self.headers()
        ) as answer:
            if answer.status_code != 200:
                await answer.aread()
                raise AssertionError(f"{answer.status_code}: {answer.text}")
            if answer.headers["content-type"].startswith("application/json"):
                await answer.aread()
                body: dict[str, Any] = answer.json()
                body["notifications"] = []
            else:
                body = await _read_stream(answer, request_id, on_request)
        if method in CHECKED:
            check_legacy(method, {k: v for k, v in body.items() if k != "notifications"})
        return body


async def _read_stream(
    answer: httpx.Response, request_id: Any, on_request: ServerRequest | None
) -> dict[str, Any]:
    before = []
    async for event in sse_events(answer):
        data = event.get("data")
        if not data:
            continue
        message = json.loads(data)
        if message.get("id") == request_id and "method" not in message:
            message["notifications"] = before
            return message
        check_legacy(None, message)
        if "method" in message and "id" in message:
            assert on_request is not None, f"an unexpected request: {message}"
            await on_request(message)
        else:
            before.append(message)
    raise AssertionError("the stream ended without the response")


async def sse_events(answer: httpx.Response) -> AsyncIterator[dict[str, str]]:
    """The events of an SSE answer, each its fields (comments skipped)."""
    fields: dict[str, str] = {}
    async for line in answer.aiter_lines():
        if not line:
            if fields:
                yield fields
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        fields[name] = fields[name] + "\n" + value if name in fields else value


@asynccontextmanager
async def stream_of(client: LegacyHttpClient, **headers: str) -> AsyncIterator[httpx.Response]:
    """The session's own stream (a GET)."""
    sent = client.headers(accept="text/event-stream", **headers)
    del sent["content-type"]
    async with client.http.stream("GET", client.url, headers=sent) as answer:
        yield answer
