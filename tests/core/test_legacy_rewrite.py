"""A 2025 session's request rewritten as the 2026-07-28 request it stands for (`LegacyFront.
route`): whatever the params' spacing and members, the core reads the same members, with
the session's `_meta` in front, and a `_meta` of the request's own kept (a progress token)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from msgspec import Raw

from mcp_tasks.core import Reply
from mcp_tasks.core import _wire as wire_module
from mcp_tasks.core.legacy import (
    LegacyFront,
    LegacySession,
    Translated,
    legacy_reply,
    plain_reply,
)
from mcp_tasks.core.wire import CallToolResult, Implementation, IncomingMessage, TextContent

FRONT = LegacyFront(lambda: Implementation(name="t", version="1"), lambda: {}, lambda: None)
SESSION = LegacySession(version="2025-11-25")
SPACE = st.text(alphabet=" \t\r\n", max_size=40)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
MEMBERS = st.dictionaries(
    st.text(max_size=8).filter(lambda key: key != "_meta"), VALUES, max_size=4
)


def spaced(members: dict[str, Any], gaps: list[str]) -> bytes:
    """`members` as a JSON object with whitespace of `gaps` around its tokens."""
    gap = iter([*gaps, *[""] * 64])
    parts = [
        f"{key and next(gap)}{json.dumps(key)}:{next(gap)}{json.dumps(value)}"
        for key, value in members.items()
    ]
    return f"{next(gap)}{{{next(gap)}{','.join(parts)}{next(gap)}}}{next(gap)}".encode()


@given(members=MEMBERS, gaps=st.lists(SPACE, max_size=12), token=st.none() | st.integers())
def test_the_rewritten_params_hold_the_same_members_after_the_sessions_meta(
    members: dict[str, Any], gaps: list[str], token: int | None
) -> None:
    if token is not None:
        members = {**members, "_meta": {"progressToken": token}}
    message = IncomingMessage(
        jsonrpc="2.0", id=1, method="tools/call", params=Raw(spaced(members, gaps))
    )
    route = FRONT.route(message, SESSION, claimless=True)
    assert isinstance(route, Translated)
    params = msgspec.json.decode(route.message.params)
    meta = params.pop("_meta")
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    if token is not None:
        assert meta["progressToken"] == token
    assert params == {key: value for key, value in members.items() if key != "_meta"}


def _result_types() -> list[type[msgspec.Struct]]:
    return [
        value
        for value in vars(wire_module).values()
        if isinstance(value, type)
        and issubclass(value, msgspec.Struct)
        and "result_type" in value.__struct_fields__
    ]


def test_every_result_writes_its_meta_after_result_type() -> None:
    """What `plain_reply` relies on: a result that ends with `resultType` has no `_meta`."""
    results = _result_types()
    assert len(results) >= 8
    for result in results:
        fields = result.__struct_fields__
        if "meta" in fields:
            assert fields.index("meta") > fields.index("result_type"), result.__name__


def test_cacheable_results_and_rounds_are_turned_back_the_slow_way() -> None:
    tool_result = CallToolResult.text("hi")
    body = msgspec.json.encode({"id": 1, "result": tool_result, "jsonrpc": "2.0"})
    reply = Reply(body=body, request_id=1)
    plain = plain_reply(reply, "tools/call")
    assert plain is not None
    assert json.loads(plain.body) == {
        "id": 1,
        "result": {"content": [{"type": "text", "text": "hi"}]},
        "jsonrpc": "2.0",
    }
    assert plain_reply(reply, "resources/read") is None  # its ttlMs and cacheScope
    assert plain_reply(msgspec.structs.replace(reply, error_code=-32602), "tools/call") is None
    asked = body.replace(b'"complete"', b'"input_required"')
    assert plain_reply(Reply(body=asked, request_id=1), "tools/call") is None
    with_meta = CallToolResult(content=[TextContent(text="hi")], meta={"k": 1})
    body = msgspec.json.encode({"id": 1, "result": with_meta, "jsonrpc": "2.0"})
    assert plain_reply(Reply(body=body, request_id=1), "tools/call") is None
    turned = legacy_reply(Reply(body=body, request_id=1), "tools/call")
    assert turned is not None
    assert json.loads(turned.body)["result"] == {
        "content": [{"type": "text", "text": "hi"}],
        "_meta": {"k": 1},
    }
