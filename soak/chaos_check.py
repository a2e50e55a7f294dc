"""The invariants `soak/chaos.py` checks after each round, on what its clients saw.

No I/O here: a round's history (`RoundLog`: every task a client created, everything seen of
it, the kills) goes in, the violations come out, each a sentence naming the task and what
went wrong. `tests/test_chaos.py` plants violations in made-up histories to show each
check catches its own.

The invariants, for every task a client got an id for:

* **finished**: its last state seen is `completed`, `cancelled` or `failed`;
* **with its real result**: `completed` with the text its arguments make
  (`expected_text`), never another task's;
* **cancelled because asked**: `cancelled` only if a client sent `tasks/cancel`; and once
  the server acknowledged one (it answers success also for a task already over), the task
  did not end otherwise after that (by its `lastUpdatedAt`);
* **failed with a clear reason**: `failed` only with the orphan error ("…stopped before the
  task finished…"), only if a process was killed while the task was unfinished, and never
  for a `resumable` tool (its task runs again instead);
* **none stuck past its lease**: first seen finished by `stuck_deadline`: the latest of its
  creation, its answer and the end of the last kill around it, plus its work, plus
  `lease_seconds` and a third (when another process looks for lapsed leases), plus a grace;
* **no result changed once seen**: every observation after the first finished one is the
  same status with the same result or error;
* **no record lost or kept past its TTL**: `tasks/get` refuses the task (unknown, expired)
  neither before `expires_at` (less a clock slack) nor stays readable after it (plus the
  slack); after the round, every task was read once more past its TTL and refused, and the
  store itself held no record (`leftover`, filled by the harness).

Plus the harness's own errors (`RoundLog.errors`): a request that failed for a reason no
retry covers (anything but a connection refused or reset while a process was down, or a
refusal with `retryAfterMs`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

FINISHED = ("completed", "failed", "cancelled")
GONE = "gone"
"""An observation's status when `tasks/get` refused the task as unknown."""
ORPHAN_REASON = "stopped before the task finished"
CLOCK_SLACK_SECONDS = 0.5
"""Between the server's clock (createdAt) and the harness's, and the expiry's rounding."""
GRACE_SECONDS = 3.0
"""Added to a task's deadline for the rest: polling, a busy machine, process starts."""


@dataclass
class Seen:
    """One observation of a task: when (wall clock), its status (or GONE), and its result's
    text, its error's message, or the refusal's message; `updated_at`, the server's
    lastUpdatedAt."""

    at: float
    status: str
    detail: str = ""
    updated_at: float = 0.0

    def same_end(self, other: Seen) -> bool:
        return (self.status, self.detail) == (other.status, other.detail)


@dataclass
class TaskLog:
    """What the clients did with one task and saw of it."""

    task_id: str
    tool: str
    expected: str
    """The text it must complete with."""
    created_at: float
    expires_at: float
    """The server's createdAt + ttlMs."""
    work_seconds: float
    resumable: bool = False
    cancel: str = "no"
    """"no", "sent" (no answer: maybe it got through) or "acknowledged"."""
    cancel_acknowledged_at: float = 0.0
    answered_at: float | None = None
    seen: list[Seen] = field(default_factory=list)

    def first_end(self) -> Seen | None:
        return next((seen for seen in self.seen if seen.status in FINISHED), None)

    def last_state(self) -> Seen | None:
        return next((seen for seen in reversed(self.seen) if seen.status != GONE), None)


@dataclass
class Kill:
    """A process killed with SIGKILL at `at`, and back (serving again) at `back_at`."""

    target: str
    at: float
    back_at: float


@dataclass
class RoundLog:
    store: str
    lease_seconds: float
    tasks: list[TaskLog] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    leftover: list[str] = field(default_factory=list)
    """What the store itself still held after every TTL and the expiry's bound."""


def violations(log: RoundLog) -> list[str]:
    """Every invariant broken in the round, one sentence each."""
    found = [f"{log.store}: {error}" for error in log.errors]
    found += [f"{log.store}: left in the store after every TTL: {item}" for item in log.leftover]
    for task in log.tasks:
        name = f"{log.store}: task {task.task_id} ({task.tool})"
        found += [f"{name}: {problem}" for problem in task_problems(task, log)]
    return found


def task_problems(task: TaskLog, log: RoundLog) -> Iterator[str]:
    end = task.first_end()
    last = task.last_state()
    if end is None or last is None or last.status not in FINISHED:
        shown = "nothing" if last is None else f"{last.status} {last.detail!r}".rstrip()
        yield f"never finished; last seen: {shown}"
    if end is not None:
        yield from _end_problems(task, end, log)
        yield from _changes(task, end)
        deadline = stuck_deadline(task, log)
        if end.at > deadline:
            yield f"finished {end.at - deadline:.1f} s past its lease deadline"
    yield from _ttl_problems(task)


def _end_problems(task: TaskLog, end: Seen, log: RoundLog) -> Iterator[str]:
    if end.status == "completed" and end.detail != task.expected:
        yield f"completed with {end.detail!r}, not its own result {task.expected!r}"
    if end.status == "cancelled" and task.cancel == "no":
        yield "cancelled, but no client asked"
    acknowledged = task.cancel_acknowledged_at
    if task.cancel == "acknowledged" and end.status != "cancelled":
        late = end.updated_at - acknowledged
        if late > CLOCK_SLACK_SECONDS:
            yield f"ended {end.status} {late:.1f} s after the server acknowledged tasks/cancel"
    if end.status == "failed":
        if ORPHAN_REASON not in end.detail:
            yield f"failed without a clear reason: {end.detail!r}"
        elif task.resumable:
            yield f"failed, though resumable (it should have run again): {end.detail!r}"
        elif not _killed_while_running(task, end, log):
            yield f"failed as orphaned with no process killed while it ran: {end.detail!r}"


def _killed_while_running(task: TaskLog, end: Seen, log: RoundLog) -> bool:
    return any(task.created_at <= kill.back_at and kill.at <= end.at for kill in log.kills)


def _changes(task: TaskLog, end: Seen) -> Iterator[str]:
    later = task.seen[task.seen.index(end) + 1 :]
    for seen in later:
        if seen.status != GONE and not seen.same_end(end):
            yield (
                f"changed after it was seen {end.status} {end.detail!r}: "
                f"{seen.status} {seen.detail!r}"
            )


def _ttl_problems(task: TaskLog) -> Iterator[str]:
    for seen in task.seen:
        if seen.status == GONE and seen.at < task.expires_at - CLOCK_SLACK_SECONDS:
            early = task.expires_at - seen.at
            yield f"refused as unknown {early:.1f} s before its TTL ran out: {seen.detail!r}"
        if seen.status != GONE and seen.at > task.expires_at + CLOCK_SLACK_SECONDS:
            late = seen.at - task.expires_at
            yield f"still readable ({seen.status}) {late:.1f} s after its TTL ran out"
    if not task.seen or task.seen[-1].status != GONE:
        yield "not refused by tasks/get after its TTL"


def stuck_deadline(task: TaskLog, log: RoundLog) -> float:
    """When the task must have been seen finished, at the latest."""
    start = max(task.created_at, task.answered_at or 0.0)
    for kill in log.kills:
        if kill.at >= task.created_at - GRACE_SECONDS:
            start = max(start, kill.back_at)
    takeover = log.lease_seconds * 4 / 3
    return start + task.work_seconds + takeover + GRACE_SECONDS
