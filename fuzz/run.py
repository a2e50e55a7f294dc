"""Fuzz the core (decode + handle) by the million, and the HTTP request path, outside CI.

    .venv/bin/python fuzz/run.py --inputs 1000000                 # both parts, 2 processes
    .venv/bin/python fuzz/run.py --inputs 200000 --http-inputs 0  # the core only
    .venv/bin/python fuzz/run.py --replay /tmp/mcp-tasks-fuzz/core-....jsonl

The core part
-------------
`--inputs` messages from `corpus.Generator` (near-valid requests naming what the core
handed out, byte-mutated requests, arbitrary JSON and bytes, edge cases: see corpus.py),
with random HTTP headers and principals, go through `ServerCore.receive`; the effects are
performed in memory by the harness of the core tests (`tests/core/harness.py`: tools,
prompts, resources and completions run, tasks are fetched, saved, deleted). Between inputs,
random handler outcomes are fed back to running tasks through `task_returned` and the
clock jumps now and then (`expire_task` runs for what expired). A session (one core and
its store) lasts `--session` inputs; each session draws its own task options.

Checked for EVERY input:

* no exception escapes the core: `receive`, `tool_returned`, `prompt_returned`,
  `resource_returned`, `completion_returned`, `handle_task_request`, `task_returned`,
  `expire_task`, nor the harness's own checks of the effects (a save against the wrong
  version, a reply and a handler at once, ...);
* every reply is a JSON-RPC response: one JSON object, `"jsonrpc": "2.0"`, exactly one of
  `result` (an object) and `error` (`code` an integer, `message` a string, maybe `data`),
  no other keys; its `id` echoes the request's id, same type, or is absent when the message
  had no usable one; `Reply.error_code`, `Reply.request_id` and `Reply.http_status` agree
  with the body (`http_status_for_code`, or 429 for a poll refused as too early); a result
  only for a method that has results;
* a request always gets a reply (or opens a listen stream, whose acknowledgement and
  closing response are then checked against the schemas); a notification or a response
  never gets one (unless the bytes are not UTF-8: refusing them whole is right);
* one message makes at most one task.

Validated against the official JSON Schemas (tests/schema, via tests/schema_check.py), as
tests/core/test_fuzz.py validates them: by default EVERY reply (about 4,000 inputs a
second per process). `--validate F` validates only a random fraction F of the replies of a
kind (method, error code or result type, UTF-8 or not) already validated in the session,
and always the first of each kind. Every listen stream's acknowledgement and closing
response are validated.

The HTTP part
-------------
`--http-inputs` Hypothesis examples of `tests/test_fuzz_http.py` (hostile HTTP requests over
127.0.0.1 to the real `serve_http`, in a thread of this process): see that module for what
is generated and checked; every JSON-RPC message in an answer is schema-validated there.

Counts are printed at the end (`--json` for a machine-readable form). The exit status is 1
if anything escaped or any reply was invalid; the session that failed is written to
`--crash-dir` as JSON lines, for `--replay`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import math
import multiprocessing
import random
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "fuzz")]

import schema_check  # noqa: E402
from core.harness import CORE, Harness, check_any_reply  # noqa: E402
from core.test_catalog import COMPLETIONS, PROMPTS, RESOURCES  # noqa: E402
from core.test_fuzz import (  # noqa: E402
    _NOT_JSON,
    CATALOG_METHODS,
    KNOWN_METHODS,
    _check_stream,
    _is_notification,
    _is_request_id,
    _is_response,
    _is_utf8,
)
from core.tools import TOOLS, ask_name  # noqa: E402
from corpus import Generator, Input, Pools  # noqa: E402

from mcp_tasks.core import (  # noqa: E402
    START_TASK,
    CallToolResult,
    ErrorObject,
    HttpHeaders,
    InputRequired,
    ListRootsRequest,
    Reply,
    TaskOptions,
    TextContent,
    ToolOutcome,
    http_status_for_code,
)

_Call = TypeVar("_Call")
_Outcome = TypeVar("_Outcome")


def _guarded(handler: Callable[[_Call], _Outcome]) -> Callable[[_Call], _Outcome | ErrorObject]:
    """The test handlers index their arguments freely: their crash is theirs, not the
    core's, and a real shell turns it into an error outcome."""

    def run(call: _Call) -> _Outcome | ErrorObject:
        try:
            return handler(call)
        except Exception:
            return ErrorObject(code=-32603, message="the handler crashed")

    return run


