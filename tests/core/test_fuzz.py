"""Fuzzing the core: whatever comes in, no exception escapes and every reply is JSON-RPC.

Inputs are arbitrary bytes, arbitrary JSON values, "near-valid" requests (a valid request
of a random known method with a few keys of its envelope, params or _meta dropped, replaced
or added, with or without HTTP headers) and random handler outcomes fed back through
`tool_returned` and `task_returned`. Everything goes through the harness's `perform`, so
the `RunTool` and `FetchTask` effects are followed to their replies too.

In CI, 10,000 examples go through decode and handle (`receive` and the effects): 2,000
arbitrary bytes, 1,000 JSON values, 1,000 near-valid tool and task requests and 6,000 of
everything mixed, over a core that also has prompts, resources and completions; every reply
is validated against the official schemas. `fuzz/run.py` runs millions, outside CI.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, Final, TypeVar

import pytest
import schema_check
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET
from schema_check import check_reply

from mcp_tasks.core import (
    PROTOCOL_VERSION,
    START_TASK,
    AudioContent,
    CallToolResult,
    CreateMessageParams,
    CreateMessageRequest,
    ElicitParams,
    ElicitRequest,
    EmbeddedResource,
    ErrorObject,
    HttpHeaders,
    ImageContent,
    InputRequired,
    ListRootsRequest,
    PromptSpec,
    ReleaseLease,
    Reply,
    ResourceContents,
    ResourceLink,
    ResourceSpec,
    ResourceTemplateSpec,
    RunTool,
    SamplingMessage,
    SaveTask,
    Step,
    Subscription,
    TaskOptions,
    TaskStatus,
    TextContent,
    ToolOutcome,
    ToolSpec,
    http_status_for_code,
)

from .harness import (
    ALL_CAPS,
    CORE,
    TASKS_CAPS,
    CompletionHandler,
    CompletionTarget,
    Handler,
    Harness,
    PromptHandler,
    ResourceHandler,
    check_any_reply,
    meta,
)
from .test_catalog import COMPLETIONS, LOGS, PROMPTS, RESOURCES
from .tools import TOOLS, ask_name

_Call = TypeVar("_Call")
_Outcome = TypeVar("_Outcome")

FUZZ: Final = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

KNOWN_METHODS: Final = (
    "server/discover",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
)
CATALOG_METHODS: Final = (
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
)
OTHER_METHODS: Final = (
    "tasks/list",
    "tasks/result",
    "initialize",
    "ping",
    "resources/read",
    "prompts/get",
    "notifications/cancelled",
    "notifications/initialized",
    "",
    "TOOLS/LIST",
)
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"


def _guarded(handler: Callable[[_Call], _Outcome]) -> Callable[[_Call], _Outcome | ErrorObject]:
    """The test tools index their arguments freely; a real shell turns a handler's crash
    into an error outcome, and so does this one (the crash is the tool's, not the core's)."""

    def run(call: _Call) -> _Outcome | ErrorObject:
        try:
            return handler(call)
        except (KeyError, TypeError, ValueError, AttributeError):
            return ErrorObject(code=-32603, message="the handler crashed")

    return run


FUZZ_TOOLS: Final[dict[str, tuple[ToolSpec, Handler]]] = {
    name: (spec, _guarded(handler)) for name, (spec, handler) in TOOLS.items()
}
FUZZ_PROMPTS: Final[dict[str, tuple[PromptSpec, PromptHandler]]] = {
    name: (spec, _guarded(handler)) for name, (spec, handler) in PROMPTS.items()
}
FUZZ_RESOURCES: Final[dict[str, tuple[ResourceSpec | ResourceTemplateSpec, ResourceHandler]]] = {
    uri: (spec, _guarded(handler)) for uri, (spec, handler) in RESOURCES.items()
}
FUZZ_COMPLETIONS: Final[dict[CompletionTarget, CompletionHandler]] = {
    target: _guarded(handler) for target, handler in COMPLETIONS.items()
}


def _seeded(*, catalog: bool = False) -> Harness:
    """A harness holding tasks in several statuses: tsk-0001 working, tsk-0002
    input_required (keys a, b), tsk-0003 completed, tsk-0004 cancelled; with `catalog`,
    the prompts, resources and completions of test_catalog too."""
    entries: dict[str, Any] = {}
    if catalog:
        entries = {
            "prompts": FUZZ_PROMPTS,
            "resources": FUZZ_RESOURCES,
            "completions": FUZZ_COMPLETIONS,
        }
    h = Harness(tools=FUZZ_TOOLS, task_options=TaskOptions(max_tasks=64), **entries)
    ids = [h.call("slow", {"label": str(n)}, caps=ALL_CAPS)["result"]["taskId"] for n in range(4)]
    assert ids == ["tsk-0001", "tsk-0002", "tsk-0003", "tsk-0004"]
    sampling = CreateMessageRequest(
        params=CreateMessageParams(
            messages=[SamplingMessage(role="user", content={"type": "text", "text": "hi"})],
            max_tokens=5,
        )
    )
    h.finish(ids[1], InputRequired(requests={"a": ask_name(), "b": sampling}))
    h.finish(ids[2], CallToolResult.text("done"))
    h.cancel(ids[3])
    h.exchanges.clear()
    return h


# A requestState sealed by a harness at its start time (the key and clock are the same in
# every fresh harness), bound to ask_then_task with arguments {}.
VALID_STATE: Final[str] = Harness(tools=TOOLS).call("ask_then_task", {}, caps=ALL_CAPS)["result"][
    "requestState"
]


# --- what a reply must be -----------------------------------------------------------------


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_notification(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("jsonrpc") == "2.0"
        and isinstance(value.get("method"), str)
        and "id" not in value
    )


def _is_response(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "id" in value
        and "method" not in value
        and ("result" in value or "error" in value)
    )


_NOT_JSON: Final = object()


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _loads(data: bytes) -> Any:
    """What the bytes say, read as the core reads them (UTF-8, no BOM); bytes that are not
    UTF-8 keep them as lone surrogates. _NOT_JSON if this is no JSON text at all."""
    try:
        return json.loads(data.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return _NOT_JSON


def _check(value: Any, reply: Reply | None, *, exact: bool = True) -> None:
    """The rules every outcome of one message must follow; `value` is what was sent.

    Not `exact` (bytes that are not UTF-8): the core may refuse them as a whole (even a
    notification), or read past the bad bytes, so only the reply's envelope is checked."""
    if reply is None:
        assert _is_notification(value) or _is_response(value), f"no reply to {value!r:.300}"
        return
    if exact:  # bytes that are not UTF-8 are no JSON text: refusing them all is right
        assert not _is_notification(value), "a notification got a reply"
    message = json.loads(reply.body)
    assert isinstance(message, dict) and message.get("jsonrpc") == "2.0"
    code = message["error"]["code"] if "error" in message else None
    assert reply.error_code == code
    assert reply.http_status == (200 if code is None else http_status_for_code(code))
    method = value.get("method") if isinstance(value, dict) else None
    if not exact or value is _NOT_JSON:
        kind = "JSONRPCErrorResponse" if "error" in message else "JSONRPCResultResponse"
        schema_check.check(schema_check.CORE, kind, message)
        return
    if isinstance(method, str) and method in KNOWN_METHODS:
        check_reply(method, reply.body)
    elif isinstance(method, str) and method in CATALOG_METHODS:
        check_any_reply(method, reply.body)  # a listen stream's result is never a reply
    elif "error" in message:
        schema_check.check(schema_check.CORE, "JSONRPCErrorResponse", message)
        check_reply(None, reply.body)  # and the shape of the error its code names
    else:
        schema_check.check(schema_check.CORE, "JSONRPCResultResponse", message)
        raise AssertionError(f"a result to a request for {method!r}")
    request_id = value.get("id") if isinstance(value, dict) else None
    if _is_request_id(request_id):
        assert "id" in message and message["id"] == request_id
        assert type(message["id"]) is type(request_id)
        assert reply.request_id == request_id
    else:
        assert "id" not in message, "an id in reply to a message without a usable one"


