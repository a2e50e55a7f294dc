"""`x-mcp-header`: a tool argument mirrored by an `Mcp-Param-{Name}` HTTP header.

Registration refuses a malformed annotation; over HTTP each annotated argument of a
tools/call must be mirrored exactly by its header (-32020, HTTP 400 otherwise); without
HttpHeaders (stdio) nothing is checked.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_tasks.core import CallToolResult, HttpHeaders, ToolCall, ToolOutcome, ToolSpec

from .harness import Harness, checked_harnesses
from .tools import args


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


DEPLOY = ToolSpec(
    name="deploy",
    input_schema=schema(
        region={"type": "string", "x-mcp-header": "Region"},
        count={"type": "integer", "x-mcp-header": "Count"},
        dry_run={"type": "boolean", "x-mcp-header": "Dry-Run"},
        note={"type": "string"},
    ),
)


class Recorder:
    """The deploy handler: answers with the arguments it saw, and counts its runs."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    def __call__(self, call: ToolCall) -> ToolOutcome:
        self.calls.append(call)
        return CallToolResult.text(json.dumps(args(call), sort_keys=True))


@pytest.fixture
def make_harness() -> Iterator[type[Harness]]:
    yield from checked_harnesses()


@pytest.fixture
def deploy() -> Recorder:
    return Recorder()


@pytest.fixture
def h(make_harness: type[Harness], deploy: Recorder) -> Harness:
    return make_harness(tools={"deploy": (DEPLOY, deploy)})


def http(params: dict[str, str] | None, name: str = "deploy") -> HttpHeaders:
    """The headers of a tools/call over Streamable HTTP; `params` by lower-cased Name."""
    return HttpHeaders(protocol_version="2026-07-28", method="tools/call", name=name, params=params)


def call(h: Harness, arguments: dict[str, Any] | None, params: dict[str, str] | None) -> Any:
    return h.call("deploy", arguments, headers=http(params))


def mismatch(h: Harness, arguments: dict[str, Any] | None, params: dict[str, str] | None) -> str:
    """Send the call; it must be refused with -32020 and HTTP 400. Returns the message."""
    reply = call(h, arguments, params)
    assert "error" in reply, f"expected -32020, got {reply}"
    assert reply["error"]["code"] == -32020
    assert h.exchanges[-1].http_status == 400
    message: str = reply["error"]["message"]
    return message


# --- registration -------------------------------------------------------------------------


def test_header_params_maps_each_annotated_argument_to_its_header() -> None:
    assert DEPLOY.header_params() == {"region": "Region", "count": "Count", "dry_run": "Dry-Run"}


@pytest.mark.parametrize(
    "input_schema",
    [
        {"type": "object"},
        {"type": "object", "properties": "not a dict"},
        schema(flag=True),  # a boolean subschema carries no annotation
        schema(plain={"type": "string"}),
        # Only top-level properties are mirrored: a nested annotation is not one.
        schema(
            obj={"type": "object", "properties": {"x": {"type": "string", "x-mcp-header": "X"}}}
        ),
    ],
)
def test_a_schema_without_top_level_annotations_has_no_header_params(
    input_schema: dict[str, Any],
) -> None:
    assert ToolSpec(name="t", input_schema=input_schema).header_params() == {}


@pytest.mark.parametrize("header", ["X", "x-region_1.v2~", "A!#$%&'*+^`|", "0"])
def test_any_http_token_is_a_header_name(header: str) -> None:
    spec = ToolSpec(name="t", input_schema=schema(a={"type": "string", "x-mcp-header": header}))
    assert spec.header_params() == {"a": header}


@pytest.mark.parametrize(
    ("properties", "words"),
    [
        ({"a": {"type": "string", "x-mcp-header": ""}}, "must be an HTTP token, not ''"),
        ({"a": {"type": "string", "x-mcp-header": "Two Words"}}, "must be an HTTP token"),
        ({"a": {"type": "string", "x-mcp-header": "a:b"}}, "must be an HTTP token"),
        ({"a": {"type": "string", "x-mcp-header": "Région"}}, "must be an HTTP token"),
        ({"a": {"type": "string", "x-mcp-header": "a\r\nX-Evil"}}, "must be an HTTP token"),
        ({"a": {"type": "string", "x-mcp-header": "(a)"}}, "must be an HTTP token"),
        ({"a": {"type": "string", "x-mcp-header": 7}}, "must be an HTTP token, not 7"),
        ({"a": {"type": "string", "x-mcp-header": None}}, "must be an HTTP token"),
        ({"a": {"type": "number", "x-mcp-header": "A"}}, "needs type string, integer or boolean"),
        ({"a": {"type": "object", "x-mcp-header": "A"}}, "needs type string, integer or boolean"),
        ({"a": {"type": "array", "x-mcp-header": "A"}}, "needs type string, integer or boolean"),
        ({"a": {"x-mcp-header": "A"}}, "needs type string, integer or boolean"),
        (
            {"a": {"type": ["string", "null"], "x-mcp-header": "A"}},
            "needs type string, integer or boolean",
        ),
        (
            {
                "a": {"type": "string", "x-mcp-header": "Region"},
                "b": {"type": "string", "x-mcp-header": "REGION"},
            },
            "x-mcp-header 'REGION' is used twice",
        ),
    ],
)
def test_a_malformed_annotation_is_refused_at_construction(
    properties: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValueError, match=r"tool 't', argument '[ab]'") as raised:
        ToolSpec(name="t", input_schema=schema(**properties))
    assert words in str(raised.value)


