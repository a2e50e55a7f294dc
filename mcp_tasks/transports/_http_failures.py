"""How the HTTP client transport names httpx2's failures: a `TransportError` that says what
happened and where, `ServerUnreachable` (with whether the request may have arrived) when it
is what a server going away or restarting looks like."""

from __future__ import annotations

import types
from typing import Final

import httpx2

from ._client_base import ServerUnreachable, TransportError

__all__ = ["NamedFailures"]

_CUT_SHORT: Final = ("Server disconnected", "peer closed connection")
"""How httpx2's RemoteProtocolError starts when the server went away mid-exchange (any
other is a malformed answer)."""


class NamedFailures:
    """Turns httpx2's errors into TransportError naming what happened and the URL."""

    def __init__(self, url: str, timeout_seconds: float) -> None:
        self.url = url
        self.timeout_seconds = timeout_seconds

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: types.TracebackType | None,
    ) -> None:
        if error is None or not isinstance(error, httpx2.HTTPError | httpx2.StreamError):
            return
        if isinstance(error, httpx2.TimeoutException):
            what = f"timed out ({type(error).__name__}, timeout_seconds={self.timeout_seconds:g})"
        elif isinstance(error, httpx2.ConnectError):
            what = "cannot connect"
        elif isinstance(error, httpx2.RemoteProtocolError):
            what = "the server's HTTP answer was cut short or malformed"
        elif isinstance(error, httpx2.NetworkError):
            what = "the connection failed (closed or reset)"
        else:
            what = "the HTTP request failed"
        detail = str(error) or type(error).__name__
        message = f"{what}: {self.url}: {detail}"
        may_have_arrived = _went_away(error)
        if may_have_arrived is not None:
            raise ServerUnreachable(message, may_have_arrived=may_have_arrived) from error
        raise TransportError(message) from error


def _went_away(error: BaseException) -> bool | None:
    """Whether `error` is what a server going away looks like: False when the connection
    was refused (the request never left), True when it broke after the request may have
    arrived, None when it is something else (a timeout, a bad name, TLS, a bad answer)."""
    if isinstance(error, httpx2.TimeoutException):
        return None
    if isinstance(error, httpx2.ConnectError):
        return False if _refused(error) else None
    if isinstance(error, httpx2.RemoteProtocolError):
        return True if str(error).startswith(_CUT_SHORT) else None
    if isinstance(error, httpx2.NetworkError):
        return True
    return None


def _refused(error: BaseException) -> bool:
    """Whether a ConnectionRefusedError is among the causes of `error` (anyio and trio put
    it below an OSError, or in a group of the attempts)."""
    seen: list[BaseException] = [error]
    for _ in range(32):  # chains are a few links long; never loop on a cycle
        if not seen:
            return False
        found = seen.pop()
        if isinstance(found, ConnectionRefusedError):
            return True
        seen.extend(cause for cause in (found.__cause__, found.__context__) if cause is not None)
        if isinstance(found, BaseExceptionGroup):
            seen.extend(found.exceptions)
    return False
