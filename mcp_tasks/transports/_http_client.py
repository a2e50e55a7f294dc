"""The client side of Streamable HTTP (MCP 2026-07-28), on httpx2 (itself on anyio: the
transport runs under asyncio as under trio).

Theory of operation
-------------------
Each message is its own POST to the one endpoint URL, with `Content-Type:
application/json`, `Accept: application/json, text/event-stream` and the caller's MCP
headers. The answer to a request is read by its Content-Type, before a byte of the body:

    application/json     one JSON-RPC response (any HTTP status: a 400 or a 404 carries
                         the JSON-RPC error, which is returned, not raised)
    text/event-stream    events read as they come: notifications go to `on_notification`,
                         the response whose id matches ends the read (and the stream); a
                         server->client request on the stream is a protocol violation
    anything else        TransportError, with the status, the type and the start of the body

No body or event is held past `max_message_bytes`: more is a TransportError. Cancelling
the caller leaves the `async with client.stream(...)` block, which closes the connection:
on Streamable HTTP that is how a request is cancelled. Connection failures and timeouts
(httpx2's, `timeout_seconds` for the connect and for each read) become TransportError
naming the URL; those a server restart makes (the connection refused, reset or closed before
the answer, a stream cut short, a proxy's 502/503/504) are its subclass ServerUnreachable,
which says whether the request may have arrived. A notification is a POST whose only good
answer is 202.

A 2025 session (the client falls back to one for a server of the 2025 revisions) is kept
here: the `Mcp-Session-Id` the server gives the `initialize` answer is sent on every later
POST, a 404 to one of them is `SessionExpired`, requests the server sends on a response
stream go to `on_server_request` and its answer is POSTed back, and `aclose` ends the
session with a DELETE. With `resumes_streams` (a 2025 session), a response stream that ends
before its answer, after events with ids, is resumed: a GET with `Last-Event-ID`, after the
wait the server's `retry:` asked for. Inside `async with`, `listen_to_session` opens the
session's own GET stream in the background, where the server's requests and notifications
come too (reopened after its `retry:` wait when it ends; a 405 means the server has none).

The SSE reader is `EventStream` (`_sse_reader.py`, no I/O).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, suppress
from typing import Any, Final

import anyio
import httpx2
import msgspec
from anyio.abc import TaskGroup

from ..core._depth import MAX_DEPTH, too_deep
from ._client_base import (
    AuthorizationError,
    HttpAuthorization,
    NotificationHandler,
    ServerRequestHandler,
    ServerUnreachable,
    SessionExpired,
    TransportError,
    UnexpectedAnswer,
    preview,
    response_kind,
    same_id,
)
from ._http_failures import NamedFailures
from ._http_session_streams import SessionStreams
from ._http_session_streams import media_type as _media_type
from ._sse_reader import EventStream

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "HttpClientTransport"]

DEFAULT_MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
_PREVIEW_BYTES: Final = 512
_PROXY_SAYS_SERVER_AWAY: Final = frozenset({502, 503, 504})
"""Statuses that, without a JSON-RPC body, are a proxy's word that the server is not there."""
_SESSION: Final = "mcp-session-id"
_MAX_SESSION_ID: Final = 1024
_DELETE_SECONDS: Final = 5.0
_MAX_AUTHORIZED_TRIES: Final = 16
"""A bound on the sends of one request that `auth` could otherwise loop on."""
_POST_HEADERS: Final = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
}