# --- the headers must mirror the body ------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "params"),
    [
        ({"region": "us-west"}, {"region": "us-west"}),
        ({"region": "us-west"}, {"region": "  us-west\t"}),  # the header's own padding
        ({"region": "us-west"}, {"region": b64("us-west")}),
        ({"region": "café"}, {"region": b64("café")}),
        ({"region": " padded "}, {"region": b64(" padded ")}),
        ({"region": ""}, {"region": ""}),
        ({"region": ""}, {"region": "=?base64??="}),
        ({"region": "?>?"}, {"region": "=?base64?Pz4/?="}),  # the standard alphabet
        # Literal values that merely look like base64 are compared as they are.
        ({"region": "dXMtd2VzdA=="}, {"region": "dXMtd2VzdA=="}),
        ({"region": "=?BASE64?YQ==?="}, {"region": "=?BASE64?YQ==?="}),  # markers are exact
        ({"region": "=?base64?YQ==?"}, {"region": "=?base64?YQ==?"}),
        ({"region": "=?base64?YQ==?="}, {"region": b64("=?base64?YQ==?=")}),
        ({"count": 42}, {"count": "42"}),
        ({"count": 0}, {"count": "0"}),
        ({"count": -7}, {"count": "-7"}),
        ({"count": 2**53 - 1}, {"count": str(2**53 - 1)}),
        ({"count": 42}, {"count": b64("42")}),
        # Numbers compare by value (SEP-2243): the header need not be the body's spelling.
        ({"count": 42}, {"count": "042"}),
        ({"count": 42}, {"count": "+42"}),
        ({"count": 42}, {"count": "42.0"}),
        ({"count": 42}, {"count": "4.2e1"}),
        ({"count": 2**60}, {"count": str(2**60)}),
        ({"count": 1.5}, {"count": "1.5"}),  # the schema's integer type is not this check's
        ({"dry_run": True}, {"dry-run": "true"}),
        # The body is not checked against the schema: a string "42" is mirrored as text.
        ({"count": "42"}, {"count": "42"}),
        ({"dry_run": False}, {"dry-run": "false"}),
        (
            {"region": "eu", "count": 3, "dry_run": True, "note": "n"},
            {"region": "eu", "count": "3", "dry-run": "true"},
        ),
        # Nothing annotated in the body, nothing in the headers.
        ({"note": "only"}, None),
        ({}, {}),
        (None, None),
        # A null argument is as good as absent: no header expected.
        ({"region": None}, None),
        # Headers for arguments the tool does not annotate are not this check's business.
        ({"note": "n"}, {"note": "n", "other": "x"}),
    ],
)
def test_headers_that_mirror_the_body_pass(
    h: Harness, deploy: Recorder, arguments: dict[str, Any] | None, params: dict[str, str] | None
) -> None:
    result = call(h, arguments, params)["result"]
    assert json.loads(result["content"][0]["text"]) == (arguments or {})
    assert len(deploy.calls) == 1


