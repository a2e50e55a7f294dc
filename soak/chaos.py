"""Chaos: a mixed workload against real servers and stores, SIGKILLs at random moments,
and invariants checked afterwards.

    python soak/chaos.py --rounds 100          # the long run (about 23 min), both stores
    python soak/chaos.py --quick --store redis  # 3 short rounds (the test suite runs this)

Theory of operation
-------------------
A round runs, at the same time and independently, a Redis cluster (a redis-server with an
append-only file synced on every write, and two `mcp-tasks serve soak/chaos_server.py`
processes on it, A and B) and a SQLite server (one process on a fresh file), each with a
short TTL and lease. Against each, workers run tasks for `--seconds`: `work` and `redo`
(resumable) tasks of 0.2-2 s, `ask` tasks answered in place, and tasks cancelled while
running; each created on a random process and polled, answered and cancelled through
random ones (the processes share the tasks through Redis). Meanwhile a chaos task kills
one process at a random moment with SIGKILL (server A, server B or redis-server; the
SQLite server), restarts it 0.1-1 s later on the same port, and sometimes does it twice.

Clients retry what a killed process makes fail: a refused or reset connection (on another
process, when there is one) and a refusal with `retryAfterMs` (503 while Redis is down), up
to `RETRY_SECONDS`; a request whose connection broke may have got through, so a create
whose answer was lost leaves a task nobody knows (counted as `unknown_creates`; the store
check below still sees it expire), and a cancel whose answer was lost counts as "sent".

When the workload stops and every worker has seen its tasks finished (or given up), every
task is read once more, then once more past its TTL (it must be refused), and the store
itself must come to hold no record at all (within `EXPIRY_CLAIM_SECONDS` and a few more:
a process killed inside an expiry batch leaves that batch claimed for that long). Then
`chaos_check.violations` judges the round; the run exits 1 if any round broke anything,
keeping that round's directory (server and redis logs) and naming it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import random
import re
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ANSWER_FACTOR, expected_text, print_rows
from chaos_check import GONE, Kill, RoundLog, Seen, TaskLog, violations
from chaos_procs import Proc, RedisProc, free_port, redis_leftover, server_proc, sqlite_leftover

from mcp_tasks import ElicitParams, ElicitResult
from mcp_tasks.client import Client, RetryPolicy, connect_http
from mcp_tasks.core import CompletedTask, FailedTask, InputRequiredTask, TextContent
from mcp_tasks.core._client import RpcError
from mcp_tasks.store import EXPIRY_CLAIM_SECONDS
from mcp_tasks.transports import TransportError

RETRY_SECONDS = 20.0
"""How long a request is retried (a process is down for about a second at a time)."""
REQUEST_SECONDS = 10.0
POLL_SECONDS = 0.1
FOLLOW_SECONDS = 40.0
"""How long a worker follows one task before it gives up (the checker then says why)."""
EMPTY_SECONDS = EXPIRY_CLAIM_SECONDS + 5.0
"""How long after the last TTL the store may still hold records."""
GONE_MESSAGE = re.compile(r"^Unknown task: |^Task '[^']*' has expired$")
KINDS = {"work": 0.3, "redo": 0.2, "ask": 0.25, "cancel": 0.25}
_T = TypeVar("_T")


@dataclass
class Settings:
    rounds: int = 100
    stores: tuple[str, ...] = ("redis", "sqlite")
    seconds: float = 4.0
    """How long the workers start new tasks, per round."""
    workers: int = 6
    ttl_ms: int = 8000
    lease_seconds: float = 2.0
    seed: int = 0


@dataclass
class Figures:
    """What a round did, beside its verdict."""

    requests: int = 0
    retries: int = 0
    unknown_creates: int = 0
    ends: collections.Counter[str] = field(default_factory=collections.Counter)
    kills: collections.Counter[str] = field(default_factory=collections.Counter)
    empty_after: float = 0.0
    """Seconds from the last TTL until the store held no record."""


class GaveUp(Exception):
    """A request kept failing for longer than RETRY_SECONDS."""


class Refused(Exception):
    """The server answered with an error that retrying will not help: `error`; `broke`
    says whether an earlier attempt broke off (and may have got through)."""

    def __init__(self, error: RpcError, broke: bool) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error
        self.broke = broke


# --- requests that tolerate a killed process ---------------------------------------------


class Calls:
    """Requests through the clients (one per process), retried past what kills cause."""

    def __init__(self, clients: list[Client], figures: Figures, rng: random.Random) -> None:
        self.clients = clients
        self.figures = figures
        self.rng = rng

    async def do(self, op: Callable[[Client], Awaitable[_T]]) -> tuple[_T, bool]:
        """The answer of `op` on a random client, and whether an earlier attempt broke
        off (it may have got through). An error retrying will not help is `Refused`."""
        index = self.rng.randrange(len(self.clients))
        broke = False
        deadline = time.monotonic() + RETRY_SECONDS
        while True:
            self.figures.requests += 1
            wait = POLL_SECONDS
            try:
                with trio.fail_after(REQUEST_SECONDS):
                    return await op(self.clients[index]), broke
            except (TransportError, trio.TooSlowError) as error:
                broke, last = True, error
                index = (index + 1) % len(self.clients)
            except RpcError as error:
                if error.retry_after_ms is None:
                    raise Refused(error, broke) from None
                last, wait = error, min(1.0, error.retry_after_ms / 1000)
            self.figures.retries += 1
            if time.monotonic() + wait > deadline:
                raise GaveUp(f"{type(last).__name__}: {last}")
            await trio.sleep(wait)


def seen_of(task: Any) -> Seen:
    """An observation of a task read from the server."""
    detail = ""
    if isinstance(task, CompletedTask):
        content = task.result.content
        detail = content[0].text if content and isinstance(content[0], TextContent) else ""
    elif isinstance(task, FailedTask):
        detail = task.error.message
    return Seen(time.time(), str(task.status), detail, timestamp(task.last_updated_at))


def timestamp(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def expires_at(task: Any) -> float:
    return timestamp(task.created_at) + (task.ttl_ms or 0) / 1000


async def read(calls: Calls, log: TaskLog) -> Seen:
    """`tasks/get`, noted in the task's log: its state, or GONE when refused as unknown."""
    try:
        task, _ = await calls.do(lambda client: client.get_task(log.task_id))
        seen = seen_of(task)
    except Refused as refused:
        if not GONE_MESSAGE.search(refused.error.message):
            raise
        seen = Seen(time.time(), GONE, refused.error.message)
    log.seen.append(seen)
    return seen