CATALOG: Final[dict[str, Any]] = {
    "tools": {name: (spec, _guarded(handler)) for name, (spec, handler) in TOOLS.items()},
    "prompts": {name: (spec, _guarded(handler)) for name, (spec, handler) in PROMPTS.items()},
    "resources": {uri: (spec, _guarded(handler)) for uri, (spec, handler) in RESOURCES.items()},
    "completions": {target: _guarded(handler) for target, handler in COMPLETIONS.items()},
}
OUTCOMES: Final[list[ToolOutcome]] = [
    CallToolResult.text("done"),
    CallToolResult(content=[TextContent(text="it went wrong")], is_error=True),
    ErrorObject(code=-32603, message="the job failed"),
    ErrorObject(code=1234, message="odd", data={"x": [1]}),
    InputRequired(requests={"a": ask_name()}),
    InputRequired(requests={"k": ListRootsRequest(), "who": ask_name()}, state="s"),
    START_TASK,
]
"""What a task's handler may return, fed back through `task_returned`."""
SECONDS: Final = (0.001, 0.5, 2.0, 60.0, 301.0, 700.0)
SPECIAL_OPTIONS: Final[list[dict[str, Any]]] = [
    {},
    {"max_tasks": 8},
    {"ttl_ms": 1000, "poll_interval_ms": 100},
    {"ttl_ms": None},
    {"min_poll_fraction": 0.5},
]
"""Task options a session may draw (those this version of TaskOptions knows)."""


class Invalid(AssertionError):
    """A reply (or the lack of one) that breaks the rules."""


_TOO_DEEP: Final = object()


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode(data: bytes) -> tuple[Any, bool]:
    """What the bytes say, read independently of the core (Python's json, RFC 8259: no NaN
    or Infinity; bytes that are not UTF-8 become lone surrogates), and whether a string in
    the text holds a lone surrogate (anywhere: also in a duplicate key's value that the
    last one replaced). `_NOT_JSON` for no JSON text; `_TOO_DEEP` for nesting beyond
    Python's recursion limit (the core's decoder may still read it)."""
    lone = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal lone
        if not lone:
            lone = any(_has_lone_surrogate(key) or _has_lone_surrogate(v) for key, v in items)
        return dict(items)

    try:
        value = json.loads(
            data.decode("utf-8", "surrogateescape"),
            parse_constant=_no_constants,
            object_pairs_hook=pairs,
        )
    except RecursionError:
        return _TOO_DEEP, False
    except ValueError:
        return _NOT_JSON, False
    return value, lone or _has_lone_surrogate(value)


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if any("\ud800" <= char <= "\udfff" for char in item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _is_parse_error(reply: Reply | None) -> bool:
    return reply is not None and reply.error_code == -32700 and reply.request_id is None


# --- counts ------------------------------------------------------------------------------------


@dataclass
class Stats:
    inputs: int = 0
    replies: int = 0
    no_reply: int = 0
    listen_streams: int = 0
    lone_surrogates: int = 0
    shape_checked: int = 0
    schema_checked: int = 0
    task_steps: int = 0
    clock_jumps: int = 0
    sessions: int = 0
    escapes: int = 0
    invalid: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    error_codes: Counter[str] = field(default_factory=Counter)
    results: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)

    def add(self, other: Stats) -> None:
        for name, value in vars(other).items():
            mine = getattr(self, name)
            if isinstance(value, Counter):
                mine.update(value)
            elif isinstance(value, list):
                mine.extend(value[: max(0, 5 - len(mine))] if name == "failures" else value)
            else:
                setattr(self, name, mine + value)

    def report(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs,
            "inputs by kind": dict(self.kinds.most_common()),
            "replies": self.replies,
            "no reply (notifications, responses)": self.no_reply,
            "listen streams opened": self.listen_streams,
            "JSON with lone surrogate escapes, refused as -32700": self.lone_surrogates,
            "replies checked as JSON-RPC": self.shape_checked,
            "replies schema-validated": self.schema_checked,
            "results by method": dict(self.results.most_common()),
            "errors by code": dict(self.error_codes.most_common()),
            "task outcomes fed back": self.task_steps,
            "clock jumps": self.clock_jumps,
            "sessions": self.sessions,
            "escapes": self.escapes,
            "invalid replies": self.invalid,
        }


# --- what every reply must be -----------------------------------------------------------------


