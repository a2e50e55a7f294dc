"""Load: 1,024 concurrent tasks, 32 pollers polling them for 60 s, and the 1,025th refused.

What is measured
----------------
A server process, `mcp-tasks serve soak/server.py --http 127.0.0.1:0` (the memory store,
`max_tasks` 1024, a TTL of an hour so that nothing expires during the run, an advised
`pollIntervalMs` of 500), pinned to core 0 on a machine with two cores or more; a load
process, pinned to core 1, with 32 pollers, each a `mcp_tasks.client.Client` of its own
(one keep-alive connection) over 127.0.0.1:

1. Creation: the pollers create the 1,024 tasks at once, 32 each, one `tools/call` in
   flight per poller. Task i works for between 10 % and 70 % of the run (spread evenly
   over i, so tasks finish all through it), reporting progress; one in eight is `ask`,
   which stops halfway to ask for a number in place. Every result is a digest of the
   task's arguments (and answer), so a result can be checked against its task.
2. The refusal: with the 1,024 tasks held, one more `tools/call` must be refused with
   JSON-RPC -32603 "Too many tasks: the server holds its limit of 1024; ...": once
   through the library's client (`RpcError`), once as a raw POST to learn the HTTP status.
3. Polling, for 60 s: each poller loops over its 32 tasks, `tasks/get` one request at a
   time, honouring the advised interval: no task is polled sooner than the `Client`'s
   `PollPolicy` delay (the task's `pollIntervalMs`) after its previous answer, and a
   poller with nothing due sleeps. 1,024 tasks at 500 ms ask for about 2,000 polls/s:
   when the two processes cannot make that many, polls simply come later (the achieved
   mean interval per task is reported, the immediate poll after an answer included; the
   CPU time of each process tells which one was the limit). An `input_required` task is
   answered with `tasks/update` (and polled again at once, as the client's `await_task`
   does). A completed task is checked against its arguments, and polled on to the end:
   each later read must give the same result.
4. At the end, with the 1,024 tasks still held (finished tasks count until they
   expire), the refusal again.

Reported: requests, errors (anything but the expected refusals: a transport error, a
JSON-RPC error, a task failed or cancelled, a wrong result), lost results (tasks whose
correct result was never read), latency p50/p99 per kind of request and in all (from
sending a request to its parsed answer, in the load process), the server's RSS (idle,
after creation, at the end, the peak) read from /proc/PID/status, and the CPU time each
process used. The run passes with zero errors, zero lost results and every refusal as
expected; it exits 1 otherwise.

    python soak/load.py            # 1,024 tasks, 32 pollers, 60 s (about 70 s in all)
    python soak/load.py --quick    # smoke test: 64 tasks (max_tasks 64), 8 pollers, 6 s
    python soak/load.py --json     # the figures as one JSON object

`--tasks`, `--pollers`, `--seconds` and `--poll-ms` change the figures; the server's
`max_tasks` is set to `--tasks` (through SOAK_MAX_TASKS). Loopback only; bounded in time.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `_common`

import argparse
import contextlib
import json
import os
import platform
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
import msgspec
import trio
from _common import (
    ANSWER_FACTOR,
    MAX_TASKS_ENV,
    POLL_ENV,
    SERVER_FILE,
    TTL_ENV,
    children_cpu_seconds,
    cli_command,
    cpu_seconds,
    expected_text,
    ms,
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
)

TOO_MANY = "Too many tasks: the server holds its limit of {limit}; "
ASK_EVERY = 8  # one task in eight asks for input
MAX_ERROR_SAMPLES = 20
LOAD_TTL_MS = 3_600_000


# --- the load process ---------------------------------------------------------------------


@dataclass
class Job:
    index: int
    tool: str
    seconds: float
    label: str
    task_id: str = ""
    next_due: float = 0.0
    polls: int = 0
    first_poll: float = 0.0
    last_poll: float = 0.0
    answered: set[str] = field(default_factory=set)
    result_ok: bool = False

    @property
    def n(self) -> int:
        return self.index

    @property
    def arguments(self) -> dict[str, Any]:
        return {"label": self.label, "n": self.n, "seconds": self.seconds}

    @property
    def expected(self) -> str:
        answer = self.n * ANSWER_FACTOR if self.tool == "ask" else None
        return expected_text(self.label, self.n, answer)


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    wrong_results: int = 0
    answered: int = 0

    def took(self, kind: str, seconds: float) -> None:
        self.latencies.setdefault(kind, []).append(seconds)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < MAX_ERROR_SAMPLES:
            self.error_samples.append(what[:400])


def result_text(task: CompletedTask[CallToolResult]) -> str | None:
    """The text of a completed task's result, None if it is not one text or an error."""
    content = task.result.content
    if task.result.is_error or not content or not isinstance(content[0], TextContent):
        return None
    return content[0].text