# --- the workload ----------------------------------------------------------------------


@dataclass
class Side:
    """One store's half of a round: its processes, clients, and what was seen."""

    store: str
    procs: list[Proc]
    servers: list[Proc]
    log: RoundLog
    figures: Figures
    calls: Calls
    leftover: Callable[[], list[str]]


async def worker(side: Side, index: int, until: float, rng: random.Random) -> None:
    count = 0
    while time.monotonic() < until:
        kind = rng.choices(list(KINDS), list(KINDS.values()))[0]
        label = f"{side.store}-w{index}-{count}"
        try:
            await run_one(side, kind, label, rng)
        except (GaveUp, Refused) as error:
            side.log.errors.append(f"{label} ({kind}): {type(error).__name__}: {error}")
        count += 1


async def run_one(side: Side, kind: str, label: str, rng: random.Random) -> None:
    tool = {"cancel": "work"}.get(kind, kind)
    seconds = round(rng.uniform(1.0 if kind == "cancel" else 0.2, 2.0), 2)
    n = rng.randrange(1, 1_000_000)
    arguments = {"label": label, "n": n, "seconds": seconds}
    answer = n * ANSWER_FACTOR
    task, broke = await side.calls.do(
        lambda client: client.call_tool_or_task(tool, dict(arguments))
    )
    side.figures.unknown_creates += broke  # an earlier attempt may have made a task
    expected = expected_text(label, n, answer if tool == "ask" else None)
    log = TaskLog(task.task_id, tool, expected, time.time(), expires_at(task), seconds)
    log.resumable = tool == "redo"
    log.seen.append(seen_of(task))
    side.log.tasks.append(log)
    cancel_at = time.monotonic() + rng.uniform(0.1, seconds) if kind == "cancel" else None
    await follow(side, log, cancel_at, answer)
    end = log.first_end()
    if end is not None:
        side.figures.ends[f"{log.tool} {end.status}"] += 1
        await read(side.calls, log)  # once more, likely through the other process


async def follow(side: Side, log: TaskLog, cancel_at: float | None, answer: int) -> None:
    """Poll until the task is seen finished; answer its question; cancel it at `cancel_at`."""
    give_up = time.monotonic() + FOLLOW_SECONDS
    while time.monotonic() < give_up:
        if cancel_at is not None and time.monotonic() >= cancel_at:
            await cancel(side.calls, log)
            cancel_at = None
        seen = await read(side.calls, log)
        if seen.status in ("completed", "failed", "cancelled", GONE):
            return
        if seen.status == "input_required":
            await update(side.calls, log, answer)
        await trio.sleep(POLL_SECONDS)


async def cancel(calls: Calls, log: TaskLog) -> None:
    """`tasks/cancel`: "acknowledged" if answered success; refused (the task finished
    first), "no", unless an earlier attempt broke off and may have cancelled it."""
    log.cancel = "sent"
    try:
        await calls.do(lambda client: client.cancel_task(log.task_id))
        log.cancel, log.cancel_acknowledged_at = "acknowledged", time.time()
    except Refused as refused:
        log.cancel = "sent" if refused.broke else "no"