def check_reply_shape(value: Any, exact: bool, reply: Reply | None) -> str:
    """The rules for every input (the module docstring); the kind of reply, for counting
    and for choosing what to validate."""
    if value is _TOO_DEEP:  # Python could not read it: the envelope only
        value, exact = _NOT_JSON, False
    if reply is None:
        if not (_is_notification(value) or _is_response(value)):
            raise Invalid("no reply to a request")
        return "none"
    if exact and _is_notification(value):
        raise Invalid("a notification got a reply")
    message = json.loads(reply.body)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise Invalid("not a JSON-RPC 2.0 object")
    if not set(message) <= {"jsonrpc", "id", "result", "error"}:
        raise Invalid(f"unexpected keys {sorted(message)}")
    if ("result" in message) == ("error" in message):
        raise Invalid("not exactly one of result and error")
    method = value.get("method") if isinstance(value, dict) else None
    if "error" in message:
        error = message["error"]
        if not isinstance(error, dict) or not set(error) <= {"code", "message", "data"}:
            raise Invalid(f"a malformed error object {error!r:.200}")
        code = error.get("code")
        if type(code) is not int or not isinstance(error.get("message"), str):
            raise Invalid(f"a malformed error object {error!r:.200}")
        statuses = {http_status_for_code(code)} | ({429} if code == -32000 else set())
        if reply.error_code != code or reply.http_status not in statuses:
            raise Invalid(f"Reply says {reply.error_code}/{reply.http_status}, body {code}")
        kind = f"error {code}"
    else:
        if not isinstance(message["result"], dict):
            raise Invalid("a result that is not an object")
        if reply.error_code is not None or reply.http_status != 200:
            raise Invalid(f"Reply says {reply.error_code}/{reply.http_status} for a result")
        if exact and method not in KNOWN_METHODS + CATALOG_METHODS:
            raise Invalid(f"a result to a request for {method!r:.80}")
        result = message["result"]
        shown = result.get("status", result.get("resultType"))
        kind = f"{method} {shown}"
    if not exact:
        return f"{kind} (not UTF-8)"
    request_id = value.get("id") if isinstance(value, dict) else None
    if _is_request_id(request_id):
        if message.get("id") != request_id or type(message.get("id")) is not type(request_id):
            raise Invalid(f"id {message.get('id')!r:.80} in reply to id {request_id!r:.80}")
        if reply.request_id != request_id:
            raise Invalid("Reply.request_id differs from the body's id")
    elif "id" in message:
        raise Invalid("an id in reply to a message without a usable one")
    return kind


def validate(value: Any, exact: bool, body: bytes) -> None:
    """The reply against the official schemas, as tests/core/test_fuzz.py checks it."""
    message = json.loads(body)
    method = value.get("method") if isinstance(value, dict) else None
    if not exact or value is _NOT_JSON or value is _TOO_DEEP:
        kind = "JSONRPCErrorResponse" if "error" in message else "JSONRPCResultResponse"
        schema_check.check(CORE, kind, message)
    elif "error" in message:
        schema_check.check(CORE, "JSONRPCErrorResponse", message)
        schema_check.check_reply(None, body)  # and the shape of the error its code names
    elif method in KNOWN_METHODS:
        schema_check.check_reply(method, body)
    else:
        check_any_reply(method, body)


# --- one session -------------------------------------------------------------------------------


def _task_options(rng: random.Random) -> dict[str, Any]:
    """Options for a session's tasks: one of `SPECIAL_OPTIONS`, if this TaskOptions has it."""
    known = set(TaskOptions.__struct_fields__)
    options = {"max_tasks": rng.choice((8, 64, 256))}
    options.update(rng.choice(SPECIAL_OPTIONS))
    return {key: value for key, value in options.items() if key in known}


