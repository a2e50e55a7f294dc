"""Hostile input, table-driven: each row of `CASES` is one thing a broken or malicious client
sends, with the HTTP status, the JSON-RPC error code and the words its answer must carry.

Every row runs on Streamable HTTP (raw bytes on a 127.0.0.1 socket, read back with the h11
client of test_http), served on trio and on asyncio (`http-asyncio`), and, when it is
about JSON rather than HTTP, on stdio too (`serve_stdio` over memory streams). Each runs
against a fresh `hostile_server()`; after it, a plain request must still be answered (on
the same connection too, unless the answer said `Connection: close`, and then the server
must close it), and nothing may be logged as an error. Every JSON-RPC message that comes
back is checked against the schemas. Rows that aim at a task or an input round check
afterwards that it still works.

Besides the table: nesting swept across the depth limit, and clients that
leave in the middle of an SSE answer (a tool's progress stream, a `subscriptions/listen`).

Rows that show a library bug are kept, marked `xfail(strict=True)` with the reason.
Timeouts are configured short for the rows that trickle; waits are on answers, events and
end-of-file under `fail_after`, never a sleep that hopes.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import h11
import msgspec
import pytest
import trio
from runtime.helpers import check_message, check_notification
from schema_check import check_reply
from test_http import HttpClient, rpc, serving, serving_on_asyncio
from test_stdio import Peer, stdio_session

from mcp_tasks import (
    START_TASK,
    TASKS_EXTENSION,
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    InputRequired,
    Server,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.core._depth import MAX_DEPTH, nesting_depth

VERSION = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
TASKS_CAPS: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}}
META: dict[str, Any] = {PV: VERSION, CAPS: TASKS_CAPS}
MEGABYTE = 1_000_000
DEEP = 100_000
"""Far deeper than any recursion limit."""
SMALL_BODY = 64 * 1024
"""The body (HTTP) and line (stdio) limit of the rows about oversize messages."""
SLOW_SECONDS = 0.3
SLOW: dict[str, Any] = {
    "header_timeout_seconds": SLOW_SECONDS,
    "body_timeout_seconds": SLOW_SECONDS,
}
"""The timeouts of the rows that trickle (the default ones would make the test slow)."""
TRICKLE_SECONDS = 0.05
"""A slow sender's pause between two bytes."""
ANSWER_SECONDS = 5
Headers = Sequence[tuple[str, str | bytes]]


# --- the server under attack ----------------------------------------------------------------


class Typed(msgspec.Struct):
    count: int = 0
    ratio: float = 0.0
    flag: bool = False
    tags: list[str] = []
    label: str = ""


class Greeting(msgspec.Struct):
    name: str = "world"


@dataclass
class Probe:
    cancelled: trio.Event = field(default_factory=trio.Event)
    release: trio.Event = field(default_factory=trio.Event)


REGION_SCHEMA = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
}


def _ask(key: str) -> InputRequired:
    schema = {"type": "object", "properties": {key: {"type": "string"}}, "required": [key]}
    params = ElicitParams(message=f"Your {key}?", requested_schema=schema)
    return InputRequired(requests={key: ElicitRequest(params=params)})