async def update(calls: Calls, log: TaskLog, answer: int) -> None:
    """Answer the question the task asks (it may have failed meanwhile: then refused)."""
    accept = {"action": "accept", "content": {"value": answer}}
    with contextlib.suppress(Refused):  # no longer waiting: the next poll says why
        task, _ = await calls.do(lambda client: client.get_task(log.task_id))
        if not isinstance(task, InputRequiredTask):
            return
        answers = dict.fromkeys(task.input_requests, accept)
        await calls.do(lambda client: client.update_task(log.task_id, answers))
        log.answered_at = time.time()


async def chaos(side: Side, targets: list[Proc], until: float, rng: random.Random) -> None:
    """SIGKILL a random target at a random moment, restart it 0.1-1 s later; maybe again."""
    kills = 1 + (rng.random() < 0.5)
    for _ in range(kills):
        left = until - time.monotonic()
        if left <= 0.3:
            return
        await trio.sleep(rng.uniform(0.3, left))
        target = rng.choice(targets)
        at = time.time()
        await target.kill()
        await trio.sleep(rng.uniform(0.1, 1.0))
        await target.start()
        side.log.kills.append(Kill(target.name, at, time.time()))
        side.figures.kills[target.name] += 1


# --- a round -----------------------------------------------------------------------------


async def never_asked(params: ElicitParams) -> ElicitResult:
    raise AssertionError(f"the workers answer with tasks/update, not in place: {params!r}")


def make_side(store: str, folder: Path, settings: Settings, rng: random.Random) -> Side:
    """The processes of one store's half of a round (not started yet)."""
    figures = Figures()
    options = {"ttl_ms": settings.ttl_ms, "lease_seconds": settings.lease_seconds}
    if store == "redis":
        redis_proc = RedisProc(free_port(), folder)
        prefix = f"chaos{secrets.token_hex(3)}"
        url = f"redis://127.0.0.1:{redis_proc.port}/0?prefix={prefix}"
        servers = [
            server_proc(f"server {name}", free_port(), url, folder, **options) for name in "AB"
        ]
        procs: list[Proc] = [redis_proc, *servers]

        def leftover() -> list[str]:
            return redis_leftover(redis_proc.port, prefix)

    else:
        path = folder / "tasks.db"
        servers = [server_proc("server", free_port(), f"sqlite:///{path}", folder, **options)]
        procs = servers

        def leftover() -> list[str]:
            return sqlite_leftover(path)

    log = RoundLog(store, settings.lease_seconds)
    return Side(store, procs, servers, log, figures, Calls([], figures, rng), leftover)


async def run_side(side: Side, settings: Settings, rng: random.Random) -> None:
    """Start the processes, run the workload and the kills, then the checks after it."""
    for proc in side.procs:
        await proc.start()
    try:
        async with contextlib.AsyncExitStack() as stack:
            for server in side.servers:
                url = f"http://127.0.0.1:{server_port(server)}/mcp"
                client = connect_http(url, on_elicit=never_asked, retry=RetryPolicy(attempts=0))
                side.calls.clients.append(await stack.enter_async_context(client))
            until = time.monotonic() + settings.seconds
            async with trio.open_nursery() as nursery:
                nursery.start_soon(chaos, side, side.procs, until, random.Random(rng.random()))
                for index in range(settings.workers):
                    nursery.start_soon(worker, side, index, until, random.Random(rng.random()))
            await after_workload(side)
    finally:
        for proc in reversed(side.procs):
            await proc.stop()


def server_port(proc: Proc) -> int:
    return int(proc.command[proc.command.index("--http") + 1].rpartition(":")[2])


async def after_workload(side: Side) -> None:
    """Every task read once more; then past its TTL (refused); then the store emptied."""
    try:
        for log in side.log.tasks:
            await read(side.calls, log)
        if side.log.tasks:
            last = max(log.expires_at for log in side.log.tasks)
            await trio.sleep(max(0.0, last + 0.2 - time.time()))
        for log in side.log.tasks:
            await read(side.calls, log)
    except (GaveUp, Refused) as error:
        side.log.errors.append(f"reading the tasks after the workload: {error}")
    last = max([log.expires_at for log in side.log.tasks], default=time.time())
    while True:
        left = await trio.to_thread.run_sync(side.leftover)
        side.figures.empty_after = max(0.0, time.time() - last)
        if not left or time.time() > last + EMPTY_SECONDS:
            side.log.leftover = left
            return
        await trio.sleep(0.2)


