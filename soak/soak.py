"""Soak: tasks created, answered, cancelled and left to expire for 10 minutes, while the
server's resident memory, file descriptors and live trio tasks are watched for leaks.

What is measured
----------------
A server process, `python soak/server.py` (the memory store, `max_tasks` 1024, a TTL of
5 s, an advised `pollIntervalMs` of 100, its monitor sampling every 2 s), pinned to core 0
on a machine with two cores or more; a load process, pinned to core 1, runs 8 workers
over 127.0.0.1 for the whole run. Each worker has a `mcp_tasks.client.Client` (one
keep-alive connection) that it closes and opens anew every 50 scenarios, so connections
come and go as well, and goes round four scenarios, one after another, without pause:

* complete: `work` for 0.05-0.5 s, polled (at the advised interval) until it completes;
  its result is checked against its arguments;
* answer: `ask`, which asks for a number in place; answered with `tasks/update` when it
  shows `input_required`, polled until it completes, the result checked;
* cancel: a `work` of 60 s, or an `ask` waiting for its answer (by turns), polled until its
  handler runs, then `tasks/cancel`: it must show `cancelled`;
* expire: created and left alone, by turns a `work` of 0.05 s (it completes, then
  expires), a `work` of 60 s (it expires while its handler runs) and an `ask` (it expires
  while its handler waits for an answer). Once TTL + 1.5 s have passed, `tasks/get` must
  refuse it (the record is gone).

After the run the load process waits until the last abandoned task must have expired and
checks it, then closes its clients. Then the server is left idle until it is back where
it started (no task stored, no handler running, as many trio tasks and descriptors as
before the load), for at most TTL + 20 s.

Samples: the server's RSS (VmRSS of /proc/PID/status) and open descriptors (entries of
/proc/PID/fd), read by this process every 2 s; the live trio tasks, counted inside the
server by its monitor (see `soak/server.py`: a walk of the task tree from
`trio.lowlevel.current_root_task()`), with the records stored and the handlers running.

Verdict (the rules; any failed one exits 1):

* load: no error (a transport or JSON-RPC error, a wrong result, a task that did not
  complete, cancel or expire as it should) and every scenario ran;
* RSS flat: warm-up is the first 20 % of the load; the reference is the mean RSS of the
  next 10 % of it; every later sample during the load is within +-10 % of the reference;
* descriptors and trio tasks not growing: after warm-up, the mean of the last fifth of the
  samples during the load is at most the mean of the first fifth plus max(2, 10 %); and
  once idle again the count is back to exactly its value before the load;
* nothing left: once idle again, no task record is stored and no handler runs.

    python soak/soak.py               # 10 minutes of load (about 10.5 minutes in all)
    python soak/soak.py --minutes 2   # any length
    python soak/soak.py --quick       # smoke test: 15 s of load, a TTL of 2 s, 0.5 s samples
    python soak/soak.py --json        # the figures and verdicts as one JSON object

Loopback only; bounded in time.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `_common`

import argparse
import collections
import contextlib
import json
import os
import platform
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio
from _common import (
    ANSWER_FACTOR,
    POLL_ENV,
    SAMPLE_EVERY_ENV,
    SAMPLES_ENV,
    SERVER_FILE,
    TTL_ENV,
    children_cpu_seconds,
    cpu_seconds,
    expected_text,
    open_fds,
    percentile,
    pin,
    print_rows,
    rss_kib,
    started_server,
)

from mcp_tasks import CallToolResult, ElicitParams, ElicitResult, TextContent
from mcp_tasks.client import Client, RpcError, Task, connect_http
from mcp_tasks.core import (
    CancelledTask,
    CompletedTask,
    FailedTask,
    InputRequiredTask,
    WorkingTask,
)

SCENARIOS = ("complete", "answer", "cancel", "expire")
RECONNECT_EVERY = 50  # scenarios per client: then a new connection
SCENARIO_TIMEOUT_SECONDS = 30.0
EXPIRY_MARGIN_SECONDS = 1.5
POLL_MS = 100
WARMUP_FRACTION = 0.2
REFERENCE_FRACTION = 0.1
RSS_BAND = 0.10
GROWTH_FRACTION = 0.10
GROWTH_SLACK = 2
MAX_ERROR_SAMPLES = 20
T = TypeVar("T")


# --- the load process ---------------------------------------------------------------------


@dataclass
class Stats:
    ran: collections.Counter[str] = field(default_factory=collections.Counter)
    ok: collections.Counter[str] = field(default_factory=collections.Counter)
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    abandoned: list[tuple[float, str, str]] = field(default_factory=list)
    """(when it must have expired, task id, what it was), in creation order."""

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < MAX_ERROR_SAMPLES:
            self.error_samples.append(what[:400])


class ScenarioError(Exception):
    """A scenario did not go as it should."""


async def never_asked(params: ElicitParams) -> ElicitResult:
    """Declares elicitation (for `ask`); the workers answer with `tasks/update` themselves."""
    raise AssertionError("the workers answer input themselves")


def result_text(task: CompletedTask[CallToolResult]) -> str | None:
    """The text of a completed task's result, None if it is not one text or an error."""
    content = task.result.content
    if task.result.is_error or not content or not isinstance(content[0], TextContent):
        return None
    return content[0].text