def _send(h: Harness, value: Any, data: bytes, headers: HttpHeaders | None = None) -> Reply | None:
    before, streams = h.store.count(), len(h.subscriptions)
    reply: Reply | None = h.perform(h.core.receive(data, h.now, headers))
    if len(h.subscriptions) > streams:  # a listen stream opened: no reply until it ends
        assert reply is None and len(h.subscriptions) == streams + 1
        _check_stream(value, h, h.subscriptions[-1])
    else:
        _check(value, reply, exact=_is_utf8(data))
    assert h.store.count() <= before + 1  # one message makes at most one task
    return reply


def _check_stream(value: Any, h: Harness, subscription: Subscription) -> None:
    """The first and the last message of a listen stream the core agreed to open."""
    assert isinstance(value, dict) and value.get("method") == "subscriptions/listen"
    assert _is_request_id(value.get("id")) and subscription.request_id == value["id"]
    ack = json.loads(h.core.subscription_acknowledged(subscription))
    schema_check.check(CORE, "SubscriptionsAcknowledgedNotification", ack)
    ended = h.core.subscription_ended(subscription)
    schema_check.check(CORE, "SubscriptionsListenResultResponse", json.loads(ended.body))
    assert ended.request_id == value["id"] and ended.http_status == 200


# --- strategies -----------------------------------------------------------------------------

