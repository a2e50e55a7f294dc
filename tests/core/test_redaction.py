"""Sensitive arguments never reach a journal, however the message spells them: every JSON
escape form of the method, the tool's name, the keys (`params`, `name`, `arguments`, the
argument's own) and the secret itself, and keys named twice (the core keeps the last; the
shadowed one must go too). Each journal still replays byte for byte. The secret is looked
for raw and in every JSON string of every line, decoded (a message kept as text is itself
decoded again), so no escaped spelling of it hides."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_tasks.core import CallToolResult, HttpHeaders, ToolSpec

from .harness import ALL_CAPS, Harness, meta
from .test_journal import assert_replays, recording

SECRET = "hunter2-s3cr3t/x"
SHADOWED = "shadowed-s3cr3t"
SENSITIVE = frozenset({"password"})

_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n"}


def _forms(char: str) -> list[str]:
    """Every way JSON may write `char` inside a string."""
    code = ord(char)
    forms = [f"\\u{code:04x}", f"\\u{code:04X}"]
    if char in _SHORT:
        forms.append(_SHORT[char])
    if char not in '"\\' and code >= 0x20:
        forms.append(char)
    return forms


def spelled(text: str) -> st.SearchStrategy[str]:
    """`text` as a JSON string literal, each character in any of its forms."""
    chars = [st.sampled_from(_forms(char)) for char in text]
    return st.tuples(*chars).map(lambda parts: '"' + "".join(parts) + '"')


def login_tool() -> ToolSpec:
    schema = {"type": "object", "properties": {"user": {}, "password": {}}}
    return ToolSpec(name="log/in", input_schema=schema, sensitive_arguments=SENSITIVE)


def harness() -> tuple[Harness, list[bytes]]:
    def handler(call: Any) -> Any:
        return CallToolResult.text("in")

    h = Harness(tools={"log/in": (login_tool(), handler)})
    return h, recording(h)


@st.composite
def call_messages(draw: st.DrawFn) -> str:
    """A `tools/call` of `log/in` carrying SECRET, spelled every way JSON allows."""
    key = {name: draw(spelled(name)) for name in ("method", "params", "name", "arguments")}
    password = draw(spelled("password"))
    secret = draw(spelled(SECRET))
    members = ['"user":"ada"', f"{password}:{secret}"]
    if draw(st.booleans()):  # the argument named twice: the first is shadowed
        members.insert(0, f"{draw(spelled('password'))}:{json.dumps(SHADOWED)}")
    arguments = "{" + ",".join(members) + "}"
    meta_json = json.dumps(meta(ALL_CAPS))
    params = [
        f"{key['name']}:{draw(spelled('log/in'))}",
        f'"_meta":{meta_json}',
        f"{key['arguments']}:{arguments}",
    ]
    if draw(st.booleans()):  # arguments named twice
        params.insert(0, f'{key["arguments"]}:{{"password":{json.dumps(SHADOWED)}}}')
    params = draw(st.permutations(params))
    body = "{" + ",".join(params) + "}"
    envelope = [
        '"jsonrpc":"2.0"',
        '"id":7',
        f"{key['method']}:{draw(spelled('tools/call'))}",
        f"{key['params']}:{body}",
    ]
    if draw(st.booleans()):  # params named twice (whichever comes last is served)
        shadowed = f'{{"password":{json.dumps(SHADOWED)}}}'
        shadow = f'{{"name":"log/in","_meta":{meta_json},"arguments":{shadowed}}}'
        envelope.insert(0, f"{key['params']}:{shadow}")
    return "{" + ",".join(draw(st.permutations(envelope))) + "}"


def strings_in(value: Any) -> list[str]:
    """Every string in a decoded JSON value (keys too), and those in a string that is
    itself JSON."""
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [key, *strings_in(item)]]
    if isinstance(value, list):
        return [text for item in value for text in strings_in(item)]
    if not isinstance(value, str):
        return []
    try:
        inner = json.loads(value)
    except ValueError:
        return [value]
    return [value, *strings_in(inner)] if isinstance(inner, dict | list) else [value]


def assert_no_secret(lines: list[bytes]) -> None:
    for line in lines:
        text = line.decode()
        for secret in (SECRET, SHADOWED, "s3cr3t"):
            assert secret not in text, line
            assert not any(secret in found for found in strings_in(json.loads(line))), line


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=call_messages())
def test_no_spelling_of_a_call_writes_its_secret(message: str) -> None:
    h, lines = harness()
    reply = h.send(message.encode())
    assert reply.reply is not None
    assert json.loads(reply.reply)["result"]["content"][0]["text"] == "in"  # it was served
    assert_no_secret(lines)
    assert_replays(lines)


@pytest.mark.parametrize(
    "message",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"tools\\/call","params":{"name":"log/in",'
        b'"arguments":{"password":"hunter2-s3cr3t/x"}',  # cut short: not JSON
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["log\\/in",'
        b'{"password":"hunter2-s3cr3t/x"}]}',  # params not an object
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"log\\u002fin",'
        b'"arguments":{"password":"hunter2-s3cr3t/x"},"x":' + b"[" * 600 + b"]" * 600 + b"}}",
    ],
    ids=["not-json", "params-not-an-object", "too-deep"],
)
def test_a_message_the_core_cannot_read_is_not_kept_if_it_names_the_tool(message: bytes) -> None:
    h, lines = harness()
    h.send(message)
    assert_no_secret(lines)
    assert_replays(lines)  # the line is skipped, the rest replays


@pytest.mark.parametrize(
    "name",
    ["log/in", " log/in ", "=?base64?bG9nL2lu?=", "=?base64?!?="],
    ids=["plain", "padded", "base64", "unreadable"],
)
def test_a_header_of_the_tool_mcp_name_names_is_redacted(name: str) -> None:
    """The body calls another tool, the headers name `log/in` (plain, padded, in base64,
    or unreadably) and carry its secret: the core refuses the mismatch, the journal keeps
    no secret."""
    password = {"type": "string", "x-mcp-header": "Password"}
    schema = {"type": "object", "properties": {"password": password}}
    spec = ToolSpec(name="log/in", input_schema=schema, sensitive_arguments=SENSITIVE)
    h = Harness(tools={"log/in": (spec, lambda call: CallToolResult.text("in"))})
    lines = recording(h)
    headers = HttpHeaders(
        protocol_version="2026-07-28",
        method="tools/call",
        name=name,
        params={"password": SECRET},
    )
    h.call("nope", {"password": "x"}, headers=headers, caps=ALL_CAPS)
    assert_no_secret(lines)
    assert_replays(lines)


@pytest.mark.parametrize(
    "arguments",
    [b'["hunter2-s3cr3t/x"]', b'"hunter2-s3cr3t/x"', b'{"password":"hunter2-s3cr3t/x","n":1e400}'],
    ids=["a-list", "a-string", "a-number-past-a-double"],
)
def test_arguments_that_are_no_object_or_do_not_decode_are_not_kept(arguments: bytes) -> None:
    h, lines = harness()
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"log/in","_meta":'
    body += json.dumps(meta(ALL_CAPS)).encode() + b',"arguments":' + arguments + b"}}"
    assert h.send(body).reply is not None  # refused, or (1e400: no type to decode) served
    assert_no_secret(lines)
    assert_replays(lines)