class Worker:
    def __init__(self, index: int, url: str, ttl: float, stats: Stats) -> None:
        self.index = index
        self.url = url
        self.ttl = ttl
        self.stats = stats
        self.serial = 0
        self.turn: collections.Counter[str] = collections.Counter()

    async def timed(self, request: Awaitable[T]) -> T:
        start = time.perf_counter()
        try:
            return await request
        finally:
            self.stats.latencies.append(time.perf_counter() - start)

    async def run(self, deadline: float) -> None:
        scenarios = {
            "complete": self.complete,
            "answer": self.answer,
            "cancel": self.cancel,
            "expire": self.expire,
        }
        step = self.index
        while time.monotonic() < deadline:
            async with connect_http(self.url, on_elicit=never_asked) as client:
                for _ in range(RECONNECT_EVERY):
                    if time.monotonic() >= deadline:
                        break
                    name = SCENARIOS[step % len(SCENARIOS)]
                    step += 1
                    await self.one(name, scenarios[name], client)
                    await self.check_expired(client, time.monotonic())

    async def one(
        self, name: str, scenario: Callable[[Client], Awaitable[None]], client: Client
    ) -> None:
        self.stats.ran[name] += 1
        try:
            with trio.fail_after(SCENARIO_TIMEOUT_SECONDS):
                await scenario(client)
        except Exception as error:  # a ScenarioError, RpcError, TransportError, TooSlowError
            self.stats.error(f"{name}: {type(error).__name__}: {error}")
        else:
            self.stats.ok[name] += 1

    def arguments(self, seconds: float) -> dict[str, Any]:
        self.serial += 1
        return {"label": f"w{self.index}", "n": self.serial, "seconds": seconds}

    async def create(self, client: Client, tool: str, arguments: dict[str, Any]) -> Task:
        outcome = await self.timed(client.call_tool_or_task(tool, arguments))
        if isinstance(outcome, CallToolResult):
            raise ScenarioError(f"{tool} answered in place, not with a task")
        return outcome

    async def poll(self, client: Client, task: Task, until: tuple[type[Any], ...]) -> Task:
        """Poll `task` at the advised interval until it is one of `until`; a task ended
        otherwise is an error."""
        while not isinstance(task, until):
            if isinstance(task, CompletedTask | FailedTask | CancelledTask):
                raise ScenarioError(f"task {task.task_id} ended {type(task).__name__}: {task}")
            await trio.sleep(client.poll.delay(task))
            task = await self.timed(client.get_task(task.task_id))
        result: Task = task
        return result

    async def complete(self, client: Client) -> None:
        seconds = round(0.05 + 0.45 * (self.serial % 10) / 9, 3)
        arguments = self.arguments(seconds)
        task = await self.poll(
            client, await self.create(client, "work", arguments), (CompletedTask,)
        )
        assert isinstance(task, CompletedTask)
        self.check_result(task, expected_text(arguments["label"], arguments["n"]))

    async def answer(self, client: Client) -> None:
        arguments = self.arguments(0.2)
        task = await self.create(client, "ask", arguments)
        task = await self.poll(client, task, (InputRequiredTask,))
        assert isinstance(task, InputRequiredTask)
        value = arguments["n"] * ANSWER_FACTOR
        answer = {"action": "accept", "content": {"value": value}}
        responses = {key: answer for key in task.input_requests}
        await self.timed(client.update_task(task.task_id, responses))
        task = await self.poll(client, task, (CompletedTask,))
        assert isinstance(task, CompletedTask)
        self.check_result(task, expected_text(arguments["label"], arguments["n"], value))

    async def cancel(self, client: Client) -> None:
        self.turn["cancel"] += 1
        if self.turn["cancel"] % 2:
            task = await self.create(client, "work", self.arguments(60.0))
            task = await self.poll(client, task, (WorkingTask,))
        else:
            task = await self.create(client, "ask", self.arguments(0.0))
            task = await self.poll(client, task, (InputRequiredTask,))
        await self.timed(client.cancel_task(task.task_id))
        task = await self.timed(client.get_task(task.task_id))
        if not isinstance(task, CancelledTask):
            raise ScenarioError(f"task {task.task_id} is {type(task).__name__} once cancelled")

    async def expire(self, client: Client) -> None:
        kinds = (("work", 0.05, "completed"), ("work", 60.0, "running"), ("ask", 0.0, "asking"))
        tool, seconds, kind = kinds[self.turn["expire"] % len(kinds)]
        self.turn["expire"] += 1
        task = await self.create(client, tool, self.arguments(seconds))
        due = time.monotonic() + self.ttl + EXPIRY_MARGIN_SECONDS
        self.stats.abandoned.append((due, task.task_id, kind))

    async def check_expired(self, client: Client, now: float) -> None:
        """Each abandoned task whose time is up must be gone (any worker may check it)."""
        abandoned = self.stats.abandoned
        while abandoned and abandoned[0][0] <= now:
            _, task_id, kind = abandoned.pop(0)
            try:
                task = await self.timed(client.get_task(task_id))
            except RpcError:  # -32602: it expired, or it is unknown: gone either way
                self.stats.ok[f"expired ({kind})"] += 1
            else:
                self.stats.error(f"expire: task {task_id} ({kind}) still there: {task}")

    def check_result(self, task: CompletedTask[CallToolResult], expected: str) -> None:
        text = result_text(task)
        if text != expected:
            raise ScenarioError(f"task {task.task_id}: result {text!r}, not {expected!r}")


