"""What the Streamable HTTP endpoint accepts: its configuration and the judgement of a head.

Theory of operation
-------------------
No I/O here: the connection (`_http_server`) reads a request head with httptools
(`_http_wire`), the ASGI app (`_asgi`) takes it from its scope, and both ask `RequestRules`
what to make of it (through the exchange, `_exchange.admit`).
`read_headers` picks out the few headers the endpoint reads (`READ_HEADERS`, repeated ones
joined with ", ") and the `Mcp-Param-*` ones (`PARAM_PREFIX`; the built-in server picks
them out the same way as it parses the head); `refusal_for` then runs the checks in this
order, and the first that fails is the answer:

    Host            loopback names, or `allowed_hosts` (421: DNS rebinding protection)
    Origin          loopback http(s) origins, or `allowed_origins` (403)
    path            the endpoint, query ignored (404)
    method          POST (405, with `Allow: POST`)
    Content-Type    application/json (415)
    Accept          admits application/json (406)
    framing         not both Content-Length and Transfer-Encoding (400, raised: it closes)

The probe paths (`health_path`, `ready_path`) never come here: they are answered first,
without a check (`_http_health`). `_exchange.principal_of` asks the configured
`Authenticator` who sends the request (401 if nobody). A refusal is a `Refusal`: an HTTP
status, a message and a reason word (what its log line and telemetry count); the
connection sends it as a JSON-RPC error without an id (-32600), with the peer's values
quoted and cut short.

A server sees few distinct values of each header, so the verdicts on them are remembered
(at most 64 each, against a client that sends a new value every time): a request pays
for a dictionary lookup, not for parsing its Host or Accept again.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import msgspec

from ..core import (
    HttpHeaders,
)
from ..core.wire import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    error_body,
    shown,
)
from ._port import SessionHeaders

if TYPE_CHECKING:
    from ..auth import ResourceServer

__all__ = [
    "PARAM_PREFIX",
    "READ_HEADERS",
    "AuthenticationUnavailable",
    "Authenticator",
    "HttpConfig",
    "Refusal",
    "RequestRules",
    "Unauthorized",
    "add_param",
    "body_too_large",
    "declared_body_size",
    "is_loopback",
    "mcp_headers",
    "read_headers",
    "session_headers",
    "target_path",
]

logger = logging.getLogger("mcp_tasks.transports.http")

READ_HEADERS: Final = frozenset(  # what `read_headers` reads
    {
        b"host",
        b"origin",
        b"content-type",
        b"content-length",
        b"transfer-encoding",
        b"accept",
        b"mcp-protocol-version",
        b"mcp-method",
        b"mcp-name",
        b"mcp-session-id",
        b"last-event-id",
    }
)
PARAM_PREFIX: Final = b"mcp-param-"
_REMEMBERED_VERDICTS: Final = 64


class Unauthorized(Exception):
    """Raise in an authenticator: the request is answered 401 with `message` and a
    `WWW-Authenticate: challenge` header, and its body is never read. `status` 403: the
    credentials are good but do not reach this far (`insufficient_scope`); 400: they
    are malformed."""

    def __init__(
        self, message: str, *, challenge: str = 'Bearer realm="mcp"', status: int = 401
    ) -> None:
        if status not in (400, 401, 403):
            raise ValueError(f"an authenticator refuses with 400, 401 or 403, not {status}")
        super().__init__(message)
        self.message = message
        self.challenge = challenge
        self.status = status


class AuthenticationUnavailable(Exception):
    """Raise in an authenticator when the credentials cannot be checked now (the keys or
    the introspection endpoint did not answer): 503 with `Retry-After`, so that clients
    try again rather than throw their token away."""

    def __init__(self, message: str, *, retry_after_seconds: int = 5) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_seconds = max(1, retry_after_seconds)


Authenticator = Callable[[Mapping[str, str]], "str | Awaitable[str]"]


@dataclass(frozen=True, kw_only=True)
class HttpConfig:
    """Where the endpoint is, the limits and timeouts, and whom the server answers."""

    endpoint: str = "/mcp"
    """The one path that takes MCP messages (POST only); other paths are 404."""
    max_body_bytes: int = 4 * 1024 * 1024
    """A larger body is refused with 413, by its Content-Length or while it is counted."""
    max_body_bytes_in_flight: int = 64 * 1024 * 1024
    """Bytes of request bodies received and being handled at once, over all connections
    (at least `max_body_bytes`), counted as they arrive. Beyond it a request waits for
    room, the rest of its body left unread."""
    body_wait_seconds: float = 5.0
    """How long a request waits for room in `max_body_bytes_in_flight` (in all, however
    many times its body needs more); then it is refused with 503 and `Retry-After` (and
    the connection closes)."""
    min_body_bytes_per_second: float | None = 1024.0
    """How fast a body must come after `body_grace_seconds`: by then plus one second for
    every this many bytes received, the next bytes are due, or the request is refused
    with 408 and the connection closed (never later than `body_timeout_seconds`). None:
    only `body_timeout_seconds` bounds a slow body."""
    body_grace_seconds: float = 5.0
    """How long a body may take before `min_body_bytes_per_second` counts."""
    max_header_bytes: int = 16 * 1024
    """Request line and headers together; more is 431."""
    header_timeout_seconds: float = 10.0
    """From a connection's opening, or a request's first byte, until its head is in (408)."""
    body_timeout_seconds: float = 30.0
    """From the end of the head until the whole body is in (408)."""
    idle_timeout_seconds: float = 60.0
    """How long a keep-alive connection may wait for its next request before it closes."""
    drain_timeout_seconds: float = 10.0
    """On shutdown, how long requests in flight may run before they are cancelled."""
    keep_alive_comment_seconds: float | None = 15.0
    """On an SSE answer (a `subscriptions/listen` stream, a request sending progress), how
    long it may go without a message before the comment line `: keep-alive` is sent, so
    that proxies and clients see it is alive. None: never."""
    allowed_hosts: frozenset[str] = frozenset()
    """`Host` values accepted besides localhost, 127.0.0.1 and ::1 (a name, or name:port).
    Empty on a non-loopback bind: any Host is accepted."""
    allowed_origins: frozenset[str] = frozenset()
    """`Origin` values accepted besides loopback ones, e.g. `https://app.example.com`."""
    authenticate: Authenticator | None = None
    """Who sends each request: called with its headers (names lowercased), it returns the
    caller's principal (a non-empty string), or raises `Unauthorized` (HTTP 401). Every
    task is bound to the principal that created it. None: no authentication, every
    request is nobody's, and any task id opens its task."""
    resource_server: ResourceServer | None = None
    """Protect the endpoint with OAuth (`mcp_tasks.auth.ResourceServer`): its metadata is
    served at the well-known paths, every request needs a bearer token it accepts (the
    token's principal is the request's), and operations need their scopes. Not together
    with `authenticate`."""
    health_path: str | None = "/healthz"
    """Liveness (GET or HEAD): 200 `{"status":"ok"}` while the process serves. Like
    `ready_path`, it needs no authentication and passes any Host and Origin: load
    balancers probe by address, and the answer reveals nothing. None: no such path."""
    ready_path: str | None = "/readyz"
    """Readiness (GET or HEAD): 200 `{"status":"ready"}`, or 503 `{"status":"not ready",
    "reason":...}` while draining, not running, or when the store does not answer a read
    within `ready_timeout_seconds`. None: no such path."""
    ready_timeout_seconds: float = 1.0
    """How long `ready_path` waits for the store before it answers "store unreachable"."""
    access_log: bool = False
    """One INFO line per request on the logger `mcp_tasks.access`: method, path, the
    `Mcp-Method` and `Mcp-Name` headers, status, duration, client address."""

    def __post_init__(self) -> None:
        if self.resource_server is not None and self.authenticate is not None:
            raise ValueError("give authenticate or resource_server, not both")
        for name in ("endpoint", "health_path", "ready_path"):
            path = getattr(self, name)
            if path is not None and not path.startswith("/"):
                raise ValueError(f"{name} must be a path starting with '/', not {path!r}")
        probes = [path for path in (self.health_path, self.ready_path) if path is not None]
        if self.endpoint in probes or len(set(probes)) < len(probes):
            raise ValueError("endpoint, health_path and ready_path must be different paths")
        if self.ready_timeout_seconds <= 0:
            raise ValueError("ready_timeout_seconds must be positive")
        for name in ("max_body_bytes", "max_header_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive number of bytes")
        for name in ("header", "body", "idle", "drain"):
            if getattr(self, f"{name}_timeout_seconds") <= 0:
                raise ValueError(f"{name}_timeout_seconds must be positive")
        if self.max_body_bytes_in_flight < self.max_body_bytes:
            raise ValueError("max_body_bytes_in_flight must be at least max_body_bytes")
        if self.body_wait_seconds < 0:
            raise ValueError("body_wait_seconds must not be negative")
        rate = self.min_body_bytes_per_second
        if rate is not None and not rate > 0:
            raise ValueError("min_body_bytes_per_second must be positive, or None")
        if not self.body_grace_seconds > 0:
            raise ValueError("body_grace_seconds must be positive")
        if self.keep_alive_comment_seconds is not None and self.keep_alive_comment_seconds <= 0:
            raise ValueError("keep_alive_comment_seconds must be positive, or None")
        object.__setattr__(self, "allowed_hosts", _lowered(self.allowed_hosts))
        origins = _lowered(origin.rstrip("/") for origin in self.allowed_origins)
        object.__setattr__(self, "allowed_origins", origins)


