"""Fuzzing the HTTP request path: hostile bytes to the real `serve_http` on 127.0.0.1.

One server (`fuzz_server`, tools, tasks, prompts, resources and completion) runs in a
thread of its own, under its own `trio.run`, for all the examples of a test; Hypothesis
drives plain blocking sockets against it. Each example is one connection that sends one
hostile request (random method, target, version, Host, Origin, Content-Type, Accept,
Expect, Connection, Mcp-* and Mcp-Param-* headers, random extra header lines with
non-ASCII bytes or huge values, correct, missing, wrong, duplicate or contradictory
Content-Length, chunked bodies whole or mangled) with a body of random bytes, random JSON
or a near-valid JSON-RPC request; sometimes a well-formed request goes first on the same
connection (pipelining; a HEAD among them: see the tests at the end), sometimes the
client resets the connection right after sending. About half the requests have every part
as HTTP allows (the server may still refuse a GET, a foreign Host, text/plain), most others
one or two hostile parts, a few all of them.

What must hold, request by request. The oracle is h11 itself, configured as the server
configures it, parsing the same bytes (`parse_as_server`):

* a request h11 reads whole gets exactly one well-formed HTTP response (the client's own
  h11 parses it); a request h11 refuses gets a response too (4xx or 5xx); a request the
  bytes leave unfinished may get a response, or just the connection closed once the client
  half-closes;
* a response with a body is `application/json` or `text/event-stream` (an SSE stream only
  if the request's Accept allows one); every JSON message in it is JSON-RPC and valid
  against the official schemas: a result for the method of the request body, an error
  whose HTTP status is the one its code maps to (`http_status_for_code`), or an HTTP
  refusal (-32600, no id) with a 4xx/5xx status; 202 only for a notification or response;
* after a response that says `Connection: close`, the server sends nothing more and closes;
* no exception escapes: the server logs no error, its thread is alive, and after every
  example a normal `server/discover` gets its correct result (on a keep-alive connection
  of a well-behaved client; each example's own connection is new, so accepting is tested
  too).

`fuzz/run.py` runs the same examples by the tens of thousands (`run_http_fuzz`).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import logging
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Literal, TypeVar

import h11
import httptools
import msgspec
import pytest
import trio
from core.harness import meta
from core.test_fuzz import (
    _NOT_JSON,
    ENVELOPES,
    GOOD_ANSWERS,
    GOOD_CAPS,
    HEADER_VALUES,
    JSON_VALUES,
    _edited,
    _is_notification,
    _is_request_id,
    _is_response,
    _loads,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime.helpers import check_message, check_notification
from schema_check import check_legacy, check_reply

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    InputRequired,
    RequestContext,
    Server,
    TaskOptions,
    ToolContext,
    ToolError,
    ToolOutcome,
)
from mcp_tasks.core import PROTOCOL_VERSION, HttpHeaders, http_status_for_code
from mcp_tasks.transports import HttpConfig, serve_http

CONFIG: Final = HttpConfig(
    max_body_bytes=64 * 1024,
    max_header_bytes=8 * 1024,
    header_timeout_seconds=5.0,
    body_timeout_seconds=5.0,
    drain_timeout_seconds=1.0,
)
"""Small limits, so that 413 and 431 cost little; the timeouts never fire (the client
half-closes an unfinished request instead of waiting)."""
ANSWER_SECONDS: Final = 10.0
"""How long a response may take: every tool of `fuzz_server` answers at once."""
LISTEN_SECONDS: Final = 0.25
"""A listen stream never ends by itself: the client leaves once its first event is in, or
after this long if nothing came (no SSE allowed: a stream with nowhere to send)."""
META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
REFUSAL_STATUSES: Final = frozenset({400, 403, 404, 405, 406, 408, 413, 415, 421, 431, 501, 505})
"""The statuses of the answers HTTP gives by itself (docs/transports.md, and the error
status hints of h11): a -32600 error without an id."""


# --- the server ------------------------------------------------------------------------------


class Greeting(msgspec.Struct):
    name: str = "world"


class JobArgs(msgspec.Struct):
    label: str = ""


REGIONAL_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "note": {"type": "string"},
    },
}


def _question(key: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {key: {"type": "string"}}}
    return ElicitRequest(params=ElicitParams(message=f"{key}?", requested_schema=schema))


def fuzz_server() -> Server:
    """Every kind of answer, and each at once: no tool waits in place."""
    server = Server(
        "fuzz-http",
        "1.0",
        tasks=TaskOptions(ttl_ms=60_000, poll_interval_ms=100, max_tasks=100_000),
        shutdown_grace_seconds=0.5,
    )

    @server.tool()
    async def greet(ctx: ToolContext, args: Greeting) -> ToolOutcome:
        return CallToolResult.text(f"Hello, {args.name}!")

    @server.tool()
    async def chatty(ctx: ToolContext) -> str:
        """Progress and a log message: an SSE answer when the request asks for them."""
        await ctx.report_progress(1, 2, "half way")
        await ctx.log("info", {"said": "hello"})
        return "done"

    @server.tool(task_support="optional")
    async def job(ctx: ToolContext, args: JobArgs) -> ToolOutcome | str:
        return f"job {args.label} done" if ctx.in_task else START_TASK

    @server.tool(task_support="required")
    async def asking_job(ctx: ToolContext) -> ToolOutcome | str:
        """A task that waits in input_required until tasks/update answers `ok`."""
        if not ctx.in_task:
            return START_TASK
        if ctx.elicit_response("ok") is None:
            return InputRequired(requests={"ok": _question("ok")})
        return "answered"

    @server.tool(task_support="required")
    async def forever(ctx: ToolContext) -> ToolOutcome | str:
        """A task that stays working until it is cancelled or expires."""
        if not ctx.in_task:
            return START_TASK
        await trio.sleep_forever()
        return "never"

    @server.tool()
    async def ask(ctx: ToolContext) -> ToolOutcome | str:
        """An input round in place (no task)."""
        answer = ctx.elicit_response("who")
        return InputRequired(requests={"who": _question("who")}) if answer is None else "thanks"

    @server.tool()
    async def fails(ctx: ToolContext) -> str:
        raise ToolError("it failed, as it always does")

    @server.tool(input_schema=REGIONAL_SCHEMA)
    async def regional(ctx: ToolContext, args: dict[str, Any]) -> str:
        return f"region={args.get('region')}"

    @server.prompt()
    async def hello(ctx: RequestContext) -> str:
        return "hello"

    @server.resource("notes://today")
    async def today(ctx: RequestContext) -> str:
        return "today's notes"

    @server.resource_template("files://{name}")
    async def files(ctx: RequestContext, name: str) -> str:
        return f"the file {name}"

    @server.completion(uri_template="files://{name}")
    async def file_names(argument: Any, resolved: Any) -> list[str]:
        return ["a", "b", "c"]

    return server


class _ErrorRecords(logging.Handler):
    """Errors logged by one thread (the server's: another server may run meanwhile)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.thread: int | None = None
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.records.append(record)


class ServedInThread:
    """`server` behind `serve_http` on 127.0.0.1 port 0, in a thread with its own trio.run.

    `errors` collects what the library logs at ERROR or above (an exception that escaped a
    connection or a request is logged so); `failure` is what ended the thread, if anything.
    """

    def __init__(self, server: Server, config: HttpConfig = CONFIG) -> None:
        self.server = server
        self.config = config
        self.port = 0
        self.probe = Probe(0)
        self.failure: BaseException | None = None
        self._errors = _ErrorRecords()
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._thread = threading.Thread(target=self._run, name="fuzz-http-server", daemon=True)

    @property
    def errors(self) -> list[str]:
        return [record.getMessage() for record in self._errors.records]

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self.failure is None

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as error:
            self.failure = error
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with self.server.running(), trio.open_nursery() as nursery:
            self._scope = nursery.cancel_scope
            serve = partial(serve_http, self.server, "127.0.0.1", 0, config=self.config)
            self.port = await nursery.start(serve)
            self.probe = Probe(self.port)
            self._ready.set()

    def __enter__(self) -> ServedInThread:
        logging.getLogger("mcp_tasks").addHandler(self._errors)
        self._thread.start()
        self._errors.thread = self._thread.ident
        if not self._ready.wait(30) or self.failure is not None or not self.port:
            raise RuntimeError(f"the server did not start: {self.failure!r}")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.probe.close()
        try:
            if self._token is not None and self._scope is not None and self._thread.is_alive():
                with contextlib.suppress(trio.RunFinishedError):
                    trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
            self._thread.join(30)
        finally:
            logging.getLogger("mcp_tasks").removeHandler(self._errors)

    def subscription_count(self) -> int:
        return self.server.subscription_count


# --- what h11, as the server sets it up, makes of the bytes ------------------------------------


@dataclass
class ParsedRequest:
    head: h11.Request
    body: bytes


@dataclass
class Parsed:
    """The requests h11 reads whole from the bytes, in order, and how the bytes end after
    them: `complete` (nothing left, or the client closes the connection with its last
    request), `incomplete` (more bytes needed) or `error` (h11 refuses what follows).
    `broken_head` is the head of the request the bytes end in, if h11 read that far;
    `refused_method` that request's method when h11 refused its head and llhttp (the
    server's parser) reads it: the server answers it as such (a `HEAD`, no body)."""

    requests: list[ParsedRequest]
    ending: Literal["complete", "incomplete", "error"]
    broken_head: h11.Request | None = None
    refused_method: bytes | None = None


def parse_as_server(data: bytes, max_header_bytes: int = CONFIG.max_header_bytes) -> Parsed:
    server = h11.Connection(h11.SERVER, max_incomplete_event_size=max_header_bytes)
    server.receive_data(data)
    requests: list[ParsedRequest] = []
    head: h11.Request | None = None
    body: list[bytes] = []
    head_at = 0  # where the next request's head begins in `data`
    try:
        while True:
            if head is None:
                head_at = len(data) - len(server.trailing_data[0])
            event = server.next_event()
            if event is h11.NEED_DATA:
                pending = head is not None or bool(server.trailing_data[0])
                return Parsed(requests, "incomplete" if pending else "complete", head)
            if isinstance(event, h11.Request):
                head, body = event, []
            elif isinstance(event, h11.Data):
                body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                requests.append(ParsedRequest(head, b"".join(body)))
                head = None
                # Not 2xx: a CONNECT or an Upgrade is refused, as the server refuses them.
                response = h11.Response(status_code=404, headers=[(b"content-length", b"0")])
                server.send(response)
                server.send(h11.EndOfMessage())
                if server.their_state is not h11.DONE or server.our_state is not h11.DONE:
                    return Parsed(requests, "complete")  # the client asked to close
                server.start_next_cycle()
            else:  # pragma: no cover - ConnectionClosed or PAUSED: nothing more is read
                return Parsed(requests, "complete")
    except h11.RemoteProtocolError:
        method = _method_llhttp_reads(data[head_at:]) if head is None else None
        return Parsed(requests, "error", head, method)


def _method_llhttp_reads(data: bytes) -> bytes | None:
    """The method of the head `data` begins with, if llhttp reads that head (h11 asks more:
    a `Host`, for one)."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    parser = httptools.HttpRequestParser(_NoCallbacks())
    try:
        parser.feed_data(data[: end + 4])
    except httptools.HttpParserUpgrade:
        pass
    except httptools.HttpParserError:
        return None
    method: bytes = parser.get_method()
    return method


class _NoCallbacks:
    """What httptools calls while it parses: nothing."""


# --- one exchange over a socket ------------------------------------------------------------------


@dataclass
class Answer:
    """One response as the client's h11 read it: status, headers, body (whole, or what
    came before the client stopped waiting)."""

    status: int
    headers: dict[bytes, bytes]
    body: bytes
    whole: bool
    informational: list[int] = field(default_factory=list)


@dataclass
class Exchange:
    answers: list[Answer]
    closed: bool
    """The server closed the connection (EOF) before the client stopped reading."""
    abandoned: bool = False
    """The client stopped early: it reset the connection, or left a listen stream."""


class NoAnswer(AssertionError):
    pass


@dataclass(frozen=True)
class Wire:
    """One hostile request as it goes on the wire; `data` may hold more than one request
    (a well-formed one first: pipelining). `reset` closes the connection with an RST right
    after sending, without reading the answer."""

    data: bytes
    reset: bool = False


def _framing_request(method: bytes) -> h11.Request:
    return h11.Request(method=method, target="/", headers=[(b"host", b"x")])


def exchange(port: int, wire: Wire, parsed: Parsed) -> Exchange:
    """Send `wire` on a new connection, read what comes back with the client's own h11.

    As many responses are awaited as the oracle says are due (one per request read whole,
    one for a request h11 refuses); then the client half-closes and reads up to the end
    of the connection (the server must close it). Half-closing is how a client cancels
    (docs/transports.md), so it waits for what is due first; a request the bytes leave
    unfinished may then be answered, or the connection just closed."""
    listen = any(
        _body_method(request.body) == "subscriptions/listen" for request in parsed.requests
    )
    due = len(parsed.requests) + (parsed.ending == "error")
    framing = [request.head.method for request in parsed.requests]
    if parsed.ending != "complete":  # the request the bytes end in, as the server reads it
        if parsed.broken_head is not None:
            framing.append(parsed.broken_head.method)
        else:
            framing.append(parsed.refused_method or b"GET")
    sock = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_SECONDS)
    try:
        with contextlib.suppress(ConnectionError):  # refused early (413): answered anyway
            sock.sendall(wire.data)
        if wire.reset:
            return Exchange([], closed=False, abandoned=True)
        return _read_answers(sock, framing, due, listen)
    finally:
        if wire.reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


def _read_answers(sock: socket.socket, framing: list[bytes], due: int, listen: bool) -> Exchange:
    return _Reader(sock, framing, due, listen).read()


class _Done(Exception):
    """Not an error: the exchange is over."""

    def __init__(self, closed: bool, abandoned: bool = False) -> None:
        self.closed = closed
        self.abandoned = abandoned


class _Reader:
    """Responses off one socket, framed by the client's own h11 as answers to `framing`
    (the request methods, in order); `due` of them must come."""

    def __init__(self, sock: socket.socket, framing: list[bytes], due: int, listen: bool) -> None:
        self.sock = sock
        self.framing = framing
        self.due = due
        self.listen = listen
        self.client = h11.Connection(h11.CLIENT)
        self.answers: list[Answer] = []
        self.deadline = time.monotonic() + (LISTEN_SECONDS if listen else ANSWER_SECONDS)
        self.half_closed = False
        self.current: Answer | None = None
        self.informational: list[int] = []
        self.can_frame = self._frame_next()

    def read(self) -> Exchange:
        try:
            while True:
                self._step()
        except _Done as done:
            return Exchange(self.answers, closed=done.closed, abandoned=done.abandoned)

    def _frame_next(self) -> bool:
        if len(self.answers) >= len(self.framing):
            return False
        self.client.send(_framing_request(self.framing[len(self.answers)]))
        self.client.send(h11.EndOfMessage())
        return True

    def _step(self) -> None:
        if len(self.answers) >= self.due and not self.half_closed:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)
            self.half_closed = True
        expecting = self.can_frame or self.client.their_state is h11.MUST_CLOSE
        try:
            event = self.client.next_event() if expecting else None
        except h11.RemoteProtocolError as error:
            if self.current is not None or len(self.answers) < self.due:
                came = f"{len(self.answers)} answer(s) of {self.due}"
                raise AssertionError(f"{came}, then: {error}") from None
            raise _Done(closed=True) from None  # closed instead of an answer not due
        if event is None or event is h11.NEED_DATA:
            self._receive(expecting)
        elif isinstance(event, h11.InformationalResponse):
            self.informational.append(event.status_code)
        elif isinstance(event, h11.Response):
            headers = {name.lower(): value for name, value in event.headers}
            self.current = Answer(
                event.status_code, headers, b"", whole=False, informational=self.informational
            )
            self.informational = []
        elif isinstance(event, h11.Data):
            assert self.current is not None
            self.current.body += event.data
            if self.listen and b"\n\n" in self.current.body:  # a listen stream began: leave
                self.answers.append(self.current)
                raise _Done(closed=False, abandoned=True)
        elif isinstance(event, h11.EndOfMessage):
            assert self.current is not None
            self.current.whole = True
            self.answers.append(self.current)
            self.current = None
            if self.client.our_state is h11.DONE and self.client.their_state is h11.DONE:
                self.client.start_next_cycle()
                self.can_frame = self._frame_next()
            else:
                self.can_frame = False  # the server closes: only end-of-file may follow
                self.due = len(self.answers)
        elif isinstance(event, h11.ConnectionClosed):
            if self.current is not None:
                raise AssertionError(f"the connection closed inside a response: {self.current}")
            raise _Done(closed=True)

    def _receive(self, expecting: bool) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            if self.listen:  # a stream that stays open, as it should
                if self.current is not None:
                    self.answers.append(self.current)
                raise _Done(closed=False, abandoned=True)
            came = f"{len(self.answers)} of {self.due} came"
            raise NoAnswer(f"no answer in {ANSWER_SECONDS}s; {came}")
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return
        except ConnectionError:
            data = b""
        if not expecting:
            if data:
                raise AssertionError(f"bytes where no response was due: {data[:200]!r}")
            raise _Done(closed=True)  # end of file where no response was due
        self.client.receive_data(data)


# --- what every answer must be ----------------------------------------------------------------


def _body_method(body: bytes) -> str | None:
    value = _loads(body)
    method = value.get("method") if isinstance(value, dict) else None
    return method if isinstance(method, str) else None


def _accepts_event_stream(head: h11.Request) -> bool:
    accept = [value.lower() for name, value in head.headers if name == b"accept"]
    if not accept:
        return True
    joined = b", ".join(accept)
    return any(kind in joined for kind in (b"text/event-stream", b"*/*", b"text/*"))


@dataclass
class Tally:
    """Counts over a fuzz run."""

    examples: int = 0
    requests: int = 0
    answers: int = 0
    json_messages: int = 0
    schema_checked: int = 0
    closed_without_answer: int = 0
    abandoned: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    codes: Counter[int] = field(default_factory=Counter)
    endings: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        return {
            "examples": self.examples,
            "requests read whole by h11": self.requests,
            "answers": self.answers,
            "JSON-RPC messages (all schema-checked)": self.json_messages,
            "closed without an answer (unfinished request)": self.closed_without_answer,
            "abandoned by the client (reset, listen)": self.abandoned,
            "statuses": dict(sorted(self.statuses.items())),
            "error codes": dict(sorted(self.codes.items())),
            "endings": dict(sorted(self.endings.items())),
        }


def check_exchange(parsed: Parsed, result: Exchange, tally: Tally) -> None:
    tally.examples += 1
    tally.requests += len(parsed.requests)
    tally.endings[parsed.ending] += 1
    if result.abandoned:
        tally.abandoned += 1
    for index, answer in enumerate(result.answers):
        request = parsed.requests[index] if index < len(parsed.requests) else None
        check_answer(request, answer, tally, refused_method=parsed.refused_method)
        if not answer.whole:
            return  # a listen stream the client left
        if answer.headers.get(b"connection", b"").lower() == b"close":
            assert index == len(result.answers) - 1, "an answer after Connection: close"
            assert result.closed or result.abandoned, "Connection: close, and not closed"
    if result.abandoned:
        return
    due = len(parsed.requests) + (parsed.ending == "error")
    closing = bool(result.answers) and result.answers[-1].headers.get(b"connection") == b"close"
    if len(result.answers) < due and not closing:
        raise AssertionError(f"{len(result.answers)} answer(s) where {due} were due: {parsed}")
    if not result.answers:
        tally.closed_without_answer += 1


def check_answer(
    request: ParsedRequest | None,
    answer: Answer,
    tally: Tally,
    *,
    refused_method: bytes | None = None,
) -> None:
    """One response: its status, its framing, and each JSON-RPC message in it (to a
    request h11 refused: `refused_method`, if llhttp read it)."""
    tally.answers += 1
    tally.statuses[answer.status] += 1
    where = f"HTTP {answer.status} {answer.headers} {answer.body[:300]!r}"
    assert 200 <= answer.status < 600, where
    assert set(answer.informational) <= {100}, where
    value: Any = _NOT_JSON if request is None else _loads(request.body)
    content_type = answer.headers.get(b"content-type")
    method = refused_method if request is None else request.head.method
    is_head = method == b"HEAD"
    if answer.status == 202:
        assert answer.body == b"" and content_type is None, where
        assert _is_notification(value) or _is_response(value), f"202 for {value!r:.300}"
        return
    if is_head:
        assert answer.body == b"", where
        return
    if content_type == b"text/event-stream":
        assert request is not None and answer.status == 200, where
        assert _accepts_event_stream(request.head), "SSE to a client that does not accept it"
        blocks = answer.body.split(b"\n\n")
        assert not answer.whole or blocks[-1] == b"", f"an unfinished event: {where}"
        events = [block.removeprefix(b"data: ") for block in blocks[:-1]]
        assert all(block.startswith(b"data: ") for block in blocks[:-1]), where
        last = len(events) - 1 if answer.whole else len(events)
        for number, event in enumerate(events):
            if number == last:  # the response, in a stream that began as 200
                _check_message(value, None, event, tally)
            else:
                message = json.loads(event)
                assert "id" not in message, f"a response inside the stream: {message}"
                check_notification(message)
                tally.json_messages += 1
        return
    assert content_type == b"application/json", where
    assert answer.whole, where
    _check_message(value, answer.status, answer.body, tally)


def _claims(value: Any) -> bool:
    """`value` is a 2026-07-28 request: `params._meta` names a protocol version."""
    params = value.get("params") if isinstance(value, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta


LEGACY_STATUSES: Final = (None, 200, 400, 404, 429, 503)
"""What a 2025 client's request may get: 200 (errors in the body, as its revisions say), or
HTTP's own refusals of its session (400 without one, 404 for one that is gone)."""