class Session:
    """One core and its store, `inputs` messages long."""

    def __init__(self, rng: random.Random, stats: Stats, validate_fraction: float) -> None:
        self.rng = rng
        self.stats = stats
        self.validate_fraction = validate_fraction
        self.options = _task_options(rng)
        self.harness = Harness(**CATALOG, task_options=TaskOptions(**self.options))
        self.pools = Pools()
        self.generator = Generator(rng, self.pools)
        self.seen: set[str] = set()
        self.log: list[dict[str, Any]] = [{"options": self.options}]
        self.crashed = False
        stats.sessions += 1

    def run(self, inputs: int) -> None:
        for _ in range(inputs):
            self.one(self.generator.next())
            roll = self.rng.random()
            if roll < 0.08:
                self.feed_a_task()
            elif roll < 0.085:
                self.jump(self.rng.choice(SECONDS))

    def one(self, item: Input) -> None:
        self.log.append(_logged(item))
        h, stats = self.harness, self.stats
        stats.inputs += 1
        stats.kinds[item.kind] += 1
        value, lone = decode(item.data)
        exact = _is_utf8(item.data)
        before, streams = h.store.count(), len(h.subscriptions)
        try:
            reply: Reply | None = h.perform(
                h.core.receive(item.data, h.now, item.headers, item.principal)
            )
        except Exception as error:
            self.fail("escape", error)
            return
        try:
            if h.store.count() > before + 1:
                raise Invalid("one message made more than one task")
            if len(h.subscriptions) > streams:
                if reply is not None or len(h.subscriptions) != streams + 1:
                    raise Invalid("a listen stream with a reply, or two streams")
                _check_stream(value, h, h.subscriptions[-1])
                stats.listen_streams += 1
                stats.schema_checked += 2
                h.subscriptions.clear()
                return
            if lone and _is_parse_error(reply):  # \ud800 escaped: the core's JSON refuses it
                stats.lone_surrogates += 1
                value = _NOT_JSON
            kind = check_reply_shape(value, exact, reply)
            if reply is None:
                stats.no_reply += 1
                return
            stats.replies += 1
            stats.shape_checked += 1
            message = json.loads(reply.body)
            if "error" in message:
                stats.error_codes[str(message["error"]["code"])] += 1
            else:
                stats.results[kind] += 1
                self.pools.learn(message)
            if kind not in self.seen or self.rng.random() < self.validate_fraction:
                self.seen.add(kind)
                validate(value, exact, reply.body)
                stats.schema_checked += 1
        except AssertionError as error:
            self.fail("invalid", error)

    def feed_a_task(self) -> None:
        """A running task's handler returns a random outcome."""
        running = [r for r in self.harness.store.records.values() if not r.status.is_terminal]
        if running:
            self.feed(self.rng.choice(running).task_id, self.rng.randrange(len(OUTCOMES)))

    def feed(self, task_id: str, pick: int) -> None:
        h = self.harness
        record = h.store.get(task_id)
        if record is None:
            return
        self.log.append({"task": task_id, "outcome": pick})
        self.stats.task_steps += 1
        try:
            step = h.core.task_returned(record, OUTCOMES[pick], h.now)
            if step.reply is not None:
                raise Invalid("task_returned made a reply")
            h.perform(step)
        except Invalid as error:
            self.fail("invalid", error)
        except Exception as error:
            self.fail("escape", error)

    def jump(self, seconds: float) -> None:
        """The clock moves on; what expired meanwhile expires."""
        self.log.append({"advance": seconds})
        self.stats.clock_jumps += 1
        self.harness.now += seconds
        try:
            self.harness.expire_due()
        except Exception as error:
            self.fail("escape", error)

    def fail(self, what: str, error: BaseException) -> None:
        if what == "escape":
            self.stats.escapes += 1
        else:
            self.stats.invalid += 1
        if len(self.stats.failures) < 5:
            last = self.log[-1]
            trace = "".join(traceback.format_exception(error))
            self.stats.failures.append(f"{what}: {error!r}\nlast input: {last}\n{trace}")
        self.crashed = True


def _logged(item: Input) -> dict[str, Any]:
    headers = (
        None
        if item.headers is None
        else {name: getattr(item.headers, name) for name in item.headers.__struct_fields__}
    )
    return {
        "kind": item.kind,
        "data": base64.b64encode(item.data).decode(),
        "headers": headers,
        "principal": item.principal,
    }


def _replayed(line: dict[str, Any]) -> Input:
    headers = line["headers"]
    return Input(
        line["kind"],
        base64.b64decode(line["data"]),
        None if headers is None else HttpHeaders(**headers),
        line["principal"],
    )


# --- workers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Work:
    worker: int
    inputs: int
    seed: int
    session: int
    validate: float
    crash_dir: str
    quiet: bool


def run_core(work: Work) -> Stats:
    """One worker's share of the core inputs, session after session."""
    rng = random.Random(work.seed)
    stats = Stats()
    started = time.monotonic()
    done = 0
    next_report = 100_000
    while done < work.inputs:
        count = min(work.session, work.inputs - done)
        session = Session(rng, stats, work.validate)
        session.run(count)
        if session.crashed:
            _save(session, work)
        done += count
        if not work.quiet and work.worker == 0 and done >= next_report:
            rate = done / (time.monotonic() - started)
            print(f"  worker 0: {done:,} inputs, {rate:,.0f}/s", file=sys.stderr, flush=True)
            next_report += 100_000
    return stats