HUGE_INTS: Final = st.sampled_from(
    [2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**40), 10**300]
)
SCALARS: Final = (
    st.none()
    | st.booleans()
    | st.integers()
    | HUGE_INTS
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES: Final = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)
JSON_OBJECTS: Final = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3)
ENVELOPE_KEYS: Final = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"])
ENVELOPE_VALUES: Final = (
    st.sampled_from(["2.0", "1.0", 2.0, "tools/list", "tasks/get", "notifications/x", 1, "a"])
    | JSON_VALUES
)
ENVELOPES: Final = st.dictionaries(ENVELOPE_KEYS | st.text(max_size=6), ENVELOPE_VALUES, max_size=6)

IDS: Final = (
    st.integers()
    | HUGE_INTS
    | st.text(max_size=8)
    | st.sampled_from([0, -1, True, False, None, 1.0, 1.5, "", [1], {"id": 1}])
)
METHODS: Final = st.sampled_from(KNOWN_METHODS + CATALOG_METHODS + OTHER_METHODS) | st.text(
    max_size=10
)
TASK_IDS: Final = (
    st.sampled_from(["tsk-0001", "tsk-0002", "tsk-0003", "tsk-0004", "tsk-0099", ""])
    | st.text(max_size=8)
    | JSON_VALUES
)
NAMES: Final = st.sampled_from([*FUZZ_TOOLS, "nope", ""]) | st.text(max_size=8) | JSON_VALUES
ARGUMENTS: Final = (
    st.dictionaries(
        st.sampled_from(["name", "label"]) | st.text(max_size=4),
        st.text(max_size=6) | JSON_VALUES,
        max_size=3,
    )
    | st.just({})
    | JSON_VALUES
)
GOOD_ANSWERS: Final[list[Any]] = [
    {"action": "accept", "content": {"name": "Ada"}},
    {"action": "decline"},
    {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
    {"roots": [{"uri": "file:///tmp"}]},
]
ANSWER_FOR: Final = {
    "elicitation/create": GOOD_ANSWERS[0],
    "sampling/createMessage": GOOD_ANSWERS[2],
    "roots/list": GOOD_ANSWERS[3],
}
ANSWERS: Final = st.sampled_from([*GOOD_ANSWERS, {"action": "maybe"}, {}, None]) | JSON_VALUES
INPUT_RESPONSES: Final = (
    st.dictionaries(
        st.sampled_from(["a", "b", "who", "k1"]) | st.text(max_size=4), ANSWERS, max_size=3
    )
    | JSON_VALUES
)
REQUEST_STATES: Final = (
    st.sampled_from(
        [
            VALID_STATE,
            VALID_STATE[:-2] + "AA",
            VALID_STATE.replace("v1.", "v2."),
            "v1.e30.AAAA",
            "v1..",
            "v1.!!!.???",
            "garbage",
            "",
        ]
    )
    | st.text(max_size=20)
    | JSON_VALUES
)
CAPS: Final = st.sampled_from([{}, TASKS_CAPS, ALL_CAPS, {"elicitation": {}}]) | st.dictionaries(
    st.sampled_from(["elicitation", "sampling", "roots", "extensions", "experimental"]),
    JSON_VALUES,
    max_size=3,
)
VERSIONS: Final = st.sampled_from([PROTOCOL_VERSION, "2025-11-25", ""]) | JSON_VALUES
META_KEYS: Final = [
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
]


def _meta_with(caps: Any, version: Any, dropped: list[str], extra: dict[str, Any]) -> Any:
    full = {**meta(caps), "io.modelcontextprotocol/protocolVersion": version, **extra}
    return {k: v for k, v in full.items() if k not in dropped}


METAS: Final = st.one_of(
    st.builds(meta, st.sampled_from([{}, TASKS_CAPS, ALL_CAPS])),
    st.builds(meta, CAPS),
    st.builds(
        _meta_with,
        CAPS,
        VERSIONS,
        st.lists(st.sampled_from(META_KEYS), max_size=2),
        st.dictionaries(
            st.sampled_from([*META_KEYS, "progressToken", "io.modelcontextprotocol/logLevel"])
            | st.text(max_size=6),
            JSON_VALUES,
            max_size=2,
        ),
    ),
    JSON_VALUES,
)
PARAM_FIELDS: Final = {
    "taskId": TASK_IDS,
    "name": NAMES,
    "arguments": ARGUMENTS,
    "inputResponses": INPUT_RESPONSES,
    "requestState": REQUEST_STATES,
    "cursor": JSON_VALUES,
    "task": JSON_VALUES,
    "uri": JSON_VALUES,
    "requestId": IDS,
    "reason": JSON_VALUES,
}
PARAMS: Final = st.one_of(
    st.fixed_dictionaries({"_meta": METAS}, optional=PARAM_FIELDS),
    st.fixed_dictionaries({}, optional={"_meta": METAS, **PARAM_FIELDS}),
    JSON_VALUES,
)

# Printable ASCII, as HTTP header values are; non-ASCII Mcp-Name has its own test below.
HEADER_TEXT: Final = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)
HEADER_VALUES: Final = st.one_of(
    st.none(),
    HEADER_TEXT,
    HEADER_TEXT.map("=?base64?{}?=".format),
    st.sampled_from(
        [
            PROTOCOL_VERSION,
            f" {PROTOCOL_VERSION} ",
            "tasks/get",
            "tools/call",
            "tsk-0001",
            "slow",
            "=?base64?c2xvdw==?=",
            "=?base64?dHNrLTAwMDE=?=",
            "=?base64?***?=",
            "=?base64??=",
            "=?base64?/w==?=",
            "=?base64?",
        ]
    ),
)