async def never_asked(params: ElicitParams) -> ElicitResult:
    """Declares elicitation (for `ask`); the pollers answer with `tasks/update` themselves."""
    raise AssertionError("the pollers answer input themselves")


class Poller:
    def __init__(self, client: Client, jobs: list[Job], stats: Stats) -> None:
        self.client = client
        self.jobs = jobs
        self.stats = stats

    async def create_all(self) -> None:
        for job in self.jobs:
            start = time.perf_counter()
            try:
                outcome = await self.client.call_tool_or_task(job.tool, job.arguments)
            except Exception as error:
                self.stats.error(f"create {job.index}: {type(error).__name__}: {error}")
                continue
            finally:
                self.stats.took("tools/call", time.perf_counter() - start)
            if isinstance(outcome, CallToolResult):
                self.stats.error(f"create {job.index}: answered in place, not with a task")
                continue
            job.task_id = outcome.task_id
            job.next_due = time.monotonic() + self.client.poll.delay(outcome)

    async def poll_until(self, deadline: float) -> None:
        jobs = [job for job in self.jobs if job.task_id]
        while jobs:
            job = min(jobs, key=lambda each: each.next_due)
            now = time.monotonic()
            if job.next_due >= deadline:
                await trio.sleep(max(0.0, deadline - now))
                return
            if job.next_due > now:
                await trio.sleep(job.next_due - now)
            await self.poll(job)

    async def poll(self, job: Job) -> None:
        start = time.perf_counter()
        try:
            task = await self.client.get_task(job.task_id)
        except Exception as error:
            self.stats.error(f"tasks/get {job.index}: {type(error).__name__}: {error}")
            job.next_due = time.monotonic() + 1.0
            return
        finally:
            self.stats.took("tasks/get", time.perf_counter() - start)
        now = time.monotonic()
        job.polls += 1
        job.first_poll = job.first_poll or now
        job.last_poll = now
        job.next_due = now + self.client.poll.delay(task)
        await self.look_at(job, task)

    async def look_at(self, job: Job, task: Task) -> None:
        if isinstance(task, CompletedTask):
            text = result_text(task)
            if text == job.expected:
                job.result_ok = True
            else:
                self.stats.wrong_results += 1
                self.stats.error(f"task {job.index}: result {text!r}, not {job.expected!r}")
        elif isinstance(task, FailedTask | CancelledTask):
            self.stats.error(f"task {job.index} ({job.tool}) ended {type(task).__name__}: {task}")
            job.next_due = float("inf")
        elif isinstance(task, InputRequiredTask):
            keys = [key for key in task.input_requests if key not in job.answered]
            if keys:
                await self.answer(job, keys)

    async def answer(self, job: Job, keys: list[str]) -> None:
        answer = {"action": "accept", "content": {"value": job.n * ANSWER_FACTOR}}
        start = time.perf_counter()
        try:
            await self.client.update_task(job.task_id, {key: answer for key in keys})
        except Exception as error:
            self.stats.error(f"tasks/update {job.index}: {type(error).__name__}: {error}")
            return
        finally:
            self.stats.took("tasks/update", time.perf_counter() - start)
        job.answered.update(keys)
        self.stats.answered += 1
        job.next_due = time.monotonic()  # as await_task does: look again at once


