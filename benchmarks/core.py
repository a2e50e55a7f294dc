"""Benchmarks of the sans-I/O server core, in-process, on one thread.

What is measured
----------------
1. tasks/get per second: the whole path of one poll, i.e. `ServerCore.handle(Received)`,
   the `FetchTask` need (`MemoryTaskStore.get`), its `TaskFetched` and the encoded
   reply, for a completed task with a small result. The requests are prebuilt bytes that
   differ only in their JSON-RPC id.
2. Task lives per second: `tools/call` (`RunTool`, the handler returns `START_TASK`,
   `ToolReturned`, then `SaveTask`/`StartTask`/`WakeAt` performed), the handler run again
   inside the task returning `CallToolResult.text("ok")`, `TaskReturned` and its
   `SaveTask`, then a `tasks/get` answered from the store. The store is not pruned: each
   run starts a fresh core and store and lets it grow (its final size is printed).
3. Memory per stored completed task: tracemalloc snapshots before and after a store is
   filled with 100,000 tasks made as in 2, with only the store left alive. "Beyond the
   payload" subtracts `len(record.result)`, the encoded result of each task. The default
   TTL is kept, so the store's expiry index (one heap entry per task) is included.

Throughputs are the median of several runs of about a second each (`time.perf_counter`);
the garbage collector stays on, as in a server. Run from the repository root:

    python benchmarks/core.py            # full run (about half a minute)
    python benchmarks/core.py --quick    # smoke test: short runs, 10,000 stored tasks
    python benchmarks/core.py --json     # the figures as one JSON object
    python benchmarks/core.py --profile  # cProfile of the tasks/get path, top functions
    python benchmarks/core.py --recording  # tasks/get through a recording core, and not
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import itertools
import json
import math
import platform
import pstats
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import msgspec

from mcp_tasks.core import (
    PROTOCOL_VERSION,
    START_TASK,
    TASKS_EXTENSION,
    CallToolResult,
    FetchTask,
    Implementation,
    Need,
    Reply,
    RunTool,
    SaveTask,
    ServerCore,
    StartTask,
    Step,
    TaskOptions,
    ToolCall,
    ToolOutcome,
    ToolSpec,
    WakeAt,
)
from mcp_tasks.core.inputs import Received, TaskReturned
from mcp_tasks.journals import Recorder
from mcp_tasks.store import MemoryTaskStore

T = TypeVar("T")

T0 = 1_785_585_600.0  # 2026-08-01T12:00:00Z
TICK = 1e-6  # how far `now` advances per core call, in seconds
STATE_KEY = bytes(range(32))
TOOL_NAME = "job"
ID_VARIANTS = 16  # prebuilt requests per method, differing only in their JSON-RPC id
MAX_TASKS = 10**9

GET_TARGET_PER_S = 50_000
MEMORY_TARGET_BYTES = 1536  # 1.5 KiB beyond the result payload

REQUEST_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "bench-client", "version": "1.0"},
}
_TASK_ID_SLOT = "@TASK-ID@"


def encode_request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": REQUEST_META},
    }
    return msgspec.json.encode(message)


def get_requests(task_id: str) -> list[bytes]:
    return [encode_request(i, "tasks/get", {"taskId": task_id}) for i in range(ID_VARIANTS)]


CALL_REQUESTS = [
    encode_request(i, "tools/call", {"name": TOOL_NAME, "arguments": {"n": i}})
    for i in range(ID_VARIANTS)
]
GET_HEAD, GET_TAIL = encode_request(1, "tasks/get", {"taskId": _TASK_ID_SLOT}).split(
    _TASK_ID_SLOT.encode()
)


def task_id_of(n: int) -> str:
    """The deterministic id of the n-th task a shell's core creates (from 1)."""
    return f"tsk-{n:07d}"


def job(call: ToolCall) -> ToolOutcome:
    """Asks for a task, then finishes at once with a small result."""
    if not call.in_task:
        return START_TASK
    return CallToolResult.text("ok")


# --- the shell ------------------------------------------------------------------------