@st.composite
def _headers_for(draw: st.DrawFn, message: dict[str, Any]) -> HttpHeaders | None:
    """None (stdio), random headers, or the headers that match the body, maybe one off."""
    kind = draw(st.sampled_from(["none", "random", "matching", "matching"]))
    if kind == "none":
        return None
    if kind == "random":
        return HttpHeaders(
            protocol_version=draw(HEADER_VALUES),
            method=draw(HEADER_VALUES),
            name=draw(HEADER_VALUES),
        )
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta_value = params.get("_meta")
    version = (
        meta_value.get("io.modelcontextprotocol/protocolVersion")
        if isinstance(meta_value, dict)
        else None
    )
    named = params.get("taskId", params.get("name"))
    named = named if isinstance(named, str) else None
    if named is not None and draw(st.booleans()):  # the same name, base64-wrapped
        named = "=?base64?" + base64.b64encode(named.encode()).decode() + "?="
    fields: dict[str, Any] = {
        "protocol_version": version if isinstance(version, str) else None,
        "method": message.get("method") if isinstance(message.get("method"), str) else None,
        "name": named,
    }
    if draw(st.booleans()):
        off = draw(st.sampled_from(["protocol_version", "method", "name", "name"]))
        fields[off] = draw(HEADER_VALUES)
    return HttpHeaders(**fields)


GOOD_CAPS: Final = st.sampled_from([{}, TASKS_CAPS, ALL_CAPS, {**TASKS_CAPS, "elicitation": {}}])
SEEDED_TASKS: Final = st.sampled_from(["tsk-0001", "tsk-0002", "tsk-0003", "tsk-0004"])
ENVELOPE_FIELDS: Final = {
    "jsonrpc": ENVELOPE_VALUES,
    "id": IDS,
    "method": METHODS,
    "params": PARAMS,
    "result": JSON_VALUES,
    "error": JSON_VALUES,
}
META_FIELDS: Final = {
    META_KEYS[0]: VERSIONS,
    META_KEYS[1]: CAPS,
    META_KEYS[2]: JSON_VALUES,
    "progressToken": IDS,
    "io.modelcontextprotocol/logLevel": JSON_VALUES,
}


@st.composite
def _valid_request(draw: st.DrawFn) -> dict[str, Any]:
    """A request that passes every check of the core (for a known method)."""
    method = draw(st.sampled_from(KNOWN_METHODS))
    params: dict[str, Any] = {"_meta": meta(draw(GOOD_CAPS))}
    if method in ("tasks/get", "tasks/update", "tasks/cancel"):
        params["taskId"] = draw(SEEDED_TASKS)
    if method == "tasks/update":
        params["inputResponses"] = draw(
            st.dictionaries(
                st.sampled_from(["a", "b", "zz"]), st.sampled_from(GOOD_ANSWERS), max_size=3
            )
        )
    if method == "tools/call":
        params["name"] = draw(st.sampled_from(sorted(FUZZ_TOOLS)))
        if draw(st.booleans()):
            params["arguments"] = draw(
                st.fixed_dictionaries(
                    {}, optional={"name": st.text(max_size=6), "label": st.text(max_size=6)}
                )
            )
        if params["name"] == "ask_then_task" and draw(st.booleans()):
            params.update(
                arguments={},
                requestState=VALID_STATE,
                inputResponses={"who": draw(st.sampled_from(GOOD_ANSWERS[:2]))},
            )
    request_id = draw(st.integers(-(2**31), 2**31) | st.text(max_size=8) | HUGE_INTS)
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


@st.composite
def near_valid_messages(draw: st.DrawFn) -> tuple[dict[str, Any], HttpHeaders | None]:
    """A valid request, then up to three random edits: a key of the envelope, of params or
    of params._meta dropped, replaced (by a value typical of that key, or any JSON) or added."""
    return _edited(draw, draw(_valid_request()))


