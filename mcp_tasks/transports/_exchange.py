"""One HTTP exchange of the Streamable HTTP endpoint, without I/O: what its two drivers share.

Theory of operation
-------------------
The built-in server (`_http_server`: httptools on anyio sockets) and the ASGI app (`_asgi`:
ASGI messages) are two drivers of the same exchange. Each moves bytes its own way, and
asks this module what to do with them, in this order:

    the head       a probe? (`probe_kind`: answered at once, `_http_health`); else the
                   rules and the authenticator (`admit`): a `Refusal`, or the principal
    the body       a `BodyIntake` (`_budget`): counted (413), held in the budget shared
                   by the bodies in flight (503), at the pace it must keep (408)
    the server     `handle`; a bug behind it is the core's one internal-error reply,
                   with the request's id (`handler_failed`)
    the answer     `answer_of(reply)`: JSON with the reply's status (and `Retry-After`),
                   202 with nothing when there is no reply (a notification, a response);
                   or, from the request's first notification on, an SSE stream
                   (`SSE_HEADERS`, one `sse_event` per message, `KEEP_ALIVE` comments
                   when quiet); a refusal as `refusal_answer` says
    its framing    `framed`: Content-Length, and `Connection: close` while draining

Beside the exchange, each driver keeps the time of the request in flight the same way:
one task, the keeper, looks at every request in flight once a `keeper_tick`, and asks the
request's `Keeping` what is due (a request pays for no timer and no task of its own):

    watch_due      the request has been with the server for a tick: watch its client
                   (the driver's watcher reads the socket, or waits for `http.disconnect`,
                   and cancels the request when the client has gone)
    comment_due    its SSE stream has been quiet for `keep_alive_comment_seconds`: the
                   driver starts a task that writes `comment()` (`KEEP_ALIVE`, or nothing
                   if the stream spoke or ended since), under the stream's send lock

So both drivers send the same comment on the same schedule: `keep_alive_comment_seconds`
after the stream last carried bytes (its head, a message, a comment), at the first tick
since, up to one tick late. What stays with each driver is what is its own: reading and
writing, its deadlines (the built-in server keeps its own; an ASGI server enforces those before
a request reaches the app), the drain.

The functions are small and allocate what the answer needs and no more: the built-in
server's `tasks/get` is measured against a fixed-answer server on the same parser and loop
(`benchmarks/compare.py`), and every list, tuple and await on its path counts.
"""

from __future__ import annotations

import http
import inspect
import logging
import math
from collections.abc import Iterable
from typing import Final

from ..core import Reply, internal_error_reply
from ._http_access import report_refusal
from ._http_rules import (
    AuthenticationUnavailable,
    Authenticator,
    HttpConfig,
    Refusal,
    RequestRules,
    Unauthorized,
)
from ._port import MessageHandler, SessionReply

__all__ = [
    "CLOSE",
    "JSON",
    "KEEP_ALIVE",
    "REASONS",
    "SSE_HEADERS",
    "TICK_SECONDS",
    "Headers",
    "Keeping",
    "admit",
    "answer_of",
    "framed",
    "handler_failed",
    "keeper_tick",
    "principal_of",
    "refusal_answer",
    "sse_event",
    "sse_frame",
    "sse_head",
]

Headers = list[tuple[bytes, bytes]]

TICK_SECONDS: Final = 0.1
"""How often a driver's keeper looks at what is in flight, at most (`keeper_tick`)."""
JSON: Final = (b"content-type", b"application/json")
CLOSE: Final = (b"connection", b"close")
SSE_HEADERS: Final = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx: pass each event on at once
)
KEEP_ALIVE: Final = b": keep-alive\n\n"
"""An SSE comment, which clients skip: it shows a quiet stream is alive."""
REASONS: Final = {status.value: status.phrase.encode() for status in http.HTTPStatus}
"""The reason phrase of each status, for a driver that writes its status line."""