def _check_message(value: Any, status: int | None, body: bytes, tally: Tally) -> None:
    """A JSON-RPC message in answer to a request whose body is `value`: schema-valid, and
    its HTTP status (None: the last event of an SSE stream), its id and its kind agree
    with the request. A well-formed request without the 2026-07-28 claim is a 2025
    client's (`initialize` opens a session): its answer is checked against the 2025-11-25
    schema, with the HTTP statuses of that revision."""
    message = json.loads(body)
    assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", message
    tally.json_messages += 1
    method = value.get("method") if isinstance(value, dict) else None
    legacy = (
        isinstance(value, dict)
        and value.get("jsonrpc") == "2.0"
        and isinstance(method, str)
        and _is_request_id(value.get("id"))
        and not _claims(value)
        and (method in ("initialize", "ping") or "error" in message)
        and not ("id" not in message and status in REFUSAL_STATUSES)  # HTTP's own refusal
    )
    if legacy:
        check_legacy(method if "result" in message else None, message)
        tally.schema_checked += 1
        assert status in LEGACY_STATUSES, f"HTTP {status} for {message}"
        if "result" in message:
            assert message["id"] == value["id"] and type(message["id"]) is type(value["id"])
        return
    if "error" in message:
        check_reply(None, body)  # the error response, and the shape its code asks for
        tally.schema_checked += 1
        code = message["error"]["code"]
        tally.codes[code] += 1
        if "id" not in message and code == -32600 and status in REFUSAL_STATUSES:
            return  # HTTP refused the request on its own
        assert status in (None, http_status_for_code(code)), f"HTTP {status} for {message}"
    else:
        assert status in (None, 200), f"HTTP {status} for a result {message}"
        assert isinstance(method, str), f"a result to {value!r:.300}"
        check_message(method, body)
        tally.schema_checked += 1
    request_id = value.get("id") if isinstance(value, dict) else None
    if "id" in message:
        assert _is_request_id(request_id), f"an id in reply to {value!r:.300}"
        assert message["id"] == request_id and type(message["id"]) is type(request_id)
    elif message["error"]["code"] != -32700:  # the core's JSON may refuse what Python's
        # reads (an escaped lone surrogate): a parse error has no id to give back
        assert not _is_request_id(request_id), f"no id in reply to {value!r:.300}"