async def run_load(url: str, seconds: float, workers: int, ttl: float) -> dict[str, Any]:
    stats = Stats()
    start = time.monotonic()
    async with trio.open_nursery() as nursery:
        for index in range(workers):
            nursery.start_soon(Worker(index, url, ttl, stats).run, start + seconds)
    ended = time.time()
    if stats.abandoned:
        await trio.sleep(max(0.0, stats.abandoned[-1][0] - time.monotonic()))
        async with connect_http(url) as client:
            await Worker(-1, url, ttl, stats).check_expired(client, time.monotonic())
    latencies = sorted(stats.latencies)
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    expired = sum(count for name, count in stats.ok.items() if name.startswith("expired"))
    return {
        "workers_ended_unix": ended,
        "requests": len(latencies),
        "errors": stats.errors,
        "error_samples": stats.error_samples,
        "scenarios_run": dict(stats.ran),
        "scenarios_ok": {**{name: stats.ok[name] for name in SCENARIOS[:3]}, "expire": expired},
        "expired_by_kind": {k: v for k, v in stats.ok.items() if k.startswith("expired")},
        "tasks_created": sum(stats.ran.values()),
        "p50_ms": None if p50 is None else p50 * 1000,
        "p99_ms": None if p99 is None else p99 * 1000,
    }


# --- orchestration ------------------------------------------------------------------------


