"""`Server.record` in a running server: real files, rotated; a disk that refuses writes
loses lines (counted, logged, a gap noted) and never a request; lines reach the file within
a second; sensitive arguments stay out; each file replays on its own."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome
from mcp_tasks.journals import _writer
from mcp_tasks.journals._codec import frame
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


def test_a_symbolic_link_planted_at_the_path_is_never_followed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Refused when the writer is made; planted later, every opening refuses it (the lines
    are lost, counted and logged), and what it points to is left as it was."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    journal = tmp_path / "j.jsonl"
    journal.symlink_to(victim)
    with pytest.raises(ValueError, match="symbolic link"):
        JournalWriter(journal)
    journal.unlink()
    writer = JournalWriter(journal)
    journal.symlink_to(victim)
    with caplog.at_level(logging.WARNING, logger="mcp_tasks.recording"):
        writer(frame(b'{"gap":0}'))
        assert writer.wait_written(10)
        writer.close()
    assert victim.read_text() == "precious\n" and journal.is_symlink()
    assert writer.lines_lost == 1 and writer.lines_written == 0
    assert any("symbolic link" in record.getMessage() for record in caplog.records)


def test_every_journal_file_and_folder_made_is_private_whatever_the_umask(
    tmp_path: Path,
) -> None:
    """0700 folders, 0600 files, rotated ones too, under umask 0; a folder that existed
    is left as it was."""
    kept = tmp_path / "kept"
    kept.mkdir()
    kept.chmod(0o755)
    journal = kept / "a" / "b" / "j.jsonl"
    writer = JournalWriter(journal, max_bytes=4096, backups=2)
    line = frame(b'{"gap":0,"pad":"' + b"x" * 1000 + b'"}')
    previous = os.umask(0)
    try:
        for _ in range(12):
            writer(line)
            assert writer.wait_written(10)
        writer.close()
    finally:
        os.umask(previous)
    files = journals_in(journal.parent)
    assert [path.name for path in files] == ["j.jsonl", "j.jsonl.1", "j.jsonl.2"]
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for folder in (journal.parent, journal.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE(kept.stat().st_mode) == 0o755


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_the_process_standard_streams_are_journals_though_linux_makes_them_links(
    stream: str,
) -> None:
    """`/dev/stdout` is a link (to /proc/self/fd/1) that names no planted file: a journal
    written there reaches the process's own stream."""
    other = "stderr" if stream == "stdout" else "stdout"
    code = (
        "from mcp_tasks.recording import JournalWriter\n"
        f"writer = JournalWriter('/dev/{stream}')\n"
        "writer(b'{\"journal\":1}\\n')\n"
        "writer.close()\n"
        f"import sys; print('lost', writer.lines_lost, file=sys.{other})\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    written, said = (ran.stdout, ran.stderr) if stream == "stdout" else (ran.stderr, ran.stdout)
    assert written == '{"journal":1}\n'
    assert said.strip() == "lost 0"


def test_lines_lost_to_a_slow_disk_leave_the_writing_thread_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `MAX_QUEUED_BYTES` waiting, `flush` loses lines on the server's thread; the
    file the writing thread is blocked on stays open under it (closing it there let the
    descriptor be reused, or killed the thread), and once the disk keeps up again every
    batch is done, the gap noted."""
    monkeypatch.setattr(_writer, "MAX_QUEUED_BYTES", 256 * 1024)
    fifo = tmp_path / "slow-disk"
    os.mkfifo(fifo, 0o600)
    received = bytearray()
    reader_ready = threading.Event()
    go = threading.Event()

    def slow_disk() -> None:
        with open(fifo, "rb", buffering=0) as pipe:
            reader_ready.set()
            go.wait(30)
            while chunk := pipe.read(1 << 16):
                received.extend(chunk)

    reader = threading.Thread(target=slow_disk, daemon=True)
    reader.start()
    writer = JournalWriter(fifo)
    line = frame(b'{"call":"receive","n":1,"pad":"' + b"x" * 4000 + b'"}')
    writer(frame(b'{"journal":"mcp-tasks","format":2}'))
    for _ in range(40):  # 160 KiB: more than the pipe holds, the writer thread blocks
        writer(line)
    writer.flush()
    assert reader_ready.wait(10)
    opened = None
    for _ in range(200):  # bounded: the thread opens the pipe as the reader is there
        opened = writer._file
        if opened is not None:
            break
        threading.Event().wait(0.05)
    assert opened is not None
    for _ in range(200):  # 800 KiB more than may wait: lost, on this thread
        writer(line)
        writer.flush()
    assert writer.lines_lost > 0
    assert writer._file is opened and not opened.closed  # still the writing thread's
    go.set()
    assert writer.wait_written(30)
    writer(line)
    assert writer.wait_written(30)
    writer.close()
    reader.join(30)
    assert b'{"gap":' in received
    assert received.count(b'"pad"') == writer.lines_written - 1  # every line but the header
