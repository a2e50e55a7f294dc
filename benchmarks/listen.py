"""Task creations per second with 2,000 `subscriptions/listen` streams open, next to none.

What is measured
----------------
One server, `serve_http` around a tool `slow_compute` whose task has no work, runs in a
process of its own; the load generator runs in this one, over 127.0.0.1. On a machine with
two or more cores the server is pinned to core 0 and the generator to core 1.

* `none`: 16 keep-alive connections create tasks, one request in flight on each, as fast as
  the server answers (`loadgen.fixed_requests`); creations/s counts the answers completed in
  a window that starts after a warm-up. Every answer must be a task handle.
* `streams`: the same, while 2,000 listen streams are open, each on a connection of its own
  and naming 256 task ids (unguessable ones, like a client's; none of them the tasks being
  created, whose ids nobody knows in advance). Every task write (created, then completed)
  asks the server which streams watch that task: this measures what that costs.

Runs alternate, `none` then `streams`, three rounds; the streams are opened before each
`streams` run (each acknowledged before the run starts) and closed after it. The best run
of each counts (anything else on the machine only ever slows a run down), and the ratio
streams/none is the figure: at least 0.8 is the aim. The server's resident memory is read
with and without the streams (Linux), which gives what one open stream costs.

    python benchmarks/listen.py            # 2,000 streams x 256 ids, about 20 s
    python benchmarks/listen.py --quick    # smoke test: 50 streams x 16 ids, short runs
    python benchmarks/listen.py --json     # the figures as one JSON object
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
import platform
import resource
import secrets
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
import trio

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    Server,
    ServerOptions,
    TaskOptions,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.transports import serve_http

CONNECTIONS = 16
TARGET_RATIO = 0.8
SERVER_LIFETIME_SECONDS = 900  # a server left behind stops by itself
SPARE_DESCRIPTORS = 256  # besides one per stream: the load's connections, files, pipes
LISTEN = "subscriptions/listen"


def _load_sibling(name: str) -> Any:
    """A module next to this file, loaded by path (this folder is off sys.path)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", Path(_HERE) / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


loadgen = _load_sibling("loadgen")