def _edited(draw: st.DrawFn, message: dict[str, Any]) -> tuple[dict[str, Any], HttpHeaders | None]:
    """`message` after up to three random edits (see `near_valid_messages`), and headers."""
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(["envelope", "params", "params", "meta"]))
        fields: dict[str, Any] = {
            "envelope": ENVELOPE_FIELDS,
            "params": {**PARAM_FIELDS, "_meta": METAS},
            "meta": META_FIELDS,
        }[where]
        target: Any = message
        if where != "envelope":
            target = message.get("params")
            if where == "meta" and isinstance(target, dict):
                target = target.get("_meta")
        if not isinstance(target, dict):
            continue
        edit = draw(st.sampled_from(["drop", "replace", "replace", "add"]))
        if edit == "drop" and target:
            del target[draw(st.sampled_from(sorted(target)))]
            continue
        key = draw(st.sampled_from(sorted(fields)) | st.text(max_size=6))
        if edit == "replace" and target:
            key = draw(st.sampled_from(sorted(target)))
        target[key] = draw(fields.get(key, JSON_VALUES) | JSON_VALUES)
    return message, draw(_headers_for(message))


# --- bytes and JSON values into receive ----------------------------------------------------

VALID_BODY: Final = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "slow", "arguments": {"label": "é"}, "_meta": meta(ALL_CAPS)},
    }
).encode()


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    """A valid request's bytes with a few random cuts, insertions and replacements."""
    data = bytearray(VALID_BODY)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["cut", "insert", "replace", "truncate"]))
        if kind == "truncate":
            del data[at:]
        elif kind == "cut":
            del data[at : at + draw(st.integers(1, 8))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif at < len(data):
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


@settings(FUZZ, max_examples=2000)
@given(
    data=st.binary(max_size=300)
    | _mutated()
    | st.sampled_from(
        [
            b"",
            b" ",
            b"\xef\xbb\xbf{}",
            b"{}",
            b"[]",
            b"null",
            b"\x00",
            b'{"jsonrpc":"2.0"',
            b'"\xff"',
            b"1e400",
            b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
        ]
    )
)
def test_arbitrary_bytes_get_a_jsonrpc_reply_or_none(data: bytes) -> None:
    h = _seeded()
    _send(h, _loads(data), data)


@settings(FUZZ, max_examples=1000)
@given(value=JSON_VALUES | ENVELOPES, ascii_only=st.booleans())
def test_arbitrary_json_values_get_a_jsonrpc_reply_or_none(value: Any, ascii_only: bool) -> None:
    h = _seeded()
    _send(h, value, json.dumps(value, ensure_ascii=ascii_only).encode())


@settings(FUZZ, max_examples=1000)
@given(message=near_valid_messages(), ascii_only=st.booleans())
def test_near_valid_requests_get_a_jsonrpc_reply_or_none(
    message: tuple[dict[str, Any], HttpHeaders | None],
    ascii_only: bool,
) -> None:
    value, headers = message
    h = _seeded()
    _send(h, value, json.dumps(value, ensure_ascii=ascii_only).encode(), headers)


def test_the_near_valid_generator_reaches_deep_into_the_core() -> None:
    """Requests of the shapes the near-valid generator starts from pass every check."""
    h = _seeded()
    for params, method in [
        ({"taskId": "tsk-0002", "inputResponses": {"a": GOOD_ANSWERS[0]}}, "tasks/update"),
        (
            {
                "name": "ask_then_task",
                "arguments": {},
                "requestState": VALID_STATE,
                "inputResponses": {"who": GOOD_ANSWERS[0]},
            },
            "tools/call",
        ),
        ({"taskId": "tsk-0001"}, "tasks/cancel"),
    ]:
        value = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {**params, "_meta": meta(ALL_CAPS)},
        }
        reply = _send(h, value, json.dumps(value).encode())
        assert reply is not None and "result" in json.loads(reply.body), reply
    assert h.record("tsk-0001").status is TaskStatus.CANCELLED
    assert set(h.record("tsk-0002").input_requests or {}) == {"b"}
    assert "tsk-0005" in h.started  # the MRTR retry with the sealed state became a task


# --- everything at once, over tools, tasks, prompts, resources and completion ---------------

PROMPT_NAMES: Final = ("review", "hello", "ask", "broken", "nope")
RESOURCE_URIS: Final = (
    "file:///readme.md",
    "file:///logs/2026-08-01.txt",
    "file:///logs/a%20b.txt",
    "file:///logs/.txt",
    "file:///secret",
    "file:///gone",
    "file:///nope",
)
COMPLETION_REFS: Final = (
    {"type": "ref/prompt", "name": "review"},
    {"type": "ref/resource", "uri": LOGS.uri_template},
    {"type": "ref/prompt", "name": "nope"},
    {"type": "ref/resource", "uri": "file:///x/{y}"},
)
LISTEN_FILTERS: Final = st.fixed_dictionaries(
    {},
    optional={
        "toolsListChanged": st.booleans(),
        "promptsListChanged": st.booleans(),
        "resourcesListChanged": st.booleans(),
        "resourceSubscriptions": st.lists(st.sampled_from(RESOURCE_URIS), max_size=3),
        "taskIds": st.lists(SEEDED_TASKS | st.text(max_size=4), max_size=3),
    },
)