async def probe_refusal(client: Client, url: str, limit: int, stats: Stats) -> dict[str, Any]:
    """One more `tools/call` through the client, then one as a raw POST: both must be
    refused with -32603 and the "Too many tasks" message."""
    arguments = {"label": "one-too-many", "n": -1, "seconds": 0.1}
    expected = TOO_MANY.format(limit=limit)
    probe: dict[str, Any] = {}
    start = time.perf_counter()
    try:
        outcome = await client.call_tool_or_task("work", arguments)
    except RpcError as error:
        probe.update(code=error.code, message=error.message)
    else:
        probe.update(code=None, message=f"accepted: {outcome}")
    finally:
        stats.took("refused tools/call", time.perf_counter() - start)
    params = {"name": "work", "arguments": arguments}
    body, headers = client.core.request(10**9, "tools/call", params)
    post_headers = {
        **headers,
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    start = time.perf_counter()
    async with httpx2.AsyncClient() as raw:
        response = await raw.post(url, content=body, headers=post_headers)
    stats.took("refused tools/call", time.perf_counter() - start)
    refusal = (msgspec.json.decode(response.content) or {}).get("error") or {}
    probe.update(
        http_status=response.status_code,
        raw_code=refusal.get("code"),
        raw_message=refusal.get("message"),
    )
    probe["refused"] = all(
        code == -32603 and isinstance(message, str) and message.startswith(expected)
        for code, message in (
            (probe["code"], probe["message"]),
            (probe["raw_code"], probe["raw_message"]),
        )
    )
    if not probe["refused"]:
        stats.error(f"one task too many was not refused as expected: {probe}")
    return probe


def make_jobs(count: int, seconds: float) -> list[Job]:
    jobs = []
    for index in range(count):
        tool = "ask" if index % ASK_EVERY == ASK_EVERY - 1 else "work"
        share = 0.1 + 0.6 * index / max(1, count - 1)
        jobs.append(Job(index=index, tool=tool, seconds=round(seconds * share, 3), label="t"))
    return jobs


async def run_load(url: str, count: int, pollers: int, seconds: float) -> dict[str, Any]:
    stats = Stats()
    jobs = make_jobs(count, seconds)
    figures: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        probe_client = await stack.enter_async_context(connect_http(url))
        workers = []
        for n in range(pollers):  # a client each: a connection each
            client = await stack.enter_async_context(connect_http(url, on_elicit=never_asked))
            workers.append(Poller(client, jobs[n::pollers], stats))
        start = time.monotonic()
        async with trio.open_nursery() as nursery:
            for worker in workers:
                nursery.start_soon(worker.create_all)
        figures["creation_seconds"] = time.monotonic() - start
        figures["created_at_unix"] = time.time()
        figures["created"] = sum(1 for job in jobs if job.task_id)
        figures["refusal_after_creation"] = await probe_refusal(probe_client, url, count, stats)
        poll_start = time.monotonic()
        deadline = poll_start + seconds
        async with trio.open_nursery() as nursery:
            for worker in workers:
                nursery.start_soon(worker.poll_until, deadline)
        figures["poll_seconds"] = time.monotonic() - poll_start
        figures["refusal_at_end"] = await probe_refusal(probe_client, url, count, stats)
    intervals = [
        (job.last_poll - job.first_poll) / (job.polls - 1) for job in jobs if job.polls > 1
    ]
    everything = sorted(value for values in stats.latencies.values() for value in values)
    figures.update(
        requests=len(everything),
        errors=stats.errors,
        error_samples=stats.error_samples,
        wrong_results=stats.wrong_results,
        lost_results=sum(1 for job in jobs if not job.result_ok),
        completed=sum(1 for job in jobs if job.result_ok),
        answered=stats.answered,
        polls=sum(job.polls for job in jobs),
        mean_poll_interval_ms=1000 * sum(intervals) / len(intervals) if intervals else None,
        latency={"all": _latency(everything)},
    )
    for kind, values in sorted(stats.latencies.items()):
        figures["latency"][kind] = _latency(sorted(values))
    return figures


def _latency(values: list[float]) -> dict[str, Any]:
    p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
    return {
        "count": len(values),
        "p50_ms": None if p50 is None else p50 * 1000,
        "p99_ms": None if p99 is None else p99 * 1000,
        "max_ms": values[-1] * 1000 if values else None,
    }


# --- orchestration ------------------------------------------------------------------------


def run_all(count: int, pollers: int, seconds: float, poll_ms: int) -> dict[str, Any]:
    env = {MAX_TASKS_ENV: str(count), TTL_ENV: str(LOAD_TTL_MS), POLL_ENV: str(poll_ms)}
    command = cli_command("serve", str(SERVER_FILE), "--http", "127.0.0.1:0")
    command += ["--log-level", "warning"]
    figures: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "tasks": count,
        "max_tasks": count,
        "pollers": pollers,
        "seconds": seconds,
        "poll_interval_ms": poll_ms,
        "polling": "honoured: no task polled sooner than its pollIntervalMs after its last poll",
    }
    with started_server(command, env) as server:
        time.sleep(0.5)
        idle_rss, _ = rss_kib(server.pid)
        server_cpu = cpu_seconds(server.pid)
        load_cpu = children_cpu_seconds()
        load = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--role", "load", "--url", server.url,
             "--tasks", str(count), "--pollers", str(pollers), "--seconds", str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        samples: list[tuple[float, int]] = []
        output: list[str] = []
        reader = threading.Thread(target=lambda: output.append(load.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        deadline = time.monotonic() + seconds + 600
        while load.poll() is None and time.monotonic() < deadline:
            samples.append((time.time(), rss_kib(server.pid)[0]))
            time.sleep(0.5)
        if load.poll() is None:
            load.kill()
        load.wait()
        reader.join()
        figures["load_cpu_seconds"] = children_cpu_seconds() - load_cpu
        figures["server_cpu_seconds"] = cpu_seconds(server.pid) - server_cpu
        rss, peak = rss_kib(server.pid)
        if load.returncode != 0:
            raise RuntimeError(
                f"the load process failed ({load.returncode}); the server said:\n"
                + server.log_tail()
            )
    result = json.loads(output[0])
    figures.update(result)

    def rss_at(moment: float) -> int:
        return min(samples, key=lambda sample: abs(sample[0] - moment))[1] if samples else rss

    figures["server_rss_kib"] = {
        "idle": idle_rss,
        "after_creation": rss_at(result["created_at_unix"]),
        "end": rss,
        "peak": peak,
    }
    refusals = (figures["refusal_after_creation"], figures["refusal_at_end"])
    figures["passed"] = (
        figures["created"] == count
        and figures["errors"] == 0
        and figures["lost_results"] == 0
        and figures["wrong_results"] == 0
        and all(refusal["refused"] for refusal in refusals)
    )
    return figures


def print_report(figures: dict[str, Any]) -> None:
    print(
        f"mcp_tasks load: {figures['tasks']} tasks (max_tasks {figures['max_tasks']}), "
        f"{figures['pollers']} pollers, {figures['seconds']:g} s of polling over 127.0.0.1; "
        f"Python {figures['python']}, {figures['cpus']} CPUs"
    )
    print(f"polling: pollIntervalMs {figures['poll_interval_ms']}, {figures['polling']}\n")
    rss = figures["server_rss_kib"]
    latency = figures["latency"]
    seconds = figures["creation_seconds"] + figures["poll_seconds"]
    per_second = figures["requests"] / seconds if seconds else 0.0
    checked = f"{figures['completed']} checked right, {figures['wrong_results']} wrong"
    interval = ms(figures["mean_poll_interval_ms"])
    rows = [
        ("figure", "value"),
        ("created", f"{figures['created']} tasks in {figures['creation_seconds']:.2f} s"),
        ("requests", f"{figures['requests']:,} ({per_second:,.0f}/s)"),
        ("errors", str(figures["errors"])),
        ("lost results", f"{figures['lost_results']} ({checked})"),
        ("input answered", str(figures["answered"])),
        ("polls", f"{figures['polls']:,}, mean interval per task {interval}"),
    ]
    for when in ("after_creation", "at_end"):
        refusal = figures[f"refusal_{when}"]
        verdict = "refused" if refusal["refused"] else "NOT REFUSED AS EXPECTED"
        shown = f"{refusal['code']} {refusal['message']!r} (HTTP {refusal['http_status']})"
        rows.append(
            (f"task {figures['tasks'] + 1}, {when.replace('_', ' ')}", f"{verdict}: {shown}")
        )
    mib = {key: f"{value / 1024:.1f}" for key, value in rss.items()}
    rows.append(
        (
            "server RSS MiB",
            f"idle {mib['idle']}, after creation {mib['after_creation']}, end {mib['end']}, "
            f"peak {mib['peak']}",
        )
    )
    cpu = f"server {figures['server_cpu_seconds']:.1f} s, load {figures['load_cpu_seconds']:.1f} s"
    rows.append(("CPU time", f"{cpu} (in {seconds:.1f} s)"))
    print_rows(rows)
    print()
    table = [("request", "count", "p50", "p99", "max")]
    for kind, figure in latency.items():
        p50, p99, most = (ms(figure[key]) for key in ("p50_ms", "p99_ms", "max_ms"))
        table.append((kind, f"{figure['count']:,}", p50, p99, most))
    print_rows(table)
    for sample in figures["error_samples"]:
        print(f"error: {sample}")
    print(f"\nverdict: {'PASS' if figures['passed'] else 'FAIL'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke test")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--tasks", type=int, help="tasks created (and max_tasks); default 1024")
    parser.add_argument("--pollers", type=int, help="pollers; default 32")
    parser.add_argument("--seconds", type=float, help="seconds of polling; default 60")
    parser.add_argument("--poll-ms", type=int, default=500, help="the advised poll interval")
    parser.add_argument("--role", choices=["load"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    count = args.tasks or (64 if args.quick else 1024)
    pollers = args.pollers or (8 if args.quick else 32)
    seconds = args.seconds or (6.0 if args.quick else 60.0)
    if args.role == "load":
        pin(1)
        figures = trio.run(run_load, args.url, count, pollers, seconds)
        print(json.dumps(figures))
        return 0
    figures = run_all(count, pollers, seconds, args.poll_ms)
    print(json.dumps(figures, indent=2)) if args.json else print_report(figures)
    return 0 if figures["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
