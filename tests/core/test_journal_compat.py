"""Journals written before the core took one input type still replay.

`journals/before-inputs.jsonl` was recorded by mcp-tasks 0.1.0.dev0 at commit c12a730,
when a journal wrapped each of the core's 27 entry points: the session of
`test_journal.session` under a poll policy, then one call of each entry point a listen
stream, an unreachable store, a handler's progress and log, a resume and an orphan use.
Not `internal_failure`: its answer changed on purpose since (one internal-error reply for
every transport), and a replay would rightly say so. Nor the two `receive` lines that called
a tool registered `task_support="required"` (`greet`, `ask_then_task`): the core answered
them with `RunTool(starts_task=True)` then, and creates the task at once now (issue 28,
point 5), drawing its id; a replay rightly says the answer changed.
"""

from __future__ import annotations

import json
from pathlib import Path

from mcp_tasks.journals import Playback
from mcp_tasks.journals._codec import unframe

JOURNAL = Path(__file__).parent / "journals" / "before-inputs.jsonl"


def test_a_journal_written_by_the_entry_points_replays_call_for_call() -> None:
    lines = JOURNAL.read_bytes().splitlines(keepends=True)
    playback = Playback()
    replayed = [call for line in lines for call in playback.feed(line)]
    problems = [(call.n, call.call, call.problem) for call in replayed if not call.matches]
    assert problems == []
    recorded = [json.loads(unframe(line)) for line in lines]
    calls = [entry["call"] for entry in recorded if "call" in entry]
    calls += [entry["then"]["call"] for entry in recorded if "then" in entry]
    assert sorted(call.call for call in replayed) == sorted(calls)
    assert {
        "task_resumed",
        "subscription_acknowledged",
        "list_changed",
        "subscription_ended",
        "listen_refused",
        "store_unavailable",
        "progress",
        "log",
        "task_orphaned",
        "expire_task",
        "handle_task_request",
    } <= set(calls)