async def admit(
    rules: RequestRules,
    method: bytes,
    target: bytes,
    found: dict[bytes, bytes],
    headers: Iterable[tuple[bytes, bytes]],
    *,
    authenticate: Authenticator | None,
) -> tuple[Refusal | None, str | None]:
    """The verdict on a request's head: the first `Refusal` of the rules or of the
    authenticator (None: it passes), and the principal it is sent by (None: no
    authenticator). A head framed two ways raises its `Refusal` (it closes)."""
    refusal = rules.refusal_for(method, target, found)
    if refusal is not None or authenticate is None:
        return refusal, None
    try:
        return None, await principal_of(authenticate, headers)
    except Refusal as unauthorized:
        return unauthorized, None


_auth_logger = logging.getLogger("mcp_tasks.transports.http")  # where the HTTP rules log
_UNCHECKED: Final = "Unauthorized: the credentials could not be checked"
_REFUSED_AS: Final = {
    400: ("Bad request", "bad_credentials"),
    401: ("Unauthorized", "unauthorized"),
    403: ("Forbidden", "forbidden"),
}


async def principal_of(
    authenticate: Authenticator, raw_headers: Iterable[tuple[bytes, bytes]]
) -> str:
    """The authenticator's principal for a request with `raw_headers`; `Refusal` 401 when
    it refuses (or fails: a broken authenticator lets nobody in)."""
    headers = {
        name.decode("ascii", "replace").lower(): value.decode("latin-1")
        for name, value in raw_headers
    }
    try:
        found = authenticate(headers)
        principal = await found if inspect.isawaitable(found) else found
    except Unauthorized as refused:
        word, reason = _REFUSED_AS[refused.status]
        message = f"{word}: {refused.message}"
        raise Refusal(refused.status, message, reason=reason, challenge=refused.challenge) from None
    except AuthenticationUnavailable as unavailable:
        message = f"Service unavailable: {unavailable.message}"
        wait = unavailable.retry_after_seconds
        raise Refusal(503, message, reason="auth_unavailable", retry_after_seconds=wait) from None
    except Exception:
        _auth_logger.exception("the authenticator failed")
        raise Refusal(401, _UNCHECKED, reason="unauthorized") from None
    if not isinstance(principal, str) or not principal:
        _auth_logger.error(
            "the authenticator returned %r, not a principal (a non-empty str)", principal
        )
        raise Refusal(401, _UNCHECKED, reason="unauthorized")
    return principal


def handler_failed(body: bytes, logger: logging.Logger) -> Reply:
    """What a request whose `handle` raised is answered: the core's internal-error reply,
    with its id when the body shows one. The traceback goes to the log, not the client.
    Call it in the `except` clause."""
    logger.exception("the server failed on a request")
    return internal_error_reply(body)


def answer_of(reply: Reply | None) -> tuple[int, Headers, bytes]:
    """The status, headers (before `framed`) and body of a JSON answer to `reply`."""
    if reply is None:  # a notification (or a response) accepted
        return 202, [], b""
    if type(reply) is SessionReply:  # an `initialize` that opened a session
        return reply.http_status, [JSON, (b"mcp-session-id", reply.session_id.encode())], reply.body
    if reply.retry_after_seconds is None:
        return reply.http_status, [JSON] if reply.body else [], reply.body
    retry_after = (b"retry-after", str(reply.retry_after_seconds).encode())
    return reply.http_status, [JSON, retry_after], reply.body


def refusal_answer(
    refusal: Refusal, handler: MessageHandler, *, close: bool
) -> tuple[int, Headers, bytes]:
    """Report a refusal (`_http_access`) and say its answer: a JSON-RPC error without an
    id, with `Connection: close` when the connection closes after it (`close`)."""
    report_refusal(refusal, handler)
    headers = [JSON, *refusal.extra_headers]
    if close:
        headers.append(CLOSE)
    return refusal.status, headers, refusal.body()


