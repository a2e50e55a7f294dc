"""`Server.record` in a running server: real files, rotated; a disk that refuses writes
loses lines (counted, logged, a gap noted) and never a request; lines reach the file within
a second; sensitive arguments stay out; each file replays on its own."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome
from mcp_tasks.recording import JournalWriter
from mcp_tasks.replay import replay
from mcp_tasks.testing import journals_in

from .helpers import Client


def build() -> Server:
    server = Server("recorded", "1.0", tasks=TaskOptions(ttl_ms=60_000))

    @server.tool()
    async def greet(ctx: ToolContext, name: str) -> str:
        """Say hello."""
        return f"Hello, {name}!"

    @server.tool(task_support="optional", sensitive=["token"])
    async def deploy(ctx: ToolContext, target: str, token: str) -> ToolOutcome:
        """Deploy, as a task."""
        if not ctx.in_task:
            return START_TASK
        await ctx.set_status_message(f"deploying {target}")
        return CallToolResult.text(f"deployed {target}")

    return server


async def session(server: Server, calls: int = 3) -> list[str]:
    client = Client(server)
    tasks = []
    for number in range(calls):
        await client.call("greet", {"name": f"n{number}"})
        task_id = await client.start("deploy", {"target": "prod", "token": "s3cr3t-t0ken"})
        await client.wait_status(task_id, "completed")
        tasks.append(task_id)
    return tasks


async def test_a_running_server_records_a_journal_that_replays(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    server = build()
    journal = tmp_path / "journals" / "j.jsonl"
    server.record(journal)
    with pytest.raises(RuntimeError, match="records already"):
        server.record(tmp_path / "other.jsonl")
    async with server.running():
        tasks = await session(server)
    result = replay(journal)
    assert result.calls >= 20 and set(tasks) <= result.tasks
    text = journal.read_text()
    assert "s3cr3t-t0ken" not in text and '"token":"[redacted]"' in text
    assert '"then":{"call":"handle_task_request"' in text  # tasks/get, one line each


async def test_record_is_refused_while_running(autojump_clock: MockClock, tmp_path: Path) -> None:
    server = build()
    async with server.running():
        with pytest.raises(RuntimeError, match="while the server is running"):
            server.record(tmp_path / "j.jsonl")


async def test_lines_reach_the_file_within_a_second(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    server = build()
    journal = tmp_path / "j.jsonl"
    writer = server.record(journal)
    async with server.running():
        await Client(server).call("greet", {"name": "Ada"})
        assert not journal.exists() or b"Hello, Ada" not in journal.read_bytes()
        await trio.sleep(1.01)  # the server hands the lines to the writing thread
        assert writer.wait_written(10)  # which writes them (real time, not trio's)
        assert b"Hello, Ada" in journal.read_bytes()


async def test_the_journal_rotates_and_every_file_replays_on_its_own(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    server = build()
    journal = tmp_path / "j.jsonl"
    server.record(JournalWriter(journal, max_bytes=8192, backups=2))
    async with server.running():
        for _ in range(6):
            await session(server, calls=2)
            await trio.sleep(1.01)  # each second's lines written: rotation between them
    files = journals_in(tmp_path)
    assert [path.name for path in files] == ["j.jsonl", "j.jsonl.1", "j.jsonl.2"]
    for path in files:
        first, second = path.read_bytes().splitlines()[:2]
        assert first.startswith(b'{"journal":"mcp-tasks"') and second.startswith(b'{"config"')
        assert replay(path).calls > 0
        assert path.stat().st_size < 8192 + 64 * 1024  # rotated once past the limit


async def test_a_disk_that_refuses_writes_loses_lines_never_requests(
    tmp_path: Path, autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """/dev/full takes every write with ENOSPC: the server answers all the same, and
    says so on mcp_tasks.recording, rate-limited."""
    server = build()
    writer = JournalWriter("/dev/full")
    server.record(writer)
    with caplog.at_level(logging.WARNING, logger="mcp_tasks.recording"):
        async with server.running():
            for _ in range(3):
                hello = await Client(server).call("greet", {"name": "Ada"})
                assert hello["result"]["content"][0]["text"] == "Hello, Ada!"
                await trio.sleep(1.01)
    assert writer.lines_lost >= 3 and writer.lines_written == 0
    complaints = [r.getMessage() for r in caplog.records if r.name == "mcp_tasks.recording"]
    assert complaints and "could not be written" in complaints[0]
    assert "No space left on device" in complaints[0]


async def test_writing_again_notes_the_lines_lost_and_still_replays(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """Its folder is a file for a while (a mistake, a removed mount): the lines of that
    while are lost, and once the folder can be made again a gap line says how many."""
    server = build()
    blocked = tmp_path / "journals"
    blocked.write_text("not a folder")
    journal = blocked / "j.jsonl"
    writer = JournalWriter(journal)
    server.record(writer)
    async with server.running():
        await session(server, calls=1)
        await trio.sleep(1.01)
        assert writer.wait_written(10)
        lost = writer.lines_lost
        assert lost > 0 and writer.lines_written == 0
        blocked.unlink()
        await session(server, calls=1)
        await trio.sleep(1.01)
    lines = journal.read_bytes().splitlines()
    gaps = [json.loads(line) for line in lines if line.startswith(b'{"gap"')]
    assert [gap["gap"] for gap in gaps] == [lost]
    assert replay(journal).calls > 0  # header and configuration written again first


def test_the_pytest_helper_makes_a_test_of_each_journal(tmp_path: Path) -> None:
    """`replay_journals(folder)` in a test module of a user's project: one test per
    journal, the broken one failing with its report; an empty folder fails too."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    folder = tmp_path / "journals"
    server = build()
    good = folder / "good.jsonl"
    server.record(good)

    async def record() -> None:
        async with server.running():
            await session(server, calls=1)

    trio.run(record)
    lines = good.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3].replace(b"Hello", b"Howdy", 1)
    (folder / "edited.jsonl").write_bytes(b"".join(lines))
    (tmp_path / "empty").mkdir()
    test_file = tmp_path / "test_journals.py"
    test_file.write_text(
        "from mcp_tasks.testing import replay_journals\n"
        f"test_journals = replay_journals({str(folder)!r})\n"
        f"test_none = replay_journals({str(tmp_path / 'empty')!r})\n"
    )
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:randomly", "-p",
         "no:cacheprovider"],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    out = ran.stdout
    assert ran.returncode == 1, out
    assert "2 failed, 1 passed" in out
    assert "test_journals[edited.jsonl]" in out and "line 4:" in out
    assert "test_none[no-journals]" in out and "no journal (*.jsonl)" in out
