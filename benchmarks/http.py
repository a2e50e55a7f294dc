"""Streamable HTTP throughput and latency, next to the practical limit of Python here.

What is measured
----------------
Two servers, each in a process of its own, answer the same pre-built POSTs from a load
generator in a third process, over 127.0.0.1:

* `mcp_tasks`: `serve_http` around `examples/jobs.py` (defaults: every check on, the
  core validating `_meta` and the MCP headers against the body);
* `limit`: the minimal h11 + trio + msgspec server of `servers.py`, which reads each request,
  decodes its id and method and answers a fixed result of the right shape: what Python on
  trio and h11 can do at best on this machine.

Workloads: `tasks/get` on a completed task (its result inlined), and `tools/call` of the
synchronous tool `greet`. The generator keeps 16 keep-alive connections busy, one request in
flight on each; it is a `selectors` loop on raw sockets, cheap enough that the server's core
is the bottleneck, and the same generator measures both servers. On a machine with two or
more cores the servers are pinned to core 0 and the generator to core 1. After a warm-up,
requests/s counts the answers completed in the window; latency is from writing a request
to reading the end of its answer (p50, p99). Every answer must be 200. Runs alternate
between the two servers, three per server and workload, and the best of each counts
(anything else running on the machine only ever slows a run down).

    python benchmarks/http.py            # 2 s per run, 12 runs (about 40 s in all)
    python benchmarks/http.py --quick    # smoke test: short runs
    python benchmarks/http.py --json     # the figures as one JSON object
"""

# ruff: noqa: E402  (the imports must follow the sys.path fix below)
from __future__ import annotations

import os
import sys

# Run as a script, this file's folder comes first on sys.path, and this file (http.py) would
# stand in for the standard library's `http` package: take the folder off before importing.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]

import argparse
import contextlib
import http.client
import importlib.util
import json
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import trio

from mcp_tasks.transports._http_server import serve_http

ROOT = Path(__file__).resolve().parent.parent
CONNECTIONS = 16
TARGET_RATIO = 0.7
SERVER_LIFETIME_SECONDS = 600  # a server left behind stops by itself
VERSION = "2026-07-28"
TASKS_CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
FAKE_TASK_ID = "tsk_" + "x" * 32  # what the limit server is asked for (any id will do)


# --- the servers --------------------------------------------------------------------------


def run_mcp_server() -> None:
    spec = importlib.util.spec_from_file_location("jobs", ROOT / "examples" / "jobs.py")
    assert spec and spec.loader
    jobs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(jobs)

    async def main() -> None:
        with trio.move_on_after(SERVER_LIFETIME_SECONDS):
            async with jobs.server.running(), trio.open_nursery() as nursery:
                port = await nursery.start(serve_http, jobs.server, "127.0.0.1", 0)
                print(f"PORT {port}", flush=True)

    trio.run(main)


def _load_sibling(name: str) -> Any:
    """A module next to this file, loaded by path (this folder is off sys.path)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", Path(_HERE) / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_limit_server() -> None:
    """The limit server of `servers.py` (it answers `tasks/get` with a fixed completed task
    and a tool call with a fixed greeting)."""
    servers = _load_sibling("servers")
    trio.run(servers._for_a_while, "limit-http")


# --- the load generator -------------------------------------------------------------------


loadgen = _load_sibling("loadgen")


def build_request(workload: str, task_id: str, port: int) -> bytes:
    """One POST for `workload`: "tasks/get" (of `task_id`), or "tools/call NAME" (the tool
    NAME; `greet` is asked to greet "bench", any other tool gets no arguments)."""
    if workload == "tasks/get":
        return loadgen.task_poll(port, task_id)
    method, _, tool = workload.partition(" ")
    if method != "tools/call" or not tool:
        raise ValueError(f"a workload is 'tasks/get' or 'tools/call NAME', not {workload!r}")
    arguments = {"name": "bench"} if tool == "greet" else {}
    params = {"name": tool, "arguments": arguments}
    return loadgen.post(port, "tools/call", tool, params)


def generate_load(port: int, data: bytes, warmup: float, seconds: float) -> dict[str, Any]:
    """`loadgen.fixed_requests`, under this benchmark's names for its figures."""
    run = loadgen.fixed_requests(port, data, warmup, seconds, CONNECTIONS)
    return {
        "requests": run["count"],
        "failures": run["failures"],
        "requests_per_second": run["per_second"],
        "p50_ms": run["p50_ms"],
        "p99_ms": run["p99_ms"],
    }


# --- orchestration ------------------------------------------------------------------------


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {cpu})