@dataclass
class RoundResult:
    number: int
    seconds: float
    sides: list[Side]
    broken: list[str]
    folder: Path


async def one_round(number: int, settings: Settings, rng: random.Random) -> RoundResult:
    folder = Path(tempfile.mkdtemp(prefix=f"chaos-{number}-"))
    started = time.monotonic()
    sides = []
    for store in settings.stores:
        (folder / store).mkdir()
        sides.append(make_side(store, folder / store, settings, rng))
    async with trio.open_nursery() as nursery:
        for side in sides:
            nursery.start_soon(run_side, side, settings, random.Random(rng.random()))
    broken = [problem for side in sides for problem in violations(side.log)]
    if broken:
        for side in sides:
            for proc in side.procs:
                broken.append(f"{side.store}: {proc.name} log ({proc.log}):\n{proc.tail()}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return RoundResult(number, time.monotonic() - started, sides, broken, folder)


# --- the run -----------------------------------------------------------------------------


def summary(results: list[RoundResult], settings: Settings, seconds: float) -> dict[str, Any]:
    by_store: dict[str, Any] = {}
    for store in settings.stores:
        sides = [side for result in results for side in result.sides if side.store == store]
        ends: collections.Counter[str] = collections.Counter()
        kills: collections.Counter[str] = collections.Counter()
        for side in sides:
            ends.update(side.figures.ends)
            kills.update(side.figures.kills)
        by_store[store] = {
            "rounds": len(sides),
            "tasks": sum(len(side.log.tasks) for side in sides),
            "ends": dict(sorted(ends.items())),
            "kills": dict(sorted(kills.items())),
            "requests": sum(side.figures.requests for side in sides),
            "retries": sum(side.figures.retries for side in sides),
            "unknown_creates": sum(side.figures.unknown_creates for side in sides),
            "empty_after_max_s": round(max((s.figures.empty_after for s in sides), default=0), 2),
            "violations": sum(len(violations(side.log)) for side in sides),
        }
    return {
        "settings": vars(settings) | {"stores": list(settings.stores)},
        "seconds": round(seconds, 1),
        "stores": by_store,
        "violations": sum(figures["violations"] for figures in by_store.values()),
        "broken_rounds": [str(result.folder) for result in results if result.broken],
    }


def show(report: dict[str, Any]) -> None:
    rows = [["store", "rounds", "tasks", "ends", "kills", "requests (retried)", "violations"]]
    for store, figures in report["stores"].items():
        ends = ", ".join(f"{name} {count}" for name, count in figures["ends"].items())
        kills = ", ".join(f"{name} {count}" for name, count in figures["kills"].items())
        requests = f"{figures['requests']} ({figures['retries']})"
        cells = [figures["rounds"], figures["tasks"], ends, kills, requests, figures["violations"]]
        rows.append([store, *map(str, cells)])
    print_rows(rows)
    print(f"{report['seconds']} s; violations: {report['violations']}")


async def run(settings: Settings, *, verbose: bool) -> dict[str, Any]:
    rng = random.Random(settings.seed or None)
    started = time.monotonic()
    results = []
    for number in range(1, settings.rounds + 1):
        result = await one_round(number, settings, rng)
        results.append(result)
        if verbose:
            tasks = sum(len(side.log.tasks) for side in result.sides)
            kills = sum(len(side.log.kills) for side in result.sides)
            verdict = "ok" if not result.broken else f"{len(result.broken)} problems"
            print(
                f"round {number}: {tasks} tasks, {kills} kills, {result.seconds:.1f} s: {verdict}",
                file=sys.stderr,
            )
        for problem in result.broken:
            print(f"round {number}: {problem}", file=sys.stderr)
    return summary(results, settings, time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Kill servers and redis-server under load; check invariants."
    )
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--store", choices=["redis", "sqlite", "both"], default="both")
    parser.add_argument("--seconds", type=float, default=4.0, help="workload per round")
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0, help="0: a random run")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 2.5 s")
    parser.add_argument("--json", action="store_true", help="the figures as JSON on stdout")
    args = parser.parse_args()
    if not 1 <= args.rounds <= 1000 or not 0.5 <= args.seconds <= 60 or not 1 <= args.workers <= 32:
        parser.error("--rounds 1-1000, --seconds 0.5-60, --workers 1-32")
    stores = ("redis", "sqlite") if args.store == "both" else (args.store,)
    settings = Settings(args.rounds, stores, args.seconds, args.workers, seed=args.seed)
    if args.quick:
        settings.rounds, settings.seconds = 3, 2.5
    report = trio.run(partial(run, settings, verbose=not args.json))
    if args.json:
        print(json.dumps(report))
    else:
        show(report)
    sys.exit(1 if report["violations"] else 0)


if __name__ == "__main__":
    main()