class Refusal(Exception):
    """An answer HTTP gives by itself, instead of the server's. Raised, it also closes.

    `reason` is a short fixed word for the kind of refusal ("host", "too_large"...): the
    key of its rate-limited log line and what telemetry counts. The message may quote the
    peer's values, and goes to the peer only."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        reason: str,
        allow: bytes | None = None,
        challenge: str | None = None,
        retry_after_seconds: int | None = None,
        request_id: int | str | None = None,
    ) -> None:
        super().__init__(message)
        self.request_id = request_id
        """The id of the request refused, when its body was read (else the error has none)."""
        self.status = status
        self.message = message
        self.reason = reason
        self.extra_headers = [] if allow is None else [(b"allow", allow)]
        if challenge is not None:
            self.extra_headers.append((b"www-authenticate", challenge.encode("latin-1")))
        self.retry_after_seconds = retry_after_seconds
        """Set for a refusal worth trying again (503): sent as `Retry-After`, and in the
        JSON-RPC error (-32603, `data.retryAfterMs`) for clients that read only the body."""
        if retry_after_seconds is not None:
            self.extra_headers.append((b"retry-after", str(retry_after_seconds).encode()))

    def body(self) -> bytes:
        """The JSON-RPC error the refusal is sent as (no id unless the body was read)."""
        if self.retry_after_seconds is None:
            return error_body(self.request_id, INVALID_REQUEST, self.message)
        # The server's state, not the request, is why: -32603, as the core words it.
        wait_ms = {"retryAfterMs": self.retry_after_seconds * 1000}
        return error_body(None, INTERNAL_ERROR, self.message, wait_ms)


class RequestRules:
    """The checks of one `serve_http`'s request heads, and the verdicts they remember."""

    def __init__(
        self, config: HttpConfig, *, loopback: bool, sessions: Callable[[], bool] = lambda: False
    ) -> None:
        self.config = config
        self._sessions = sessions
        """Whether the server serves 2025 sessions now (`GET` and `DELETE` then allowed)."""
        self.endpoint = config.endpoint.encode()
        protection = config.resource_server
        self.authenticate = config.authenticate if protection is None else protection.authenticate
        """Who sends each request: `HttpConfig.authenticate`, or the resource server's."""
        self.check_host = loopback or bool(config.allowed_hosts)
        self._host_verdicts: dict[bytes, bool] = {}
        self._json_verdicts: dict[bytes, bool] = {}
        self._accept_verdicts: dict[bytes, bool] = {}
        self._event_stream_verdicts: dict[bytes, bool] = {}
        self._passed: set[tuple[bytes | bool | None, ...]] = set()

    RULED: Final = (b"host", b"origin", b"content-type", b"accept")
    """What `refusal_for` reads of a `POST`'s headers besides its framing, and so what it
    remembers a verdict by: a head that passed passes again with any other header changed."""

    def refusal_for(
        self, method: bytes, target: bytes, found: dict[bytes, bytes]
    ) -> Refusal | None:
        """Why the head of a request is refused, in the order the checks run: its method,
        its target (as on the request line) and what `read_headers` found. A `POST` whose
        head passed is remembered as it reads (a client sends the same head each time)."""
        if method != b"POST":
            return self._refusal_for(method, target, found)
        framed_twice = b"transfer-encoding" in found and b"content-length" in found
        passed = (target, *map(found.get, self.RULED), framed_twice)
        if passed in self._passed:
            return None
        refusal = self._refusal_for(method, target, found)
        if refusal is None:
            if len(self._passed) >= _REMEMBERED_VERDICTS:
                self._passed.clear()
            self._passed.add(passed)
        return refusal

    def _refusal_for(
        self, method: bytes, target: bytes, found: dict[bytes, bytes]
    ) -> Refusal | None:
        host = found.get(b"host")
        if self.check_host and (
            host is None or not _remembered(self._host_verdicts, host, self._host_allowed)
        ):
            quoted = "is missing" if host is None else f"{_shown(host)} is not allowed"
            return Refusal(421, f"Host header {quoted} (DNS rebinding protection)", reason="host")
        if self.check_host and not target.startswith(b"/"):
            # Absolute-form (`POST http://name/mcp`): its authority names the host as well
            # (RFC 9112 3.2.2), so it passes the same check.
            authority = urlsplit(target).netloc
            if not authority or not _remembered(self._host_verdicts, authority, self._host_allowed):
                shown = _shown(authority) if authority else "(none)"
                return Refusal(
                    421,
                    f"Request target host {shown} is not allowed (DNS rebinding protection)",
                    reason="host",
                )
        origin = found.get(b"origin")
        if origin is not None and not self._origin_allowed(origin):
            return Refusal(403, f"Origin {_shown(origin)} is not allowed", reason="origin")
        if target != self.endpoint and target_path(target) != self.endpoint:
            endpoint = self.config.endpoint
            message = f"Not found: {_shown(target)}; the endpoint is {endpoint}"
            return Refusal(404, message, reason="path")
        if method != b"POST":
            return self._not_post(method, found)
        content_type = found.get(b"content-type")
        if content_type is None or not _remembered(self._json_verdicts, content_type, _is_json):
            quoted = "none" if content_type is None else _shown(content_type)
            message = f"Unsupported Content-Type {quoted}: send application/json"
            return Refusal(415, message, reason="content_type")
        accept = found.get(b"accept")
        if accept is None or not _remembered(self._accept_verdicts, accept, _accepts_json):
            quoted = "none" if accept is None else _shown(accept)
            message = f"Not acceptable: Accept {quoted}; send application/json, text/event-stream"
            return Refusal(406, message, reason="accept")
        if b"transfer-encoding" in found and b"content-length" in found:
            # Framed two ways (a request-smuggling pattern): answered, then closed.
            message = "Content-Length and Transfer-Encoding together: refused"
            raise Refusal(400, message, reason="framing")
        return None

    def forbidden(self, body: bytes, handler: object) -> Refusal | None:
        """403 when the operation in `body` needs scopes the request's token lacks
        (`ResourceServer.refusal_for_body`); None without a resource server, or when
        `handler` has no operation that needs scopes of its own (`ScopedOperations`)."""
        protection = self.config.resource_server
        if protection is None or not getattr(handler, "scoped_operations", False):
            return None
        return protection.refusal_for_body(body, handler.scopes_needed)  # type: ignore[attr-defined]

    def _not_post(self, method: bytes, found: dict[bytes, bytes]) -> Refusal | None:
        """`GET` (a 2025 session's own SSE stream) and `DELETE` (its end) while the server
        serves 2025 sessions; any other method is 405."""
        if method in (b"GET", b"DELETE") and self._sessions():
            accept = found.get(b"accept")
            if method == b"GET" and (accept is None or not _accepts_event_stream(accept)):
                quoted = "none" if accept is None else _shown(accept)
                message = f"Not acceptable: Accept {quoted}; a GET stream is text/event-stream"
                return Refusal(406, message, reason="accept")
            return None
        if self._sessions():
            allowed, takes = b"GET, POST, DELETE", "GET, POST and DELETE"
        else:
            allowed, takes = b"POST", "POST only"
        message = f"Method {_shown(method)} is not allowed: the MCP endpoint takes {takes}"
        return Refusal(405, message, reason="method", allow=allowed)

    def allows_event_stream(self, accept: bytes | None) -> bool:
        """Whether the answer may turn into an SSE stream (no Accept admits anything)."""
        return accept is None or _remembered(
            self._event_stream_verdicts, accept, _accepts_event_stream
        )

    def _host_allowed(self, host: bytes) -> bool:
        text = host.decode("latin-1").strip().lower()
        name = _host_name(text)
        allowed = self.config.allowed_hosts
        return text in allowed or name in allowed or is_loopback(name)

    def _origin_allowed(self, origin: bytes) -> bool:
        text = origin.decode("latin-1").strip().lower().rstrip("/")
        if text in self.config.allowed_origins:
            return True
        try:
            parts = urlsplit(text)
            name = parts.hostname
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and name is not None and is_loopback(name)


