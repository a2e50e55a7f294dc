"""`mcp-tasks replay` on journals made to hurt it: every one is refused with a message
naming its line, exit status 1, and no traceback, in a process whose memory is capped.

Crafted from a real journal (recorded through the core with `RecordingCore`): nesting
deeper than any journal writes (in each part of a line), a wrong type in every field a
replay reads, lines cut short, binary, a checksum of 10,000 digits, an empty file, no
header, another format, a call before any configuration, a line longer than the bound
(`--max-line-bytes`) and `/dev/zero` (one endless line), which must be refused having read
little more than the bound. Beyond the subprocesses, every field of every line of the real
journal is replaced in turn by each wrong type and the journal replayed in this process:
only `ReplayFailed` may come out."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core.harness import ALL_CAPS, Harness
from core.test_journal import recording, session
from core.tools import TOOLS

from mcp_tasks.core import TaskOptions
from mcp_tasks.journals._codec import frame
from mcp_tasks.replay import DEFAULT_MAX_LINE_BYTES, ReplayFailed, replay

MEMORY_LIMIT = 1024 * 1024 * 1024
"""The address space `mcp-tasks replay` runs in: far below /dev/zero, or a 3 GiB line."""
RUN_CAPPED = (
    "import resource, sys\n"
    f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))\n"
    "from mcp_tasks.cli import main\n"
    "sys.argv[0] = 'mcp-tasks'\n"
    "main()\n"
)


def recorded() -> list[bytes]:
    """A real journal: a session through a recording core."""
    h = Harness(tools=TOOLS, task_options=TaskOptions(ttl_ms=600_000))
    lines = recording(h)
    session(h)
    h.call("greet", {"name": "Ada"}, caps=ALL_CAPS)
    return [bytes(line) for line in lines]


LINES = recorded()
HEADER, CONFIG = LINES[0], LINES[1]
CALLS = [line for line in LINES[2:] if line.startswith(b'{"call"')]
TASK_LINE = next(line for line in CALLS if b'"then":' in line)


def body(line: bytes) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(line)
    decoded.pop("crc")
    return decoded


def framed(value: Any) -> bytes:
    return frame(json.dumps(value, separators=(",", ":")).encode())


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def framed_raw(text: str) -> bytes:
    return frame(text.encode())


DEEP = deep(50_000)


def with_call(line: bytes) -> bytes:
    return HEADER + CONFIG + line


HOSTILE: dict[str, bytes] = {
    "empty": b"",
    "blank": b"\n\n  \n",
    "no-header": CONFIG + CALLS[0],
    "no-header-call-first": CALLS[0],
    "format-later": framed({"journal": "mcp-tasks", "format": 99}) + CONFIG,
    "format-string": framed({"journal": "mcp-tasks", "format": "1"}) + CONFIG,
    "another-journal": framed({"journal": "other", "format": 1}),
    "header-a-list": framed_raw("[1,2]"),
    "call-before-config": HEADER + CALLS[0],
    "binary": HEADER + bytes(range(256)) + b"\n",
    "binary-framed": HEADER + frame(b'{"gap":"\xff\xfe"}'),
    "nul": HEADER + b"\x00" * 100 + b"\n",
    "cut-short": HEADER + CONFIG + CALLS[0][: len(CALLS[0]) // 2] + b"\n",
    "cut-short-last": HEADER + CONFIG + CALLS[0][:-9],
    "crc-changed": with_call(CALLS[0].replace(b'"crc":', b'"crc":1')),
    "crc-10000-digits": HEADER + CALLS[0][:-2].rpartition(b":")[0] + b":" + b"9" * 10_000 + b"}\n",
    "deep-line": HEADER + framed_raw('{"gap":' + deep(100_000) + "}"),
    "deep-config": HEADER + framed_raw('{"config":' + deep(50_000) + "}"),
    "deep-in": with_call(framed_raw('{"call":"receive","n":1,"in":' + deep(50_000) + "}")),
    "deep-draws": with_call(
        framed_raw('{"call":"receive","n":1,"in":{},"draws":[["id",' + deep(50_000) + "]]}")
    ),
    "deep-data": with_call(
        framed_raw(
            '{"call":"receive","n":1,"draws":[],"out":null,"in":{"data":{"a":' + DEEP + "}}}"
        )
    ),
    "deep-then": with_call(
        framed_raw(TASK_LINE.decode().partition('"then":')[0] + '"then":' + deep(50_000) + "}")
    ),
    "config-a-list": HEADER + framed({"config": [1]}),
    "config-tools-wrong": HEADER + framed({"config": {**body(CONFIG)["config"], "catalog": 5}}),
    "config-tool-wrong": HEADER
    + framed({"config": {**body(CONFIG)["config"], "catalog": {"tools": [{"name": 5}]}}}),
    "n-a-string": with_call(framed({**body(CALLS[0]), "n": "one"})),
    "call-unknown": with_call(framed({**body(CALLS[0]), "call": "__init__"})),
    "call-a-number": with_call(framed({**body(CALLS[0]), "call": 7})),
    "in-a-list": with_call(framed({**body(CALLS[0]), "in": [1]})),
    "draws-an-object": with_call(framed({**body(CALLS[0]), "draws": {"a": 1}})),
    "draws-wrong-items": with_call(framed({**body(CALLS[0]), "draws": [[1, 2, 3]]})),
    "data-a-number": with_call(framed({**body(CALLS[0]), "in": {"data": 5}})),
    "data-a-short-list": with_call(framed({**body(CALLS[0]), "in": {"data": [1]}})),
    "data-bad-base64": with_call(framed({**body(CALLS[0]), "in": {"data": ["base64", "!"]}})),
    "then-a-string": with_call(framed({**body(TASK_LINE), "then": "x"})),
    "then-a-gap": with_call(framed({**body(TASK_LINE), "then": {"gap": 1}})),
    "gap-a-string": HEADER + framed({"gap": "x"}),
}


def run_replay(path: Path | str, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", RUN_CAPPED, "replay", *flags, str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def assert_refused(ran: subprocess.CompletedProcess[str], line: int) -> None:
    assert ran.returncode == 1, ran.stderr
    assert "Traceback" not in ran.stderr, ran.stderr
    assert f", line {line}:" in ran.stderr, ran.stderr
    assert len(ran.stderr) < 20_000  # a report, not the line


FIRST_LINE = {
    "empty",
    "blank",
    "no-header",
    "no-header-call-first",
    "format-later",
    "format-string",
}
FIRST_LINE |= {"another-journal", "header-a-list"}


def refused_at(name: str) -> int:
    """The line a hostile journal is refused at: its last (or its first, or where the
    bytes 0-255 put a newline)."""
    if name in FIRST_LINE:
        return 1
    if name == "binary":
        return 2  # bytes 0 to 9, byte 10 being a newline
    journal = HOSTILE[name]
    return journal.count(b"\n") + (not journal.endswith(b"\n"))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_journal_is_refused_naming_its_line(tmp_path: Path, name: str) -> None:
    journal = tmp_path / f"{name}.jsonl"
    journal.write_bytes(HOSTILE[name])
    assert_refused(run_replay(journal), refused_at(name))


def test_a_real_journal_replays(tmp_path: Path) -> None:
    journal = tmp_path / "real.jsonl"
    journal.write_bytes(b"".join(LINES))
    ran = run_replay(journal)
    assert ran.returncode == 0, ran.stderr
    assert f"{len(CALLS)} calls" in ran.stdout or "calls replayed" in ran.stdout


def test_a_line_past_the_bound_is_refused_unread(tmp_path: Path) -> None:
    """An 8 MiB line with a 1 MiB bound: refused, naming it (`/dev/zero` below shows it
    is not read whole: it has no end)."""
    journal = tmp_path / "huge.jsonl"
    with journal.open("wb") as file:
        file.write(HEADER + CONFIG + b'{"gap":"')
        chunk = b"x" * (1024 * 1024)
        for _ in range(8):
            file.write(chunk)
        file.write(b'"}\n')
    ran = run_replay(journal, "--max-line-bytes", str(1024 * 1024))
    assert_refused(ran, 3)
    assert "longer than 1048576 bytes" in ran.stderr


def test_dev_zero_is_refused_within_the_memory_cap() -> None:
    """An endless line: refused at the default bound, in a process capped at 1 GiB."""
    ran = run_replay("/dev/zero")
    assert_refused(ran, 1)
    assert f"longer than {DEFAULT_MAX_LINE_BYTES} bytes" in ran.stderr


def test_a_bound_below_a_line_or_not_a_number_is_a_usage_error(tmp_path: Path) -> None:
    journal = tmp_path / "real.jsonl"
    journal.write_bytes(b"".join(LINES))
    ran = run_replay(journal, "--max-line-bytes", "0")
    assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr


# --- every field, every wrong type, in this process ---------------------------------------

WRONG: list[Any] = [None, True, -1, 2**70, 1.5, "x", [], [1, "a"], {}, {"a": [1]}]


def replaced(value: Any) -> Iterator[Any]:
    """`value` with each of its parts (itself included) replaced by each wrong value."""
    yield from WRONG
    if isinstance(value, dict):
        for key, item in value.items():
            for other in replaced(item):
                yield {**value, key: other}
            yield {k: v for k, v in value.items() if k != key}
    elif isinstance(value, list):
        for at, item in enumerate(value):
            for other in replaced(item):
                yield [*value[:at], other, *value[at + 1 :]]


@pytest.mark.parametrize("kind", ["header", "config", "call", "task"])
def test_every_wrong_type_anywhere_is_refused_or_answers_differently(
    tmp_path: Path, kind: str
) -> None:
    """Only `ReplayFailed` comes out (a refusal naming the line, or a difference)."""
    line = {"header": HEADER, "config": CONFIG, "call": CALLS[0], "task": TASK_LINE}[kind]
    before = {"header": [], "config": [HEADER], "call": [HEADER, CONFIG]}.get(kind)
    journal = tmp_path / "j.jsonl"
    tried = 0
    for mutation in replaced(body(line)):
        if tried >= 4000:
            break
        tried += 1
        journal.write_bytes(b"".join([*(before or [HEADER, CONFIG]), framed(mutation)]))
        try:
            replay(journal)
        except ReplayFailed as failed:
            assert failed.line >= 1
    assert tried > 30


def test_the_report_of_a_huge_answer_is_short(tmp_path: Path) -> None:
    """A recorded answer of 300,000 lines: the diff shown is cut, saying how much more."""
    journal = tmp_path / "long-answer.jsonl"
    journal.write_bytes(HEADER + CONFIG + framed({**body(CALLS[0]), "out": list(range(300_000))}))
    ran = run_replay(journal)
    assert_refused(ran, 3)
    assert "more lines of the diff)" in ran.stderr
