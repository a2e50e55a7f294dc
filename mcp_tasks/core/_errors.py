"""Errors: one base class, split by who got it wrong.

`RemoteProtocolError` means the peer sent something we must refuse; `LocalProtocolError`
means our own caller (the shell, or a tool handler) misused the core. Both carry the
JSON-RPC code the failure maps to, and an HTTP status hint for the Streamable HTTP
transport. The core converts them to JSON-RPC error replies at the one place where
messages are received.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
SERVER_ERROR = -32000
"""JSON-RPC's implementation-defined server error: here, a poll refused for coming too soon
(`data.retryAfterMs`; over HTTP, 429 with `Retry-After`)."""

# What the 2026-07-28 Streamable HTTP transport answers for each code. Codes not listed
# travel with 200: the JSON-RPC error object is the answer.
_HTTP_STATUS_FOR_CODE = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    METHOD_NOT_FOUND: 404,
    INVALID_PARAMS: 400,
    INTERNAL_ERROR: 500,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
}


def http_status_for_code(code: int) -> int:
    """The HTTP status that carries a JSON-RPC error with this code."""
    return _HTTP_STATUS_FOR_CODE.get(code, 200)


class ProtocolError(Exception):
    """A failure that maps to a JSON-RPC error object. Abstract: every error is a
    `RemoteProtocolError` or a `LocalProtocolError`.

    `ProtocolError(code, message, data)` still works in a handler (it was the way to answer
    with a JSON-RPC error) and makes a `RemoteProtocolError`: the request cannot be served.
    """

    code: int
    message: str
    data: Any

    def __new__(cls, *args: Any, **kwargs: Any) -> ProtocolError:
        made = RemoteProtocolError if cls is ProtocolError else cls
        return super().__new__(made, *args)

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    @property
    def http_status(self) -> int:
        return http_status_for_code(self.code)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.message!r})"


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow."""


class LocalProtocolError(ProtocolError):
    """Our caller used the core in a way the protocol does not allow."""

    def __init__(self, message: str, code: int = INTERNAL_ERROR, data: Any = None) -> None:
        super().__init__(code, message, data)


class IllegalTransition(LocalProtocolError):
    """A status change that the task state table does not contain."""


class VersionConflict(Exception):
    """A store write lost a compare-and-set race: the record changed underneath it."""

    def __init__(self, task_id: str, expected: int | None, found: int | None) -> None:
        super().__init__(
            f"task {task_id!r} is at version {found}, not {expected}: reload and try again"
        )
        self.task_id = task_id
        self.expected = expected
        self.found = found