@pytest.mark.parametrize(
    ("arguments", "params", "words"),
    [
        ({"region": "us-west"}, None, "Mcp-Param-Region header is missing"),
        ({"region": "us-west"}, {}, "(it must carry arguments.region)"),
        ({"region": "us-west"}, {"count": "1"}, "Mcp-Param-Region header is missing"),
        ({"dry_run": False}, {}, "Mcp-Param-Dry-Run header is missing"),
        ({"count": 0}, {}, "Mcp-Param-Count header is missing"),
        ({}, {"region": "us-west"}, "Mcp-Param-Region header is sent but arguments.region is not"),
        (None, {"count": "1"}, "Mcp-Param-Count header is sent but arguments.count is not"),
        ({"region": None}, {"region": "null"}, "is sent but arguments.region is not"),
        ({"region": "us-west"}, {"region": "us-east"}, "Mcp-Param-Region header does not match"),
        ({"region": "us-west"}, {"region": "US-WEST"}, "does not match arguments.region"),
        ({"region": "us-west"}, {"region": b64("us-east")}, "does not match arguments.region"),
        ({"region": " padded "}, {"region": " padded "}, "does not match"),  # header trims
        ({"region": "us-west"}, {"region": b64(" us-west")}, "does not match"),  # base64 doesn't
        ({"region": "us-west"}, {"region": "dXMtd2VzdA=="}, "does not match"),  # no markers
        ({"region": "=?base64?YQ==?="}, {"region": "=?base64?YQ==?="}, "does not match"),
        ({"count": 42}, {"count": "43"}, "Mcp-Param-Count header does not match"),
        ({"count": 42}, {"count": "4_2"}, "does not match arguments.count"),
        ({"count": 42}, {"count": "0x2a"}, "does not match arguments.count"),
        ({"count": 42}, {"count": "42."}, "does not match arguments.count"),
        ({"count": 42}, {"count": "nan"}, "does not match arguments.count"),
        ({"count": 2**60}, {"count": str(2**60 + 1)}, "does not match arguments.count"),
        ({"count": 42}, {"count": "forty-two"}, "does not match arguments.count"),
        ({"dry_run": True}, {"dry-run": "1"}, "Mcp-Param-Dry-Run header does not match"),
        ({"dry_run": True}, {"dry-run": "false"}, "does not match arguments.dry_run"),
        ({"region": {"a": 1}}, {"region": '{"a": 1}'}, "does not match arguments.region"),
        ({"region": ["x"]}, {"region": "x"}, "does not match arguments.region"),
        ({"count": 1.5}, {"count": "1.50001"}, "does not match arguments.count"),
    ],
)
def test_a_missing_stray_or_different_header_is_header_mismatch(
    h: Harness,
    deploy: Recorder,
    arguments: dict[str, Any] | None,
    params: dict[str, str] | None,
    words: str,
) -> None:
    assert words in mismatch(h, arguments, params)
    assert deploy.calls == []


@pytest.mark.parametrize(
    "value",
    [
        "=?base64?dXMtd2VzdA?=",  # padding missing
        "=?base64?dXMtd2VzdA=?=",  # padding short
        "=?base64?dXMtd2VzdA===?=",  # padding too long
        "=?base64?dXMt*2VzdA==?=",  # a character outside the alphabet
        "=?base64?dXMt d2VzdA==?=",  # whitespace inside
        "=?base64?Pz4_?=",  # the url-safe alphabet
        "=?base64?Pz4-?=",
        "=?base64?/w==?=",  # decodes, but not to UTF-8
        "=?base64?***?=",
    ],
)
def test_malformed_base64_is_header_mismatch(h: Harness, deploy: Recorder, value: str) -> None:
    message = mismatch(h, {"region": "us-west"}, {"region": value})
    assert message == "Mcp-Param-Region header holds invalid =?base64?...?= text"
    assert deploy.calls == []


def test_each_annotated_argument_is_checked(h: Harness) -> None:
    arguments = {"region": "eu", "count": 3, "dry_run": True}
    headers = {"region": "eu", "count": "3", "dry-run": "true"}
    for key, wrong in (("region", "us"), ("count", "4"), ("dry-run", "false")):
        assert "does not match" in mismatch(h, arguments, {**headers, key: wrong})


def test_the_header_is_checked_before_the_handler_or_an_input_round(
    make_harness: type[Harness], deploy: Recorder
) -> None:
    h = make_harness(tools={"deploy": (DEPLOY, deploy)})
    extra = {"requestState": "garbage", "inputResponses": {"a": {"action": "decline"}}}
    reply = h.call("deploy", {"region": "us"}, headers=http({"region": "eu"}), extra=extra)
    assert reply["error"]["code"] == -32020 and deploy.calls == []


# --- when nothing is checked -----------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [{"region": "us-west"}, {"region": "café", "count": 3, "dry_run": False}, {}],
)
def test_without_http_headers_nothing_is_checked(
    h: Harness, deploy: Recorder, arguments: dict[str, Any]
) -> None:
    result = h.call("deploy", arguments)["result"]  # stdio: no HttpHeaders at all
    assert json.loads(result["content"][0]["text"]) == arguments
    assert len(deploy.calls) == 1


def test_a_tool_without_annotations_ignores_param_headers(
    make_harness: type[Harness], deploy: Recorder
) -> None:
    plain = ToolSpec(name="plain", input_schema=schema(region={"type": "string"}))
    h = make_harness(tools={"plain": (plain, deploy)})
    reply = h.call(
        "plain", {"region": "us-west"}, headers=http({"region": "elsewhere"}, name="plain")
    )
    assert "result" in reply and len(deploy.calls) == 1


def test_a_tool_registered_later_is_checked_too(make_harness: type[Harness]) -> None:
    h = make_harness()
    recorder = Recorder()
    h.tools["deploy"] = (DEPLOY, recorder)
    h.core.add_tool(DEPLOY)
    assert "Mcp-Param-Region" in mismatch(h, {"region": "us-west"}, None)
    h.core.remove_tool("deploy")
    h.core.add_tool(ToolSpec(name="deploy", input_schema=schema(region={"type": "string"})))
    assert "result" in call(h, {"region": "us-west"}, None)
