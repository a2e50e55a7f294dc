"""The nesting limit is counted over the bytes, before decoding, and agrees with the JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_tasks.core._depth import MAX_DEPTH, nesting_depth, too_deep

from .harness import Harness


@pytest.fixture
def h(make_harness: type[Harness]) -> Harness:
    return make_harness()


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


# Strings full of what could fool a scan: brackets, quotes, backslashes, escapes.
tricky_text = st.text(alphabet='[]{}"\\/ab\n\u2028é', max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | tricky_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky_text, inner, max_size=4),
    max_leaves=40,
)


@given(json_values, st.booleans())
def test_the_depth_counted_over_the_bytes_is_the_depth_of_the_json(
    value: Any, ascii_only: bool
) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert nesting_depth(data) == depth_of(value)


@pytest.mark.parametrize(
    ("data", "depth"),
    [
        (b"1", 0),
        (b'"[[["', 0),
        (b'["\\\\", "]"]', 1),
        (b'["\\"[", {"a\\\\": [{}]}]', 4),
        (b"[" * 100_000 + b"]" * 100_000, 100_000),
        (b"[" * 1000, 1000),  # never closed: still too deep to decode
    ],
)
def test_depth_of_edge_cases(data: bytes, depth: int) -> None:
    assert nesting_depth(data) == depth
    assert nesting_depth(memoryview(data)) == depth


def test_too_deep_is_exactly_past_the_limit() -> None:
    at_limit = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert not too_deep(at_limit)
    assert too_deep(b"[" + at_limit + b"]")
    assert too_deep(bytearray(b"{}" + b"[" * (MAX_DEPTH + 1)))
    # many brackets, none deep: the scan, not the count, decides
    assert not too_deep(json.dumps([[1]] * (MAX_DEPTH * 4)).encode())
    assert not too_deep(json.dumps(["[" * (MAX_DEPTH * 2)]).encode())


@pytest.mark.parametrize("where", ["params", "arguments", "id"])
def test_a_message_past_the_limit_is_refused_before_decoding(h: Harness, where: str) -> None:
    """The same -32600 on every interpreter (msgspec on 3.13 would decode 5,000 levels)."""
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    inner = {"params": '{"x":@}', "arguments": '{"name":"t","arguments":{"x":@}}', "id": "{}"}
    body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":' + inner[where] + "}"
    if where == "id":
        body = body.replace('"id":1', '"id":@')
    message = body.replace("@", deep).encode()
    assert nesting_depth(message) > MAX_DEPTH
    reply = json.loads(h.send(message).reply or b"")
    assert reply["error"]["code"] == -32600, reply
    assert f"nested more deeply than this server accepts ({MAX_DEPTH} levels)" in str(reply)


def test_a_top_level_array_is_not_an_object_however_deep(h: Harness) -> None:
    reply = json.loads(h.send(b"[" * 5000 + b"]" * 5000).reply or b"")
    assert reply["error"]["code"] == -32600
    assert "must be a JSON object" in reply["error"]["message"]