def _python(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


@contextlib.contextmanager
def started_server(kind: str) -> Any:
    process = subprocess.Popen(_python("--role", kind), stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the {kind} server did not start: {line!r}")
        yield int(line.split()[1])
    finally:
        process.terminate()
        process.wait(timeout=10)


def completed_task(
    port: int, tool: str = "slow_compute", arguments: dict[str, Any] | None = None
) -> str:
    """Create a task on the MCP server (a call of `tool`, by default `slow_compute` for
    10 ms) and wait until it has completed; its id."""

    def post(method: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": TASKS_CAPS,
        }
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                           "params": {**params, "_meta": meta}})  # fmt: skip
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "MCP-Protocol-Version": VERSION,
                   "Mcp-Method": method, "Mcp-Name": name}  # fmt: skip
        connection.request("POST", "/mcp", body, headers)
        reply: dict[str, Any] = json.loads(connection.getresponse().read())
        connection.close()
        return reply

    if arguments is None:
        arguments = {"seconds": 0.01, "label": "bench"} if tool == "slow_compute" else {}
    call = {"name": tool, "arguments": arguments}
    task_id: str = post("tools/call", tool, call)["result"]["taskId"]
    deadline = time.monotonic() + 10
    while post("tasks/get", task_id, {"taskId": task_id})["result"]["status"] != "completed":
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark's task did not complete")
        time.sleep(0.02)
    return task_id


def measure(port: int, workload: str, task_id: str, warmup: float, seconds: float) -> Any:
    args = ["--role", "load", "--port", str(port), "--workload", workload, "--task-id", task_id]
    args += ["--warmup", str(warmup), "--seconds", str(seconds)]
    out = subprocess.run(
        _python(*args), capture_output=True, text=True, check=True, timeout=warmup + seconds + 60
    )
    return json.loads(out.stdout)


def run_all(warmup: float, seconds: float, rounds: int) -> dict[str, Any]:
    """Both servers up at once (an idle one costs nothing); runs alternate between them,
    `rounds` times per workload, and the best run of each counts: other load on the
    machine can only slow a run down."""
    workloads = ("tasks/get", "tools/call greet")
    figures: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "connections": CONNECTIONS,
        "warmup_seconds": warmup,
        "seconds": seconds,
        "rounds": rounds,
        "target_ratio": TARGET_RATIO,
        "workloads": {},
    }
    with started_server("limit") as limit_port, started_server("mcp") as mcp_port:
        ports = {"limit": (limit_port, FAKE_TASK_ID), "mcp_tasks": (mcp_port, "")}
        ports["mcp_tasks"] = (mcp_port, completed_task(mcp_port))  # a task to poll
        for workload in workloads:
            runs: dict[str, list[dict[str, Any]]] = {"limit": [], "mcp_tasks": []}
            for _ in range(rounds):
                for server, (port, task_id) in ports.items():
                    runs[server].append(measure(port, workload, task_id, warmup, seconds))
            entry: dict[str, Any] = {}
            figures["workloads"][workload] = entry
            for server, results in runs.items():
                best = max(results, key=lambda result: result["requests_per_second"])
                entry[server] = {
                    **best,
                    "every_run_per_second": [r["requests_per_second"] for r in results],
                }
            limit = entry["limit"]["requests_per_second"]
            entry["ratio"] = entry["mcp_tasks"]["requests_per_second"] / limit if limit else None
    return figures


def print_table(figures: dict[str, Any]) -> None:
    print(
        f"mcp_tasks Streamable HTTP benchmark: Python {figures['python']}, "
        f"{figures['cpus']} CPUs, {figures['platform']}"
    )
    print(
        f"{figures['connections']} keep-alive connections over 127.0.0.1, "
        f"{figures['seconds']:g} s per run after {figures['warmup_seconds']:g} s of warm-up, "
        f"best of {figures['rounds']} alternating runs\n"
    )
    rows = [("workload", "server", "req/s", "p50", "p99", "failures", "vs limit")]
    for workload, entry in figures["workloads"].items():
        for server in ("limit", "mcp_tasks"):
            run = entry[server]
            ratio = entry["ratio"]
            verdict = "ok" if ratio is not None and ratio >= figures["target_ratio"] else "MISSED"
            rows.append(
                (
                    workload,
                    server,
                    f"{run['requests_per_second']:,.0f}",
                    f"{run['p50_ms']:.2f} ms",
                    f"{run['p99_ms']:.2f} ms",
                    str(run["failures"]),
                    ""
                    if server == "limit"
                    else f"{ratio:.2f} (target >= {figures['target_ratio']:.1f}) {verdict}",
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * width for width in widths))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke test")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--role", choices=["mcp", "limit", "load"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--task-id", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.role in ("mcp", "limit"):
        _pin(0)
        run_mcp_server() if args.role == "mcp" else run_limit_server()
    elif args.role == "load":
        _pin(1)
        data = build_request(args.workload, args.task_id, args.port)
        print(json.dumps(generate_load(args.port, data, args.warmup, args.seconds)))
    else:
        warmup, seconds, rounds = (0.1, 0.3, 1) if args.quick else (0.5, 2.0, 3)
        figures = run_all(warmup, seconds, rounds)
        print(json.dumps(figures, indent=2)) if args.json else print_table(figures)


if __name__ == "__main__":
    main()