# --- a normal request, to see that the server is still there ----------------------------------

DISCOVER: Final = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "health",
        "method": "server/discover",
        "params": {"_meta": meta({})},
    }
).encode()


class Probe:
    """A keep-alive connection of a well-behaved client: a `server/discover` after every
    example must get its result (a new connection if the server closed this one: it may,
    when idle)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: socket.socket | None = None
        self.client = h11.Connection(h11.CLIENT)
        self.valid: set[bytes] = set()  # bodies already validated: they repeat exactly

    def discover(self) -> Answer:
        try:
            return self._discover()
        except (OSError, h11.ProtocolError, EOFError):
            self.close()  # closed while idle: once more, on a new connection
            return self._discover()

    def _discover(self) -> Answer:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=ANSWER_SECONDS)
            self.client = h11.Connection(h11.CLIENT)
        request = h11.Request(method="POST", target="/mcp", headers=DISCOVER_HEADERS)
        data = b"".join(
            self.client.send(event) or b""
            for event in (request, h11.Data(data=DISCOVER), h11.EndOfMessage())
        )
        self.sock.sendall(data)
        answer: Answer | None = None
        while True:
            event = self.client.next_event()
            if event is h11.NEED_DATA:
                received = self.sock.recv(65536)
                if not received:
                    raise EOFError("the server closed the probe's connection")
                self.client.receive_data(received)
            elif isinstance(event, h11.Response):
                headers = {name.lower(): value for name, value in event.headers}
                answer = Answer(event.status_code, headers, b"", whole=False)
            elif isinstance(event, h11.Data):
                assert answer is not None
                answer.body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert answer is not None
                answer.whole = True
                self.client.start_next_cycle()
                return answer
            else:
                raise AssertionError(f"the probe got {event!r}")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


DISCOVER_HEADERS: Final = [
    (b"host", b"127.0.0.1"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", PROTOCOL_VERSION.encode()),
    (b"mcp-method", b"server/discover"),
    (b"content-length", str(len(DISCOVER)).encode()),
]


def check_still_serving(served: ServedInThread) -> None:
    """No error logged, the thread alive, and a normal request gets its correct result."""
    assert served.alive, f"the server thread ended: {served.failure!r}"
    assert not served.errors, served.errors
    answer = served.probe.discover()
    assert answer.status == 200 and answer.headers[b"content-type"] == b"application/json"
    if answer.body not in served.probe.valid:
        check_reply("server/discover", answer.body)
        assert json.loads(answer.body)["id"] == "health"
        served.probe.valid.add(answer.body)


# --- hostile requests ----------------------------------------------------------------------------

TASK_IDS: list[str] = ["tsk_unknown"]
"""Filled by `seed_tasks` with real task ids (working, input_required, completed,
cancelled) before the examples run; drawn by index, so any list works."""

TOOL_ARGUMENTS: Final[dict[str, st.SearchStrategy[Any]]] = {
    "greet": st.fixed_dictionaries({}, optional={"name": st.text(max_size=8)}),
    "chatty": st.just({}),
    "job": st.fixed_dictionaries({}, optional={"label": st.text(max_size=8)}),
    "asking_job": st.just({}),
    "forever": st.just({}),
    "ask": st.just({}),
    "fails": st.just({}),
    "regional": st.fixed_dictionaries(
        {},
        optional={
            "region": st.sampled_from(["eu", "us", "Zürich"]),
            "count": st.integers(0, 3),
            "note": st.text(max_size=4),
        },
    ),
    "nope": st.just({}),
}
RPC_METHODS: Final = (
    "server/discover",
    "tools/list",
    "tools/call",
    "tools/call",
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
    "notifications/cancelled",
)
EXTRA_META: Final = st.fixed_dictionaries(
    {},
    optional={
        "progressToken": st.integers(0, 9) | st.text(max_size=4),
        "io.modelcontextprotocol/logLevel": st.sampled_from(["debug", "info", "error", "nope"]),
    },
)


@st.composite
def valid_rpc(draw: st.DrawFn) -> dict[str, Any]:
    """A JSON-RPC message `fuzz_server` accepts (or refuses only for what it names)."""
    method = draw(st.sampled_from(RPC_METHODS))
    params: dict[str, Any] = {"_meta": meta(draw(GOOD_CAPS), **draw(EXTRA_META))}
    if method == "notifications/cancelled":
        return {"jsonrpc": "2.0", "method": method, "params": {"requestId": draw(st.integers())}}
    if method == "tools/call":
        params["name"] = draw(st.sampled_from(sorted(TOOL_ARGUMENTS)))
        params["arguments"] = draw(TOOL_ARGUMENTS[params["name"]])
        if params["name"] == "ask" and draw(st.booleans()):
            params["inputResponses"] = {"who": draw(st.sampled_from(GOOD_ANSWERS))}
    elif method.startswith("tasks/"):
        params["taskId"] = TASK_IDS[draw(st.integers(0, 63)) % len(TASK_IDS)]
        if method == "tasks/update":
            params["inputResponses"] = draw(
                st.dictionaries(
                    st.sampled_from(["ok", "zz"]),
                    st.sampled_from(
                        [{"action": "accept", "content": {"ok": "yes"}}, *GOOD_ANSWERS]
                    ),
                    max_size=2,
                )
            )
    elif method == "prompts/get":
        params["name"] = draw(st.sampled_from(["hello", "nope"]))
    elif method == "resources/read":
        params["uri"] = draw(
            st.sampled_from(["notes://today", "files://a", "files://a%2Fb", "files://", "nope://x"])
        )
    elif method == "completion/complete":
        params["ref"] = draw(
            st.sampled_from(
                [
                    {"type": "ref/resource", "uri": "files://{name}"},
                    {"type": "ref/prompt", "name": "hello"},
                ]
            )
        )
        params["argument"] = {
            "name": draw(st.sampled_from(["name", "x"])),
            "value": draw(st.text(max_size=4)),
        }
    elif method == "subscriptions/listen":
        params["notifications"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "toolsListChanged": st.booleans(),
                    "resourceSubscriptions": st.just(["notes://today"]),
                    "taskIds": st.lists(st.sampled_from(TASK_IDS[:4] or ["x"]), max_size=2),
                },
            )
        )
    request_id = draw(st.integers(-(2**31), 2**31) | st.text(max_size=6))
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


Headers = list[tuple[bytes, bytes]]
RAW_BYTES: Final = st.binary(max_size=12)
_T = TypeVar("_T")


NAME_PARAM: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


def _matching(message: dict[str, Any]) -> HttpHeaders:
    """The Mcp-* headers a correct client sends with `message`."""
    method = message.get("method")
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta_value = params.get("_meta")
    version = meta_value.get(META_VERSION) if isinstance(meta_value, dict) else None
    name = params.get(NAME_PARAM.get(method, ""), None) if isinstance(method, str) else None
    if isinstance(name, str) and not name.isascii():
        name = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
    return HttpHeaders(
        protocol_version=version if isinstance(version, str) else None,
        method=method if isinstance(method, str) else None,
        name=name if isinstance(name, str) else None,
    )


def _mcp_headers(draw: st.DrawFn, message: dict[str, Any]) -> tuple[dict[str, Any], Headers]:
    """The message, one time in three after the core fuzzer's edits (`_edited`), and the
    Mcp-* headers a correct client sends with it, each now and then changed; one time in
    ten, the core fuzzer's headers instead (none, random, or one off)."""
    headers: HttpHeaders | None = _matching(message)
    if draw(st.sampled_from([False, False, True])):
        message, theirs = _edited(draw, message)
        headers = theirs if draw(_mostly(False, True)) else _matching(message)
    if headers is None:  # no Mcp-* header at all
        return message, []
    found = [
        (b"Mcp-Protocol-Version", headers.protocol_version),
        (b"Mcp-Method", headers.method),
        (b"Mcp-Name", headers.name),
    ]
    out: Headers = []
    for header, text in found:
        if text is None:
            continue
        name, value = header, text.encode("utf-8", "surrogateescape")
        how = draw(_mostly("as is", "upper", "twice", "raw", "folded", "spaced"))
        if how == "upper":
            name = name.upper()
        elif how == "twice":
            out.append((name, draw(st.sampled_from([value, b"", b"x"]))))
        elif how == "raw":
            value = draw(RAW_BYTES)
        elif how == "folded":
            value = value + b"\r\n " + draw(RAW_BYTES)
        elif how == "spaced":
            value = b"  " + value + b" "
        out.append((name, value))
    return message, out


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, Headers]:
    """A body, and the Mcp-* headers that go with it."""
    kind = draw(st.sampled_from(["rpc"] * 6 + ["bytes", "json", "huge", "empty"]))
    if kind == "rpc":
        message, headers = _mcp_headers(draw, draw(valid_rpc()))
        if message.get("params", {}) and isinstance(message["params"], dict):
            arguments = message["params"].get("arguments")
            if message["params"].get("name") == "regional" and isinstance(arguments, dict):
                for key, header in (("region", b"Mcp-Param-Region"), ("count", b"Mcp-Param-Count")):
                    if key in arguments and draw(st.integers(0, 3)):
                        shown = json.dumps(arguments[key]).strip('"').encode()
                        headers.append((header, draw(st.sampled_from([shown, b"=?base64?ZXU=?="]))))
        return json.dumps(message, ensure_ascii=draw(st.booleans())).encode(), headers
    random_mcp = st.lists(
        st.tuples(
            st.sampled_from([b"Mcp-Protocol-Version", b"Mcp-Method", b"Mcp-Name", b"Mcp-Param-X"]),
            HEADER_VALUES.filter(lambda v: v is not None).map(lambda v: str(v).encode()),
        ),
        max_size=3,
    )
    if kind == "bytes":
        return draw(st.binary(max_size=200)), draw(random_mcp)
    if kind == "json":
        return json.dumps(draw(JSON_VALUES | ENVELOPES)).encode(), draw(random_mcp)
    if kind == "huge":  # around max_body_bytes
        size = CONFIG.max_body_bytes + draw(st.integers(-2, 2)) * 1024
        return b"[" + b"0," * (size // 2 - 1) + b"0]", []
    return b"", []


TOKEN: Final = st.text(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    min_size=1,
    max_size=12,
).map(str.encode)


def _mostly(usual: _T, *others: _T, odds: int = 9) -> st.SearchStrategy[_T]:
    """`usual` `odds` times in `odds + 1`, else one of `others`."""
    return st.sampled_from([usual] * odds * len(others) + list(others))


# Each part of a request has values HTTP allows (which the server may still refuse: a
# GET, a foreign Host, text/plain) and hostile ones (which h11 may refuse outright).
PLAUSIBLE: Final[dict[str, st.SearchStrategy[bytes]]] = {
    "method": _mostly(
        b"POST",
        b"GET",
        b"PUT",
        b"DELETE",
        b"OPTIONS",
        b"PATCH",
        b"HEAD",
        b"post",
        b"TRACE",
        odds=19,
    ),
    "target": _mostly(
        b"/mcp",
        b"/mcp?x=1",
        b"/mcp/",
        b"/MCP",
        b"/",
        b"*",
        b"//mcp",
        b"http://127.0.0.1/mcp",
        b"http://evil.example/mcp",
        b"/mcp?",
        b"/../mcp",
        odds=19,
    ),
    "version": _mostly(b"HTTP/1.1", b"HTTP/1.0", odds=19),
    "host": _mostly(
        b"127.0.0.1",
        b"localhost:1",
        b"[::1]:80",
        b"LOCALHOST",
        b"evil.example",
        b"127.0.0.1.evil.example",
        b"127.0.0.1:x",
        b"[::1",
        odds=19,
    ),
    "content-type": _mostly(
        b"application/json",
        b"application/json; charset=utf-8",
        b"APPLICATION/JSON",
        b"application/json;",
        b"text/plain",
        b"",
        b"application/jsonx",
        b"application/json, text/plain",
        odds=19,
    ),
    "accept": _mostly(
        b"application/json, text/event-stream",
        b"application/json",
        b"text/event-stream",
        b"*/*",
        b"text/*",
        b"",
        b"image/png",
        b"application/*",
        b"application/json;q=0, text/event-stream",
        odds=19,
    ),
    "origin": st.sampled_from(
        [
            b"http://localhost",
            b"https://127.0.0.1:9",
            b"null",
            b"http://evil.example",
            b"file://",
            b"http://[::1]",
            b"http://localhost.evil",
            b"http://[::1",
        ]
    ),
    "expect": st.sampled_from([b"100-continue", b"100-Continue", b"something"]),
    "connection": st.sampled_from([b"close", b"keep-alive", b"Close, x"]),
    "eol": st.just(b"\r\n"),
    "colon": _mostly(b": ", b":", b":\t", b":  ", odds=19),
}
RAW_VALUE: Final = st.binary(max_size=12) | st.integers(100, 12_000).map(lambda n: b"v" * n)
HOSTILE: Final[dict[str, st.SearchStrategy[bytes]]] = {
    "method": TOKEN | st.binary(max_size=8) | st.sampled_from([b"CONNECT", b"PRI", b""]),
    "target": st.binary(max_size=16) | st.binary(max_size=16).map(lambda b: b"/mcp" + b),
    "version": st.sampled_from(
        [b"HTTP/2.0", b"HTTP/1.1 x", b"", b"http/1.1", b"HTTP/1.", b"HTTP/9.9", b"HTTP/1.1\x00"]
    )
    | st.binary(max_size=9),
    "host": RAW_VALUE,
    "content-type": RAW_VALUE,
    "accept": RAW_VALUE,
    "origin": RAW_VALUE,
    "expect": RAW_VALUE,
    "connection": RAW_VALUE,
    "eol": st.sampled_from([b"\n", b"\r", b"\n\r", b"\r\r\n"]),
    "colon": st.sampled_from([b" : ", b"::", b"", b" :", b":\r\n "]),
}
HOSTILE_PARTS: Final = (
    *HOSTILE,
    "framing",
    "framing",
    "extra headers",
    "extra headers",
    "mcp headers",
    "duplicate host",
    "no host",
    "no accept",
)
OPTIONAL_HEADERS: Final = {b"Origin": 2, b"Expect": 2, b"Connection": 2}
"""Of 16 requests, how many carry each of these headers (when not hostile)."""
FRAMINGS: Final = st.sampled_from(
    [
        "none",
        "short",
        "long",
        "twice",
        "two",
        "odd",
        "bad chunks",
        "chunked and length",
        "other coding",
    ]
)
ODD_LENGTHS: Final = st.sampled_from(
    [b"-1", b"+5", b" 5", b"0x10", b"99999999999999999999", b"", b"1e3", b"5,5", b"\xff"]
)
EXTRA_HEADERS: Final = st.lists(
    st.tuples(TOKEN | st.binary(min_size=1, max_size=8), RAW_VALUE), min_size=1, max_size=3
)
MANGLED_MCP: Final = st.lists(
    st.tuples(
        st.sampled_from(
            [
                b"Mcp-Protocol-Version",
                b"Mcp-Method",
                b"Mcp-Name",
                b"Mcp-Param-Region",
                b"MCP-NAME",
                b"Mcp-Param-",
            ]
        ),
        RAW_VALUE | HEADER_VALUES.filter(lambda v: v is not None).map(lambda v: str(v).encode()),
    ),
    min_size=1,
    max_size=3,
)


def _chunked(draw: st.DrawFn, body: bytes, mangle: bool) -> bytes:
    out = b""
    rest = body
    while rest:
        size = draw(st.integers(1, max(1, len(rest))))
        extension = draw(_mostly(b"", b";x=y", b"; x"))
        out += b"%x" % size + extension + b"\r\n" + rest[:size] + b"\r\n"
        rest = rest[size:]
    out += b"0\r\n" + draw(_mostly(b"", b"Trailer: x\r\n")) + b"\r\n"
    if mangle:
        how = draw(st.sampled_from(["size", "cut", "crlf", "junk"]))
        at = draw(st.integers(0, max(0, len(out) - 1)))
        if how == "size":
            out = b"zz\r\n" + out
        elif how == "cut":
            out = out[:at]
        elif how == "crlf":
            out = out.replace(b"\r\n", b"\n", 1)
        else:
            out = out[:at] + draw(st.binary(min_size=1, max_size=4)) + out[at:]
    return out


def _framed(draw: st.DrawFn, body: bytes, framing: str) -> tuple[Headers, bytes]:
    length = str(len(body)).encode()
    if framing == "length":
        return [(b"Content-Length", length)], body
    if framing == "chunked":
        return [(b"Transfer-Encoding", b"chunked")], _chunked(draw, body, mangle=False)
    if framing == "short" and body:
        return [(b"Content-Length", str(draw(st.integers(0, len(body) - 1))).encode())], body
    if framing == "long":
        return [(b"Content-Length", str(len(body) + draw(st.integers(1, 99))).encode())], body
    if framing in ("twice", "two"):
        other = length if framing == "twice" else str(len(body) + 1).encode()
        return [(b"Content-Length", length), (b"Content-Length", other)], body
    if framing == "odd":
        return [(b"Content-Length", draw(ODD_LENGTHS))], body
    if framing == "bad chunks":
        return [(b"Transfer-Encoding", b"chunked")], _chunked(draw, body, mangle=True)
    if framing == "chunked and length":
        headers = [(b"Transfer-Encoding", b"chunked"), (b"Content-Length", length)]
        return headers, _chunked(draw, body, mangle=False)
    if framing == "other coding":
        coding = draw(st.sampled_from([b"gzip", b"chunked, gzip", b"identity", b"gzip, chunked"]))
        return [(b"Transfer-Encoding", coding)], body
    return [], body  # none: the body bytes are read as the next request


@st.composite
def hostile_request(draw: st.DrawFn) -> bytes:
    """One request, made to hurt: about half have every part as HTTP allows (the server
    may still refuse them), most others one or two hostile parts, a few all of them."""
    level = draw(st.sampled_from([0] * 10 + [1] * 7 + [2] * 2 + [len(HOSTILE_PARTS)]))
    hostile = {draw(st.sampled_from(HOSTILE_PARTS)) for _ in range(level)}

    def part(name: str) -> bytes:
        return draw((HOSTILE if name in hostile else PLAUSIBLE)[name])

    body, headers = draw(bodies())
    if "mcp headers" in hostile:
        headers.extend(draw(MANGLED_MCP))
    if "no host" not in hostile:
        headers.append((b"Host", part("host")))
    if "duplicate host" in hostile:
        headers.append((b"Host", draw(PLAUSIBLE["host"] | HOSTILE["host"])))
    if draw(_mostly(True, False)) or "content-type" in hostile:
        headers.append((b"Content-Type", part("content-type")))
    if "no accept" not in hostile:
        headers.append((b"Accept", part("accept")))
    for name, odds in OPTIONAL_HEADERS.items():
        key = name.decode().lower()
        if key in hostile or draw(st.sampled_from([False] * (16 - odds) + [True] * odds)):
            headers.append((name, part(key)))
    if "extra headers" in hostile:
        headers.extend(draw(EXTRA_HEADERS))
    framing = draw(FRAMINGS) if "framing" in hostile else draw(_mostly("length", "chunked"))
    more, body = _framed(draw, body, framing)
    headers = draw(st.permutations(headers + more))
    eol, colon = part("eol"), part("colon")
    request_line = part("method") + b" " + part("target") + b" " + part("version")
    head = eol.join([request_line, *(name + colon + value for name, value in headers)])
    return head + eol + eol + body


def _well_formed(method: bytes, body: bytes) -> bytes:
    return (
        method + b" /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


FIRST_REQUESTS: Final = st.sampled_from(
    [
        _well_formed(b"POST", DISCOVER),
        _well_formed(b"GET", b""),
        _well_formed(b"HEAD", b""),
        _well_formed(b"POST", b"{"),
    ]
)
WIRES: Final = st.builds(
    lambda first, request, reset: Wire((first or b"") + request, reset),
    st.sampled_from([None] * 9 + [1]).flatmap(lambda n: FIRST_REQUESTS if n else st.none()),
    hostile_request(),
    _mostly(False, True),
)


# --- running the examples ----------------------------------------------------------------------


def seed_tasks(port: int) -> None:
    """Tasks in each status, for tasks/* requests to name: working, input_required,
    completed, cancelled."""
    caps: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
    ids: list[str] = []
    for tool in ("forever", "asking_job", "job", "forever"):
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": {}, "_meta": meta(caps)},
            }
        ).encode()
        answer = _rpc(port, body, "tools/call", tool)
        ids.append(json.loads(answer.body)["result"]["taskId"])
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tasks/cancel",
            "params": {"taskId": ids[3], "_meta": meta(caps)},
        }
    ).encode()
    assert _rpc(port, body, "tasks/cancel", ids[3]).status == 200
    TASK_IDS[:] = [*ids, "tsk_unknown"]