def _save(session: Session, work: Work) -> None:
    folder = Path(work.crash_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"core-w{work.worker}-seed{work.seed}-{time.time_ns()}.jsonl"
    with path.open("w") as out:
        for line in session.log:
            out.write(json.dumps(line) + "\n")
    session.stats.saved.append(str(path))


def replay(path: Path) -> Stats:
    """Run a saved session again, every reply schema-validated."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    stats = Stats()
    session = Session(random.Random(0), stats, 1.0)
    session.options = lines[0]["options"]
    session.harness = Harness(**CATALOG, task_options=TaskOptions(**session.options))
    for line in lines[1:]:
        if "advance" in line:
            session.jump(line["advance"])
        elif "task" in line:
            session.feed(line["task"], line["outcome"])
        else:
            session.one(_replayed(line))
    return stats


def run_all_core(args: argparse.Namespace) -> Stats:
    jobs = max(1, min(args.jobs, args.inputs))
    share = math.ceil(args.inputs / jobs)
    works = [
        Work(
            i,
            min(share, args.inputs - i * share),
            args.seed * 1000 + i,
            args.session,
            args.validate,
            args.crash_dir,
            args.json,
        )
        for i in range(jobs)
        if args.inputs - i * share > 0
    ]
    total = Stats()
    if len(works) == 1:
        total.add(run_core(works[0]))
        return total
    with multiprocessing.get_context("fork").Pool(len(works)) as pool:
        for stats in pool.map(run_core, works):
            total.add(stats)
    return total


# --- the HTTP part -------------------------------------------------------------------------------


def run_http(examples: int, quiet: bool) -> tuple[dict[str, Any], list[str]]:
    import test_fuzz_http as fuzz_http  # noqa: PLC0415 - starts nothing until called

    tally = fuzz_http.Tally()
    failures: list[str] = []
    started = time.monotonic()

    def progress(current: Any) -> None:
        if not quiet and current.examples % 5_000 == 0:
            rate = current.examples / (time.monotonic() - started)
            print(
                f"  http: {current.examples:,} examples, {rate:,.0f}/s", file=sys.stderr, flush=True
            )

    with fuzz_http.ServedInThread(fuzz_http.fuzz_server()) as served:
        fuzz_http.seed_tasks(served.port)
        try:
            fuzz_http.run_http_fuzz(served, examples, tally, database=False, progress=progress)
        except Exception as error:
            failures.append("".join(traceback.format_exception(error)))
        with contextlib.suppress(AssertionError):
            fuzz_http._wait_for_streams_to_end(served)
        if served.subscription_count():
            failures.append("a listen stream outlived its client")
    failures.extend(f"logged by the server: {message}" for message in served.errors)
    if served.failure is not None:
        failures.append(f"the server thread failed: {served.failure!r}")
    return tally.summary(), failures


# --- main ---------------------------------------------------------------------------------------


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000, help="core inputs")
    parser.add_argument("--http-inputs", type=int, default=20_000, help="HTTP examples")
    parser.add_argument("--jobs", type=int, default=2, help="processes for the core part")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--session", type=int, default=5_000, help="inputs per core session")
    parser.add_argument(
        "--validate",
        type=float,
        default=1.0,
        help="fraction of the replies of an already validated kind to validate (1: all)",
    )
    parser.add_argument("--crash-dir", default="/tmp/mcp-tasks-fuzz")
    parser.add_argument("--replay", type=Path, help="a saved session to run again")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON only")
    return parser.parse_args(argv)


def _print(title: str, report: dict[str, Any]) -> None:
    print(f"\n{title}")
    for key, value in report.items():
        print(f"  {key}: {value}")


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.replay is not None:
        stats = replay(args.replay)
        _print("replay", stats.report())
        for failure in stats.failures:
            print(failure)
        return 1 if stats.escapes or stats.invalid else 0
    started = time.monotonic()
    core = run_all_core(args) if args.inputs > 0 else Stats()
    core_seconds = time.monotonic() - started
    http_started = time.monotonic()
    http_report, http_failures = (
        run_http(args.http_inputs, args.json) if args.http_inputs else ({}, [])
    )
    http_seconds = time.monotonic() - http_started
    summary = {
        "seed": args.seed,
        "core": {
            **core.report(),
            "seconds": round(core_seconds, 1),
            "inputs per second": round(core.inputs / max(core_seconds, 1e-9)),
        },
        "http": {**http_report, "seconds": round(http_seconds, 1), "failures": len(http_failures)},
        "wall seconds": round(time.monotonic() - started, 1),
    }
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"seed {args.seed}, {summary['wall seconds']} s")
        _print("core: decode + handle", summary["core"])
        _print("HTTP request path", summary["http"])
    for failure in [*core.failures, *http_failures]:
        print("\nFAILURE\n" + failure, file=sys.stderr)
    for path in core.saved:
        print(f"a failing session, for --replay: {path}", file=sys.stderr)
    failed = core.escapes or core.invalid or http_failures
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
