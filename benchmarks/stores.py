"""The HTTP benchmark with the task store as its parameter: memory, SQLite and Redis.

What is measured
----------------
Throughput. One bench server per store, each in a process of its own (`serve_http` around
the `Server` below, `max_tasks` high enough never to refuse a creation): memory, SQLite in
a temporary folder, and Redis on a redis-server of our own (loopback, never saved to disk)
under a fresh key prefix. The load generator of `benchmarks/http.py` (16 keep-alive
connections, one pre-built POST in flight on each, a `selectors` loop on raw sockets) runs
two workloads against each:

* `tasks/get` on a completed task: requests/s;
* `tools/call quick`: every request creates a task (which completes at once): creations/s.

On a machine with two or more cores the servers and the redis-server are pinned to core 0,
the generator to core 1: what a store costs, the store included, comes out of the one core
the server has (SQLite works inside the server's process anyway). Runs alternate between the
stores, three per store and workload; the best of each counts. Each figure is also given as
a ratio to memory's; the aim is Redis >= 0.5 x memory on `tasks/get`.

Cross-process latency on Redis, and on SQLite opened shared. Two server processes, A and B,
on one Redis prefix, or one SQLite file (`?shared=true`: signals through a table each
process polls), not pinned. N times: create a `blocks_noting` task on A, poll `tasks/get`
on A until its handler runs; t0; send `tasks/cancel` to B; the handler on A, cancelled,
writes the time it was woken to a file: latency = that time - t0. Likewise `tasks/update`:
an `asks_noting` task on A waits in `ctx.elicit(...)`, `input_required`; t0; the answer
goes to B; A's handler writes the time it got the answer. Reported: p50 and p99 against
the aim of p99 < 50 ms.

    python benchmarks/stores.py            # 2 s per run, 18 runs, 200 of each signal (~70 s)
    python benchmarks/stores.py --quick    # smoke test: short runs, 20 of each signal
    python benchmarks/stores.py --json     # the figures as one JSON object

It needs `redis-server` on the PATH (Debian/Ubuntu: apt-get install redis-server).
"""

# ruff: noqa: E402  (the imports must follow the sys.path fix below)
from __future__ import annotations

import os
import sys

# Run as a script, this file's folder comes first on sys.path, and the benchmark `http.py`
# next to it would stand in for the standard library's `http`: take the folder off first.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]

import argparse
import contextlib
import http.client
import importlib.util
import json
import platform
import random
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import trio

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome
from mcp_tasks.store import open_store
from mcp_tasks.store._sqlite_coordination import SIGNAL_POLL_SECONDS
from mcp_tasks.transports import serve_http


