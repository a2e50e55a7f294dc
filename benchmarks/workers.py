"""One worker beside two: `mcp-tasks serve --workers N` (issue 33, point 5), loaded by wrk.

    python benchmarks/workers.py [--seconds 5]     # prints the figures as JSON

`benchmarks/servers.py` (the server `compare.py` measures as "mcp_tasks": `greet`, and a
`slow_compute` that is always a task) is served by `mcp-tasks serve` with `--workers 1` and
then `--workers 2` on each store workers can share: Redis (a redis-server of its own, on
loopback; skipped without one) and a SQLite file (in a temporary folder, opened shared by
each worker), and each is loaded by wrk (`loadgen.wrk_requests`: 16 keep-alive
connections, a warm-up, then a window) with two of `compare.py`'s workloads: a synchronous
`greet` call, and tasks/get of a completed task (a store read each). Nothing is pinned: two
workers need two cores, and wrk and redis-server share the machine with them, so on a
machine of two cores the ratio says what a second worker buys when the load is generated on
the same machine, not the ceiling of two cores. `ratio` is req/s with two workers over req/s
with one, for each workload.
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
import importlib.util
import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(_HERE)
ROOT = HERE.parent
SERVING = re.compile(r"serving \S+ \S+ on http://127\.0\.0\.1:(\d+)/mcp")
WORKER_SERVING = re.compile(r"worker \d+ \(pid \d+\) serving")


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", HERE / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


compare = _load("compare")
loadgen = compare.loadgen
stores = _load("stores")


@contextlib.contextmanager
def served(workers: int, store_url: str) -> Iterator[Any]:
    """`serve benchmarks/servers.py --workers N` on a free port, once every worker serves: a
    `compare.Running`."""
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", str(HERE / "servers.py"),
               "--http", "127.0.0.1:0", "--store", store_url, "--workers", str(workers),
               "--log-level", "warning"]  # fmt: skip
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, cwd=ROOT)
        try:
            port = _wait_for_workers(process, errors, workers)
            running = compare.Running(f"mcp_tasks, {workers} worker(s)", process, port)
            compare._wait_until_serving(running)
            yield running
        finally:
            loadgen.stop(process, timeout=30)


def _wait_for_workers(process: subprocess.Popen[bytes], errors: Any, workers: int) -> int:
    """The port, once `workers` workers say they serve (one process: its own line)."""
    deadline = time.monotonic() + 60
    while True:
        errors.seek(0)
        text = errors.read()
        found = SERVING.search(text)
        ready = workers == 1 or len(WORKER_SERVING.findall(text)) >= workers
        if found and ready:
            return int(found.group(1))
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"serve --workers {workers} did not start: {text}")
        time.sleep(0.05)


def workers_figures(plan_seconds: float, log: Callable[[str], None]) -> dict[str, Any]:
    """req/s of one worker and of two, for `greet` and tasks/get, and their ratios: on Redis
    (the top-level entries, as before SQLite could be shared; absent without redis-server)
    and on SQLite (`figures["sqlite"]`)."""
    figures: dict[str, Any] = {"cores": os.cpu_count(), "store": "redis"}
    if shutil.which("redis-server") is not None:
        with stores.started_redis() as (store_url, redis_version):
            figures["redis"] = redis_version
            figures.update(_one_beside_two(store_url, "Redis", plan_seconds, log))
    with tempfile.TemporaryDirectory() as folder:
        store_url = f"sqlite:///{folder}/tasks.db"
        figures["sqlite"] = _one_beside_two(store_url, "SQLite", plan_seconds, log)
    return figures


def _one_beside_two(
    store_url: str, name: str, plan_seconds: float, log: Callable[[str], None]
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for workers in (1, 2):
        with served(workers, store_url) as running:
            task_id = compare.completed_task(running)
            loads = {
                "greet": loadgen.greet_call(running.port),
                "tasks/get": loadgen.task_poll(running.port, task_id),
            }
            for workload, data in loads.items():
                log(f"--workers {workers}, {name}: {workload} for {plan_seconds:g} s")
                measured = loadgen.wrk_requests(running.port, data, 1.0, plan_seconds)
                figures.setdefault(workload, {})[f"workers_{workers}"] = measured
    for entry in figures.values():
        entry["ratio"] = entry["workers_2"]["per_second"] / entry["workers_1"]["per_second"]
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="each measured window")
    options = parser.parse_args(argv)
    figures = workers_figures(options.seconds, lambda line: print(line, file=sys.stderr))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