def framed(headers: Headers, body: bytes, *, draining: bool) -> Headers:
    """`headers` with the answer's framing: its Content-Length, and `Connection: close`
    while the server drains."""
    headers.append((b"content-length", b"%d" % len(body)))
    if draining:
        headers.append(CLOSE)
    return headers


def sse_head(*, draining: bool) -> Headers:
    """The headers of an answer that turns into an SSE stream (status 200)."""
    return [*SSE_HEADERS, CLOSE] if draining else list(SSE_HEADERS)


def sse_event(message: bytes) -> bytes:
    """One JSON-RPC message as an SSE event; a message that is an SSE event already (a
    2025 session's event with its id, or a comment: it does not start with `{`) as it is."""
    if message[:1] != b"{":
        return message
    return b"data: " + message + b"\n\n"


def sse_frame(data: bytes, event_id: str | None = None, *, retry_ms: int | None = None) -> bytes:
    """An SSE event with an id (and the client's reconnection delay), for `sse_event` to
    pass on as it is; `data` empty: a priming event (2025-11-25)."""
    head = b"" if event_id is None else b"id: " + event_id.encode() + b"\n"
    if retry_ms is not None:
        head += b"retry: " + str(retry_ms).encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


# --- the keeper's decisions ----------------------------------------------------------------


def keeper_tick(config: HttpConfig) -> float:
    """How often a driver's keeper looks at what is in flight: `TICK_SECONDS`, or a quarter
    of the shortest time it keeps if that is less, so that nothing is more than a quarter
    of its time late."""
    shortest = min(
        config.header_timeout_seconds,
        config.body_timeout_seconds,
        config.idle_timeout_seconds,
        config.keep_alive_comment_seconds or math.inf,
    )
    return min(TICK_SECONDS, shortest / 4)


class Keeping:
    """What the keeper decides about one request in flight, without I/O: when its client is
    watched, when its quiet SSE stream is due a keep-alive comment (theory of operation).

    The driver tells it what happens (`handling`, `sent`, `ended`; the time is the
    driver's clock, `anyio.current_time()`) and asks it at each tick (`watch_due`,
    `comment_due`); each says yes once. A driver may reuse one for the next request."""

    __slots__ = ("_every", "_tick", "commenting", "sent_at", "since", "watched")

    def __init__(self, every: float | None, tick: float) -> None:
        self._every = math.inf if every is None else every  # keep_alive_comment_seconds
        self._tick = tick
        self.since = math.inf  # when the request went to the server (inf: none in flight)
        self.watched = False  # its client is watched
        self.sent_at = math.inf  # when its SSE stream last carried bytes (inf: no stream)
        self.commenting = False  # a comment is due, and not yet written

    def handling(self, now: float) -> None:
        """The request went to the server."""
        self.since = now
        self.watched = self.commenting = False
        self.sent_at = math.inf

    def sent(self, now: float) -> None:
        """Bytes went out on the request's SSE stream (its head, a message, a comment).
        After `ended` (a message that was on its way), nothing: no comment follows."""
        if self.since != math.inf:
            self.sent_at = now
            self.commenting = False

    def ended(self) -> None:
        """The server answered (or the request was cancelled): nothing more is due."""
        self.since = self.sent_at = math.inf

    def watch_due(self, now: float) -> bool:
        """True once the request has been with the server for a tick: watch its client."""
        if self.watched or now - self.since < self._tick:
            return False
        self.watched = True
        return True

    def comment_due(self, now: float) -> bool:
        """True once the stream has been quiet for `keep_alive_comment_seconds`: start
        writing `comment()` (it is not due again before that is done)."""
        if self.commenting or now - self.sent_at < self._every:
            return False
        self.commenting = True
        return True

    def comment(self, now: float) -> bytes | None:
        """The bytes to write on the stream now, under its send lock: `KEEP_ALIVE`; None if
        the stream carried something since it was due, or ended. Call `sent` once they
        are out."""
        self.commenting = False
        return KEEP_ALIVE if now - self.sent_at >= self._every else None