def read_monitor(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    samples = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            samples.append(json.loads(line))
    return samples


def growth_verdict(values: list[float]) -> dict[str, Any]:
    """The mean of the last fifth of `values` against that of the first fifth."""
    fifth = max(1, len(values) // 5)
    first, last = statistics.fmean(values[:fifth]), statistics.fmean(values[-fifth:])
    allowed = first + max(GROWTH_SLACK, GROWTH_FRACTION * first)
    return {"first_fifth_mean": first, "last_fifth_mean": last, "allowed": allowed,
            "ok": last <= allowed}  # fmt: skip


def series_summary(values: list[float]) -> dict[str, Any]:
    return {"min": min(values), "max": max(values), "mean": statistics.fmean(values)}


def slope_per_minute(points: list[tuple[float, float]]) -> float | None:
    """The least-squares slope of (seconds, value) points, per minute."""
    if len(points) < 2:
        return None
    mean_t = statistics.fmean(t for t, _ in points)
    mean_v = statistics.fmean(v for _, v in points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return None
    return 60 * sum((t - mean_t) * (v - mean_v) for t, v in points) / spread


def run_all(seconds: float, workers: int, ttl_ms: int, every: float) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "seconds": seconds,
        "workers": workers,
        "ttl_ms": ttl_ms,
        "poll_interval_ms": POLL_MS,
        "sample_seconds": every,
        "rules": {
            "warmup_fraction": WARMUP_FRACTION,
            "reference_fraction": REFERENCE_FRACTION,
            "rss_band": RSS_BAND,
            "growth_fraction": GROWTH_FRACTION,
            "growth_slack": GROWTH_SLACK,
        },
    }
    with tempfile.TemporaryDirectory() as folder:
        monitor_file = Path(folder) / "monitor.jsonl"
        env = {TTL_ENV: str(ttl_ms), POLL_ENV: str(POLL_MS), SAMPLES_ENV: str(monitor_file),
               SAMPLE_EVERY_ENV: str(every)}  # fmt: skip
        with started_server([sys.executable, str(SERVER_FILE)], env) as server:
            pid = server.pid
            time.sleep(max(1.0, 2.5 * every))  # idle: the monitor has sampled
            idle = read_monitor(monitor_file)[-1]
            baseline = {"rss_kib": rss_kib(pid)[0], "fds": open_fds(pid), **_counts(idle)}
            figures["baseline"] = baseline
            samples: list[dict[str, Any]] = []
            start = time.time()
            cpu_before = children_cpu_seconds()
            load = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--role", "load",
                 "--url", server.url, "--seconds", str(seconds), "--workers", str(workers),
                 "--ttl-ms", str(ttl_ms)],
                stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            output: list[str] = []
            assert load.stdout is not None
            stdout = load.stdout
            reader = threading.Thread(target=lambda: output.append(stdout.read()))
            reader.start()
            give_up = time.monotonic() + seconds + ttl_ms / 1000 + 120
            while load.poll() is None and time.monotonic() < give_up:
                samples.append({"t": time.time(), "rss_kib": rss_kib(pid)[0], "fds": open_fds(pid)})
                time.sleep(every)
            if load.poll() is None:
                load.kill()
            load.wait()
            reader.join()
            figures["load_cpu_seconds"] = children_cpu_seconds() - cpu_before
            if load.returncode != 0 or not output or not output[0].strip():
                raise RuntimeError(
                    f"the load process failed ({load.returncode}); the server said:\n"
                    + server.log_tail()
                )
            result = json.loads(output[0])
            load_ended = time.time()
            # Idle again: wait until the server is back where it started.
            settle = time.monotonic() + ttl_ms / 1000 + 20
            final: dict[str, Any] = {}
            while time.monotonic() < settle:
                time.sleep(every)
                monitor = read_monitor(monitor_file)[-1]
                final = {"rss_kib": rss_kib(pid)[0], "fds": open_fds(pid), **_counts(monitor)}
                samples.append({"t": time.time(), "rss_kib": final["rss_kib"], "fds": final["fds"]})
                if (
                    monitor["t"] > load_ended
                    and all(final[key] == baseline[key] for key in ("fds", "trio_tasks"))
                    and final["stored"] == 0
                    and final["running_handlers"] == 0
                ):
                    break
            figures["settle_seconds"] = time.time() - load_ended
            figures["final"] = final
            figures["server_cpu_seconds"] = cpu_seconds(pid)
        monitor_samples = read_monitor(monitor_file)
    figures["load"] = result
    judge(figures, start, result["workers_ended_unix"], samples, monitor_samples)
    return figures


def _counts(monitor: dict[str, Any]) -> dict[str, Any]:
    keys = ("trio_tasks", "tasks_living", "running_handlers", "stored", "names")
    return {key: monitor[key] for key in keys}


def judge(
    figures: dict[str, Any],
    start: float,
    ended: float,
    samples: list[dict[str, Any]],
    monitor: list[dict[str, Any]],
) -> None:
    """The verdicts, by the rules in the module's docstring."""
    length = ended - start
    warm = start + WARMUP_FRACTION * length
    reference_end = warm + REFERENCE_FRACTION * length
    during = [s for s in samples if warm <= s["t"] <= ended]
    watched = [s for s in monitor if warm <= s["t"] <= ended]
    reference = [s["rss_kib"] for s in during if s["t"] <= reference_end] or [during[0]["rss_kib"]]
    ref = statistics.fmean(reference)
    rss = [s["rss_kib"] for s in during]
    deviation = max(abs(value - ref) / ref for value in rss)
    baseline, final = figures["baseline"], figures["final"]
    load = figures["load"]
    verdicts = {
        "load": {
            "ok": load["errors"] == 0 and all(load["scenarios_ok"][name] > 0 for name in SCENARIOS),
            "errors": load["errors"],
        },
        "rss": {
            "ok": deviation <= RSS_BAND,
            "reference_kib": ref,
            "max_deviation": deviation,
            **series_summary(rss),
            "slope_kib_per_minute": slope_per_minute(
                [(s["t"] - warm, s["rss_kib"]) for s in during]
            ),
            "samples": len(rss),
        },
        "fds": {
            **growth_verdict([s["fds"] for s in during]),
            **series_summary([s["fds"] for s in during]),
            "baseline": baseline["fds"],
            "final": final.get("fds"),
        },
        "trio_tasks": {
            **growth_verdict([s["trio_tasks"] for s in watched]),
            **series_summary([s["trio_tasks"] for s in watched]),
            "baseline": baseline["trio_tasks"],
            "final": final.get("trio_tasks"),
            "walk_matches_tasks_living": all(s["trio_tasks"] == s["tasks_living"] for s in monitor),
            "samples": len(watched),
        },
        "left_over": {
            "ok": final.get("stored") == 0 and final.get("running_handlers") == 0,
            "stored": final.get("stored"),
            "running_handlers": final.get("running_handlers"),
            "stored_max_during": max(s["stored"] for s in watched),
        },
    }
    for name in ("fds", "trio_tasks"):
        verdict = verdicts[name]
        verdict["back_to_baseline"] = verdict["final"] == verdict["baseline"]
        verdict["ok"] = verdict["ok"] and verdict["back_to_baseline"]
    if not verdicts["trio_tasks"]["back_to_baseline"]:
        before = collections.Counter(baseline["names"])
        after = collections.Counter(final.get("names", {}))
        verdicts["trio_tasks"]["extra_names"] = dict(after - before)
        verdicts["trio_tasks"]["missing_names"] = dict(before - after)
    figures["verdicts"] = verdicts
    figures["timeline"] = _timeline(start, samples, monitor)
    figures["passed"] = all(verdict["ok"] for verdict in verdicts.values())


def _timeline(
    start: float, samples: list[dict[str, Any]], monitor: list[dict[str, Any]], rows: int = 12
) -> list[dict[str, Any]]:
    """About `rows` samples spread over the run (and the idle end), with the monitor's
    sample nearest to each."""
    if not samples:
        return []
    picks = sorted({round(i * (len(samples) - 1) / (rows - 1)) for i in range(rows)})
    timeline = []
    for index in picks:
        sample = samples[index]
        near = min(monitor, key=lambda m: abs(m["t"] - sample["t"])) if monitor else {}
        timeline.append({
            "seconds": round(sample["t"] - start, 1),
            "rss_kib": sample["rss_kib"],
            "fds": sample["fds"],
            "trio_tasks": near.get("trio_tasks"),
            "stored": near.get("stored"),
            "running_handlers": near.get("running_handlers"),
        })  # fmt: skip
    return timeline


def print_report(figures: dict[str, Any]) -> None:
    load, verdicts = figures["load"], figures["verdicts"]
    print(
        f"mcp_tasks soak: {figures['seconds'] / 60:g} min of load, {figures['workers']} workers "
        f"over 127.0.0.1, TTL {figures['ttl_ms']} ms, pollIntervalMs {figures['poll_interval_ms']}"
        f"; Python {figures['python']}, {figures['cpus']} CPUs"
    )
    ok = load["scenarios_ok"]
    print(
        f"load: {load['tasks_created']:,} tasks, {load['requests']:,} requests, "
        f"{load['errors']} errors; completed {ok['complete']:,}, answered {ok['answer']:,}, "
        f"cancelled {ok['cancel']:,}, expired {ok['expire']:,} "
        f"({', '.join(f'{k[9:-1]} {v:,}' for k, v in sorted(load['expired_by_kind'].items()))}); "
        f"latency p50 {load['p50_ms']:.2f} ms, p99 {load['p99_ms']:.2f} ms"
    )
    cpu = f"server {figures['server_cpu_seconds']:.0f} s, load {figures['load_cpu_seconds']:.0f} s"
    print(f"CPU: {cpu}; idle again {figures['settle_seconds']:.1f} s after the load\n")
    table: list[tuple[str, ...]] = [("s", "RSS MiB", "fds", "trio tasks", "stored", "handlers")]
    for row in figures["timeline"]:
        counts = (str(row[key]) for key in ("fds", "trio_tasks", "stored", "running_handlers"))
        table.append((f"{row['seconds']:g}", f"{row['rss_kib'] / 1024:.1f}", *counts))
    print_rows(table)
    print()
    rss, fds, tasks = verdicts["rss"], verdicts["fds"], verdicts["trio_tasks"]
    left = verdicts["left_over"]
    slope = rss["slope_kib_per_minute"]
    rows = [
        ("check", "verdict", "figures"),
        ("load", _ok(verdicts["load"]), f"{load['errors']} errors"),
        ("RSS flat (+-10 % after warm-up)", _ok(rss),
         f"reference {rss['reference_kib'] / 1024:.1f} MiB, {rss['min'] / 1024:.1f}-"
         f"{rss['max'] / 1024:.1f} MiB, max deviation {rss['max_deviation']:.1%}, "
         f"slope {'-' if slope is None else f'{slope:+.0f}'} KiB/min"),
        ("fds not growing", _ok(fds), _growth_figures(fds)),
        ("trio tasks not growing", _ok(tasks), _growth_figures(tasks)),
        ("nothing left", _ok(left),
         f"stored {left['stored']}, handlers {left['running_handlers']} (stored at most "
         f"{left['stored_max_during']} during)"),
    ]  # fmt: skip
    print_rows(rows)
    if not tasks["walk_matches_tasks_living"]:
        print("note: the task-tree walk and trio's tasks_living disagreed in some sample")
    for name in ("extra_names", "missing_names"):
        if tasks.get(name):
            print(f"trio tasks {name.replace('_', ' ')}: {tasks[name]}")
    for sample in load["error_samples"]:
        print(f"error: {sample}")
    print(f"\nverdict: {'PASS' if figures['passed'] else 'FAIL'}")


def _growth_figures(verdict: dict[str, Any]) -> str:
    return (
        f"before {verdict['baseline']}, during {verdict['min']}-{verdict['max']} (first fifth "
        f"{verdict['first_fifth_mean']:.1f}, last {verdict['last_fifth_mean']:.1f}), "
        f"after {verdict['final']}"
    )


def _ok(verdict: dict[str, Any]) -> str:
    return "ok" if verdict["ok"] else "FAILED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke test (about 20 s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--minutes", type=float, default=10.0, help="minutes of load")
    parser.add_argument("--workers", type=int, default=8, help="concurrent workers")
    parser.add_argument("--role", choices=["load"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--ttl-ms", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "load":
        pin(1)
        figures = trio.run(run_load, args.url, args.seconds, args.workers, args.ttl_ms / 1000)
        print(json.dumps(figures))
        return 0
    seconds, ttl_ms, every = (15.0, 2000, 0.5) if args.quick else (args.minutes * 60, 5000, 2.0)
    figures = run_all(seconds, args.workers, ttl_ms, every)
    print(json.dumps(figures, indent=2)) if args.json else print_report(figures)
    return 0 if figures["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