def declared_body_size(content_length: bytes | None, limit: int) -> int | None:
    """The body size a `Content-Length` declares (None: none, or not a number); a
    `Refusal` 413 when it is over `limit`, before a byte of the body is read."""
    declared = int(content_length) if content_length and content_length.isdigit() else None
    if declared is not None and declared > limit:
        message = f"Request body too large: {declared} bytes, at most {limit}"
        raise Refusal(413, message, reason="too_large")
    return declared


def body_too_large(limit: int) -> Refusal:
    """The refusal of a body found, as it is counted, to be over `limit`."""
    return Refusal(413, f"Request body too large: more than {limit} bytes", reason="too_large")


def read_headers(
    headers: Iterable[tuple[bytes, bytes]],
) -> tuple[dict[bytes, bytes], dict[str, str]]:
    """The headers the endpoint reads (names lowercased, repeats joined with ", "), and
    the `Mcp-Param-*` ones by the rest of their name."""
    found: dict[bytes, bytes] = {}
    params: dict[str, str] = {}
    for raw_name, value in headers:
        name = raw_name.lower()
        if name in READ_HEADERS:
            found[name] = found[name] + b", " + value if name in found else value
        elif name.startswith(PARAM_PREFIX):  # few: the head's size is bounded
            add_param(params, name, value)
    return found, params