def hostile_server() -> tuple[Server, Probe]:
    """A tool for each kind of row: typed arguments, input rounds, a task waiting for an
    answer, a tool that streams progress until released, a mirrored header."""
    server = Server("hostile", "1.0", shutdown_grace_seconds=0.1)
    probe = Probe()

    @server.tool()
    async def greet(ctx: ToolContext, args: Greeting) -> ToolOutcome:
        return CallToolResult.text(f"Hello, {args.name}!")

    @server.tool()
    async def typed(ctx: ToolContext, args: Typed) -> ToolOutcome:
        summary = f"count={args.count} ratio={args.ratio} flag={args.flag}"
        return CallToolResult.text(f"{summary} tags={len(args.tags)} label={len(args.label)}")

    @server.tool()
    async def anything(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        return CallToolResult.text(f"keys={len(args)}")

    @server.tool(name="grüße")
    async def gruesse(ctx: ToolContext) -> ToolOutcome:
        return CallToolResult.text("Grüße!")

    @server.tool(input_schema=REGION_SCHEMA)
    async def regional(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        return CallToolResult.text(f"region={args.get('region')}")

    @server.tool()
    async def ask_name(ctx: ToolContext) -> ToolOutcome:
        answer = ctx.elicit_response("name")
        if answer is None:
            return _ask("name")
        return CallToolResult.text(f"Hello, {(answer.content or {}).get('name')}!")

    @server.tool()
    async def ask_colour(ctx: ToolContext) -> ToolOutcome:
        answer = ctx.elicit_response("colour")
        if answer is None:
            return _ask("colour")
        return CallToolResult.text(f"You like {(answer.content or {}).get('colour')}.")

    @server.tool(task_support="required")
    async def confirm(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        answer = ctx.elicit_response("confirm")
        if answer is None:
            return _ask("confirm")
        return CallToolResult.text(f"confirm: {answer.action}")

    @server.tool(task_support="required")
    async def quick_job(ctx: ToolContext) -> ToolOutcome:
        return CallToolResult.text("quick") if ctx.in_task else START_TASK

    @server.tool(task_support="required")
    async def gated_job(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await probe.release.wait()
        return CallToolResult.text("released")

    @server.tool()
    async def gated(ctx: ToolContext) -> ToolOutcome:
        await ctx.report_progress(1, 2, "waiting for the gate")
        try:
            await probe.release.wait()
        except trio.Cancelled:
            probe.cancelled.set()
            raise
        return CallToolResult.text("released")

    return server, probe


# --- building requests ----------------------------------------------------------------------


def message(
    method: Any,
    params: Any = None,
    /,
    *,
    request_id: Any = 1,
    meta: Any = META,
    **envelope: Any,
) -> bytes:
    """A JSON-RPC request. `meta=None` leaves `_meta` out; `...` (Ellipsis) as `params` or
    `request_id` leaves that member out; `envelope` adds or replaces top-level members
    (`jsonrpc=...` removes one)."""
    full: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if request_id is Ellipsis:
        del full["id"]
    if params is not Ellipsis:
        if isinstance(params, dict) or params is None:
            params = dict(params or {})
            if meta is not None:
                params["_meta"] = meta
        full["params"] = params
    for name, value in envelope.items():
        if value is Ellipsis:
            full.pop(name, None)
        else:
            full[name] = value
    return json.dumps(full, ensure_ascii=False).encode()


def call(tool: str, arguments: Any = None, **params: Any) -> bytes:
    return message("tools/call", {"name": tool, "arguments": arguments or {}, **params})


def with_meta(**changes: Any) -> dict[str, Any]:
    """`_meta` with keys added, changed, or removed (a value of Ellipsis)."""
    meta = {**META, **changes}
    return {key: value for key, value in meta.items() if value is not Ellipsis}


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def spliced(body: bytes, marker: str, raw: bytes) -> bytes:
    """`body` with the JSON string `"<marker>"` replaced by raw bytes (JSON that json.dumps
    would not write: 1e400, NaN, a deep nest)."""
    quoted = json.dumps(marker).encode()
    assert quoted in body, (marker, body[:200])
    return body.replace(quoted, raw)


def b64(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return "=?base64?" + base64.b64encode(data).decode() + "?="


def http_head(*lines: bytes, body: bytes = b"", length: int | None = None) -> bytes:
    """A raw POST to /mcp: these header lines, then `body`."""
    size = len(body) if length is None else length
    head = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1", *lines, b"Content-Length: %d" % size]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def json_head(body: bytes, *more: bytes, length: int | None = None) -> bytes:
    """A raw POST with every header a correct client sends for a `tools/list` body."""
    lines = [
        b"Content-Type: application/json",
        b"Accept: application/json, text/event-stream",
        b"MCP-Protocol-Version: " + VERSION.encode(),
        b"Mcp-Method: tools/list",
        *more,
    ]
    return http_head(*lines, body=body, length=length)


# --- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    """What the rows that need a server in some state get (built only when asked for)."""

    waiting_task: str = ""
    """A `confirm` task in input_required, its "confirm" question outstanding."""
    done_task: str = ""
    """A completed task."""
    state: str = ""
    """The requestState of an `ask_name` round (no arguments)."""
    foreign_state: str = ""
    """The requestState of the same round, sealed by another server (another key)."""


Body = bytes | Callable[[Prepared], bytes]
HeaderList = list[tuple[str, str | bytes]]
HeaderEdit = Callable[[HeaderList], HeaderList]


@dataclass(frozen=True)
class Json:
    """One JSON-RPC message (or what claims to be one). On HTTP, a POST with the headers a
    correct client sends for this body (unless `headers` edits them); on stdio, one line."""

    body: Body
    headers: HeaderEdit | None = None


@dataclass(frozen=True)
class Raw:
    """Bytes written to the socket as they are (HTTP only)."""

    data: bytes


@dataclass(frozen=True)
class Trickle:
    """`data`: the first `at_once` bytes at once, then the rest a byte at a time, with a
    pause of TRICKLE_SECONDS before each (HTTP only)."""

    data: bytes
    at_once: int


@dataclass(frozen=True)
class HangUp:
    """`data`, then end-of-file from the client: it leaves mid-request (HTTP only)."""

    data: bytes


Send = Json | Raw | Trickle | HangUp


@dataclass(frozen=True)
class Expect:
    status: int | None
    """HTTP status; None: the server closes the connection without a word. On stdio only
    202 counts: it means no reply at all."""
    code: int | None = None
    """JSON-RPC error code; None: a result (200), or no message at all (202)."""
    words: tuple[str, ...] = ()
    """Each is in the error message, or in the text of the result."""
    reply_id: Any = 1
    """The id the reply carries; None: no id (the request's id could not be trusted)."""
    closes: bool | None = None
    """Whether the answer says `Connection: close` (None: either way)."""
    short_message: bool = False
    """The error message is short (at most 1 KiB): it does not echo a huge input back."""
    then: Callable[[Wire, Prepared], Awaitable[None]] | None = None
    """A check after the answer, e.g. that a task the row tried to break still works."""


@dataclass(frozen=True)
class Case:
    id: str
    send: Send
    http: Expect
    stdio: Expect | None = None
    """On stdio (Json rows only): the expectation there; None: not run on stdio."""
    needs: frozenset[str] = frozenset()
    """Which fields of `Prepared` to build first."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """`HttpConfig` settings; a row that sets `max_body_bytes` runs stdio with
    `max_line_bytes=SMALL_BODY`."""
    xfail: Mapping[str, str] = field(default_factory=dict)
    """Transport -> why the row fails there (a library bug)."""


def both(
    case_id: str,
    body: Body,
    status: int,
    code: int | None = None,
    *words: str,
    needs: Sequence[str] = (),
    reply_id: Any = 1,
    then: Callable[[Wire, Prepared], Awaitable[None]] | None = None,
    xfail: str | None = None,
) -> Case:
    """A JSON row with the same answer on HTTP and on stdio."""
    expect = Expect(status, code, words, reply_id=reply_id, then=then)
    broken = {} if xfail is None else {"http": xfail, "stdio": xfail}
    return Case(case_id, Json(body), expect, expect, needs=frozenset(needs), xfail=broken)


def http_only(
    case_id: str,
    send: Send | Body,
    status: int | None,
    code: int | None = None,
    *words: str,
    headers: HeaderEdit | None = None,
    config: Mapping[str, Any] | None = None,
    needs: Sequence[str] = (),
    reply_id: Any = 1,
    closes: bool | None = None,
    xfail: str | None = None,
) -> Case:
    """A row about HTTP itself: stdio has nothing like it."""
    if not isinstance(send, Json | Raw | Trickle | HangUp):
        send = Json(send, headers)
    expect = Expect(status, code, words, reply_id=reply_id, closes=closes)
    broken = {} if xfail is None else {"http": xfail}
    return Case(
        case_id, send, expect, None, needs=frozenset(needs), config=config or {}, xfail=broken
    )


def refusal(
    case_id: str,
    send: Send | Body,
    status: int,
    *words: str,
    headers: HeaderEdit | None = None,
    config: Mapping[str, Any] | None = None,
    closes: bool | None = None,
    xfail: str | None = None,
) -> Case:
    """What HTTP refuses by itself: -32600 without an id, whose message names the problem."""
    return http_only(
        case_id,
        send,
        status,
        INVALID_REQUEST,
        *words,
        headers=headers,
        config=config,
        reply_id=None,
        closes=closes,
        xfail=xfail,
    )


def header(name: str, value: str | bytes | None) -> HeaderEdit:
    """Set header `name` to `value` (None: leave it out)."""

    def edit(headers: HeaderList) -> HeaderList:
        kept = [(n, v) for n, v in headers if n.lower() != name.lower()]
        return kept if value is None else [*kept, (name, value)]

    return edit


def extra_header(name: str, value: str | bytes) -> HeaderEdit:
    """One more `name` line, next to any already there."""
    return lambda headers: [*headers, (name, value)]


# --- checks run after a row -----------------------------------------------------------------


async def task_still_answerable(wire: Wire, prepared: Prepared) -> None:
    """The task a bad tasks/update aimed at still waits for its answer, and takes it."""
    task = await result(wire, "tasks/get", {"taskId": prepared.waiting_task})
    assert task["status"] == "input_required" and list(task["inputRequests"]) == ["confirm"]
    update = {"taskId": prepared.waiting_task, "inputResponses": {"confirm": CONFIRM_ANSWER}}
    assert (await result(wire, "tasks/update", update))["resultType"] == "complete"
    await task_completes(wire, prepared)


async def task_completes(wire: Wire, prepared: Prepared) -> None:
    """The good answer was taken (and whatever came with it ignored)."""
    task = await wait_for_status(wire, prepared.waiting_task, "completed")
    assert task["result"]["content"][0]["text"] == "confirm: accept"


async def done_task_unchanged(wire: Wire, prepared: Prepared) -> None:
    task = await result(wire, "tasks/get", {"taskId": prepared.done_task})
    assert task["status"] == "completed" and task["result"]["content"][0]["text"] == "quick"


async def state_still_good(wire: Wire, prepared: Prepared) -> None:
    """The round whose requestState a row misused still completes with its own."""
    params = {"name": "ask_name", "arguments": {}, "requestState": prepared.state}
    answered = await result(wire, "tools/call", {**params, "inputResponses": ADA})
    assert answered["content"][0]["text"] == "Hello, Ada!"


# --- the rows -------------------------------------------------------------------------------

PARSE = -32700
INVALID_REQUEST = -32600
NOT_FOUND = -32601
INVALID_PARAMS = -32602
MISMATCH = -32020
NO_CAPABILITY = -32021
BAD_VERSION = -32022

LIST = message("tools/list")
GREET = call("greet", {"name": "x"})
REGION = call("regional", {"region": "eu"})
NO_ID: dict[str, Any] = {"reply_id": None}
ID_WORDS = "id must be a string or an integer"
TASK = ("waiting_task",)
STATE = ("state",)
CONFIRM_ANSWER = {"action": "accept", "content": {"confirm": "yes"}}
ADA = {"name": {"action": "accept", "content": {"name": "Ada"}}}
CHUNKED = b"Transfer-Encoding: chunked"


def listing(**meta: Any) -> bytes:
    """tools/list with `_meta` changed (see `with_meta`)."""
    return message("tools/list", meta=with_meta(**meta))


def update(responses: Any) -> Callable[[Prepared], bytes]:
    """tasks/update of the waiting task with these `inputResponses`."""
    params = {"inputResponses": responses}
    return lambda p: message("tasks/update", {"taskId": p.waiting_task, **params})


def round_two(tool: str, state: Callable[[Prepared], str], arguments: Any = None) -> Body:
    """A second round of `tool`, answering the name question, with this `requestState`."""
    params = {"name": tool, "arguments": arguments or {}, "inputResponses": ADA}
    return lambda p: message("tools/call", {**params, "requestState": state(p)})


def tampered(p: Prepared) -> str:
    """The round's requestState with one character of its sealed part changed."""
    middle = len(p.state) // 2
    return p.state[:middle] + ("A" if p.state[middle] != "A" else "B") + p.state[middle + 1 :]


def chunked_head(*more: bytes) -> bytes:
    """A head for a chunked body (no Content-Length), with every header a correct client
    sends for a `tools/list` body."""
    return json_head(b"", CHUNKED, *more).replace(b"Content-Length: 0\r\n", b"")


JSON_CASES = [
    # malformed JSON
    both("not-json", b"{not json", 400, PARSE, "Parse error", **NO_ID),
    both("truncated-json", LIST[:-7], 400, PARSE, "Parse error", **NO_ID),
    both("trailing-garbage", LIST + b" {}", 400, PARSE, "trailing", **NO_ID),
    both("not-utf8", LIST.replace(b"list", b"l\xffst"), 400, PARSE, "UTF-8", **NO_ID),
    both("utf8-bom", b"\xef\xbb\xbf" + LIST, 400, PARSE, "Parse error", **NO_ID),
    both("nan", spliced(call("typed", {"ratio": "@"}), "@", b"NaN"), 400, PARSE, **NO_ID),
    both("nul-byte", LIST + b"\x00", 400, PARSE, "Parse error", **NO_ID),
    # not one JSON object: batches and bare values
    both("batch", b"[" + LIST + b"," + GREET + b"]", 400, INVALID_REQUEST, "object", **NO_ID),
    both("batch-of-one", b"[" + LIST + b"]", 400, INVALID_REQUEST, "object", **NO_ID),
    both("empty-batch", b"[]", 400, INVALID_REQUEST, "JSON object", **NO_ID),
    both("json-null", b"null", 400, INVALID_REQUEST, "JSON object", **NO_ID),
    both("json-string", b'"tools/list"', 400, INVALID_REQUEST, "JSON object", **NO_ID),
    both("json-number", b"42", 400, INVALID_REQUEST, "JSON object", **NO_ID),
    # the envelope, wrongly typed
    both("jsonrpc-1.0", message("tools/list", jsonrpc="1.0"), 400, INVALID_REQUEST, '"2.0"'),
    both("jsonrpc-missing", message("tools/list", jsonrpc=...), 400, INVALID_REQUEST, '"2.0"'),
    both("jsonrpc-number", message("tools/list", jsonrpc=2.0), 400, INVALID_REQUEST, '"2.0"'),
    both("method-missing", message("x", method=...), 400, INVALID_REQUEST, "method is missing"),
    both("method-number", message(7), 400, INVALID_REQUEST, "method must be a string"),
    both("method-null", message(None), 400, INVALID_REQUEST, "method must be a string"),
    both(
        "id-float", message("tools/list", request_id=1.5), 400, INVALID_REQUEST, ID_WORDS, **NO_ID
    ),
    both(
        "id-true", message("tools/list", request_id=True), 400, INVALID_REQUEST, ID_WORDS, **NO_ID
    ),
    both(
        "id-null", message("tools/list", request_id=None), 400, INVALID_REQUEST, ID_WORDS, **NO_ID
    ),
    both(
        "id-object", message("tools/list", request_id={}), 400, INVALID_REQUEST, ID_WORDS, **NO_ID
    ),
    both(
        "id-1e400",
        spliced(message("tools/list", request_id="@"), "@", b"1e400"),
        400,
        INVALID_REQUEST,
        ID_WORDS,
        **NO_ID,
    ),
    both("params-array", message("tools/list", [1, 2]), 400, INVALID_PARAMS, "`params`"),
    both("params-string", message("tools/list", "all"), 400, INVALID_PARAMS, "`params`"),
    both("params-null", message("tools/list", ..., params=None), 400, INVALID_PARAMS, "`params`"),
    # _meta: missing, wrongly typed, extra
    both("meta-missing", message("tools/list", meta=None), 400, INVALID_PARAMS, "_meta"),
    both("meta-string", message("tools/list", meta="2026"), 400, INVALID_PARAMS, "params._meta"),
    both("meta-without-version", listing(**{PV: ...}), 400, INVALID_PARAMS, PV),
    both("meta-without-capabilities", listing(**{CAPS: ...}), 400, INVALID_PARAMS, CAPS),
    both("meta-version-number", listing(**{PV: 20260728}), 400, INVALID_PARAMS, PV),
    both("meta-capabilities-array", listing(**{CAPS: ["tasks"]}), 400, INVALID_PARAMS, CAPS),
    both(
        "meta-extensions-array",
        listing(**{CAPS: {"extensions": [TASKS_EXTENSION]}}),
        400,
        INVALID_PARAMS,
        "clientCapabilities.extensions",
    ),
    both(
        "meta-elicitation-string",
        listing(**{CAPS: {"elicitation": "yes"}}),
        400,
        INVALID_PARAMS,
        "clientCapabilities.elicitation",
    ),
    both(
        "meta-progress-token-object",
        listing(progressToken={"t": 1}),
        400,
        INVALID_PARAMS,
        "progressToken",
    ),
    both(
        "meta-log-level-unknown",
        listing(**{"io.modelcontextprotocol/logLevel": "loud"}),
        400,
        INVALID_PARAMS,
        "logLevel",
    ),
    both(
        "meta-extra-keys",
        call("greet", {"name": "m"}, _meta=with_meta(**{"com.example/x": {"y": [1]}, "z": 1})),
        200,
        None,
        "Hello, m!",
    ),
    both("meta-unsupported-version", listing(**{PV: "1999-01-01"}), 400, BAD_VERSION, "1999"),
    both(
        "tasks-without-the-extension",
        lambda p: message("tasks/get", {"taskId": p.done_task}, meta=with_meta(**{CAPS: {}})),
        400,
        NO_CAPABILITY,
        TASKS_EXTENSION,
        needs=("done_task",),
    ),
    # wrong types in the params of each method
    both("call-name-number", message("tools/call", {"name": 7}), 400, INVALID_PARAMS, "name"),
    both("call-name-missing", message("tools/call", {}), 400, INVALID_PARAMS, "name"),
    both("call-unknown-tool", call("no_such_tool"), 400, INVALID_PARAMS, "Unknown tool"),
    both(
        "call-arguments-array",
        message("tools/call", {"name": "typed", "arguments": [1]}),
        400,
        INVALID_PARAMS,
        "arguments must be an object",
    ),
    both(
        "call-arguments-string",
        message("tools/call", {"name": "typed", "arguments": "count=1"}),
        400,
        INVALID_PARAMS,
        "arguments must be an object",
    ),
    both(
        "argument-string-for-int",
        call("typed", {"count": "3"}),
        400,
        INVALID_PARAMS,
        "'typed'",
        "arguments.count",
    ),
    both("argument-bool-for-int", call("typed", {"count": True}), 400, INVALID_PARAMS, "count"),
    both("argument-numbers-for-str", call("typed", {"tags": [1]}), 400, INVALID_PARAMS, "tags"),
    both("input-responses-array", call("ask_name", inputResponses=[1]), 400, INVALID_PARAMS),
    both("request-state-number", call("ask_name", requestState=5), 400, INVALID_PARAMS),
    both("get-task-id-array", message("tasks/get", {"taskId": ["t"]}), 400, INVALID_PARAMS),
    both("cancel-task-id-null", message("tasks/cancel", {"taskId": None}), 400, INVALID_PARAMS),
    both(
        "listen-without-notifications",
        message("subscriptions/listen", {}),
        400,
        INVALID_PARAMS,
        "notifications",
    ),
    both(
        "listen-notifications-array",
        message("subscriptions/listen", {"notifications": []}),
        400,
        INVALID_PARAMS,
        "params.notifications",
    ),
    both(
        "listen-to-10000-tasks",
        message("subscriptions/listen", {"notifications": {"taskIds": ["t"] * 10_000}}),
        400,
        INVALID_PARAMS,
        "at most",
    ),
    # absurd numbers
    both("id-2**64", message("tools/list", request_id=2**64), 200, reply_id=2**64),
    both(
        "id-below-int64", message("tools/list", request_id=-(2**63) - 1), 200, reply_id=-(2**63) - 1
    ),
    both("id-zero", message("tools/list", request_id=0), 200, reply_id=0),
    both("argument-10**30", call("typed", {"count": 10**30}), 200, None, f"count={10**30}"),
    both(
        "argument-1e400",
        spliced(call("typed", {"ratio": "@"}), "@", b"1e400"),
        400,
        INVALID_PARAMS,
        "out of range",
        "arguments.ratio",
    ),
    both("argument-float-for-int", call("typed", {"count": 1.5}), 400, INVALID_PARAMS, "count"),
    both(
        "progress-token-1e400",
        spliced(listing(progressToken="@"), "@", b"1e400"),
        400,
        INVALID_PARAMS,
        "progressToken",
    ),
    # deep nesting
    both("deep-array", nested(DEEP), 400, INVALID_REQUEST, "JSON object", **NO_ID),
    both(
        "deep-arguments",
        spliced(call("anything", {"x": "@"}), "@", nested(DEEP)),
        400,
        INVALID_REQUEST,
        "nested",
        **NO_ID,
    ),
    both(
        "deep-meta",
        spliced(listing(x="@"), "@", nested(DEEP)),
        400,
        INVALID_REQUEST,
        "nested",
        **NO_ID,
    ),
    both(
        "deep-id",
        spliced(message("tools/list", request_id="@"), "@", nested(DEEP)),
        400,
        INVALID_REQUEST,
        "nested",
        **NO_ID,
    ),
    both(
        "deep-answer",
        lambda p: spliced(update({"confirm": "@"})(p), "@", nested(DEEP)),
        400,
        INVALID_REQUEST,
        "nested",
        **NO_ID,
        needs=TASK,
        then=task_still_answerable,
    ),
    both(
        "nesting-of-300-is-fine",
        spliced(call("anything", {"x": "@"}), "@", nested(300)),
        200,
        None,
        "keys=1",
    ),
    # huge strings, and objects of many keys
    both("huge-argument", call("typed", {"label": "x" * MEGABYTE}), 200, None, "label=1000000"),
    both("huge-id", message("tools/list", request_id="i" * MEGABYTE), 200, reply_id="i" * MEGABYTE),
    both(
        "huge-meta-value",
        call("greet", {"name": "m"}, _meta=with_meta(**{"com.example/blob": "b" * MEGABYTE})),
        200,
        None,
        "Hello, m!",
    ),
    both(
        "wide-arguments",
        call("anything", {f"k{index}": index for index in range(100_000)}),
        200,
        None,
        "keys=100000",
    ),
    Case(  # a header cannot carry a megabyte: over HTTP, Mcp-Method cannot match
        "huge-method",
        Json(message("m" * MEGABYTE), header("Mcp-Method", "tools/call")),
        Expect(400, MISMATCH, ("Mcp-Method",)),
        Expect(None, NOT_FOUND, ("Method not found",), short_message=True),
    ),
    Case(
        "huge-tool-name",
        Json(call("t" * MEGABYTE), header("Mcp-Name", "t")),
        Expect(400, MISMATCH, ("Mcp-Name",)),
        Expect(None, INVALID_PARAMS, ("Unknown tool",), short_message=True),
    ),
    Case(
        "oversize",
        Json(call("typed", {"label": "x" * SMALL_BODY})),
        Expect(413, INVALID_REQUEST, ("too large", str(SMALL_BODY)), reply_id=None, closes=True),
        Expect(None, INVALID_REQUEST, (f"{SMALL_BODY} bytes",), reply_id=None),
        config={"max_body_bytes": SMALL_BODY},
    ),
    # unknown and removed methods; messages that get no reply
    both("unknown-method", message("tools/destroy"), 404, NOT_FOUND, "tools/destroy"),
    both("removed-method", message("tasks/list"), 404, NOT_FOUND, "tasks/list"),
    both("initialize", message("initialize"), 404, NOT_FOUND, "initialize"),
    both("unknown-notification", message("notifications/boom", request_id=...), 202),
    both(
        "cancelled-with-garbage",
        message("notifications/cancelled", {"requestId": [1]}, request_id=...),
        202,
    ),
    both("a-response", b'{"jsonrpc": "2.0", "id": 1, "result": {}}', 202),
    # tasks/update with garbage answers, at a task that waits for one
    both(
        "update-responses-string",
        update("yes"),
        400,
        INVALID_PARAMS,
        "inputResponses",
        needs=TASK,
        then=task_still_answerable,
    ),
    both(
        "update-responses-missing",
        lambda p: message("tasks/update", {"taskId": p.waiting_task}),
        400,
        INVALID_PARAMS,
        "inputResponses",
        needs=TASK,
        then=task_still_answerable,
    ),
    both(
        "update-answer-number",
        update({"confirm": 42}),
        400,
        INVALID_PARAMS,
        "inputResponses['confirm']",
        needs=TASK,
        then=task_still_answerable,
    ),
    both(
        "update-answer-bad-action",
        update({"confirm": {"action": "maybe"}}),
        400,
        INVALID_PARAMS,
        "inputResponses['confirm']",
        needs=TASK,
        then=task_still_answerable,
    ),
    both(
        "update-answer-nested-content",
        update({"confirm": {"action": "accept", "content": {"confirm": {"x": [1]}}}}),
        400,
        INVALID_PARAMS,
        "inputResponses['confirm']",
        needs=TASK,
        then=task_still_answerable,
    ),
    both(
        "update-answer-of-another-kind",
        update({"confirm": {"role": "user", "content": {}, "model": "m"}}),
        400,
        INVALID_PARAMS,
        "inputResponses['confirm']",
        needs=TASK,
        then=task_still_answerable,
    ),
    both(
        "update-unasked-keys-only",
        update({"not-asked": {"garbage": True}, "also": 1}),
        200,
        needs=TASK,
        then=task_still_answerable,
    ),
    both(
        "update-good-answer-among-garbage",
        update({"confirm": CONFIRM_ANSWER, "other": 1, "confirm2": {"action": 7}}),
        200,
        needs=TASK,
        then=task_completes,
    ),
    both(
        "update-unknown-task",
        lambda p: message("tasks/update", {"taskId": "tsk_nope", "inputResponses": {}}),
        400,
        INVALID_PARAMS,
        "tsk_nope",
        needs=TASK,
        then=task_still_answerable,
    ),
    both(
        "update-task-id-number",
        message("tasks/update", {"taskId": 5, "inputResponses": {}}),
        400,
        INVALID_PARAMS,
        "taskId",
    ),
    both(
        "update-a-finished-task",
        lambda p: message("tasks/update", {"taskId": p.done_task, "inputResponses": {"c": 1}}),
        200,
        needs=("done_task",),
        then=done_task_unchanged,
    ),
    # a requestState that is not this round's
    both(
        "state-of-another-tool",
        round_two("ask_colour", lambda p: p.state),
        400,
        INVALID_PARAMS,
        "requestState",
        "different request",
        needs=STATE,
        then=state_still_good,
    ),
    both(
        "state-with-other-arguments",
        round_two("ask_name", lambda p: p.state, {"extra": 1}),
        400,
        INVALID_PARAMS,
        "different request",
        needs=STATE,
        then=state_still_good,
    ),
    both(
        "state-of-another-server",
        round_two("ask_name", lambda p: p.foreign_state),
        400,
        INVALID_PARAMS,
        "integrity",
        needs=(*STATE, "foreign_state"),
        then=state_still_good,
    ),
    both(
        "state-tampered",
        round_two("ask_name", tampered),
        400,
        INVALID_PARAMS,
        "requestState",
        needs=STATE,
        then=state_still_good,
    ),
    both(
        "state-garbage",
        round_two("ask_name", lambda p: "not-a-state"),
        400,
        INVALID_PARAMS,
        "requestState",
        needs=STATE,
        then=state_still_good,
    ),
    both(
        "state-huge",
        round_two("ask_name", lambda p: p.state * (MEGABYTE // len(p.state))),
        400,
        INVALID_PARAMS,
        "requestState",
        needs=STATE,
        then=state_still_good,
    ),
]

HTTP_CASES = [
    # Content-Type, Content-Encoding, Accept
    refusal(
        "content-type-text",
        GREET,
        415,
        "Content-Type",
        headers=header("Content-Type", "text/plain"),
    ),
    refusal("content-type-missing", GREET, 415, "none", headers=header("Content-Type", None)),
    refusal(
        "content-type-json-lookalike",
        GREET,
        415,
        "application/jsonx",
        headers=header("Content-Type", "application/jsonx"),
    ),
    refusal(
        "content-type-form",
        GREET,
        415,
        "Content-Type",
        headers=header("Content-Type", "application/x-www-form-urlencoded"),
    ),
    refusal(
        "expect-100-with-wrong-content-type",
        Raw(http_head(b"Content-Type: text/plain", b"Expect: 100-continue", length=len(LIST))),
        415,
        "Content-Type",
        closes=True,
    ),
    http_only(
        "content-encoding-gzip",
        gzip.compress(GREET),
        400,
        PARSE,
        "UTF-8",
        headers=extra_header("Content-Encoding", "gzip"),
        reply_id=None,
    ),
    refusal("accept-missing", GREET, 406, "Accept", headers=header("Accept", None)),
    refusal("accept-html", GREET, 406, "Accept", headers=header("Accept", "text/html")),
    http_only("accept-anything", GREET, 200, None, "Hello, x!", headers=header("Accept", "*/*")),
    # sizes
    refusal(
        "content-length-of-31-digits",
        Raw(json_head(b"{", length=10**30)),
        400,
        "Content-Length",
        closes=True,
    ),
    refusal(
        "content-length-of-19-digits",
        Raw(json_head(b"{", length=10**18)),
        413,
        "too large",
        closes=True,
    ),
    refusal(
        "oversize-by-content-length",
        Raw(json_head(b"{", length=10 * MEGABYTE)),
        413,
        "too large",
        str(SMALL_BODY),
        closes=True,
        config={"max_body_bytes": SMALL_BODY},
    ),
    refusal(
        "oversize-chunked",
        Raw(chunked_head() + b"".join(b"4000\r\n" + b" " * 0x4000 + b"\r\n" for _ in range(5))),
        413,
        "too large",
        closes=True,
        config={"max_body_bytes": SMALL_BODY},
    ),
    refusal("head-over-limit", Raw(json_head(LIST, b"X-Pad: " + b"a" * 200_000)), 431, closes=True),
    refusal(
        "head-over-limit-in-one-read",
        Raw(json_head(LIST, *[b"X-Pad-%d: %s" % (i, b"a" * 100) for i in range(60)])),
        431,
        closes=True,
        config={"max_header_bytes": 2048},
    ),
    # framing
    refusal(
        "content-length-not-a-number",
        Raw(http_head(b"Content-Type: application/json", b"Content-Length: 12abc")),
        400,
        "Content-Length",
        closes=True,
    ),
    refusal(
        "content-length-twice",
        Raw(json_head(LIST, b"Content-Length: 3")),
        400,
        "Content-Length",
        closes=True,
    ),
    refusal(
        "transfer-encoding-gzip",
        Raw(chunked_head().replace(CHUNKED, b"Transfer-Encoding: gzip")),
        501,
        "Transfer-Encoding",
        closes=True,
    ),
    http_only(
        "content-length-and-chunked",
        Raw(json_head(b"0\r\n\r\n", CHUNKED, length=len(LIST))),
        400,
        INVALID_REQUEST,
        "Content-Length and Transfer-Encoding",
        reply_id=None,
        closes=True,
    ),
    refusal("not-http", Raw(b"HELLO\r\n\r\n"), 400, "Invalid HTTP request", closes=True),
    # the MCP headers against the body
    http_only(
        "version-header-missing",
        GREET,
        400,
        MISMATCH,
        "MCP-Protocol-Version header is missing",
        headers=header("MCP-Protocol-Version", None),
    ),
    http_only(
        "version-header-other",
        GREET,
        400,
        MISMATCH,
        "MCP-Protocol-Version",
        headers=header("MCP-Protocol-Version", "2025-06-18"),
    ),
    http_only(
        "method-header-missing",
        GREET,
        400,
        MISMATCH,
        "Mcp-Method header is missing",
        headers=header("Mcp-Method", None),
    ),
    http_only(
        "method-header-other",
        GREET,
        400,
        MISMATCH,
        "Mcp-Method",
        headers=header("Mcp-Method", "tools/list"),
    ),
    http_only(
        "method-header-twice",
        GREET,
        400,
        MISMATCH,
        "Mcp-Method",
        headers=extra_header("Mcp-Method", "tools/call"),
    ),
    http_only(
        "name-header-missing",
        GREET,
        400,
        MISMATCH,
        "Mcp-Name header is missing",
        headers=header("Mcp-Name", None),
    ),
    http_only(
        "name-header-other", GREET, 400, MISMATCH, "Mcp-Name", headers=header("Mcp-Name", "typed")
    ),
    http_only(
        "name-header-case", GREET, 400, MISMATCH, "Mcp-Name", headers=header("Mcp-Name", "GREET")
    ),
    http_only(
        "name-header-other-task",
        lambda p: message("tasks/get", {"taskId": p.done_task}),
        400,
        MISMATCH,
        "params.taskId",
        headers=header("Mcp-Name", "tsk_someone_else"),
        needs=("done_task",),
    ),
    http_only(  # a control character is not a field value (RFC 9110 5.5): llhttp says so
        "name-header-control-character",
        GREET,
        400,
        INVALID_REQUEST,
        "Invalid HTTP request",
        "header value",
        headers=header("Mcp-Name", b"gr\x01eet"),
        reply_id=None,
        closes=True,
    ),
    http_only(
        "param-header-missing",
        REGION,
        400,
        MISMATCH,
        "Mcp-Param-Region",
        headers=header("Mcp-Param-Region", None),
    ),
    http_only(
        "param-header-other",
        REGION,
        400,
        MISMATCH,
        "Mcp-Param-Region",
        headers=header("Mcp-Param-Region", "us"),
    ),
    # values beyond ASCII, and the base64 form
    http_only(
        "name-raw-utf8",
        call("grüße"),
        400,
        MISMATCH,
        "Mcp-Name",
        headers=header("Mcp-Name", "grüße".encode()),
    ),
    http_only(
        "name-raw-latin1",
        call("grüße"),
        400,
        MISMATCH,
        "Mcp-Name",
        headers=header("Mcp-Name", "grüße".encode("latin-1")),
    ),
    http_only("name-base64-utf8", call("grüße"), 200, None, "Grüße!"),  # derived: =?base64?...?=
    http_only(
        "name-base64-ascii", GREET, 200, None, "Hello, x!", headers=header("Mcp-Name", b64("greet"))
    ),
    http_only(
        "name-base64-of-another",
        GREET,
        400,
        MISMATCH,
        "does not match",
        headers=header("Mcp-Name", b64("typed")),
    ),
    http_only(
        "name-base64-garbage",
        GREET,
        400,
        MISMATCH,
        "base64",
        headers=header("Mcp-Name", "=?base64?%%%?="),
    ),
    http_only(
        "name-base64-not-utf8",
        GREET,
        400,
        MISMATCH,
        "base64",
        headers=header("Mcp-Name", b64(b"\xff\xfe")),
    ),
    http_only(
        "name-base64-empty",
        GREET,
        400,
        MISMATCH,
        "Mcp-Name",
        headers=header("Mcp-Name", "=?base64??="),
    ),
    http_only(
        "param-raw-utf8",
        call("regional", {"region": "Zürich"}),
        400,
        MISMATCH,
        "Mcp-Param-Region",
        headers=header("Mcp-Param-Region", "Zürich".encode()),
    ),
    http_only("param-base64-utf8", call("regional", {"region": "Zürich"}), 200, None, "Zürich"),
    # slow senders: each byte that trickles in does not move the deadline of a head or body
    refusal(
        "head-trickles",
        Trickle(json_head(LIST), at_once=10),
        408,
        "request head",
        closes=True,
        config=SLOW,
    ),
    refusal(
        "body-trickles",
        Trickle(json_head(LIST), at_once=len(json_head(LIST)) - len(LIST) + 5),
        408,
        "request body",
        closes=True,
        config=SLOW,
    ),
    refusal(
        "chunked-body-trickles",
        Trickle(
            chunked_head() + b"".join(b"1\r\n%c\r\n" % byte for byte in LIST) + b"0\r\n\r\n",
            at_once=len(chunked_head()),
        ),
        408,
        "request body",
        closes=True,
        config=SLOW,
    ),
    refusal(
        "expect-100-then-nothing",
        Raw(json_head(LIST, b"Expect: 100-continue")[: -len(LIST)]),
        408,
        "request body",
        closes=True,
        config=SLOW,
    ),
    http_only(
        "a-few-slow-bytes-in-time",
        Trickle(json_head(LIST), at_once=len(json_head(LIST)) - 3),
        200,
        config=SLOW,
    ),
    http_only("silent-connection", Raw(b""), None, config=SLOW),
    # clients that leave mid-request
    http_only("hang-up-mid-head", HangUp(json_head(LIST)[:40]), None),
    http_only("hang-up-mid-body", HangUp(json_head(LIST)[:-10]), None),
]

CASES = JSON_CASES + HTTP_CASES


# --- the two wires --------------------------------------------------------------------------

MCP_NAME_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


def decoded_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def method_of(body: bytes) -> str | None:
    decoded = decoded_or_none(body)
    if decoded is None:  # too deep for Python's json, maybe not for the server's decoder
        found = re.match(rb'{"jsonrpc": "2.0", "id": 1, "method": "([a-z/]+)"', body)
        return None if found is None else found[1].decode()
    method = decoded.get("method") if isinstance(decoded, dict) else None
    return method if isinstance(method, str) else None


def correct_headers(body: bytes) -> list[tuple[str, str]]:
    """The headers a correct client sends with `body` (as far as the body makes sense)."""
    decoded = decoded_or_none(body)
    method = method_of(body) or "tools/list"
    params = decoded.get("params") if isinstance(decoded, dict) else None
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    version = meta.get(PV) if isinstance(meta, dict) else None
    headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", version if isinstance(version, str) else VERSION),
        ("Mcp-Method", method),
    ]
    name = params.get(MCP_NAME_PARAM.get(method, ""))
    if isinstance(name, str):
        headers.append(("Mcp-Name", name if name.isascii() else b64(name)))
    arguments = params.get("arguments")
    if params.get("name") == "regional" and isinstance(arguments, dict):
        region = arguments.get("region")
        if isinstance(region, str):
            headers.append(("Mcp-Param-Region", region if region.isascii() else b64(region)))
    return headers


def post(body: bytes, headers: Headers) -> bytes:
    """A POST to /mcp with exactly these header lines (bytes go out as they are)."""
    lines = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1"]
    for name, value in headers:
        lines.append(name.encode() + b": " + (value.encode() if isinstance(value, str) else value))
    lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def check_answer(expect: Expect, sent: bytes, raw: bytes | None) -> None:
    """The JSON-RPC side of an answer: kind, code, id, words, schema."""
    if expect.status == 202:
        assert not raw, raw
        return
    assert raw, "no JSON-RPC message came back"
    reply: dict[str, Any] = json.loads(raw)
    if expect.reply_id is None:
        assert "id" not in reply, reply.get("id")
    else:
        assert reply.get("id") == expect.reply_id
    if expect.code is None:
        assert "result" in reply, str(reply)[:500]
        check_message(method_of(sent), raw)
        text = " ".join(c.get("text", "") for c in reply["result"].get("content", []))
    else:
        assert "error" in reply, str(reply)[:500]
        check_reply(None, raw)
        assert reply["error"]["code"] == expect.code, reply["error"]
        text = reply["error"]["message"]
        if expect.short_message:
            assert len(text) <= 1024, f"a message of {len(text)} characters"
    for word in expect.words:
        assert word in text, (word, text[:500])


class Wire(Protocol):
    async def exchange(self, body: bytes) -> dict[str, Any]:
        """Send one well-formed request the correct way; its (schema-checked) reply."""
        ...

    async def attack(self, case: Case, prepared: Prepared) -> None:
        """Send the row's request and check its answer."""
        ...

    async def still_serving(self) -> None:
        """A plain request afterwards is answered."""
        ...


async def result(wire: Wire, method: str, params: dict[str, Any]) -> dict[str, Any]:
    reply = await wire.exchange(message(method, params))
    assert "result" in reply, reply
    found: dict[str, Any] = reply["result"]
    return found


async def wait_for_status(wire: Wire, task_id: str, status: str) -> dict[str, Any]:
    with trio.fail_after(ANSWER_SECONDS):
        while (task := await result(wire, "tasks/get", {"taskId": task_id}))["status"] != status:
            await trio.sleep(0.01)
    return task


async def prepare(wire: Wire, needs: frozenset[str]) -> Prepared:
    values: dict[str, str] = {}
    if "waiting_task" in needs:
        created = await result(wire, "tools/call", {"name": "confirm", "arguments": {}})
        await wait_for_status(wire, created["taskId"], "input_required")
        values["waiting_task"] = created["taskId"]
    if "done_task" in needs:
        created = await result(wire, "tools/call", {"name": "quick_job", "arguments": {}})
        await wait_for_status(wire, created["taskId"], "completed")
        values["done_task"] = created["taskId"]
    if "state" in needs:
        asked = await result(wire, "tools/call", {"name": "ask_name", "arguments": {}})
        assert asked["resultType"] == "input_required"
        values["state"] = asked["requestState"]
    if "foreign_state" in needs:
        other, _ = hostile_server()  # a server of its own has a key of its own
        async with other.running():
            reply = await other.handle(call("ask_name"))
        assert reply is not None
        values["foreign_state"] = json.loads(reply.body)["result"]["requestState"]
    return Prepared(**values)


def body_of(send: Json, prepared: Prepared) -> bytes:
    return send.body if isinstance(send.body, bytes) else send.body(prepared)


GREET_AFTER = call("greet", {"name": "still here"})


class HttpWire:
    def __init__(self, port: int) -> None:
        self.port = port
        self.helper: HttpClient | None = None

    async def exchange(self, body: bytes) -> dict[str, Any]:
        if self.helper is None:
            self.helper = await HttpClient.connect(self.port)
        with trio.fail_after(ANSWER_SECONDS):
            response = await self.helper.post(body, correct_headers(body)[1:])
        check_message(method_of(body), response.body)
        reply: dict[str, Any] = response.json()
        return reply

    async def attack(self, case: Case, prepared: Prepared) -> None:
        expect = case.http
        started = trio.current_time()
        client = await HttpClient.connect(self.port)
        client.encode("POST", [])  # h11 now waits for an answer to what we write by hand
        send = case.send
        if isinstance(send, Json):
            body = body_of(send, prepared)
            headers: HeaderList = [*correct_headers(body)]
            data = post(body, headers if send.headers is None else send.headers(headers))
        else:
            data = send.data
            body = data.partition(b"\r\n\r\n")[2]
        async with trio.open_nursery() as nursery:
            trickling = trio.Event()
            if isinstance(send, Trickle):
                nursery.start_soon(trickle, client.stream, send, trickling)
            else:
                nursery.start_soon(write_all, client.stream, data, isinstance(send, HangUp))
            with trio.fail_after(ANSWER_SECONDS):
                if expect.status is None:  # closed without a word
                    assert await client.rest_until_closed() == b""
                    nursery.cancel_scope.cancel()
                    return
                response = await client.response()
            if isinstance(send, Trickle) and expect.status == 408:
                assert not trickling.is_set(), "the answer waited for the last byte"
                assert trio.current_time() - started >= SLOW_SECONDS
            nursery.cancel_scope.cancel()
        assert response.status == expect.status, (response.status, response.body[:300])
        if response.status != 202:
            assert response.headers["content-type"] == "application/json"
        check_answer(expect, body, response.body)
        closes = response.headers.get("connection") == "close"
        if expect.closes is not None:
            assert closes == expect.closes, response.headers
        with trio.fail_after(ANSWER_SECONDS):
            if closes:
                assert await client.rest_until_closed() == b""
            else:  # the same connection serves the next request
                again = await client.post(GREET_AFTER, correct_headers(GREET_AFTER)[1:])
                assert again.status == 200, again
                assert again.json()["result"]["content"][0]["text"] == "Hello, still here!"
                await client.aclose()

    async def still_serving(self) -> None:
        client = await HttpClient.connect(self.port)
        with trio.fail_after(ANSWER_SECONDS):
            response = await rpc(client, "tools/call", {"name": "greet", "arguments": {}})
        assert response.status == 200
        assert response.json()["result"]["content"][0]["text"] == "Hello, world!"
        await client.aclose()
        if self.helper is not None:
            await self.helper.aclose()


async def write_all(stream: trio.SocketStream, data: bytes, hang_up: bool) -> None:
    """Send, as a client that does not care whether the server still reads."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(data)
        if hang_up:
            await stream.send_eof()


async def trickle(stream: trio.SocketStream, send: Trickle, done: trio.Event) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(send.data[: send.at_once])
        for index in range(send.at_once, len(send.data)):
            await trio.sleep(TRICKLE_SECONDS)
            await stream.send_all(send.data[index : index + 1])
        done.set()


class StdioWire:
    def __init__(self, peer: Peer) -> None:
        self.peer = peer

    async def receive(self) -> tuple[dict[str, Any], bytes]:
        with trio.fail_after(ANSWER_SECONDS):
            reply = await self.peer.receive()
        return reply, json.dumps(reply).encode()

    async def exchange(self, body: bytes) -> dict[str, Any]:
        await self.peer.write(body + b"\n")
        reply, raw = await self.receive()
        check_message(method_of(body), raw)
        return reply

    async def attack(self, case: Case, prepared: Prepared) -> None:
        assert case.stdio is not None and isinstance(case.send, Json)
        body = body_of(case.send, prepared)
        assert b"\n" not in body
        await self.peer.write(body + b"\n")
        raw = None if case.stdio.status == 202 else (await self.receive())[1]
        check_answer(case.stdio, body, raw)

    async def still_serving(self) -> None:
        """The next message out is the answer to the next request: nothing came for a
        message that gets no reply."""
        reply = await self.exchange(message("tools/call", {"name": "greet"}, request_id="after"))
        assert reply["id"] == "after"
        assert reply["result"]["content"][0]["text"] == "Hello, world!"


@asynccontextmanager
async def open_wire(transport: str, server: Server, case: Case) -> AsyncIterator[Wire]:
    if transport == "http":
        async with serving(server, **case.config) as port:
            yield HttpWire(port)
    elif transport == "http-asyncio":
        async with serving_on_asyncio(server, **case.config) as port:
            yield HttpWire(port)
    else:
        lines = {"max_line_bytes": SMALL_BODY} if "max_body_bytes" in case.config else {}
        async with stdio_session(server, **lines) as peer:
            yield StdioWire(peer)


# --- the matrix -----------------------------------------------------------------------------


def matrix() -> list[Any]:
    params = []
    for case in CASES:
        rows = (("http", case.http), ("http-asyncio", case.http), ("stdio", case.stdio))
        for transport, expect in rows:
            if expect is None:
                continue
            reason = case.xfail.get(transport.removesuffix("-asyncio"))
            marks = [] if reason is None else [pytest.mark.xfail(strict=True, reason=reason)]
            params.append(pytest.param(transport, case, id=f"{transport}-{case.id}", marks=marks))
    return params


def no_errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A hostile client is no error of the server's: nothing may be logged as one."""
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [record.getMessage() for record in errors]


def test_the_matrix_is_big_enough() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)), "each row has an id of its own"
    assert len(CASES) >= 40
    assert sum(case.stdio is not None for case in CASES) >= 40


@pytest.mark.parametrize(("transport", "case"), matrix())
async def test_a_hostile_request_gets_a_clear_answer_and_the_server_keeps_serving(
    transport: str, case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    server, _ = hostile_server()
    async with open_wire(transport, server, case) as wire:
        prepared = await prepare(wire, case.needs)
        await wire.attack(case, prepared)
        expect = case.stdio if transport == "stdio" else case.http
        assert expect is not None
        if expect.then is not None:
            await expect.then(wire, prepared)
        await wire.still_serving()
    no_errors_logged(caplog)


# --- clients that leave in the middle of an SSE answer --------------------------------------


async def test_a_client_that_leaves_mid_sse_cancels_only_its_own_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, probe = hostile_server()
    async with serving(server) as port:
        bystander = await HttpClient.connect(port)
        assert (await rpc(bystander, "tools/list")).status == 200
        leaver = await HttpClient.connect(port)
        body = message(
            "tools/call", {"name": "gated", "arguments": {}}, meta=with_meta(progressToken="p")
        )
        with trio.fail_after(ANSWER_SECONDS):
            await leaver.send("POST", correct_headers(body), body)
            head = await leaver.head()
            assert head.status_code == 200
            assert dict(head.headers)[b"content-type"] == b"text/event-stream"
            first = await leaver.next_event()  # one progress event, then the client leaves
            assert isinstance(first, h11.Data)
            note = json.loads(first.data.removeprefix(b"data: "))
            check_notification(note)
            await leaver.aclose()
            await probe.cancelled.wait()
            response = await rpc(bystander, "tools/call", {"name": "greet", "arguments": {}})
            assert response.status == 200  # the other connection never noticed
        fresh = await HttpClient.connect(port)
        with trio.fail_after(ANSWER_SECONDS):
            assert (await rpc(fresh, "tools/list")).status == 200
    no_errors_logged(caplog)


async def test_a_listener_that_leaves_mid_stream_leaves_the_task_readable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, probe = hostile_server()
    async with serving(server) as port:
        client = await HttpClient.connect(port)
        created = await rpc(
            client, "tools/call", {"name": "gated_job", "arguments": {}}, caps=TASKS_CAPS
        )
        task_id = created.json()["result"]["taskId"]
        listener = await HttpClient.connect(port)
        body = message(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, request_id="l"
        )
        with trio.fail_after(ANSWER_SECONDS):
            await listener.send("POST", correct_headers(body), body)
            head = await listener.head()
            assert dict(head.headers)[b"content-type"] == b"text/event-stream"
            ack = await listener.next_event()
            assert isinstance(ack, h11.Data) and b"acknowledged" in ack.data
            await listener.aclose()  # mid-stream: the response has not ended
            probe.release.set()  # a status change for a listener that has just gone
            task = await wait_for_status(HttpWire(port), task_id, "completed")
        assert task["result"]["content"][0]["text"] == "released"
        with trio.fail_after(ANSWER_SECONDS):
            again = await rpc(client, "tasks/get", {"taskId": task_id}, caps=TASKS_CAPS)
        assert again.status == 200 and again.json()["result"]["status"] == "completed"
    no_errors_logged(caplog)


# --- nesting at the limit ------------------------------------------------------------------


def sweep_bodies(prepared: Prepared, depth: int) -> list[bytes]:
    """Bodies nested `depth` deep where each later decode happens: the arguments (by the
    tool's Struct, or as a dict), an answer to an asked question (an unknown member first,
    then a bad action: the task keeps waiting), an answer to an input round, `_meta`."""
    deep = nested(depth)
    bad_answer = {"x": "@", "action": "maybe"}
    with_state = {"name": "ask_name", "arguments": {}, "requestState": prepared.state}
    bodies = [
        call("typed", {"x": "@"}),
        call("anything", {"x": "@"}),
        call("regional", {"region": "eu", "x": "@"}),
        update({"confirm": bad_answer})(prepared),
        message("tools/call", {**with_state, "inputResponses": {"name": bad_answer}}),
        call("ask_name", inputResponses={"name": bad_answer}),
        listing(x="@"),
    ]
    return [spliced(body, "@", deep) for body in bodies]


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_nesting_is_refused_past_the_same_depth_on_every_interpreter(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The limit is ours (MAX_DEPTH levels, the whole message counted before it is decoded),
    not the decoder's recursion, which moves with the interpreter and the stack: a message
    that nests MAX_DEPTH levels is read, wherever the depth is (a tool's arguments, an
    answer, `_meta`); one level more is -32600 "nested", and never an internal error."""
    server, _ = hostile_server()
    async with open_wire(transport, server, Case("sweep", Json(b""), Expect(200))) as wire:
        prepared = await prepare(wire, frozenset({"waiting_task", "state"}))
        seen: dict[bool, set[tuple[int | None, bool]]] = {True: set(), False: set()}
        for depth in range(MAX_DEPTH - 12, MAX_DEPTH + 2):
            for body in sweep_bodies(prepared, depth):
                reply = await wire.exchange(body)
                error = reply.get("error", {})
                refused = nesting_depth(body) > MAX_DEPTH
                seen[refused].add((error.get("code"), "nested" in error.get("message", "")))
        assert seen[True] == {(INVALID_REQUEST, True)}, seen
        assert seen[False] and seen[False] <= {(None, False), (INVALID_PARAMS, False)}, seen
        task = await result(wire, "tasks/get", {"taskId": prepared.waiting_task})
        assert task["status"] == "input_required"
        await wire.still_serving()
    no_errors_logged(caplog)
