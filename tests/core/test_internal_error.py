"""`internal_error_reply`: the one -32603 reply to a request whose handling failed, with its
id when the bytes show one (a request), without otherwise."""

from __future__ import annotations

import json

import pytest

from mcp_tasks.core import INTERNAL_ERROR, internal_error_reply

ERROR = {"code": INTERNAL_ERROR, "message": "Internal error"}


@pytest.mark.parametrize(
    ("request_bytes", "request_id"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}', 7),
        (b'{"method":"tools/list","id":"a-1"}', "a-1"),
        (b'{"jsonrpc":"2.0","method":"notifications/cancelled"}', None),  # a notification
        (b'{"jsonrpc":"2.0","id":3,"result":{}}', None),  # a response: nothing to answer
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', None),  # no id of JSON-RPC's kinds
        (b'[{"id":1,"method":"x"}]', None),  # a batch
        (b"not json", None),
        (b"", None),
    ],
)
def test_the_reply_carries_the_id_when_it_can_be_read(
    request_bytes: bytes, request_id: int | str | None
) -> None:
    reply = internal_error_reply(request_bytes)
    expected = {"jsonrpc": "2.0", "error": ERROR}
    if request_id is not None:
        expected["id"] = request_id
    assert json.loads(reply.body) == expected
    assert (reply.http_status, reply.request_id, reply.error_code) == (500, request_id, -32603)
