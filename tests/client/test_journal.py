"""The task journal: a real file, read back after a 'restart' (a new Client and journal)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from runtime.test_jobs_example import load_jobs
from trio.testing import MockClock

from mcp_tasks import CallToolResult, Server
from mcp_tasks.client import Client
from mcp_tasks.journal import TaskJournal

from .in_process import InProcessTransport, text_result
from .test_client_in_process import Answers


def test_events_survive_a_reload_and_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    journal = TaskJournal(path)
    journal.started("t1", "slow")
    journal.started("t2", "ask")
    journal.answered("t2", ["b", "a"])
    journal.ended("t1", "CompletedTask")
    with path.open("ab") as file:
        file.write(b'{"event": "answered", "task_id": "t2", "ke')  # a crash mid-write
    again = TaskJournal(path)
    assert [entry.task_id for entry in again.pending()] == ["t2"]
    assert again.answered_keys("t2") == {"a", "b"} and again.answered_keys("zz") == frozenset()
    assert again.entries["t1"].ended == "CompletedTask" and again.entries["t2"].tool == "ask"


@pytest.fixture
async def jobs() -> AsyncIterator[Server]:
    server = load_jobs()
    async with server.running():
        yield server


async def test_resume_after_a_restart_asks_only_what_is_left(
    jobs: Server, tmp_path: Path, autojump_clock: MockClock
) -> None:
    path = tmp_path / "tasks.jsonl"
    first_life = Answers({"name": "Ada"})
    before = Client(
        InProcessTransport(jobs),
        on_elicit=first_life,
        journal=TaskJournal(path),
        cancel_on_exit=False,
    )
    with trio.move_on_after(30):  # the process "dies" while the task waits for question two
        await before.call_tool("interview")
    # Asked twice, answered once: the second question is open when the process dies.
    assert first_life.asked == ["Your name?", "Favourite colour, Ada?"]
    (pending,) = TaskJournal(path).pending()
    assert pending.tool == "interview" and len(pending.answered) == 1

    second_life = Answers({"colour": "blue"})
    after = Client(InProcessTransport(jobs), on_elicit=second_life, journal=TaskJournal(path))
    result = await after.resume_task(pending.task_id)
    assert result == text_result("Ada likes blue")
    assert second_life.asked == ["Favourite colour, Ada?"]  # the answered one is not asked
    assert TaskJournal(path).pending() == []


async def test_a_journaled_key_is_never_answered_again(
    jobs: Server, tmp_path: Path, autojump_clock: MockClock
) -> None:
    client = Client(InProcessTransport(jobs), on_elicit=Answers(), cancel_on_exit=False)
    handle = await client.call_tool_or_task("confirm_delete", {"filename": "x"})
    assert not isinstance(handle, CallToolResult)
    journal = TaskJournal(tmp_path / "tasks.jsonl")
    journal.started(handle.task_id, "confirm_delete")
    journal.answered(handle.task_id, ["confirm"])  # answered before the restart
    asker = Answers()
    resumed = Client(
        InProcessTransport(jobs), on_elicit=asker, journal=journal, cancel_on_exit=False
    )
    with trio.move_on_after(5):
        await resumed.resume_task(handle.task_id)
    assert asker.asked == []