def add_param(params: dict[str, str], name: bytes, value: bytes) -> None:
    """Note the `Mcp-Param-*` header `name` (lowercased) in `params` by the rest of its
    name, repeats joined with ", " (`read_headers`, and the built-in server's parser)."""
    key = name[len(PARAM_PREFIX) :].decode("ascii", "surrogateescape")
    text = value.decode("ascii", "surrogateescape")
    params[key] = params[key] + ", " + text if key in params else text


def session_headers(
    method: bytes, found: dict[bytes, bytes], *, event_stream: bool
) -> SessionHeaders | None:
    """What the request says of a 2025 session, or None when it says nothing (a `POST`
    without `Mcp-Session-Id`: what every 2026-07-28 request is). `event_stream`: whether
    its `Accept` admits an SSE answer (`RequestRules.allows_event_stream`)."""
    session_id = found.get(b"mcp-session-id")
    if session_id is None and method == b"POST":
        return None
    version, last_event_id = found.get(b"mcp-protocol-version"), found.get(b"last-event-id")
    return SessionHeaders(  # `_text` of each, inline: every request of a session pays it
        method=method.decode("ascii", "surrogateescape"),
        session_id=None if session_id is None else session_id.decode("ascii", _ESCAPE),
        protocol_version=None if version is None else version.decode("ascii", _ESCAPE),
        last_event_id=None if last_event_id is None else last_event_id.decode("ascii", _ESCAPE),
        event_stream=event_stream,
    )


