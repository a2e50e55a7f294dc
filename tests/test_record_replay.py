"""Record and replay, end to end: `mcp-tasks serve examples/jobs.py --record J` as a real
process on a loopback port, a real HTTP session with our client (a task with an input
round, a cancelled task, an expired one, an input round before a task, a listen stream),
then `replay(J)`: every call answers byte for byte as recorded, on every store. A byte
changed anywhere in the journal makes replay fail, naming its line."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from redis_server import free_port, running_redis

from mcp_tasks.client import RpcError, connect_http, connect_stdio
from mcp_tasks.core import ElicitParams, ElicitResult, SubscriptionFilter
from mcp_tasks.core._client import PollPolicy, TaskExpired
from mcp_tasks.journals._codec import FORMAT, frame, unframe
from mcp_tasks.replay import ReplayFailed, format_timeline, replay, timeline

ROOT = Path(__file__).parent.parent
JOBS = ROOT / "examples" / "jobs.py"
TTL_SECONDS = 3
FAST = PollPolicy(min_interval_ms=20, max_interval_ms=100)


@contextmanager
def serving(journal: Path, *flags: str) -> Iterator[str]:
    """`mcp-tasks serve` recording to `journal`; its URL. Stopped with Ctrl-C (SIGINT) at
    the end, so it closes the journal as a server does."""
    port = free_port()
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", str(JOBS)]
    command += ["--http", f"127.0.0.1:{port}", "--record", str(journal), *flags]
    command += ["--ttl", str(TTL_SECONDS)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        seen = []
        for line in process.stderr:
            seen.append(line)
            if "Streamable HTTP on" in line:
                break
        else:
            raise AssertionError("the server ended before serving: " + "".join(seen))
        yield f"http://127.0.0.1:{port}/mcp"
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


async def answer(params: ElicitParams) -> ElicitResult:
    """Whatever a form asks: a name, a yes."""
    properties = (params.requested_schema or {}).get("properties", {})
    content: dict[str, Any] = {}
    for key, schema in properties.items():
        content[key] = True if schema.get("type") == "boolean" else "Ada"
    return ElicitResult(action="accept", content=content)


async def session(url: str) -> dict[str, str]:
    """The session the journal records; the ids of its tasks by what they show."""
    tasks: dict[str, str] = {}
    async with connect_http(url, on_elicit=answer, poll=FAST) as client:
        await client.discover()
        await client.list_tools()
        await client.call_tool("greet", {"name": "World"})
        # An input round before the task exists (requestState), then the task.
        before = await client.call_tool("test_tool_with_task", {})
        assert "Hello, Ada!" in before.content[0].text  # type: ignore[union-attr]
        # A task with an input round inside it (tasks/update answers it).
        asked = await client.call_tool_or_task("confirm_delete", {"filename": "a.txt"})
        tasks["input"] = asked.task_id  # type: ignore[union-attr]
        done = await client.await_task(tasks["input"])
        assert done.content[0].text == "Deleted a.txt"  # type: ignore[union-attr]
        # A listen stream that sees a task cancelled.
        doomed = await client.call_tool_or_task("slow_compute", {"seconds": 60})
        tasks["cancelled"] = doomed.task_id  # type: ignore[union-attr]
        statuses: list[str] = []
        async with trio.open_nursery() as nursery:
            listening = trio.Event()
            ended = trio.Event()

            async def heard(message: dict[str, Any]) -> None:
                if message["method"] == "notifications/subscriptions/acknowledged":
                    listening.set()
                elif message["method"] == "notifications/tasks":
                    statuses.append(message["params"]["status"])
                    if message["params"]["status"] == "cancelled":
                        ended.set()

            watch = SubscriptionFilter(task_ids=[tasks["cancelled"]])
            nursery.start_soon(client.listen, watch, heard)
            with trio.fail_after(10):
                await listening.wait()
                await client.cancel_task(tasks["cancelled"])
                await ended.wait()
            nursery.cancel_scope.cancel()
        assert statuses[-1] == "cancelled"
        # A task left waiting for an answer until its TTL runs out.
        waiting = await client.call_tool_or_task("interview", {})
        tasks["expired"] = waiting.task_id  # type: ignore[union-attr]
        with trio.fail_after(TTL_SECONDS + 15):
            while True:
                try:
                    task = await client.get_task(tasks["expired"])
                except (RpcError, TaskExpired):
                    break  # -32602: unknown or expired
                assert task.status in ("working", "input_required")
                await trio.sleep(0.2)
    return tasks


def record(journal: Path, *flags: str) -> dict[str, str]:
    with serving(journal, *flags) as url:
        return trio.run(session, url)


def check_replays(journal: Path, tasks: dict[str, str]) -> None:
    result = replay(journal)
    text = journal.read_text()
    assert result.calls > 40
    assert set(tasks.values()) <= result.tasks
    for seen in ('"requestState"', "tasks/update", "tasks/cancel", "subscriptions/listen"):
        assert seen in text, seen
    expired = format_timeline(tasks["expired"], timeline(journal, tasks["expired"]))
    assert "input_required" in expired
    assert "removed (its TTL ran out while it was unfinished)" in expired
    cancelled = format_timeline(tasks["cancelled"], timeline(journal, tasks["cancelled"]))
    assert "cancelled" in cancelled and "handler cancelled" in cancelled


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    journal = tmp_path_factory.mktemp("memory") / "journal.jsonl"
    return journal, record(journal)


def test_a_real_http_session_replays_byte_for_byte(
    recorded: tuple[Path, dict[str, str]],
) -> None:
    journal, tasks = recorded
    check_replays(journal, tasks)


def test_every_byte_changed_makes_replay_fail_naming_its_line(
    recorded: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    journal, _ = recorded
    data = journal.read_bytes()
    starts = [0, *[i + 1 for i, byte in enumerate(data) if byte == ord("\n")][:-1]]
    picks = random.Random(20).sample(range(len(data)), 40)
    for position in picks:
        edited = bytearray(data)
        edited[position] = ord("#") if data[position] != ord("#") else ord("$")
        copy = tmp_path / "edited.jsonl"
        copy.write_bytes(bytes(edited))
        line = sum(1 for start in starts if start <= position)
        with pytest.raises(ReplayFailed) as failed:
            replay(copy)
        assert failed.value.line == line, (position, failed.value.report)
        assert f"line {line}:" in failed.value.report


def test_an_answer_changed_and_checksummed_again_fails_with_a_diff(
    recorded: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    journal, tasks = recorded
    lines = journal.read_bytes().splitlines(keepends=True)
    # The reply of a tasks/get that found the input task waiting: status edited.
    number, line = next(
        (n, line)
        for n, line in enumerate(lines, 1)
        if b'"call":"handle_task_request"' in line
        and tasks["input"].encode() in line
        and b'"status":"input_required"' in line
    )
    head, _found, tail = unframe(line).rpartition(b'"status":"input_required"')  # in `out`
    body = head + b'"status":"completed"' + tail
    lines[number - 1] = frame(body)
    copy = tmp_path / "edited.jsonl"
    copy.write_bytes(b"".join(lines))
    with pytest.raises(ReplayFailed) as failed:
        replay(copy)
    report = failed.value.report
    assert failed.value.line == number
    assert f"line {number}: handle_task_request answered differently on replay" in report
    assert "-" in report and '"status": "completed"' in report
    assert '"status": "input_required"' in report
    assert "tasks/get" in report  # the message it answers
    assert f"task {tasks['input']}:" in report  # its life up to there


def test_the_cli_replays_and_tells_a_task_s_life(
    recorded: tuple[Path, dict[str, str]],
) -> None:
    journal, tasks = recorded
    command = [sys.executable, "-m", "mcp_tasks.cli", "replay", str(journal)]
    replayed = subprocess.run(command, capture_output=True, text=True, check=False)
    assert replayed.returncode == 0, replayed.stderr
    assert "calls replayed, every answer the same" in replayed.stdout
    told = subprocess.run(
        [*command, "--task", tasks["input"]], capture_output=True, text=True, check=False
    )
    assert told.returncode == 0, told.stderr
    lines = told.stdout.splitlines()
    assert lines[0] == f"task {tasks['input']}:"
    assert "created by tools/call confirm_delete: working" in lines[1]
    assert any("input_required, asking confirm" in line for line in lines)
    assert any("tasks/update answered confirm" in line for line in lines)
    assert "completed" in lines[-1] or any("completed" in line for line in lines[-3:])
    unknown = subprocess.run(
        [*command, "--task", "tsk_nobody"], capture_output=True, text=True, check=False
    )
    assert unknown.returncode == 1 and "not in the journal" in unknown.stdout


@pytest.mark.slow
def test_a_stdio_session_replays(tmp_path: Path) -> None:
    """The same journal whatever the transport: stdio, a real subprocess."""
    journal = tmp_path / "journal.jsonl"
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", str(JOBS), "--stdio"]
    command += ["--record", str(journal)]

    async def over_stdio() -> None:
        async with connect_stdio(command, on_elicit=answer, poll=FAST) as client:
            await client.call_tool("greet", {"name": "World"})
            before = await client.call_tool("test_tool_with_task", {})
            assert "Hello, Ada!" in before.content[0].text  # type: ignore[union-attr]
            asked = await client.call_tool_or_task("confirm_delete", {"filename": "b.txt"})
            await client.await_task(asked.task_id)  # type: ignore[union-attr]

    trio.run(over_stdio)
    result = replay(journal)
    assert result.calls > 10 and len(result.tasks) == 2
    assert b'"headers":null' in journal.read_bytes()  # stdio: no HTTP headers


@pytest.mark.slow
def test_a_sqlite_backed_session_replays(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    tasks = record(journal, "--store", f"sqlite:///{tmp_path / 'tasks.db'}")
    check_replays(journal, tasks)


@pytest.mark.slow
def test_a_redis_backed_session_replays(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    with running_redis() as url:
        tasks = record(journal, "--store", url)
    check_replays(journal, tasks)


def test_nothing_secret_is_written(recorded: tuple[Path, dict[str, str]]) -> None:
    journal, _ = recorded
    text = journal.read_text()
    assert "state_key" not in text and "authorization" not in text.lower()
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["journal"] == "mcp-tasks" and header["format"] == FORMAT
    assert os.path.getsize(journal) > 0
