"""The chaos harness (`soak/chaos.py`): its invariant checker catches what it must, and a
short run against real processes (two servers on a real redis-server, one on SQLite,
SIGKILLed at random moments) breaks none.

The checker's tests feed it made-up histories (the harness's own logic, no system in it):
a clean one passes, and each planted violation is named, with its task. The runs are
marked `slow`: `pytest -m "not slow"` leaves them out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

SOAK = Path(__file__).parent.parent / "soak"
sys.path.insert(0, str(SOAK))

from chaos_check import GONE, Kill, RoundLog, Seen, TaskLog, violations  # noqa: E402

ORPHANED = (
    "The process running the task stopped before the task finished (a restart, a crash, "
    "or the task store out of its reach for longer than its lease), and its work is lost"
)
T0 = 1_000_000.0
TTL = 8.0


def task(tool: str = "work", *seen: Seen, **fields: object) -> TaskLog:
    """A task created at T0 with an 8 s TTL, 1 s of work, seen as given (by default:
    working, completed with its result, completed again, gone after its TTL)."""
    log = TaskLog("tsk_1", tool, "label:digest", T0, T0 + TTL, 1.0)
    for name, value in fields.items():
        setattr(log, name, value)
    log.seen = list(seen) or [
        Seen(T0, "working"),
        Seen(T0 + 1.2, "completed", "label:digest", T0 + 1.1),
        Seen(T0 + 2.0, "completed", "label:digest", T0 + 1.1),
        Seen(T0 + TTL + 0.2, GONE, "Unknown task: 'tsk_1'"),
    ]
    return log


def round_of(*tasks: TaskLog, kills: tuple[Kill, ...] = ()) -> RoundLog:
    return RoundLog("redis", 2.0, list(tasks), list(kills))


def gone(at: float = T0 + TTL + 0.2) -> Seen:
    return Seen(at, GONE, "Unknown task: 'tsk_1'")


def ended(status: str, detail: str = "", at: float = T0 + 1.2) -> Seen:
    return Seen(at, status, detail, at - 0.1)


KILL = Kill("server A", T0 + 0.5, T0 + 1.0)


def test_a_clean_history_passes() -> None:
    assert violations(round_of(task())) == []
    orphaned = task("ask", Seen(T0, "working"), ended("failed", ORPHANED), gone())
    cancelled = task("work", Seen(T0, "working"), ended("cancelled"), gone(), cancel="sent")
    late_ack = task(
        "work",
        ended("completed", "label:digest"),
        gone(),
        cancel="acknowledged",
        cancel_acknowledged_at=T0 + 1.5,
    )
    assert violations(round_of(orphaned, cancelled, late_ack, kills=(KILL,))) == []


PLANTED: dict[str, tuple[Callable[[], RoundLog], str]] = {
    "another task's result": (
        lambda: round_of(task("work", ended("completed", "other:digest"), gone())),
        "completed with 'other:digest', not its own result 'label:digest'",
    ),
    "cancelled unasked": (
        lambda: round_of(task("work", ended("cancelled"), gone())),
        "cancelled, but no client asked",
    ),
    "ended after the cancel was acknowledged": (
        lambda: round_of(
            task(
                "work",
                ended("completed", "label:digest", at=T0 + 3),
                gone(),
                cancel="acknowledged",
                cancel_acknowledged_at=T0 + 1,
            )
        ),
        "ended completed 1.9 s after the server acknowledged tasks/cancel",
    ),
    "failed without a clear reason": (
        lambda: round_of(task("work", ended("failed", "Tool 'work' failed"), gone())),
        "failed without a clear reason: \"Tool 'work' failed\"",
    ),
    "orphaned with no kill": (
        lambda: round_of(task("work", ended("failed", ORPHANED), gone())),
        "failed as orphaned with no process killed while it ran",
    ),
    "a resumable task failed": (
        lambda: round_of(task("redo", ended("failed", ORPHANED), gone(), resumable=True)),
        "failed, though resumable",
    ),
    "never finished": (
        lambda: round_of(task("ask", Seen(T0, "working"), Seen(T0 + 7, "input_required"), gone())),
        "never finished; last seen: input_required",
    ),
    "stuck past its lease": (
        lambda: round_of(task("work", ended("completed", "label:digest", at=T0 + 7.5), gone())),
        "finished 0.8 s past its lease deadline",
    ),
    "result changed once seen": (
        lambda: round_of(
            task(
                "work",
                ended("completed", "label:digest"),
                Seen(T0 + 3, "failed", ORPHANED),
                gone(),
            ),
            kills=(KILL,),
        ),
        "changed after it was seen completed 'label:digest': failed",
    ),
    "lost before its TTL": (
        lambda: round_of(task("work", ended("completed", "label:digest"), gone(T0 + 3))),
        "refused as unknown 5.0 s before its TTL ran out",
    ),
    "readable after its TTL": (
        lambda: round_of(
            task(
                "work",
                ended("completed", "label:digest"),
                ended("completed", "label:digest", at=T0 + TTL + 2),
            )
        ),
        "still readable (completed) 2.0 s after its TTL ran out",
    ),
    "left in the store": (
        lambda: RoundLog("sqlite", 2.0, [task()], leftover=["1 rows in table tasks"]),
        "sqlite: left in the store after every TTL: 1 rows in table tasks",
    ),
}


@pytest.mark.parametrize("planted", list(PLANTED))
def test_a_planted_violation_is_named_with_its_task(planted: str) -> None:
    make, expected = PLANTED[planted]
    found = violations(make())
    assert len(found) == 1 or planted in ("readable after its TTL",), found
    assert any(expected in problem for problem in found), found
    if planted != "left in the store":
        assert found[0].startswith("redis: task tsk_1 ("), found


# --- short runs against real processes -------------------------------------------------


def _needs_redis() -> None:
    if shutil.which("redis-server") is None:
        hint = "redis-server is not installed (Debian/Ubuntu: sudo apt-get install redis-server)"
        if os.environ.get("CI"):
            pytest.fail(hint)
        pytest.skip(hint)


@pytest.mark.slow
@pytest.mark.parametrize("store", ["redis", "sqlite"])
def test_three_rounds_of_kills_break_no_invariant(store: str) -> None:
    if store == "redis":
        _needs_redis()
    run = subprocess.run(
        [sys.executable, str(SOAK / "chaos.py"), "--quick", "--store", store, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode in (0, 1), run.stderr[-4000:]
    report = json.loads(run.stdout)
    figures = report["stores"][store]
    assert report["violations"] == 0, run.stderr[-8000:]
    assert figures["rounds"] == 3 and sum(figures["kills"].values()) >= 3, figures
    assert figures["tasks"] > 0 and any("completed" in end for end in figures["ends"]), figures