def mcp_headers(found: dict[bytes, bytes], params: dict[str, str]) -> HttpHeaders:
    """The MCP headers of a request, for the core to check against its body."""
    return HttpHeaders(
        protocol_version=_text(found.get(b"mcp-protocol-version")),
        method=_text(found.get(b"mcp-method")),
        name=_text(found.get(b"mcp-name")),
        params=params or None,
    )


_MCP_FIELD: Final = {
    b"mcp-protocol-version": "protocol_version",
    b"mcp-method": "method",
    b"mcp-name": "name",
}
"""The field of `mcp_headers` each of these headers is read into."""


def mcp_headers_with(headers: HttpHeaders, found: dict[bytes, bytes], name: bytes) -> HttpHeaders:
    """`mcp_headers` of a head that is `headers`' but for header `name`, now in `found`."""
    field = _MCP_FIELD.get(name)
    if field is None:
        return headers
    return msgspec.structs.replace(headers, **{field: _text(found[name])})


def is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _lowered(values: Iterable[str]) -> frozenset[str]:
    if isinstance(values, str):
        raise TypeError("give a collection of strings, not one string")
    return frozenset(value.strip().lower() for value in values)


def _host_name(host: str) -> str:
    """The name in a Host value `name[:port]`, without the brackets of an IPv6 literal."""
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def target_path(target: bytes) -> bytes:
    """The path of a request target, without its query (origin- or absolute-form)."""
    if not target.startswith(b"/"):  # absolute-form, as sent to proxies
        return urlsplit(target).path or b"/"
    return target.split(b"?", 1)[0]