@st.composite
def _valid_catalog_request(draw: st.DrawFn) -> dict[str, Any]:
    """A request for prompts, resources, completion or a listen stream, of the shapes the
    catalog harness accepts (or refuses only for what it names: an unknown prompt, ...)."""
    method = draw(st.sampled_from(CATALOG_METHODS))
    params: dict[str, Any] = {"_meta": meta(draw(GOOD_CAPS))}
    answers = st.fixed_dictionaries({"who": st.sampled_from(GOOD_ANSWERS[:2])})
    if method.endswith("/list") and draw(st.booleans()):
        params["cursor"] = draw(st.text(max_size=6))
    elif method == "prompts/get":
        params["name"] = draw(st.sampled_from(PROMPT_NAMES))
        params.update(
            draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "arguments": st.dictionaries(
                            st.sampled_from(["code", "language", "style", "x"]),
                            st.text(max_size=6),
                            max_size=3,
                        ),
                        "inputResponses": answers,
                    },
                )
            )
        )
    elif method == "resources/read":
        params["uri"] = draw(st.sampled_from(RESOURCE_URIS))
        params.update(draw(st.fixed_dictionaries({}, optional={"inputResponses": answers})))
    elif method == "completion/complete":
        params["ref"] = draw(st.sampled_from(COMPLETION_REFS))
        params["argument"] = {
            "name": draw(st.sampled_from(["code", "language", "day", "x"])),
            "value": draw(st.text(max_size=6)),
        }
        if draw(st.booleans()):
            params["context"] = {
                "arguments": draw(
                    st.dictionaries(
                        st.sampled_from(["code", "language", "day"]),
                        st.text(max_size=4),
                        max_size=2,
                    )
                )
            }
    elif method == "subscriptions/listen":
        params["notifications"] = draw(LISTEN_FILTERS)
    request_id = draw(st.integers(-(2**31), 2**31) | st.text(max_size=8) | HUGE_INTS)
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


@st.composite
def _catalog_messages(draw: st.DrawFn) -> tuple[dict[str, Any], HttpHeaders | None]:
    return _edited(draw, draw(_valid_catalog_request()))


def _from_bytes(data: bytes) -> tuple[Any, bytes, HttpHeaders | None]:
    return _loads(data), data, None


def _from_value(value: Any, ascii_only: bool) -> tuple[Any, bytes, HttpHeaders | None]:
    return value, json.dumps(value, ensure_ascii=ascii_only).encode(), None


def _from_message(
    message: tuple[dict[str, Any], HttpHeaders | None], ascii_only: bool
) -> tuple[Any, bytes, HttpHeaders | None]:
    value, headers = message
    return value, json.dumps(value, ensure_ascii=ascii_only).encode(), headers


MIXED_INPUTS: Final = st.one_of(
    (st.binary(max_size=300) | _mutated()).map(_from_bytes),
    st.builds(_from_value, JSON_VALUES | ENVELOPES, st.booleans()),
    st.builds(_from_message, near_valid_messages(), st.booleans()),
    st.builds(_from_message, _catalog_messages(), st.booleans()),
)


@settings(FUZZ, max_examples=6_000)
@given(message=MIXED_INPUTS)
def test_mixed_inputs_over_tools_tasks_and_the_catalog(
    message: tuple[Any, bytes, HttpHeaders | None],
) -> None:
    """The bulk of the fuzzing in CI (with the three tests above, 10,000 examples through
    decode and handle): a message of any kind, to a core that has tools, tasks, prompts,
    resources, templates and completions."""
    value, data, headers = message
    h = _seeded(catalog=True)
    _send(h, value, data, headers)


def test_the_catalog_generator_reaches_deep_into_the_core() -> None:
    """Requests of the shapes the catalog generator starts from get results."""
    h = _seeded(catalog=True)
    cases: list[tuple[str, dict[str, Any]]] = [
        ("prompts/get", {"name": "review", "arguments": {"code": "x", "language": "py"}}),
        ("resources/read", {"uri": "file:///logs/2026-08-01.txt"}),
        (
            "completion/complete",
            {"ref": COMPLETION_REFS[0], "argument": {"name": "code", "value": "x"}},
        ),
        ("prompts/list", {}),
        ("resources/list", {}),
        ("resources/templates/list", {}),
    ]
    for method, params in cases:
        value = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {**params, "_meta": meta(ALL_CAPS)},
        }
        reply = _send(h, value, json.dumps(value).encode())
        assert reply is not None and "result" in json.loads(reply.body), (method, reply)
    value = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": meta(ALL_CAPS)},
    }
    assert _send(h, value, json.dumps(value).encode()) is None
    assert len(h.subscriptions) == 1


