"""What a client's transport is: one request in, its JSON-RPC response out.

`HttpClientTransport` and `StdioClientTransport` both satisfy `ClientTransport`. A transport
moves bytes and matches a response to its request by id; it knows nothing of MCP methods.
A JSON-RPC error response is an answer like any other, returned; `TransportError` is raised
only when no answer can be had: the peer is unreachable, went away, or sent something that
is not a JSON-RPC response.

A transport may say `sends_headers = False` (stdio does): the headers it is given go
nowhere, so the client does not list tools to learn which `Mcp-Param-*` to send. Without
the attribute a transport is taken to send them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

__all__ = [
    "AuthorizationError",
    "ClientTransport",
    "HttpAuthorization",
    "NotificationHandler",
    "ServerRequestHandler",
    "ServerUnreachable",
    "SessionExpired",
    "TransportError",
    "UnexpectedAnswer",
]

NotificationHandler = Callable[[dict[str, Any]], Awaitable[None]]
"""Called with each decoded notification that arrives for a request while it waits."""
ServerRequestHandler = Callable[[dict[str, Any]], Awaitable[bytes]]
"""Answers a request a 2025 server sends the client (elicitation, sampling, roots, ping):
the encoded JSON-RPC response."""


class HttpAuthorization(Protocol):
    """What gives a transport its `Authorization` header and answers a server's challenges
    (`mcp_tasks.oauth.OAuth`)."""

    async def authorization(self) -> str | None:
        """The header value for the next request (None: send none)."""
        ...

    async def challenged(
        self, status: int, www_authenticate: list[str], sent: str | None, attempt: int
    ) -> bool:
        """Whether to send the request again after a 401 or 403 (with a new header)."""
        ...


class TransportError(Exception):
    """The peer is unreachable, went away, or answered something that is not a JSON-RPC
    response; the message says which, and where."""


class AuthorizationError(TransportError):
    """The server wants credentials the client does not have: a 401 with no way to log in,
    a login that failed (the message says at which step and why), or a server that still
    refuses every token it is given."""


class UnexpectedAnswer(TransportError):
    """The server answered, but not with this request's JSON-RPC response (another type of
    body, another id); `status` is the HTTP status (0 over stdio)."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class SessionExpired(TransportError):
    """The server no longer knows the 2025 session (HTTP 404 to a request that named it):
    the client opens a new one with `initialize`."""


class ServerUnreachable(TransportError):
    """No answer came from the server: it refused the connection, or the connection broke
    (reset, closed, cut) before the answer, or a proxy in front said the server is not
    there (HTTP 502, 503 or 504 without a JSON-RPC answer): what a server restarting looks
    like. `may_have_arrived` is False only when the request surely never left (the
    connection was refused): then sending it again cannot do anything twice."""

    def __init__(self, message: str, *, may_have_arrived: bool) -> None:
        super().__init__(message)
        self.may_have_arrived = may_have_arrived


class ClientTransport(Protocol):
    async def request(
        self,
        message: bytes,
        *,
        request_id: str | int,
        headers: Mapping[str, str],
        on_notification: NotificationHandler | None = None,
    ) -> dict[str, Any]:
        """Send one JSON-RPC request (already encoded) and return the decoded JSON-RPC
        response object (result or error) whose id equals `request_id`. Notifications that
        arrive for it on the way go to `on_notification`. `headers` are the MCP headers to
        send on HTTP (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*); stdio ignores
        them.

        Cancelling the caller while it waits cancels the request: HTTP closes the response
        stream, stdio sends `notifications/cancelled {requestId}`. Raises `TransportError`;
        a JSON-RPC error response is returned, not raised."""
        ...

    async def notify(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        """Send one JSON-RPC notification (already encoded); HTTP expects 202."""
        ...

    async def aclose(self) -> None:
        """Release the connection or the server process; safe to call twice."""
        ...


def same_id(found: object, wanted: str | int) -> bool:
    """JSON-RPC ids match by type and value: `1` is not `"1"`, and `true` is no id."""
    if isinstance(found, bool) or isinstance(wanted, bool):
        return False
    return type(found) is type(wanted) and found == wanted


def response_kind(message: object) -> str:
    """What a decoded message is: "response", "notification", "request" or "invalid"."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return "invalid"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "invalid"
        return "request" if "id" in message else "notification"
    if ("result" in message) == ("error" in message):
        return "invalid"
    if "error" in message and not _is_error_object(message["error"]):
        return "invalid"
    return "response"


def _is_error_object(error: object) -> bool:
    return (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and isinstance(error.get("message"), str)
    )


def preview(data: bytes | str, limit: int = 120) -> str:
    """A peer's bytes, quoted and cut short, for an error message."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return repr(text if len(text) <= limit else text[:limit] + "...")