def _load_http_benchmark() -> ModuleType:
    """`benchmarks/http.py`, under a name that does not hide the standard `http`."""
    spec = importlib.util.spec_from_file_location("http_benchmark", Path(_HERE) / "http.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_http_benchmark()

STORES = ("memory", "sqlite", "redis")
WORKLOADS = ("tasks/get", "tools/call quick")
REDIS_TARGET_RATIO = 0.5  # Redis / memory on tasks/get
TARGET_P99_MS = 50.0  # tasks/cancel and tasks/update, from B to the handler on A
SERVER_LIFETIME_SECONDS = 900  # a server left behind stops by itself
WAIT_SECONDS = 10.0  # for any one status or note
NOTE_POLL_SECONDS = 0.002
BLOCKING = "blocking"
ANSWER = {"action": "accept", "content": {"x": "y"}}
CONTROL_CAPS: dict[str, Any] = {**bench.TASKS_CAPS, "elicitation": {}}  # asks_noting asks
INSTALL_HINT = (
    "redis-server is not installed: this benchmark needs it "
    "(Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis)"
)


# --- the bench server ---------------------------------------------------------------------

server = Server(
    "store-bench",
    "1.0.0",
    tasks=TaskOptions(ttl_ms=3_600_000, poll_interval_ms=100, max_tasks=10**7),
    shutdown_grace_seconds=0.5,
)
NOTES_ENV = "STORES_BENCH_NOTES"
"""Names the folder where `blocks_noting` and `asks_noting` write `<task_id>.cancel` and
`<task_id>.answer` (the bench servers are started with it set)."""


def _note(task_id: str, suffix: str) -> None:
    """Write the time now to `<notes>/<task_id>.<suffix>`, whole or not at all."""
    now = time.time()
    path = Path(os.environ.get(NOTES_ENV, tempfile.gettempdir())) / f"{task_id}.{suffix}"
    part = path.with_name(path.name + ".part")
    part.write_text(repr(now))
    os.replace(part, path)


@server.tool(task_support="required")
async def quick(ctx: ToolContext) -> ToolOutcome:
    """A task that completes at once."""
    if not ctx.in_task:
        return START_TASK
    return CallToolResult.text("done")


@server.tool(task_support="required")
async def blocks_noting(ctx: ToolContext) -> ToolOutcome:
    """Work until cancelled; note the time the cancellation arrived."""
    if not ctx.in_task:
        return START_TASK
    assert ctx.task_id is not None
    await ctx.set_status_message(BLOCKING)  # seen on tasks/get: the handler is running
    try:
        await trio.sleep_forever()
    except trio.Cancelled:
        _note(ctx.task_id, "cancel")
        raise
    raise AssertionError("unreachable")


@server.tool(task_support="required")
async def asks_noting(ctx: ToolContext) -> ToolOutcome:
    """Ask for x and wait for it in place; note the time the answer arrived."""
    if not ctx.in_task:
        return START_TASK
    assert ctx.task_id is not None
    answer = await ctx.elicit("x?", {"type": "object", "properties": {"x": {"type": "string"}}})
    _note(ctx.task_id, "answer")
    return CallToolResult.text(f"x is {(answer.content or {}).get('x')}")


def run_server(store_url: str) -> None:
    server.use_store(open_store(store_url))

    async def main() -> None:
        with trio.move_on_after(SERVER_LIFETIME_SECONDS):
            async with server.running(), trio.open_nursery() as nursery:
                port = await nursery.start(serve_http, server, "127.0.0.1", 0)
                print(f"PORT {port}", flush=True)

    trio.run(main)


# --- processes ----------------------------------------------------------------------------


def _python(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


def _pin_process(pid: int, cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, {cpu})


@contextlib.contextmanager
def started_server(store_url: str, notes: Path, *, pinned: bool) -> Iterator[int]:
    """A bench server on `store_url` (pinned to core 0 if `pinned`) that writes its notes
    in `notes`; its port."""
    args = ["--role", "server", "--store", store_url, *(["--pin"] if pinned else [])]
    environment = {**os.environ, NOTES_ENV: str(notes)}
    process = subprocess.Popen(_python(*args), stdout=subprocess.PIPE, text=True, env=environment)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the bench server on {store_url} did not start: {line!r}")
        yield int(line.split()[1])
    finally:
        process.terminate()
        process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def started_redis() -> Iterator[tuple[str, str]]:
    """redis-server on a free loopback port, never saved to disk; its URL and version."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit(INSTALL_HINT)
    version = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, check=True
    ).stdout
    port = _free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _pin_process(process.pid, 0)
        deadline = time.monotonic() + 10
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock,
            ):
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {port}")
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0", version.split(" v=")[-1].split()[0]
    finally:
        process.terminate()
        process.wait(timeout=10)


# --- control requests ---------------------------------------------------------------------


class Peer:
    """One keep-alive connection to a bench server, for control requests."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_SECONDS)

    def close(self) -> None:
        self.connection.close()

    def post(self, method: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": bench.VERSION,
            "io.modelcontextprotocol/clientCapabilities": CONTROL_CAPS,
        }
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                           "params": {**params, "_meta": meta}})  # fmt: skip
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "MCP-Protocol-Version": bench.VERSION, "Mcp-Method": method,
                   "Mcp-Name": name}  # fmt: skip
        self.connection.request("POST", "/mcp", body, headers)
        response = self.connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{method} answered {response.status}: {data[:300]!r}")
        reply: dict[str, Any] = json.loads(data)
        if "result" not in reply:
            raise RuntimeError(f"{method} failed: {reply}")
        result: dict[str, Any] = reply["result"]
        return result

    def create(self, tool: str) -> str:
        result = self.post("tools/call", tool, {"name": tool, "arguments": {}})
        task_id: str = result["taskId"]
        return task_id

    def wait_for(self, task_id: str, status: str, message: str | None = None) -> None:
        """Poll tasks/get until the task shows `status` (and `message`, if given)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            task = self.post("tasks/get", task_id, {"taskId": task_id})
            shown = task["status"], task.get("statusMessage") if message else None
            if shown == (status, message):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"task {task_id} is still {task['status']}, not {status}")
            time.sleep(0.005)


def _at_random_phase() -> None:
    """Wait 0-20 ms at random: each round starts right after A's handler ended the one
    before, so without it every request would reach a store that looks for signals every
    20 ms (SQLite) at the same point of that look, always the worst or the best."""
    time.sleep(random.random() * SIGNAL_POLL_SECONDS)


def _wait_for_note(path: Path) -> float:
    deadline = time.monotonic() + WAIT_SECONDS
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {path.name} within {WAIT_SECONDS:g} s")
        time.sleep(NOTE_POLL_SECONDS)
    return float(path.read_text())


def _percentiles(latencies_ms: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies_ms)
    count = len(ordered)
    return {
        "count": count,
        "p50_ms": ordered[count // 2],
        "p99_ms": ordered[min(count - 1, int(count * 0.99))],
        "max_ms": ordered[-1],
    }


# --- the measurements ---------------------------------------------------------------------


def run_throughput(
    redis_url: str, folder: Path, warmup: float, seconds: float, rounds: int
) -> dict[str, Any]:
    urls = {
        "memory": "memory://",
        "sqlite": f"sqlite:///{folder / 'tasks.db'}",
        "redis": f"{redis_url}?prefix=bench{secrets.token_hex(4)}",
    }
    figures: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        ports = {
            store: stack.enter_context(started_server(urls[store], folder, pinned=True))
            for store in STORES
        }
        polled = {store: bench.completed_task(port, "quick") for store, port in ports.items()}
        for workload in WORKLOADS:
            runs: dict[str, list[dict[str, Any]]] = {store: [] for store in STORES}
            for _ in range(rounds):
                for store, port in ports.items():
                    runs[store].append(
                        bench.measure(port, workload, polled[store], warmup, seconds)
                    )
                    time.sleep(min(0.5, seconds / 4))  # the server settles (tasks completing)
            entry: dict[str, Any] = {}
            for store, results in runs.items():
                best = max(results, key=lambda result: result["requests_per_second"])
                entry[store] = {
                    **best,
                    "every_run_per_second": [r["requests_per_second"] for r in results],
                }
            memory = entry["memory"]["requests_per_second"]
            entry["ratio_to_memory"] = {
                store: entry[store]["requests_per_second"] / memory if memory else None
                for store in STORES
            }
            figures[workload] = entry
    return figures


def run_cross_process(url: str, folder: Path, count: int) -> dict[str, Any]:
    """p50 and p99 of a cancel and an answer sent to B until A's handler has it, for two
    processes on the store `url`."""
    cancel_ms: list[float] = []
    update_ms: list[float] = []
    with (
        started_server(url, folder, pinned=False) as port_a,
        started_server(url, folder, pinned=False) as port_b,
        contextlib.closing(Peer(port_a)) as on_a,
        contextlib.closing(Peer(port_b)) as on_b,
    ):
        for _ in range(count):
            task_id = on_a.create("blocks_noting")
            on_a.wait_for(task_id, "working", BLOCKING)
            _at_random_phase()
            start = time.time()
            on_b.post("tasks/cancel", task_id, {"taskId": task_id})
            cancel_ms.append((_wait_for_note(folder / f"{task_id}.cancel") - start) * 1000)

            task_id = on_a.create("asks_noting")
            on_a.wait_for(task_id, "input_required")
            _at_random_phase()
            start = time.time()
            on_b.post("tasks/update", task_id, {"taskId": task_id,
                                                "inputResponses": {"input-1": ANSWER}})  # fmt: skip
            update_ms.append((_wait_for_note(folder / f"{task_id}.answer") - start) * 1000)
    return {"tasks/cancel": _percentiles(cancel_ms), "tasks/update": _percentiles(update_ms)}


def run_all(warmup: float, seconds: float, rounds: int, signals: int) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "connections": bench.CONNECTIONS,
        "warmup_seconds": warmup,
        "seconds": seconds,
        "rounds": rounds,
        "redis_target_ratio": REDIS_TARGET_RATIO,
        "target_p99_ms": TARGET_P99_MS,
    }
    with tempfile.TemporaryDirectory(prefix="stores-bench-") as name, started_redis() as redis:
        folder = Path(name)
        figures["redis_server"] = redis[1]
        figures["throughput"] = run_throughput(redis[0], folder, warmup, seconds, rounds)
        url = f"{redis[0]}?prefix=cross{secrets.token_hex(4)}"
        figures["cross_process"] = run_cross_process(url, folder, signals)
        url = f"sqlite:///{folder / 'shared.db'}?shared=true"
        figures["cross_process_sqlite"] = run_cross_process(url, folder, signals)
    return figures


# --- the report ---------------------------------------------------------------------------


def _print_rows(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * width for width in widths))


def print_table(figures: dict[str, Any]) -> None:
    print(
        f"mcp_tasks stores over Streamable HTTP: Python {figures['python']}, "
        f"{figures['cpus']} CPUs, {figures['platform']}, redis-server {figures['redis_server']}"
    )
    print(
        f"{figures['connections']} keep-alive connections over 127.0.0.1, "
        f"{figures['seconds']:g} s per run after {figures['warmup_seconds']:g} s of warm-up, "
        f"best of {figures['rounds']} alternating runs\n"
    )
    rows: list[tuple[str, ...]] = [
        ("workload", "store", "req/s", "p50", "p99", "failures", "vs memory")
    ]
    target = figures["redis_target_ratio"]
    for workload, entry in figures["throughput"].items():
        for store in STORES:
            run, ratio = entry[store], entry["ratio_to_memory"][store]
            shown = "" if store == "memory" or ratio is None else f"{ratio:.2f}"
            if store == "redis" and workload == "tasks/get":
                verdict = "ok" if ratio is not None and ratio >= target else "MISSED"
                shown += f" (target >= {target:.1f}) {verdict}"
            rows.append(
                (
                    workload,
                    store,
                    f"{run['requests_per_second']:,.0f}",
                    f"{run['p50_ms']:.2f} ms",
                    f"{run['p99_ms']:.2f} ms",
                    str(run["failures"]),
                    shown,
                )
            )
    _print_rows(rows)
    for key, name in (("cross_process", "Redis"), ("cross_process_sqlite", "SQLite, shared")):
        cross = figures[key]
        count = cross["tasks/cancel"]["count"]
        print(f"\n{name}, sent to process B, until the handler on A has it ({count} of each):\n")
        rows = [("request", "p50", "p99", "max", "p99 target")]
        for request, latency in cross.items():
            verdict = "ok" if latency["p99_ms"] < figures["target_p99_ms"] else "MISSED"
            rows.append(
                (
                    request,
                    f"{latency['p50_ms']:.2f} ms",
                    f"{latency['p99_ms']:.2f} ms",
                    f"{latency['max_ms']:.2f} ms",
                    f"< {figures['target_p99_ms']:g} ms {verdict}",
                )
            )
        _print_rows(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke test")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--role", choices=["server"], help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--pin", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.role == "server":
        if args.pin:
            _pin_process(0, 0)
        run_server(args.store)
    else:
        warmup, seconds, rounds, signals = (0.1, 0.3, 1, 20) if args.quick else (0.5, 2.0, 3, 200)
        figures = run_all(warmup, seconds, rounds, signals)
        print(json.dumps(figures, indent=2)) if args.json else print_table(figures)


if __name__ == "__main__":
    main()