# --- random handler outcomes ---------------------------------------------------------------

TEXT: Final = st.text(max_size=12)
CONTENT: Final = st.one_of(
    st.builds(TextContent, text=TEXT),
    st.builds(ImageContent, data=TEXT, mime_type=TEXT),
    st.builds(AudioContent, data=TEXT, mime_type=TEXT),
    st.builds(
        EmbeddedResource,
        resource=st.builds(ResourceContents, uri=TEXT, text=TEXT)
        | st.builds(ResourceContents, uri=TEXT, blob=TEXT),
    ),
    st.builds(ResourceLink, uri=TEXT, name=TEXT),
)
RESULT_METAS: Final = (
    st.just(None)
    | JSON_OBJECTS
    | st.builds(lambda m, t: {**m, RELATED_TASK: {"taskId": t}}, JSON_OBJECTS, TEXT)
)
CALL_RESULTS: Final = st.builds(
    CallToolResult,
    content=st.lists(CONTENT, max_size=3),
    structured_content=st.just(None) | JSON_OBJECTS,
    is_error=st.booleans(),
    meta=RESULT_METAS,
)
# -32020..-32022 are left out: each has its own schema, with `data` a handler may lack.
ERROR_OBJECTS: Final = st.builds(
    ErrorObject,
    code=(st.integers() | HUGE_INTS).filter(lambda c: c not in (-32020, -32021, -32022)),
    message=TEXT,
    data=st.just(UNSET) | JSON_VALUES,
)
FORM_SCHEMA: Final = {"type": "object", "properties": {"n": {"type": "string"}}}
INPUT_REQUESTS: Final = st.one_of(
    st.builds(
        lambda m, mode: ElicitRequest(
            params=ElicitParams(message=m, mode=mode, requested_schema=FORM_SCHEMA)
        ),
        TEXT,
        st.sampled_from([None, "form"]),
    ),
    st.builds(
        lambda m, url: ElicitRequest(params=ElicitParams(message=m, mode="url", url=url)),
        TEXT,
        TEXT,
    ),
    st.builds(
        lambda text, n: CreateMessageRequest(
            params=CreateMessageParams(
                messages=[SamplingMessage(role="user", content={"type": "text", "text": text})],
                max_tokens=n,
            )
        ),
        TEXT,
        st.integers(0, 2**31),
    ),
    st.just(ListRootsRequest()),
)
INPUT_REQUIRED: Final = st.builds(
    InputRequired,
    requests=st.dictionaries(st.sampled_from(["a", "b", "c"]) | TEXT, INPUT_REQUESTS, max_size=3),
    state=st.none() | TEXT,
    status_message=st.none() | TEXT,
)
OUTCOMES: Final = CALL_RESULTS | ERROR_OBJECTS | INPUT_REQUIRED | st.just(START_TASK)
TASK_CAPS: Final = st.sampled_from(
    [
        ALL_CAPS,
        TASKS_CAPS,
        {**TASKS_CAPS, "elicitation": {}},
        {**TASKS_CAPS, "sampling": {}, "roots": {}},
    ]
)


def _statuses_after(outcome: ToolOutcome) -> set[TaskStatus]:
    if isinstance(outcome, CallToolResult):
        return {TaskStatus.COMPLETED}
    if isinstance(outcome, InputRequired):
        return {TaskStatus.INPUT_REQUIRED, TaskStatus.FAILED}
    return {TaskStatus.FAILED}


@FUZZ
@given(
    caps=TASK_CAPS,
    steps=st.lists(
        st.tuples(OUTCOMES, st.integers(0, 3000), st.booleans()), min_size=1, max_size=5
    ),
)
def test_random_outcomes_fed_back_through_task_returned(
    caps: dict[str, Any],
    steps: list[tuple[ToolOutcome, int, bool]],
) -> None:
    h = Harness(tools=FUZZ_TOOLS, task_options=TaskOptions(ttl_ms=8000))
    task_id: str = h.call("slow", {}, caps=caps)["result"]["taskId"]
    for outcome, ms, answer in steps:
        h.now += ms / 1000
        record = h.store.get(task_id)
        if record is None:
            break  # expired and removed
        step = h.core.task_returned(record, outcome, h.now)  # must never raise
        assert step.reply is None
        h.perform(step)
        after = h.store.get(task_id)
        if record.status.is_terminal:
            assert step.effects == () and after is record
        elif record.is_expired(h.now):
            assert after is None and h.cancelled[-1] == task_id
            break
        else:
            save, *rest = step.effects
            assert isinstance(save, SaveTask) and after is save.record
            assert after.version == record.version + 1
            assert after.status in _statuses_after(outcome)
            # A handler that returned its questions runs no more: its lease goes.
            waiting = not after.status.is_terminal
            assert rest == ([ReleaseLease(task_id=task_id)] if waiting else [])
        reply = h.get(task_id)
        if "result" in reply and reply["result"]["status"] == "input_required" and answer:
            requests = reply["result"]["inputRequests"]
            h.update(task_id, {k: ANSWER_FOR[r["method"]] for k, r in requests.items()})
    for exchange in h.exchanges:
        if exchange.reply is not None:
            check_reply(exchange.method, exchange.reply)


