"""Journals at the core's boundary: `RecordingCore` writes each entry point's call, and
`Playback` replays it through a fresh core, byte for byte, with what the call drew (ids,
sealing, argument decoding, the poll policy) played back: no key, no tool types. Secrets
stay out, catalog changes are noted, and anything edited or unknown is refused."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from mcp_tasks.core import (
    START_TASK,
    CallToolResult,
    ErrorObject,
    HttpHeaders,
    InputRequired,
    Step,
    TaskOptions,
    ToolSpec,
)
from mcp_tasks.core.inputs import Received
from mcp_tasks.journals._codec import CALL, FORMAT, JournalDamaged, frame, unframe
from mcp_tasks.journals._playback import Playback, Replayed
from mcp_tasks.journals._recorder import RecordingCore
from mcp_tasks.journals._redaction import REDACTED

from .harness import ALL_CAPS, Harness, meta
from .tools import TOOLS, ask_confirm, ask_name

SECRET = "hunter2-never-in-the-journal"


def recording(harness: Harness) -> list[bytes]:
    lines: list[bytes] = []

    def failed(call: str, error: Exception) -> None:
        raise AssertionError(f"{call} not recorded: {error!r}")

    harness.core = RecordingCore(harness.core, lines.append, on_error=failed)
    return lines


def replayed(lines: list[bytes]) -> list[Replayed]:
    playback = Playback()
    return [answer for line in lines for answer in playback.feed(line)]


def assert_replays(lines: list[bytes]) -> list[Replayed]:
    calls = replayed(lines)
    for call in calls:
        assert call.matches, (call.n, call.call, call.problem, call.expected, call.actual)
    return calls


def session(h: Harness) -> None:
    """Discover, a sync call, an input round into a task, input inside it, a cancel, a
    failure, a malformed message, an expiry."""
    h.request("server/discover", caps=ALL_CAPS)
    h.request("tools/list", caps=ALL_CAPS)
    h.call("greet", {"name": "Ada"}, caps=ALL_CAPS)
    first = h.call("ask_then_task", {}, caps=ALL_CAPS)
    h.now += 1.25
    answers = {"who": {"action": "accept", "content": {"name": "Alice"}}}
    state = first["result"]["requestState"]
    extra = {"inputResponses": answers, "requestState": state}
    task_id = h.call("ask_then_task", {}, caps=ALL_CAPS, extra=extra)["result"]["taskId"]
    h.finish(task_id, InputRequired(requests={"ok": ask_confirm("Go on?"), "name": ask_name()}))
    h.get(task_id, caps=ALL_CAPS)
    h.update(task_id, {"ok": {"action": "accept", "content": {"confirm": True}}}, caps=ALL_CAPS)
    h.update(task_id, {"name": {"action": "decline"}}, caps=ALL_CAPS)
    h.finish(task_id, CallToolResult.text("done"))
    doomed = h.call("slow", {}, caps=ALL_CAPS)["result"]["taskId"]
    h.cancel(doomed, caps=ALL_CAPS)
    broken = h.call("slow", {"n": 1}, caps=ALL_CAPS)["result"]["taskId"]
    h.finish(broken, ErrorObject(code=-32603, message="disk full"))
    h.send(b"{oops")
    h.now += 700
    h.expire_due()
    h.get(task_id, caps=ALL_CAPS)


def test_a_session_replays_byte_for_byte_with_what_it_drew() -> None:
    h = Harness(tools=TOOLS, task_options=TaskOptions(ttl_ms=600_000))
    lines = recording(h)
    session(h)
    calls = assert_replays(lines)
    names = {call.call for call in calls}
    assert {"receive", "tool_returned", "handle_task_request", "task_returned"} <= names
    assert "expire_task" in names
    draws = [json.loads(unframe(line)).get("draws") or [] for line in lines]
    kinds = {kind for drawn in draws for kind, _ in drawn}
    assert {"id", "digest", "mac", "verify"} <= kinds
    header = json.loads(unframe(lines[0]))
    assert header == {"journal": "mcp-tasks", "format": FORMAT}
    assert "k" * 32 not in b"".join(lines).decode()  # the harness's sealing key


def test_a_task_created_at_once_or_refused_while_closing_replays() -> None:
    """A tool that runs only as a task is created in `Received`'s answer (its id drawn
    there), and `Received.closing` is written down: both replay."""
    h = Harness(tools=TOOLS, task_options=TaskOptions(ttl_ms=600_000))
    lines = recording(h)
    h.call("required_job", {}, caps=ALL_CAPS)
    params = {"name": "required_job", "arguments": {}, "_meta": meta(ALL_CAPS)}
    message = {"jsonrpc": "2.0", "id": "late", "method": "tools/call", "params": params}
    refused = h.core.handle(Received(json.dumps(message).encode(), closing=True), h.now)
    assert isinstance(refused, Step) and refused.effects == ()
    calls = assert_replays(lines)
    created, closing = (json.loads(unframe(line)) for line in lines[-2:])
    # The task's id, then the run's arguments decoded for its handler (format 2).
    assert [kind for kind, _ in created["draws"][-2:]] == ["id", "decode"]
    assert closing["in"]["closing"] is True
    assert [call.call for call in calls][-2:] == ["receive", "receive"]


def test_an_answer_that_changed_is_found() -> None:
    h = Harness(tools=TOOLS)
    lines = recording(h)
    h.call("greet", {"name": "Ada"})
    head, _, tail = unframe(lines[-1]).rpartition(b"Hello, Ada")  # the reply, not the outcome
    lines[-1] = frame(head + b"Hello, Bob" + tail)
    call = replayed(lines)[-1]
    assert call.call == "tool_returned"
    assert not call.matches and call.problem is None
    assert b"Hello, Bob" in call.expected and b"Hello, Bob" not in call.actual


def test_a_draw_that_changed_is_found() -> None:
    h = Harness(tools=TOOLS)
    lines = recording(h)
    h.call("slow", {})
    [created] = [n for n, line in enumerate(lines) if b'"id","tsk-0001"' in line]
    drawn = b'"draws":[["id","tsk-0001"],["decode",null]]'
    lines[created] = frame(unframe(lines[created]).replace(drawn, b'"draws":[]'))
    problems = [call.problem for call in replayed(lines) if not call.matches]
    assert problems == ["the replayed call drew a id the recorded one did not"]


def test_an_edited_line_is_refused_before_anything_runs() -> None:
    h = Harness(tools=TOOLS)
    lines = recording(h)
    h.call("greet", {"name": "Ada"})
    edited = lines[-1].replace(b"Ada", b"Bob")
    with pytest.raises(JournalDamaged, match="checksum does not match"):
        replayed([*lines[:-1], edited])
    with pytest.raises(JournalDamaged, match="no checksum"):
        replayed([*lines[:-1], b'{"n":1}\n'])


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"journal":"mcp-tasks","format":9}', "cannot read"),
        (b'{"journal":"other","format":1}', "cannot read"),
        (b'{"n":1,"call":"receive","in":{},"draws":[],"out":null}', "before any configuration"),
        (b'{"hello":1}', "lacks 'n'"),
        (b'{"n":"x","call":"receive","in":{},"draws":[],"out":null}', "does not read back"),
        (b'{"gap":"x"}', "does not read back"),
        (b'{"gap":-1}', "negative"),
        (b'{"gap":' + b"[" * 5000 + b"]" * 5000 + b"}", "nests deeper than"),
    ],
)
def test_lines_no_journal_writes_are_refused(line: bytes, why: str) -> None:
    playback = Playback()
    if not line.startswith(b'{"journal"'):
        playback.feed(frame(b'{"journal":"mcp-tasks","format":1}'))
    with pytest.raises(JournalDamaged, match=why):
        playback.feed(frame(line))


def test_a_journal_starts_with_its_header() -> None:
    with pytest.raises(JournalDamaged, match="does not start with its header"):
        Playback().feed(frame(b'{"gap":1}'))


def test_an_unknown_entry_point_or_parameter_is_refused() -> None:
    h = Harness(tools=TOOLS)
    lines = recording(h)
    h.call("greet", {"name": "Ada"})
    playback = Playback()
    playback.feed(lines[0])
    playback.feed(lines[1])
    unknown = b'{"n":1,"call":"format_disk","in":{},"draws":[],"out":null}'
    with pytest.raises(JournalDamaged, match="no entry point"):
        playback.feed(frame(unknown))
    extra = b'{"n":1,"call":"receive","in":{"data":"x","evil":1},"draws":[],"out":null}'
    with pytest.raises(JournalDamaged, match="no parameter 'evil'"):
        playback.feed(frame(extra))


def test_sensitive_arguments_are_never_written_and_still_replay() -> None:
    schema = {
        "type": "object",
        "properties": {
            "user": {"type": "string"},
            "password": {"type": "string", "x-mcp-header": "Password"},
        },
    }
    login = ToolSpec(
        name="login",
        input_schema=schema,
        task_support="optional",
        sensitive_arguments=frozenset({"password"}),
    )

    def handler(call: Any) -> Any:
        if not call.input_responses:
            return InputRequired(requests={"ok": ask_confirm("Log in?")})
        return START_TASK

    h = Harness(tools={"login": (login, handler)})
    lines = recording(h)
    arguments = {"user": "ada", "password": SECRET}
    headers = HttpHeaders(
        protocol_version="2026-07-28",
        method="tools/call",
        name="login",
        params={"password": SECRET},
    )
    asked = h.call("login", arguments, headers=headers, caps=ALL_CAPS)
    state = asked["result"]["requestState"]
    answers = {"ok": {"action": "accept", "content": {"confirm": True}}}
    extra = {"inputResponses": answers, "requestState": state}
    created = h.call("login", arguments, headers=headers, extra=extra, caps=ALL_CAPS)
    task_id = created["result"]["taskId"]
    assert h.record(task_id).arguments is not None  # the store keeps it: only the journal won't
    h.get(task_id, caps=ALL_CAPS)
    h.finish(task_id, CallToolResult.text("in"))
    written = b"".join(lines).decode()
    assert SECRET not in written
    assert written.count(REDACTED) >= 4  # messages, headers, calls, the task's record
    assert "ada" in written  # only what was marked
    assert_replays(lines)


def test_a_changed_catalog_is_noted_and_replayed() -> None:
    h = Harness(tools=TOOLS)
    lines = recording(h)
    h.request("tools/list")
    h.core.add_tool(ToolSpec(name="late", description="added while recording"))
    h.request("tools/list")
    configs = [line for line in lines if line.startswith(b'{"config"')]
    assert len(configs) == 2
    late = assert_replays(lines)[-1]
    assert b"added while recording" in late.actual


def test_a_call_that_raises_is_recorded_as_raised_and_replays() -> None:
    h = Harness(tools=TOOLS)
    lines = recording(h)
    call = h.call("greet", {"name": "Ada"})  # a call that made no task
    assert "result" in call
    [need] = [json.loads(unframe(line)) for line in lines if b'"RunTool"' in line]
    made = CALL.decode(json.dumps(need["out"]["need"]["RunTool"]["call"]).encode())
    unanswerable = msgspec.structs.replace(made, request_id=None)
    with pytest.raises(AssertionError):
        h.core.task_refused(unanswerable, per_principal=False)
    raised = json.loads(unframe(lines[-1]))
    assert raised["call"] == "task_refused"
    assert raised["out"] == {"raised": "AssertionError()"}
    assert_replays(lines)


def test_writing_never_fails_a_call() -> None:
    h = Harness(tools=TOOLS)
    heard: list[str] = []

    def broken_disk(line: bytes) -> None:
        if line.startswith(b'{"call"'):
            raise OSError(28, "No space left on device")

    h.core = RecordingCore(h.core, broken_disk, on_error=lambda call, error: heard.append(call))
    assert h.call("greet", {"name": "Ada"})["result"]["content"][0]["text"] == "Hello, Ada!"
    assert heard == ["receive", "tool_returned"]


def test_the_recorded_clock_and_principal_are_what_the_core_was_given() -> None:
    h = Harness(tools=TOOLS)
    lines = recording(h)
    h.core.receive(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', 12.5, None, "ada")
    entry = json.loads(unframe(lines[-1]))
    assert entry["call"] == "receive"
    assert entry["in"]["now"] == 12.5 and entry["in"]["principal"] == "ada"
    assert entry["out"] == {"step": {"effects": [], "reply": None}}
    assert msgspec.json.decode(unframe(lines[-1]))["n"] == 1


def test_a_tasks_request_shares_its_line_with_its_answer() -> None:
    h = Harness(tools=TOOLS)
    lines = recording(h)
    task_id = h.call("slow", {})["result"]["taskId"]
    written = len(lines)
    h.get(task_id)
    assert len(lines) == written + 1  # receive and handle_task_request, one line
    shared = json.loads(unframe(lines[-1]))
    assert shared["call"] == "receive" and shared["then"]["call"] == "handle_task_request"
    assert "request" not in shared["then"]["in"]  # it is the receive's answer
    calls = assert_replays(lines)
    assert [call.call for call in calls[-2:]] == ["receive", "handle_task_request"]


def test_a_held_request_is_written_when_its_store_fails_or_at_flush() -> None:
    h = Harness(tools=TOOLS)
    lines = recording(h)
    core = h.core
    assert isinstance(core, RecordingCore)
    task_id = h.call("slow", {})["result"]["taskId"]

    def get(request_id: int) -> bytes:
        params = {"taskId": task_id, "_meta": meta()}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tasks/get", "params": params}
        return json.dumps(message).encode()

    core.receive(get(41), 5.0)
    written = len(lines)
    core.store_unavailable(41)  # the store could not load it: answered 503
    held, failed = (json.loads(unframe(line)) for line in lines[written:])
    assert held["call"] == "receive" and "FetchTask" in held["out"]["need"]
    assert failed["call"] == "store_unavailable"
    core.receive(get(42), 6.0)
    written = len(lines)
    core.flush()  # a server stopping: nothing held is lost
    assert len(lines) == written + 1 and b'"FetchTask"' in lines[-1]
    assert_replays(lines)
