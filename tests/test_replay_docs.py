"""docs/replay.md's snippets, run as written: the server recording a session (its
sensitive argument never in the journal), `replay` in code, the pytest helper, and the
command's output as the page shows it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from doc_snippets import Page

from mcp_tasks import Server
from mcp_tasks.server import Connection

PAGE = Page("replay.md")


@pytest.fixture
def in_tmp(tmp_path: Path) -> Iterator[Path]:
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(here)


def call(server: Server, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "log_in",
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }

    async def run() -> dict[str, Any]:
        async with server.running():
            reply = await server.handle(json.dumps(message).encode(), connection=Connection())
            assert reply is not None
            answer: dict[str, Any] = json.loads(reply.body)
            return answer

    return trio.run(run)


def record(folder: Path) -> Path:
    server: Server = PAGE.run("server.record(")["server"]
    answer = call(server, {"user": "ada", "password": "correct horse"})
    assert answer["result"]["content"][0]["text"] == "hello, ada"
    journal = folder / "journal.jsonl"
    assert "correct horse" not in journal.read_text()
    assert '"password":"[redacted]"' in journal.read_text()
    return journal


def test_the_recording_snippet_writes_a_journal_without_the_password(in_tmp: Path) -> None:
    record(in_tmp)


def test_the_replay_snippet_replays_it(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record(in_tmp)
    PAGE.run('replay("journal.jsonl")')
    assert "calls, 0 tasks: every answer the same" in capsys.readouterr().out


def test_the_replay_snippet_reports_a_difference(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = record(in_tmp)
    journal.write_bytes(journal.read_bytes().replace(b"hello, ada", b"hello, bob"))
    PAGE.run('replay("journal.jsonl")')
    out = capsys.readouterr().out
    assert "differs" in out and "its checksum does not match" in out


def test_the_pytest_helper_snippet_makes_a_test_per_journal(in_tmp: Path) -> None:
    folder = in_tmp / "tests" / "journals"
    folder.mkdir(parents=True)
    record(in_tmp).rename(folder / "session.jsonl")
    made = PAGE.run("replay_journals(")
    test = made["test_journals"]
    [mark] = [mark for mark in test.pytestmark if mark.name == "parametrize"]
    assert [path.name for path in mark.args[1]] == ["session.jsonl"]
    test(folder / "session.jsonl")  # replays, raising nothing


def test_the_command_prints_what_the_page_shows(in_tmp: Path) -> None:
    journal = record(in_tmp)
    out = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", "replay", str(journal.name)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    shape = "journal.jsonl: {} calls replayed, every answer the same ({} tasks)"
    calls = int(out.split(":")[1].split()[0])
    assert out.strip() == shape.format(calls, 0)
    page = PAGE.path.read_text()
    assert shape.format(68, 4) in page  # the page's example has the same shape
