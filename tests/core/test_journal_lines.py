"""The lines a recording writes, byte for byte, are the ones the recorder wrote before it
wrote them straight from the inputs (issue 28, the recording's cost).

`journals/lines.jsonl` was written by the recorder at commit 746bfa1 (1b128e1's recorder,
journals of format 2), which built a dict of each input's fields and encoded it: the
session of `test_journal.session` with and without a poll policy (a `tasks/get` that
draws), polls carrying HTTP headers and a principal, a poll the store could not answer,
one held at a flush, a call that raised, and a tool with sensitive arguments (the
redacting path). The same calls must write the same bytes: old readers, `mcp-tasks
replay` and the line checksums all see the same journal. Written again in issue 29, where
only the configuration lines changed (the server options gained `legacy_sessions`), and
again where the `server/discover` replies changed: a server that serves 2025 sessions
names their revisions in `supportedVersions`. Again in issue 32, configuration lines only:
a tool's spec gained `arguments_decoder` (written `null`: a function is not written).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcp_tasks.core import (
    START_TASK,
    CallToolResult,
    HttpHeaders,
    InputRequired,
    TaskOptions,
    ToolSpec,
)
from mcp_tasks.journals._codec import CALL, unframe
from mcp_tasks.journals._recorder import Recorder

from .harness import ALL_CAPS, Harness, meta
from .test_journal import assert_replays, session
from .tools import TOOLS, ask_confirm

GOLDEN = Path(__file__).parent / "journals" / "lines.jsonl"
HEADERS = HttpHeaders(protocol_version="2026-07-28", method="tasks/get", name=None, params=None)


def recorded(h: Harness, lines: list[bytes]) -> Recorder:
    def failed(call: str, error: Exception) -> None:
        raise AssertionError(f"{call} not recorded: {error!r}")

    recorder = Recorder(h.core, lines.append, on_error=failed)  # type: ignore[arg-type]
    h.core = recorder  # type: ignore[assignment]
    return recorder


def polls(lines: list[bytes]) -> None:
    h = Harness(tools=TOOLS, task_options=TaskOptions(min_poll_fraction=0.5))
    recorder = recorded(h, lines)
    task_id = h.call("slow", {}, caps=ALL_CAPS)["result"]["taskId"]
    h.get(task_id, caps=ALL_CAPS, headers=HEADERS)
    h.now += 0.1
    h.get(task_id, caps=ALL_CAPS)  # too soon: the policy's draw
    h.finish(task_id, CallToolResult.text("done"))
    h.now += 2.0
    h.get(task_id, caps=ALL_CAPS, headers=HEADERS)
    h.get("tsk-none", caps=ALL_CAPS)  # no such task: the record is None

    def get(request_id: int) -> bytes:
        params = {"taskId": task_id, "_meta": meta()}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tasks/get", "params": params}
        return json.dumps(message).encode()

    recorder.receive(get(41), h.now, HEADERS, "ada")
    recorder.store_unavailable(41)
    recorder.receive(get(42), h.now + 1, None, "ada")
    recorder.flush()


def raised(lines: list[bytes]) -> None:
    h = Harness(tools=TOOLS)
    mine: list[bytes] = []
    recorded(h, mine)
    h.call("greet", {"name": "Ada"})
    [need] = [json.loads(unframe(line)) for line in mine if b'"RunTool"' in line]
    made = CALL.decode(json.dumps(need["out"]["need"]["RunTool"]["call"]).encode())
    with pytest.raises(AssertionError):
        h.core.task_refused(msgspec.structs.replace(made, request_id=None), per_principal=False)
    lines += mine


def sensitive(lines: list[bytes]) -> None:
    login = ToolSpec(
        name="login",
        input_schema={"type": "object", "properties": {"password": {"type": "string"}}},
        task_support="optional",
        sensitive_arguments=frozenset({"password"}),
    )

    def handler(call: Any) -> Any:
        if not call.input_responses:
            return InputRequired(requests={"ok": ask_confirm("Log in?")})
        return START_TASK

    h = Harness(tools={"login": (login, handler)})
    recorded(h, lines)
    arguments = {"password": "hunter2"}
    state = h.call("login", arguments, caps=ALL_CAPS)["result"]["requestState"]
    answers = {"ok": {"action": "accept", "content": {"confirm": True}}}
    extra = {"inputResponses": answers, "requestState": state}
    task_id = h.call("login", arguments, extra=extra, caps=ALL_CAPS)["result"]["taskId"]
    h.get(task_id, caps=ALL_CAPS, headers=HEADERS)
    h.finish(task_id, CallToolResult.text("in"))
    h.get(task_id, caps=ALL_CAPS)


def written() -> list[bytes]:
    lines: list[bytes] = []
    for policy in (TaskOptions(ttl_ms=600_000), TaskOptions(min_poll_fraction=0.5)):
        h = Harness(tools=TOOLS, task_options=policy)
        recorded(h, lines)
        session(h)
    for more in (polls, raised, sensitive):
        more(lines)
    return [bytes(line) for line in lines]


def settled(line: bytes) -> bytes:
    """`line` without its checksum (checked), its sets in one order: a record's
    `issued_keys` is a set, written in the order of the process's string hashes."""
    return _ISSUED_KEYS.sub(lambda keys: b",".join(sorted(keys[0].split(b","))), unframe(line))


_ISSUED_KEYS = re.compile(rb'(?<="issued_keys":\[)[^\]]*')


def test_the_lines_written_are_the_bytes_written_before() -> None:
    lines = written()
    golden = GOLDEN.read_bytes().splitlines(keepends=True)
    assert len(lines) == len(golden)
    for number, (line, before) in enumerate(zip(lines, golden, strict=True), start=1):
        assert settled(line) == settled(before), f"line {number} changed"


def test_the_golden_lines_cover_every_way_a_line_is_written() -> None:
    lines = written()
    joined = b"".join(lines)
    assert b'"then":{"call":"handle_task_request","draws":[["poll"' in joined  # a drawn poll
    assert b'"then":{"call":"handle_task_request","draws":[],"in":{"record":null' in joined
    assert b'"headers":{"protocol_version":"2026-07-28"' in joined
    assert b'"principal":"ada"' in joined
    assert b'"raised":' in joined and b'"[redacted]"' in joined
    assert b'"call":"store_unavailable"' in joined
    assert_replays(lines)
