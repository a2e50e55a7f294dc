"""What the HTTP endpoint logs of the requests it serves: the access log, and its refusals.

The built-in server (`_http_server`) and the ASGI app (`_asgi`) both call these (refusals
through the exchange, `_exchange.refusal_answer`):

* `log_access`: one INFO line per request on the logger `mcp_tasks.access`, when
  `HttpConfig.access_log` is on (the caller checks it: off, a request pays one boolean).
  Its fields go on the line as `extra` (`method` and `mcp_name` are the `Mcp-Method` and
  `Mcp-Name` headers, `http_status`, `duration_ms`, `client`), for `JsonFormatter`. The
  HTTP method and the path (without its query) are in the message; no other header is.
* `report_refusal`: a request HTTP refused by itself (a `Refusal`), at INFO (4xx) or
  WARNING (5xx), through one `RateLimitedLog` keyed by the refusal's reason word, and
  to the handler's telemetry (`MessageHandler.telemetry`: `refused(reason)`). The line
  names the kind of problem and the status, never a value the client sent (a header
  may carry a secret).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

from .._support.logs import RateLimitedLog
from ..core.wire import (
    shown,
)
from ._http_rules import Refusal, target_path
from ._port import MessageHandler

__all__ = ["access_logger", "log_access", "refusals", "report_refusal"]

access_logger = logging.getLogger("mcp_tasks.access")

refusals = RateLimitedLog(logging.getLogger("mcp_tasks.transports.http"))
"""Where refusals are logged: a few lines per reason every ten seconds, then a count."""

_PROBLEMS: Final = {
    "host": "a Host that is not allowed (DNS rebinding protection)",
    "origin": "an Origin that is not allowed",
    "path": "a path that is not the endpoint",
    "method": "a method the endpoint does not take",
    "content_type": "a Content-Type that is not application/json",
    "accept": "an Accept that admits no JSON",
    "framing": "both Content-Length and Transfer-Encoding",
    "too_large": "a body over max_body_bytes",
    "head_too_large": "a head over max_header_bytes",
    "timeout": "a head or body that did not arrive in time",
    "slow_body": "a body that came slower than min_body_bytes_per_second",
    "unauthorized": "no credentials, or credentials that were not accepted",
    "bad_credentials": "malformed credentials",
    "forbidden": "credentials without the scopes the request needs",
    "auth_unavailable": "credentials that could not be checked (keys or introspection down)",
    "busy": "no room for its body in max_body_bytes_in_flight",
    "not_running": "the MCP server not running (no lifespan)",
    "bad_request": "malformed HTTP",
}


def report_refusal(refusal: Refusal, handler: MessageHandler) -> None:
    """Log a refusal (rate-limited) and tell the telemetry of `handler`."""
    level = logging.WARNING if refusal.status >= 500 else logging.INFO
    problem = _PROBLEMS.get(refusal.reason, refusal.reason)
    refusals.log(
        level,
        refusal.reason,
        "HTTP %d: refused a request with %s",
        refusal.status,
        problem,
        http_status=refusal.status,
    )
    handler.telemetry.refused(refusal.reason)


def log_access(
    method: bytes,
    target: bytes,
    headers: Iterable[tuple[bytes, bytes]],
    status: int,
    duration_seconds: float,
    *,
    client: str | None,
) -> None:
    """The access log line of one request, answered with `status` (0: not answered)."""
    mcp_method = mcp_name = None
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"mcp-method":
            mcp_method = _printable(value)
        elif lowered == b"mcp-name":
            mcp_name = _printable(value)
    duration_ms = round(duration_seconds * 1000, 3)
    named = "".join(f" {part}" for part in (mcp_method, mcp_name) if part is not None)
    access_logger.info(
        "%s %s%s %d %.1f ms from %s",
        _printable(method),
        _printable(target_path(target)),
        named,
        status,
        duration_ms,
        client or "-",
        extra={
            "method": mcp_method,
            "mcp_name": mcp_name,  # not "name": a LogRecord has its own (the logger's)
            "http_status": status,
            "duration_ms": duration_ms,
            "client": client,
        },
    )


def _printable(value: bytes) -> str:
    """A value the client sent, cut short, non-ASCII and control characters escaped (a
    line of the log stays one line)."""
    return ascii(shown(value.decode("latin-1")))[1:-1]