def _rpc(port: int, body: bytes, method: str, name: str) -> Answer:
    data = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\n"
        + f"Mcp-Protocol-Version: {PROTOCOL_VERSION}\r\nMcp-Method: {method}\r\n".encode()
        + f"Mcp-Name: {name}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    wire = Wire(data)
    (answer,) = exchange(port, wire, parse_as_server(data)).answers
    check_reply(method, answer.body)
    return answer


def one_example(served: ServedInThread, wire: Wire, tally: Tally) -> None:
    parsed = parse_as_server(wire.data)
    check_exchange(parsed, exchange(served.port, wire, parsed), tally)
    check_still_serving(served)


def run_http_fuzz(
    served: ServedInThread,
    examples: int,
    tally: Tally,
    *,
    database: bool = True,
    progress: Callable[[Tally], None] | None = None,
) -> None:
    """Run `examples` Hypothesis examples against `served`; raise on the first failure
    (shrunk). `fuzz/run.py` calls this with a large count."""
    options = settings(
        max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck)
    )
    if not database:
        options = settings(options, database=None)

    @options
    @given(wire=WIRES)
    def run(wire: Wire) -> None:
        one_example(served, wire, tally)
        if progress is not None:
            progress(tally)

    run()


def _wait_for_streams_to_end(served: ServedInThread) -> None:
    deadline = time.monotonic() + 5
    while served.subscription_count() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert served.subscription_count() == 0, "a listen stream outlived its client"