def raise_descriptor_limit(needed: int) -> int:
    """Raise this process's soft limit of open files toward `needed`, up to the hard limit;
    the soft limit it ends at."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        wanted = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        soft = wanted
    return soft


# --- the server ---------------------------------------------------------------------------


class SlowArgs(msgspec.Struct):
    seconds: float = 1.0
    label: str = ""


def run_server(streams: int) -> None:
    raise_descriptor_limit(streams + SPARE_DESCRIPTORS)
    server = Server(
        "listen-bench",
        "1.0.0",
        tasks=TaskOptions(ttl_ms=900_000, max_tasks=500_000),
        options=ServerOptions(max_listen_streams=streams, max_listen_streams_per_principal=None),
    )

    @server.tool(task_support="optional")
    async def slow_compute(ctx: ToolContext, args: SlowArgs) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        if args.seconds > 0:
            await trio.sleep(args.seconds)
        return CallToolResult.text(f"{args.label or 'job'} done")

    async def main() -> None:
        with trio.move_on_after(SERVER_LIFETIME_SECONDS):
            async with server.running(), trio.open_nursery() as nursery:
                port = await nursery.start(serve_http, server, "127.0.0.1", 0)
                print(f"PORT {port}", flush=True)

    trio.run(main)


# --- the streams --------------------------------------------------------------------------


def listen_request(port: int, request_id: int, task_ids: list[str]) -> bytes:
    """A POST of `subscriptions/listen` for `task_ids`, from a client that holds tasks."""
    body = loadgen.message(LISTEN, {"notifications": {"taskIds": task_ids}}, request_id)
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n"
        f"MCP-Protocol-Version: {loadgen.VERSION}\r\nMcp-Method: {LISTEN}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def open_streams(port: int, count: int, ids_per_stream: int) -> list[socket.socket]:
    """`count` listen streams, each acknowledged: their sockets, left open (unread: nothing
    is sent on them but a keep-alive comment now and then)."""
    sockets = []
    for n in range(count):
        task_ids = ["tsk_" + secrets.token_urlsafe(24) for _ in range(ids_per_stream)]
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(listen_request(port, n + 1, task_ids))
        sockets.append(sock)
    for sock in sockets:
        _read_acknowledgement(sock)
    return sockets


def _read_acknowledgement(sock: socket.socket) -> None:
    """Read up to the end of the stream's first event (the body is chunked: its events come
    in chunks)."""
    sock.settimeout(60)
    buffer = b""
    while (seen := buffer.find(b"acknowledged")) < 0 or buffer.find(b"\n\n", seen) < 0:
        data = sock.recv(65536)
        if not data:
            raise RuntimeError(f"a listen stream was closed: {buffer[:300]!r}")
        buffer += data
    if not buffer.startswith(b"HTTP/1.1 200 ") or b"text/event-stream" not in buffer:
        raise RuntimeError(f"a listen stream was refused: {buffer[:300]!r}")


def close_streams(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


# --- orchestration ------------------------------------------------------------------------


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {cpu})


@contextlib.contextmanager
def started_server(streams: int) -> Any:
    command = [sys.executable, str(Path(__file__).resolve()), "--role", "server"]
    command += ["--streams", str(streams)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the server did not start: {line!r}")
        yield process.pid, int(line.split()[1])
    finally:
        process.terminate()
        process.wait(timeout=30)


def resident_bytes(pid: int) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def creations(port: int, warmup: float, seconds: float) -> dict[str, Any]:
    run: dict[str, Any] = loadgen.fixed_requests(
        port, loadgen.task_creation(port), warmup, seconds, CONNECTIONS
    )
    if run["failures"] or not run["count"]:
        raise RuntimeError(f"task creations failed: {run}")
    return run


def run_all(
    streams: int, ids_per_stream: int, warmup: float, seconds: float, rounds: int
) -> dict[str, Any]:
    _pin(1)
    raise_descriptor_limit(streams + SPARE_DESCRIPTORS)
    runs: dict[str, list[dict[str, Any]]] = {"none": [], "streams": []}
    opening: list[float] = []
    memory: dict[str, int | None] = {}
    with started_server(streams) as (pid, port):
        for _ in range(rounds):
            runs["none"].append(creations(port, warmup, seconds))
            memory.setdefault("none", resident_bytes(pid))  # the first round's: memory
            started = time.perf_counter()  # freed by closed streams may stay with the process
            sockets = open_streams(port, streams, ids_per_stream)
            opening.append(time.perf_counter() - started)
            try:
                memory.setdefault("streams", resident_bytes(pid))
                runs["streams"].append(creations(port, warmup, seconds))
            finally:
                close_streams(sockets)
    best = {kind: max(results, key=lambda run: run["per_second"]) for kind, results in runs.items()}
    ratio = best["streams"]["per_second"] / best["none"]["per_second"]
    per_stream = None
    if memory.get("streams") is not None and memory.get("none") is not None:
        per_stream = (memory["streams"] - memory["none"]) / streams  # type: ignore[operator]
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "connections": CONNECTIONS,
        "streams": streams,
        "task_ids_per_stream": ids_per_stream,
        "warmup_seconds": warmup,
        "seconds": seconds,
        "rounds": rounds,
        "none": {**best["none"], "every_run_per_second": [r["per_second"] for r in runs["none"]]},
        "with_streams": {
            **best["streams"],
            "every_run_per_second": [r["per_second"] for r in runs["streams"]],
        },
        "ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "seconds_to_open_streams": min(opening),
        "server_resident_bytes": memory,
        "resident_bytes_per_stream": per_stream,
    }


def print_report(figures: dict[str, Any]) -> None:
    print(
        f"mcp_tasks listen-stream benchmark: Python {figures['python']}, "
        f"{figures['cpus']} CPUs, {figures['platform']}"
    )
    print(
        f"task creations over {figures['connections']} keep-alive connections, "
        f"{figures['seconds']:g} s per run after {figures['warmup_seconds']:g} s of warm-up, "
        f"best of {figures['rounds']} alternating runs\n"
    )
    streams = f"{figures['streams']:,} streams x {figures['task_ids_per_stream']} ids"
    for label, key in (("no listen streams", "none"), (streams, "with_streams")):
        run = figures[key]
        every = ", ".join(f"{rate:,.0f}" for rate in run["every_run_per_second"])
        print(
            f"{label:>28}: {run['per_second']:>8,.0f} creations/s  "
            f"p50 {run['p50_ms']:.2f} ms  p99 {run['p99_ms']:.2f} ms  (runs: {every})"
        )
    verdict = "ok" if figures["ratio"] >= figures["target_ratio"] else "MISSED"
    print(f"\nratio {figures['ratio']:.2f} (target >= {figures['target_ratio']:.1f}) {verdict}")
    print(f"opening the streams took {figures['seconds_to_open_streams']:.2f} s")
    if figures["resident_bytes_per_stream"] is not None:
        print(
            f"server memory per open stream: {figures['resident_bytes_per_stream'] / 1024:.1f} KiB"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke test")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--role", choices=["server"], help=argparse.SUPPRESS)
    parser.add_argument("--streams", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.role == "server":
        _pin(0)
        run_server(args.streams)
        return
    if args.quick:
        figures = run_all(streams=50, ids_per_stream=16, warmup=0.1, seconds=0.3, rounds=1)
    else:
        figures = run_all(streams=2000, ids_per_stream=256, warmup=0.5, seconds=2.0, rounds=3)
    print(json.dumps(figures, indent=2)) if args.json else print_report(figures)


if __name__ == "__main__":
    main()