def done(step: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine that finishes without suspending, as `MemoryTaskStore`'s
    do: the shell stays synchronous, so only the core and the store are timed."""
    try:
        step.send(None)
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]
    step.close()
    raise RuntimeError("a memory store call suspended")


class Shell:
    """A core, a memory store and the synchronous performance of the core's effects.

    `StartTask` is queued (a real shell would spawn the handler); `WakeAt` only keeps the
    earliest deadline, since `MemoryTaskStore` indexes expiry itself. Any other effect is
    unexpected in these benchmarks and raises.
    """

    def __init__(self) -> None:
        counter = itertools.count(1)
        self.core = ServerCore(
            info=Implementation(name="bench-server", version="0.1.0"),
            tools=[ToolSpec(name=TOOL_NAME, task_support="optional")],
            new_task_id=lambda: task_id_of(next(counter)),
            state_key=STATE_KEY,
            tasks=TaskOptions(max_tasks=MAX_TASKS),
        )
        self.store = MemoryTaskStore()
        self.started: list[StartTask] = []
        self.next_wake = math.inf
        self.now = T0

    def perform(self, answer: Step | Need, now: float) -> Reply | None:
        """Fulfil the core's needs until it answers with a `Step`; perform its commands in
        order and return the reply to send (if any)."""
        while not isinstance(answer, Step):
            if isinstance(answer, FetchTask):
                record = done(self.store.get(answer.request.task_id))
                answer = self.core.handle(answer.fetched(record), now)
            elif isinstance(answer, RunTool):
                answer = self.core.handle(answer.returned(job(answer.call)), now)
            else:
                raise RuntimeError(f"unexpected need in this benchmark: {answer!r}")
        for effect in answer.effects:
            if isinstance(effect, SaveTask):
                done(
                    self.store.save(
                        effect.record,
                        effect.expected_version,
                        active=effect.active,
                        limits=effect.limits,
                    )
                )
            elif isinstance(effect, StartTask):
                self.started.append(effect)
            elif isinstance(effect, WakeAt):
                self.next_wake = min(self.next_wake, effect.deadline)
            else:
                raise RuntimeError(f"unexpected effect in this benchmark: {effect!r}")
        return answer.reply

    def live(self, call_request: bytes) -> tuple[Reply, Reply]:
        """One task's whole life; returns the replies to `tools/call` and `tasks/get`."""
        now = self.now + TICK
        created = self.perform(self.core.handle(Received(call_request), now), now)
        start = self.started.pop()
        record = done(self.store.get(start.task_id))
        if record is None or created is None:
            raise RuntimeError("tools/call did not store a task")
        outcome = job(start.call)
        now += TICK
        self.perform(self.core.handle(TaskReturned(record, outcome), now), now)
        now += TICK
        request = GET_HEAD + start.task_id.encode() + GET_TAIL
        got = self.perform(self.core.handle(Received(request), now), now)
        if got is None:
            raise RuntimeError("tasks/get got no reply")
        self.now = now
        return created, got


def check_life(created: Reply, got: Reply) -> str:
    """The task id, after checking that both replies say what the benchmark assumes."""
    handle = json.loads(created.body)["result"]
    task = json.loads(got.body)["result"]
    if handle.get("resultType") != "task" or task.get("status") != "completed":
        raise RuntimeError(f"unexpected replies: {created.body!r}, {got.body!r}")
    if task["result"]["content"] != [{"type": "text", "text": "ok"}]:
        raise RuntimeError(f"unexpected task result: {got.body!r}")
    task_id: str = task["taskId"]
    return task_id


# --- throughput -------------------------------------------------------------------------

Batch = Callable[[int], None]


@dataclass
class Throughput:
    per_second: float
    """Median over the runs."""
    mean_us: float
    """Mean time per operation in the median run."""
    runs_per_second: list[float]
    operations: int


def timed_runs(
    make_batch: Callable[[], Batch], seconds: float, repeats: int, batch_size: int
) -> Throughput:
    """Run batches for about `seconds`, `repeats` times; each run gets a fresh batch."""
    rates: list[float] = []
    total = 0
    for _ in range(repeats):
        batch = make_batch()
        batch(batch_size)  # warm-up, not timed
        count = 0
        start = time.perf_counter()
        while True:
            batch(batch_size)
            count += batch_size
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        rates.append(count / elapsed)
        total += count
    median = statistics.median(rates)
    return Throughput(
        per_second=median, mean_us=1e6 / median, runs_per_second=rates, operations=total
    )


def tasks_get_batch(recording: bool = False) -> Batch:
    """A batch of `tasks/get` on one completed task, the only one in the store.
    `recording`: through a `Recorder` whose lines are dropped (the cost of writing each
    poll down on the server's thread; the disk's is the journal thread's)."""
    shell = Shell()
    if recording:
        shell.core = Recorder(shell.core, _dropped)  # type: ignore[assignment]
    task_id = check_life(*shell.live(CALL_REQUESTS[0]))
    requests = get_requests(task_id)

    def batch(n: int) -> None:
        handle, perform = shell.core.handle, shell.perform
        now = shell.now
        reply = None
        for i in range(n):
            now += TICK
            reply = perform(handle(Received(requests[i % ID_VARIANTS]), now), now)
        shell.now = now
        if reply is None or json.loads(reply.body)["result"]["status"] != "completed":
            raise RuntimeError(f"unexpected tasks/get reply: {reply!r}")

    return batch


def _dropped(line: bytes | bytearray) -> None:
    return None


def recording_cost(seconds: float, repeats: int) -> dict[str, Any]:
    """tasks/get per second without and with a recording core, runs alternating, the best
    of each (anything else on the machine only slows a run)."""
    plain: list[float] = []
    recorded: list[float] = []
    for _ in range(repeats):
        plain += timed_runs(tasks_get_batch, seconds, 1, batch_size=1000).runs_per_second
        recorded += timed_runs(
            lambda: tasks_get_batch(recording=True), seconds, 1, batch_size=1000
        ).runs_per_second
    best, best_recorded = max(plain), max(recorded)
    return {
        "plain_per_second": [round(rate) for rate in plain],
        "recording_per_second": [round(rate) for rate in recorded],
        "ratio": best_recorded / best,
        "recording_us_per_poll": 1e6 / best_recorded - 1e6 / best,
    }


class _LifeBatches:
    """Task lives on a fresh shell per run; remembers the largest store reached."""

    def __init__(self) -> None:
        self.largest_store = 0

    def __call__(self) -> Batch:
        shell = Shell()
        check_life(*shell.live(CALL_REQUESTS[0]))

        def batch(n: int) -> None:
            live = shell.live
            for i in range(n):
                live(CALL_REQUESTS[i % ID_VARIANTS])
            self.largest_store = max(self.largest_store, done(shell.store.count()))

        return batch


# --- memory ----------------------------------------------------------------------------


@dataclass
class Memory:
    tasks: int
    bytes_per_task: float
    """Everything the store holds per task, the result payload included."""
    payload_per_task: float
    """`len(record.result)`, averaged."""
    beyond_payload_per_task: float


def _filled_store(tasks: int) -> tuple[MemoryTaskStore, int]:
    """A store holding `tasks` completed tasks made through the core, and their payload bytes."""
    shell = Shell()
    for i in range(tasks):
        shell.live(CALL_REQUESTS[i % ID_VARIANTS])  # the replies are dropped at once
    payload = 0
    for record in (done(shell.store.get(task_id_of(n))) for n in range(1, tasks + 1)):
        if record is None or record.result is None:
            raise RuntimeError("a task is missing from the store")
        payload += len(record.result)
    return shell.store, payload


def stored_task_memory(tasks: int) -> Memory:
    """tracemalloc: what a filled store holds, with nothing else from the filling alive."""
    _filled_store(1000)  # warm caches (types, interned strings) outside the measurement
    gc.collect()
    exclude = [tracemalloc.Filter(False, tracemalloc.__file__)]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(exclude)
        store, payload = _filled_store(tasks)
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces(exclude)
    finally:
        tracemalloc.stop()
    if len(store) != tasks:
        raise RuntimeError(f"the store holds {len(store)} tasks, not {tasks}")
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return Memory(
        tasks=tasks,
        bytes_per_task=held / tasks,
        payload_per_task=payload / tasks,
        beyond_payload_per_task=(held - payload) / tasks,
    )


# --- profile ----------------------------------------------------------------------------


def profile_tasks_get(seconds: float) -> None:
    batch = tasks_get_batch()
    batch(1000)
    profiler = cProfile.Profile()
    deadline = time.perf_counter() + seconds
    profiler.enable()
    while time.perf_counter() < deadline:
        batch(1000)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


# --- report -----------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def print_table(figures: dict[str, Any]) -> None:
    get, life, mem = figures["tasks_get"], figures["task_life"], figures["memory"]
    runs = figures["runs"]
    print(
        f"mcp_tasks core benchmark: Python {figures['python']}, msgspec {figures['msgspec']}, "
        f"{figures['platform']}"
    )
    print(f"throughput: median of {runs['repeats']} runs of {runs['seconds']:g} s, one thread\n")

    def spread(rates: list[float]) -> str:
        return f"{min(rates):,.0f}-{max(rates):,.0f}/s"

    rows = [
        ("measure", "figure", "mean", "runs", "target"),
        (
            "tasks/get (decode+get+encode)",
            f"{get['per_second']:,.0f} req/s",
            f"{get['mean_us']:.2f} us",
            spread(get["runs_per_second"]),
            f">= {GET_TARGET_PER_S:,}/s  {verdict(get['per_second'] >= GET_TARGET_PER_S)}",
        ),
        (
            "task life (call..get)",
            f"{life['per_second']:,.0f} lives/s",
            f"{life['mean_us']:.2f} us",
            spread(life["runs_per_second"]),
            "-",
        ),
        (
            "stored task, beyond payload",
            f"{mem['beyond_payload_per_task']:,.0f} B",
            "",
            "",
            f"<= {MEMORY_TARGET_BYTES:,} B  "
            f"{verdict(mem['beyond_payload_per_task'] <= MEMORY_TARGET_BYTES)}",
        ),
        (
            "stored task, with payload",
            f"{mem['bytes_per_task']:,.0f} B (payload {mem['payload_per_task']:.0f} B)",
            "",
            "",
            "-",
        ),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * width for width in widths))
    print(
        f"\ntask life: a fresh store per run, never pruned (it grew to "
        f"{life['largest_store']:,} tasks)\nmemory: {mem['tasks']:,} completed tasks, their "
        "expiry index included; tracemalloc counts requested bytes, not allocator overhead"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke test")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--profile", action="store_true", help="profile the tasks/get path with cProfile instead"
    )
    parser.add_argument(
        "--recording",
        action="store_true",
        help="only tasks/get with and without recording (JSON): what writing each poll costs",
    )
    args = parser.parse_args(argv)

    seconds, repeats, tasks = (0.1, 3, 10_000) if args.quick else (1.0, 5, 100_000)
    if args.profile:
        profile_tasks_get(seconds * 3)
        return
    if args.recording:
        json.dump(recording_cost(seconds, repeats), sys.stdout, indent=1)
        print()
        return

    get = timed_runs(tasks_get_batch, seconds, repeats, batch_size=1000)
    lives = _LifeBatches()
    life = timed_runs(lives, seconds, repeats, batch_size=200)
    memory = stored_task_memory(tasks)

    figures: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "msgspec": msgspec.__version__,
        "platform": f"{platform.system()} {platform.machine()}",
        "runs": {"repeats": repeats, "seconds": seconds, "quick": args.quick},
        "tasks_get": asdict(get),
        "task_life": {**asdict(life), "largest_store": lives.largest_store},
        "memory": asdict(memory),
        "targets": {
            "tasks_get_per_second": GET_TARGET_PER_S,
            "bytes_beyond_payload": MEMORY_TARGET_BYTES,
            "tasks_get_met": get.per_second >= GET_TARGET_PER_S,
            "memory_met": memory.beyond_payload_per_task <= MEMORY_TARGET_BYTES,
        },
    }
    if args.json:
        json.dump(figures, sys.stdout)
        print()
    else:
        print_table(figures)


if __name__ == "__main__":
    main()