class HttpClientTransport(SessionStreams):
    """Requests and notifications to one Streamable HTTP endpoint, e.g.
    `http://127.0.0.1:8000/mcp`. Pass `http_client` to share a pool (it is then yours to
    close); otherwise the transport makes one and `aclose` closes it."""

    sends_headers = True
    """The MCP headers go on every POST: the client sends `Mcp-Param-*` for marked arguments."""

    def __init__(
        self,
        url: str,
        *,
        timeout_seconds: float = 30.0,
        http_client: httpx2.AsyncClient | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        headers: Mapping[str, str] | None = None,
        auth: HttpAuthorization | None = None,
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        if max_message_bytes < 1:
            raise ValueError("max_message_bytes must be at least 1")
        self.url = url
        self.timeout_seconds = timeout_seconds
        self.max_message_bytes = max_message_bytes
        self._owns_client = http_client is None
        self._client = httpx2.AsyncClient() if http_client is None else http_client
        self._timeout = httpx2.Timeout(timeout_seconds)
        self._headers = {**_POST_HEADERS, **(headers or {})}
        """Sent with every POST (credentials, say: `{"Authorization": "Bearer …"}`)."""
        self.auth = auth
        """Authorizes every request, and answers a 401 (or a 403 asking for more scope)
        with a new token and the request sent again."""
        self.session_id: str | None = None
        """The 2025 session's `Mcp-Session-Id`, once a server gave one."""
        self.on_server_request: ServerRequestHandler | None = None
        """Answers the requests a 2025 server sends on a response stream (None: they are a
        protocol violation, as in 2026-07-28)."""
        self.session_headers: dict[str, str] = {}
        """What goes with the client's answers to the server's requests (the session's
        `MCP-Protocol-Version`)."""
        self.resumes_streams = False
        """A 2025 session's response streams are resumed when cut (see the module)."""
        self._background: TaskGroup | None = None
        self._awaited: dict[str, tuple[anyio.Event, list[Any]]] = {}
        self._unclaimed: dict[str, dict[str, Any]] = {}
        """Requests resuming their cut stream, by id: their answer may come on the
        session's own stream instead."""

    async def __aenter__(self) -> HttpClientTransport:
        self._background = anyio.create_task_group()
        await self._background.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: types.TracebackType | None,
    ) -> None:
        background, self._background = self._background, None
        try:
            if background is not None:
                background.cancel_scope.cancel()
                await background.__aexit__(None, None, None)
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        await self.end_session()
        if self._owns_client:
            await self._client.aclose()

    async def end_session(self) -> None:
        """DELETE the 2025 session, if there is one (a server that says 405, or fails, is
        left to expire it)."""
        session, self.session_id = self.session_id, None
        if session is None:
            return
        headers = {**self._headers, _SESSION: session}
        with anyio.move_on_after(min(self.timeout_seconds, _DELETE_SECONDS), shield=True):
            with suppress(httpx2.HTTPError, TransportError):
                authorization = await self.auth.authorization() if self.auth else None
                if authorization is not None:
                    headers["authorization"] = authorization
                await self._client.delete(
                    self.url, headers=headers, timeout=self._timeout, follow_redirects=True
                )

    async def request(
        self,
        message: bytes,
        *,
        request_id: str | int,
        headers: Mapping[str, str],
        on_notification: NotificationHandler | None = None,
    ) -> dict[str, Any]:
        """POST a request; its JSON-RPC response, read from JSON or from an SSE stream."""
        with self._failures_named():
            for attempt in range(_MAX_AUTHORIZED_TRIES):
                sent = await self.auth.authorization() if self.auth else None
                async with self._post(message, headers, sent) as response:
                    if not await self._authorized_again(response, sent, attempt):
                        self._session_of(response)
                        return await self._read_answer(
                            response, request_id, on_notification, headers
                        )
        raise TransportError(f"{self.url} refused every token it was given")

    async def _authorized_again(
        self, response: httpx2.Response, sent: str | None, attempt: int
    ) -> bool:
        """Whether `response` is a challenge that `auth` answered with a new token (the
        request is then sent again). A 401 that cannot be answered so, and a 403 asking for
        more scope than the logins got, are `AuthorizationError` (the challenge is never
        read as the server's answer)."""
        status = response.status_code
        if status not in (401, 403):
            return False
        challenges = response.headers.get_list("www-authenticate")
        if self.auth is not None and await self.auth.challenged(status, challenges, sent, attempt):
            return True
        wants_scope = any("insufficient_scope" in challenge for challenge in challenges)
        if status == 401 or (wants_scope and self.auth is not None):
            said = _refusal(await self._read_preview(response))
            if self.auth is None:
                raise AuthorizationError(
                    f"{self.url} asks for authorization (HTTP 401: {said}); log in with "
                    "`mcp-tasks login URL`, or connect with auth=OAuth(...)"
                )
            raise AuthorizationError(
                f"{self.url} still refuses (HTTP {status}: {said}) after {attempt} authorization(s)"
            )
        return False

    def _session_of(self, response: httpx2.Response) -> None:
        """Keep the session id a server gives (at `initialize`); a 404 to a request that
        named the session means the server no longer knows it."""
        if response.status_code == 404 and _SESSION in response.request.headers:
            self.session_id = None
            raise SessionExpired(f"{self.url} no longer knows the session (HTTP 404)")
        given = response.headers.get(_SESSION)
        if given is not None and self.session_id is None:
            if not (0 < len(given) <= _MAX_SESSION_ID and given.isascii() and given.isprintable()):
                raise TransportError(f"{self.url} gave a session id that is not visible ASCII")
            self.session_id = given

    async def notify(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        """POST a notification; anything but 202 Accepted is a TransportError."""
        with self._failures_named():
            for attempt in range(_MAX_AUTHORIZED_TRIES):
                sent = await self.auth.authorization() if self.auth else None
                async with self._post(message, headers, sent) as response:
                    if not await self._authorized_again(response, sent, attempt):
                        await self._accepted(response)
                        return
        raise TransportError(f"{self.url} refused every token it was given")

    async def _accepted(self, response: httpx2.Response) -> None:
        if response.status_code == 202:
            return
        body = await self._read_preview(response)
        raise TransportError(
            f"{self.url} answered a notification with HTTP {response.status_code} "
            f"({_media_type(response) or 'no Content-Type'}), not 202: {preview(body)}"
        )

    # --- reading an answer ---------------------------------------------------------------

    async def _read_answer(
        self,
        response: httpx2.Response,
        request_id: str | int,
        on_notification: NotificationHandler | None,
        headers: Mapping[str, str],
    ) -> dict[str, Any]:
        media_type = _media_type(response)
        if media_type == "application/json":
            body = await self._read_body(response)
            return self._json_response(response.status_code, body, request_id)
        if media_type == "text/event-stream" and response.status_code == 200:
            events = EventStream(self.max_message_bytes)
            found = await self._answer_on_stream(response, events, request_id, on_notification)
            if found is None:
                found = await self._resume(events, request_id, on_notification, headers)
            return found
        body = await self._read_preview(response)
        shown = repr(media_type) if media_type else "no Content-Type"
        what = (
            f"{self.url} answered HTTP {response.status_code} with {shown}, not a JSON-RPC "
            f"response: {preview(body)}"
        )
        if response.status_code in _PROXY_SAYS_SERVER_AWAY:
            raise ServerUnreachable(what, may_have_arrived=True)
        raise UnexpectedAnswer(what, status=response.status_code)

    def _json_response(self, status: int, body: bytes, request_id: str | int) -> dict[str, Any]:
        message = self._decode(body, f"HTTP {status} body")
        if "error" in message and message.get("id") is None:
            # a refusal of this POST before its id was read (a 415, or a 400 of a server
            # that does not know the request's revision): the server's error, to raise
            return message
        if not same_id(message.get("id"), request_id):
            raise UnexpectedAnswer(
                f"{self.url} answered request {request_id!r} with the response to "
                f"{message.get('id')!r}",
                status=status,
            )
        return message

    async def _answer_on_stream(
        self,
        response: httpx2.Response,
        events: EventStream,
        request_id: str | int | None,
        on_notification: NotificationHandler | None,
    ) -> dict[str, Any] | None:
        """Reads events until the response to `request_id` (returned), answering the
        server's requests and passing notifications on; None when the stream ends first."""
        async for chunk in response.aiter_bytes():
            try:
                datas = events.feed(chunk)
            except ValueError as error:
                raise TransportError(f"{self.url}: {error}") from None
            for data in datas:
                message = self._decode_event(data, request_id)
                if "method" not in message and request_id is None:
                    self._deliver(message)  # (on the session's own stream)
                elif "method" not in message:
                    return message
                if "id" in message:
                    await self._answer_server_request(message)
                elif on_notification is not None:
                    await on_notification(message)
        return None

    async def _answer_server_request(self, message: dict[str, Any]) -> None:
        assert self.on_server_request is not None  # (else _decode refused the request)
        answer = await self.on_server_request(message)
        await self.notify(answer, headers=self.session_headers)

    def _decode_event(self, data: bytes, request_id: str | int | None) -> dict[str, Any]:
        message = self._decode(data, "event on the SSE stream", allow_notification=True)
        if "method" in message or ("error" in message and message.get("id") is None):
            return message  # (an error without an id, on this request's stream: its own)
        if request_id is not None and not same_id(message.get("id"), request_id):
            raise TransportError(
                f"{self.url} sent, on the stream of request {request_id!r}, the response "
                f"to {message.get('id')!r}"
            )
        return message

    def _decode(
        self, data: bytes, what: str, *, allow_notification: bool = False
    ) -> dict[str, Any]:
        if too_deep(data):
            raise TransportError(
                f"{self.url} sent an {what} nested more than {MAX_DEPTH} levels deep"
            )
        try:
            message: Any = msgspec.json.decode(data)
        except msgspec.DecodeError:
            shown = preview(data)
            raise TransportError(f"{self.url} sent an {what} that is not JSON: {shown}") from None
        kind = response_kind(message)
        if kind == "request" and allow_notification and self.on_server_request is not None:
            assert isinstance(message, dict)
            return message
        if kind == "request":
            method = message["method"]
            raise TransportError(
                f"{self.url} sent a request ({method!r}) on a response stream: servers must "
                "not send requests (protocol violation)"
            )
        if kind == "response" or (kind == "notification" and allow_notification):
            assert isinstance(message, dict)
            return message
        raise TransportError(
            f"{self.url} sent an {what} that is not a JSON-RPC response: {preview(data)}"
        )

    async def _read_body(self, response: httpx2.Response) -> bytes:
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self.max_message_bytes:
                raise TransportError(
                    f"the response from {self.url} is larger than {self.max_message_bytes} "
                    "bytes (max_message_bytes)"
                )
        return bytes(body)

    async def _read_preview(self, response: httpx2.Response) -> bytes:
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= _PREVIEW_BYTES:
                break
        return bytes(body[:_PREVIEW_BYTES])

    # --- sending -------------------------------------------------------------------------

    def _post(
        self, message: bytes, headers: Mapping[str, str], authorization: str | None = None
    ) -> AbstractAsyncContextManager[httpx2.Response]:
        """The `client.stream` context manager for one POST."""
        all_headers = {**self._headers, **headers}
        if authorization is not None:
            all_headers["authorization"] = authorization
        if self.session_id is not None:
            all_headers[_SESSION] = self.session_id
        return self._client.stream(
            "POST",
            self.url,
            content=message,
            headers=all_headers,
            timeout=self._timeout,
            follow_redirects=True,  # (a 307 to `/mcp/`: the POST goes there, its body kept)
        )

    def _failures_named(self) -> NamedFailures:
        return NamedFailures(self.url, self.timeout_seconds)


def _refusal(body: bytes) -> str:
    """What a refusal's body says: a JSON-RPC error's message, else the start of the body."""
    try:
        message = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return preview(body)
    error = message.get("error") if isinstance(message, dict) else None
    text = error.get("message") if isinstance(error, dict) else None
    return text[:300] if isinstance(text, str) else preview(body)
