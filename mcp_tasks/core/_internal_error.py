"""The reply to a request whose handling failed: one -32603, the same from every transport.

A bug behind `handle` (or a store that fails in a way the runtime does not expect) costs
the request it happened on, not the session. Whichever transport caught it (stdio, the
built-in HTTP server, the ASGI app) or the runtime (a store fault), the client reads the
same bytes: `{"jsonrpc":"2.0","id":<its id>,"error":{"code":-32603,"message":"Internal
error"}}`, carried over HTTP with 500. The id is read from the request's bytes when it can
be (a JSON object with an `id` and a `method`); otherwise (not JSON, a batch, a
notification, a response) the reply has none, as the MCP schema writes an id it could not
read, and `request_id` is None: stdio then sends nothing (JSON-RPC answers no
notification), HTTP must answer and sends it as it is.

Nothing of the failure is in the reply: its traceback is for the server's log alone.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ._effects import Reply
from ._encode import error_body
from ._errors import INTERNAL_ERROR
from ._wire import RequestId

__all__ = ["INTERNAL_ERROR_MESSAGE", "internal_error_for", "internal_error_reply"]

INTERNAL_ERROR_MESSAGE: Final = "Internal error"


class _IdOnly(msgspec.Struct):
    id: RequestId | None = None
    method: str | None = None


_read_id = msgspec.json.Decoder(_IdOnly).decode


def internal_error_reply(request: bytes) -> Reply:
    """The -32603 reply (HTTP 500) to the request whose raw bytes are `request`, with
    its id when it can be read (see the module's docstring)."""
    try:
        message = _read_id(request)
    except msgspec.DecodeError:  # not JSON, or not an object of a request's shape
        return internal_error_for(None)
    return internal_error_for(message.id if message.method is not None else None)


def internal_error_for(request_id: RequestId | None) -> Reply:
    """The -32603 reply (HTTP 500) to the request `request_id` (None: unknown)."""
    return Reply(
        body=error_body(request_id, INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE),
        http_status=500,
        request_id=request_id,
        error_code=INTERNAL_ERROR,
    )