@FUZZ
@given(
    caps=TASK_CAPS | st.sampled_from([{}, {"elicitation": {"url": {}}}]),
    outcome=OUTCOMES,
    tool=st.sampled_from(["greet", "slow", "required_job", "needs_roots"]),
)
def test_random_outcomes_fed_back_through_tool_returned(
    caps: dict[str, Any],
    outcome: ToolOutcome,
    tool: str,
) -> None:
    h = Harness(tools=FUZZ_TOOLS)
    message = {
        "jsonrpc": "2.0",
        "id": "c-1",
        "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": meta(caps)},
    }
    run = h.core.receive(json.dumps(message).encode(), h.now)
    if isinstance(run, Step):  # required_job: refused up front, or its task created at once
        assert run.reply is not None
        _check(message, run.reply)
        return
    assert isinstance(run, RunTool)
    reply = h.perform(h.core.tool_returned(run.call, outcome, h.now))
    _check(message, reply)


# --- found by the fuzzer --------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        {"method": "tools/list"},
        {"jsonrpc": "1.0", "method": "notifications/initialized"},
        {"jsonrpc": 2.0, "method": "tools/call", "params": {}},
    ],
)
def test_invalid_message_without_id_gets_an_error_reply(
    make_harness: type[Harness],
    message: dict[str, Any],
) -> None:
    h = make_harness(tools=TOOLS)
    exchange = h.send(json.dumps(message).encode())
    assert exchange.reply is not None, "no reply: the invalid message was taken for a notification"
    assert json.loads(exchange.reply)["error"]["code"] == -32600


@pytest.mark.parametrize("name", ["=?base64?é?=", "=?base64?dC0x\u00ff?=", "=?base64?\u2603?="])
def test_non_ascii_base64_name_header_is_header_mismatch(
    make_harness: type[Harness],
    name: str,
) -> None:
    h = make_harness(tools=TOOLS)
    headers = HttpHeaders(protocol_version=PROTOCOL_VERSION, method="tasks/get", name=name)
    reply = h.request("tasks/get", {"taskId": "t-1"}, headers=headers)
    assert reply["error"]["code"] == -32020 and "base64" in reply["error"]["message"]


_RAW_0X80: Final = "\udc80"  # stands for one 0x80 byte (invalid UTF-8) in the body


def _with_invalid_utf8(message: dict[str, Any]) -> bytes:
    text = json.dumps(message).replace("\\udc80", _RAW_0X80)
    data = text.encode("utf-8", "surrogateescape")
    assert b"\x80" in data and not _is_utf8(data)
    return data


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (
            "_meta",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/list",
                "params": {
                    "_meta": meta(
                        ALL_CAPS,
                        **{
                            "io.modelcontextprotocol/clientInfo": {
                                "name": _RAW_0X80,
                                "version": "1",
                            }
                        },
                    )
                },
            },
        ),
        (
            "taskId",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tasks/get",
                "params": {"taskId": _RAW_0X80, "_meta": meta(ALL_CAPS)},
            },
        ),
        (
            "answer",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tasks/update",
                "params": {
                    "taskId": "tsk-0002",
                    "inputResponses": {"a": {"action": "accept", "content": {"name": _RAW_0X80}}},
                    "_meta": meta(ALL_CAPS),
                },
            },
        ),
        (
            "arguments",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "ask_then_task",
                    "arguments": {"x": _RAW_0X80},
                    "requestState": VALID_STATE,
                    "_meta": meta(ALL_CAPS),
                },
            },
        ),
        (
            "notification",
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 1, "reason": _RAW_0X80},
            },
        ),
    ],
)
def test_invalid_utf8_inside_params_gets_a_reply(where: str, message: dict[str, Any]) -> None:
    h = _seeded()
    reply = h.perform(h.core.receive(_with_invalid_utf8(message), h.now))
    if "id" not in message:  # a notification: no reply, or -32700 for a body that is no JSON
        assert reply is None or json.loads(reply.body)["error"]["code"] == -32700
        return
    assert reply is not None
    error = json.loads(reply.body)["error"]
    assert error["code"] in (-32700, -32602), where