def _is_json(content_type: bytes) -> bool:
    if content_type == b"application/json":
        return True
    return content_type.split(b";", 1)[0].strip().lower() == b"application/json"


def _accepts_json(accept: bytes) -> bool:
    """Whether an Accept header admits application/json (named, or by a wildcard)."""
    for media_range in accept.lower().split(b","):
        kind, *parameters = media_range.split(b";")
        if kind.strip() in (b"application/json", b"application/*", b"*/*") and not any(
            _is_q_zero(parameter) for parameter in parameters
        ):
            return True
    return False


def _is_q_zero(parameter: bytes) -> bool:
    name, _, value = parameter.strip().partition(b"=")
    try:
        return name == b"q" and float(value) == 0
    except ValueError:
        return False


def _accepts_event_stream(accept: bytes) -> bool:
    accept = accept.lower()
    return b"text/event-stream" in accept or b"*/*" in accept or b"text/*" in accept


def _remembered(verdicts: dict[bytes, bool], value: bytes, judge: Callable[[bytes], bool]) -> bool:
    """`judge(value)`, remembered: a server sees few distinct values of a header (bounded
    all the same, against a client that sends a new one each time)."""
    verdict = verdicts.get(value)
    if verdict is None:
        if len(verdicts) >= _REMEMBERED_VERDICTS:
            verdicts.clear()
        verdict = verdicts[value] = judge(value)
    return verdict


def _shown(value: bytes) -> str:
    """A value the client sent, quoted and cut short (`core.shown`), for an error message."""
    return repr(shown(value.decode("latin-1")))


def _text(value: bytes | None) -> str | None:
    """A header value for the core; bytes beyond ASCII become lone surrogates, which can
    equal nothing a JSON body holds, so the core refuses them (-32020)."""
    return None if value is None else value.decode("ascii", _ESCAPE)


_ESCAPE: Final = "surrogateescape"