@pytest.fixture(scope="module")
def served() -> Iterator[ServedInThread]:
    with ServedInThread(fuzz_server()) as running:
        seed_tasks(running.port)
        yield running
    assert running.failure is None, running.failure
    assert not running.errors, running.errors


def test_hostile_requests_get_well_formed_answers(served: ServedInThread) -> None:
    tally = Tally()
    run_http_fuzz(served, 1_000, tally)
    _wait_for_streams_to_end(served)
    assert tally.examples >= 1_000
    print(json.dumps(tally.summary(), indent=1))  # shown with -s


def test_the_oracle_sees_what_the_server_sees() -> None:
    """The framing cases the checks rely on, read by `parse_as_server`."""
    whole = _well_formed(b"POST", DISCOVER)
    assert parse_as_server(whole).ending == "complete"
    assert len(parse_as_server(whole + whole).requests) == 2
    assert parse_as_server(whole[:-3]).ending == "incomplete"
    assert parse_as_server(whole + b"bad\r\n\r\n").ending == "error"
    assert parse_as_server(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\nxx").ending == (
        "complete"
    )


def test_the_generator_reaches_the_server(served: ServedInThread) -> None:
    """A well-formed tools/call through the same checks gets a result (so the fuzz is not
    all refusals)."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "chatty", "arguments": {}, "_meta": meta({}, progressToken=1)},
        }
    ).encode()
    data = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\n"
        + f"Mcp-Protocol-Version: {PROTOCOL_VERSION}\r\nMcp-Method: tools/call\r\n".encode()
        + f"Mcp-Name: chatty\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    tally = Tally()
    one_example(served, Wire(data), tally)
    assert tally.statuses == {200: 1} and tally.json_messages == 2  # progress, then the result


# Found by this fuzzer: after a HEAD on a keep-alive connection, HTTP's own refusal of the
# next request (400 for a head h11 cannot parse, 408 for one that does not arrive) was written
# as an answer to HEAD, without its body, and h11 refused to send it.


def test_a_malformed_request_after_head_gets_its_400() -> None:
    head = b"HEAD /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    wire = Wire(head + b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nbad header\r\n\r\n")
    parsed = parse_as_server(wire.data)
    assert parsed.ending == "error" and len(parsed.requests) == 1
    with ServedInThread(fuzz_server()) as served:  # its own: this one logs an error
        result = exchange(served.port, wire, parsed)
        assert [answer.status for answer in result.answers] == [405, 400], result
        check_exchange(parsed, result, Tally())
        check_still_serving(served)


def test_a_request_that_stalls_after_head_gets_its_408() -> None:
    config = dataclasses.replace(CONFIG, header_timeout_seconds=0.3)
    with ServedInThread(fuzz_server(), config) as served:
        sock = socket.create_connection(("127.0.0.1", served.port), timeout=ANSWER_SECONDS)
        try:
            sock.sendall(b"HEAD /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nPOST /mcp HTTP/1.1\r\nHo")
            result = _Reader(sock, [b"HEAD", b"POST"], due=2, listen=False).read()
        finally:
            sock.close()
        assert [answer.status for answer in result.answers] == [405, 408], result
        check_still_serving(served)
