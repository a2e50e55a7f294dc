"""mcp_tasks side by side with fastmcp-tasks, the official SDK and the practical limit.

Run it through `benchmarks/run`, which installs the peers into a virtual environment of their
own first; `--peers-python` points at that environment's interpreter.

    benchmarks/run                      # every figure (about 15 minutes), writes docs/benchmarks.md
    benchmarks/run --quick              # a smoke run: short runs, few stored tasks, no docs
    python benchmarks/compare.py --peers none --quick    # ours and the limit only
    python benchmarks/compare.py --recording             # tasks/get recording / not, alone
    python benchmarks/compare.py --only stdio --server mcp_tasks --server limit  # one, as JSON

The servers, each in a process of its own pinned to core 0 (the load generator here is
pinned to core 1):

* `mcp_tasks`: `benchmarks/servers.py` (memory store, every check on);
* `fastmcp-tasks`: fastmcp 4.1.4 with fastmcp-tasks 4.1.4 on its in-memory backend;
* `official SDK`: `mcp` 2.3.0, which has no tasks: the synchronous tool call only;
* `TypeScript SDK`: the TypeScript SDK's server on Node (`peers/ts_server.mjs`, JSON
  answers, stateless), from tests/interop/npm where it is installed: the tool call only;
* the ceilings: a fixed answer (msgspec decodes each request, a fixed result of the right
  shape goes back) behind httptools, as an asyncio `Protocol` on asyncio's loop and on
  uvloop, and on trio's sockets: what Python does here at best on each loop;
* `limit`: the same on trio with h11 (for stdio, a minimal trio echo), the pure-Python
  parser the built-in server ran on before;
* `ceiling: stdio echo`: the fastest stdio echo of the fixed answer, a `Protocol` on
  uvloop's pipes answering each read's lines in one write: what Python does over a pipe;
* embedded (on the task workloads): ours as an ASGI app (`mcp_tasks.asgi`) under uvicorn
  (uvloop and httptools; and asyncio with h11) and under hypercorn's trio worker, and the
  official SDK's `MCPServer` with our `TasksExtension` (`benchmarks/sdk_tasks_server.py`).

Beside them: where a request's CPU time goes, part by part (`split.py`), and `serve
--workers 2` against one worker on Redis and on SQLite (`workers.py`). Run by hand:
whether one core's generator can drive the fastest ceiling, wrk beside h2load
(`generators.py`).

Every server has a synchronous `greet` and a task `slow_compute`. The same load goes to all
of them, the 2026-07-28 wire with every header: 16 keep-alive connections over 127.0.0.1,
one request in flight on each, a warm-up first, then a window of fixed length. A fixed
request again and again is sent by wrk, a C load generator, whose share of its core is kept
with each figure (`load_cpu_share`: near 1, the generator may be what limits it); task lives,
which read each answer to send the next request, by wrk too, with a Lua script whose
answers queue the next poll of their task (`loadgen.wrk_lives`). Runs alternate between
the servers (ours, peer, limit, ours, peer, ...), the servers not being measured stopped
(SIGSTOP) meanwhile, and the best run of each counts: anything else on the machine can only
slow a run down.
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
import re
import signal
import socket
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(_HERE)
ROOT = HERE.parent
SERVER_CPU, LOAD_CPU = 0, 1
PEERS_ENV = {"FASTMCP_CHECK_FOR_UPDATES": "off", "FASTMCP_SHOW_SERVER_BANNER": "false"}


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


loadgen = _load("loadgen")


@dataclass(frozen=True)
class Plan:
    """How long and how much: the full run, or the smoke test."""

    warmup: float = 1.0
    seconds: float = 3.0
    rounds: int = 5
    stored: tuple[int, ...] = (100, 10_000, 100_000)
    fill_limit_seconds: float = 900.0

    @classmethod
    def quick(cls) -> Plan:
        return cls(warmup=0.2, seconds=0.5, rounds=1, stored=(100, 600, 1_500))


# --- the servers --------------------------------------------------------------------------


def _pin_process(pid: int) -> None:
    """Pin a server to its core before it starts threads (they inherit it)."""
    if _can_pin():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, {SERVER_CPU})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Running:
    """A server process serving HTTP on `port`, which can be paused while others run."""

    name: str
    process: subprocess.Popen[bytes]
    port: int

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError(f"no VmRSS for {self.name}")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def settle(self, timeout: float = 60.0) -> bool:
        """Wait until the server is about idle (its background work, such as running the
        tasks just created, is done): under a tenth of a core over a second. False if it
        still worked after `timeout` (a server may keep a little background work going)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            before = self.cpu_seconds()
            time.sleep(1.0)
            if self.cpu_seconds() - before < 0.1:
                return True
        return False


@dataclass(frozen=True)
class HttpServer:
    name: str
    command: Callable[[int], list[str]]
    """The command line, given a free port (ours and the limit pick their own and print it)."""
    prints_port: bool = False
    env: dict[str, str] = field(default_factory=dict)

    @contextlib.contextmanager
    def started(self) -> Iterator[Running]:
        port = 0 if self.prints_port else _free_port()
        process = subprocess.Popen(
            self.command(port),
            stdout=subprocess.PIPE if self.prints_port else subprocess.DEVNULL,
            env={**os.environ, **self.env},
        )
        try:
            _pin_process(process.pid)
            if self.prints_port:
                assert process.stdout is not None
                line = process.stdout.readline().decode()
                if not line.startswith("PORT "):
                    raise RuntimeError(f"{self.name} did not start: {line!r}")
                port = int(line.split()[1])
            running = Running(self.name, process, port)
            _wait_until_serving(running)
            yield running
        finally:
            loadgen.stop(process)


def _wait_until_serving(server: Running, timeout: float = 60.0) -> None:
    """Until `greet` answers 200 (the peers take seconds to import)."""
    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.process.returncode}")
        with contextlib.suppress(OSError):
            status, _ = _exchange(server.port, loadgen.greet_call(server.port))
            if status == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.name} is not serving after {timeout:g} s")
        time.sleep(0.2)


def _exchange(port: int, request: bytes) -> tuple[int, Any]:
    """One request on a connection of its own: the status and the decoded body."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        buffer = bytearray()
        while True:
            data = sock.recv(65536)
            if not data:
                raise OSError("the server closed the connection")
            buffer += data
            body_start, end = loadgen._split_answer(buffer)
            if end:
                status = int(buffer[9:12])
                return status, json.loads(bytes(buffer[body_start:end]) or b"null")


def legacy_session(server: Running) -> str | None:
    """A 2025-11-25 session opened on `server` (`initialize`, then `initialized`): its
    `Mcp-Session-Id`, or None from a server that keeps none (the SDK peer is stateless)."""
    opening = {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "loadgen", "version": "1"}}  # fmt: skip
    request = loadgen.legacy_post(server.port, "initialize", opening, None, request_id=0)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request)
        buffer = bytearray()
        while not loadgen._split_answer(buffer)[1]:
            data = sock.recv(65536)
            if not data:
                raise OSError("the server closed the connection")
            buffer += data
    head = bytes(buffer[: buffer.find(b"\r\n\r\n")]).decode("latin-1")
    if not head.startswith("HTTP/1.1 200"):
        raise RuntimeError(f"{server.name} refused initialize: {head[:200]}")
    found = re.search(r"(?im)^mcp-session-id:\s*(\S+)", head)
    session_id = found.group(1) if found else None
    notice = loadgen.legacy_post(
        server.port, "notifications/initialized", {}, session_id, request_id=None
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(notice)
        sock.recv(65536)
    return session_id


def legacy_completed_task(server: Running, session_id: str | None) -> str:
    """`completed_task` of a 2025-11-25 session (the tasks utility): its id."""
    status, reply = _exchange(server.port, loadgen.legacy_task_creation(server.port, session_id))
    task_id = reply.get("result", {}).get("task", {}).get("taskId") if status == 200 else None
    if task_id is None:
        raise RuntimeError(f"{server.name} did not create a 2025 task: {status} {reply}")
    deadline = time.monotonic() + 30
    while True:
        poll = loadgen.legacy_task_poll(server.port, task_id, session_id)
        if _exchange(server.port, poll)[1].get("result", {}).get("status") == "completed":
            return str(task_id)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.name}: 2025 task {task_id} did not complete")
        time.sleep(0.05)


def completed_task(server: Running) -> str:
    """A task created on `server` (no work) and polled until it completed: its id."""
    status, reply = _exchange(server.port, loadgen.task_creation(server.port))
    if status != 200 or "taskId" not in reply.get("result", {}):
        raise RuntimeError(f"{server.name} did not create a task: {status} {reply}")
    task_id: str = reply["result"]["taskId"]
    wait_until_completed(server, task_id)
    return task_id


def wait_until_completed(server: Running, task_id: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        _, reply = _exchange(server.port, loadgen.task_poll(server.port, task_id))
        if reply.get("result", {}).get("status") == "completed":
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.name}: task {task_id} did not complete: {reply}")
        time.sleep(0.05)


ASGI_UVICORN, ASGI_UVICORN_H11, ASGI_HYPERCORN = (
    "ASGI (uvicorn)",
    "ASGI (uvicorn, h11)",
    "ASGI (hypercorn)",
)
SDK_TASKS = "SDK + TasksExtension"
TS_SDK = "TypeScript SDK"
"""The TypeScript SDK's server on Node (`peers/ts_server.mjs`, `@modelcontextprotocol/server`
from tests/interop/npm): no tasks, the synchronous tool call only."""
EMBEDDED = [ASGI_UVICORN, ASGI_UVICORN_H11, ASGI_HYPERCORN, SDK_TASKS]
"""The servers that embed ours (run in the project's environment), on the task workloads."""
CEILING_ASYNCIO = "ceiling: asyncio + httptools"
CEILING_UVLOOP = "ceiling: uvloop + httptools"
CEILING_TRIO = "ceiling: trio + httptools"
CEILING_STDIO = "ceiling: stdio echo"
"""The fastest stdio echo: a `Protocol` on uvloop's pipes, each read's lines in one write."""
CEILINGS = [CEILING_ASYNCIO, CEILING_UVLOOP, CEILING_TRIO]
"""The fixed-answer servers on httptools: what each loop does here at best."""
FIXED = ["limit", *CEILINGS]
"""Every server that answers fixed results."""
INFO_LOGS, WITH_OTEL = "mcp_tasks, INFO logs", "mcp_tasks, OpenTelemetry"
RECORDING = "mcp_tasks, recording"
ON_TRIO = "mcp_tasks on trio"
LEGACY, SDK_LEGACY = "mcp_tasks, 2025 session", "official SDK, 2025 session"
LEGACY_HTTP = "sync tool calls (HTTP, 2025 session)"
LEGACY_POLLS = "tasks/get (HTTP, 2025 session)"
"""The workload of a 2025-11-25 client in its session (ours, and the SDK peer's)."""
MODERN_PAIR = "mcp_tasks, 2026-07-28 client"
"""Ours in the rounds of a 2025-session workload, spoken to by a 2026-07-28 client (the
modern workload of the same name), each round right before the 2025 client's: what that
aim is read against. Measured minutes apart, the machine's drift between them (runs of one
workload range over a third here) would be larger than the margin the aim measures."""
"""The same stdio servers, spoken to by a client of the 2025 revisions (`initialize` first)."""
"""Ours served on trio (`--loop trio`); "mcp_tasks" is served on asyncio, `serve`'s default
(uvloop's loop, installed with the bench extra)."""
OBSERVED = [INFO_LOGS, WITH_OTEL, RECORDING]
"""Ours logging at INFO, with OpenTelemetry on as well, and recording a journal: on every
HTTP workload."""


def http_servers(peers_python: str | None) -> list[HttpServer]:
    python, servers_py = sys.executable, str(HERE / "servers.py")
    sdk_tasks = str(HERE / "sdk_tasks_server.py")
    found = [
        HttpServer("mcp_tasks", lambda _: [python, servers_py, "ours-http"], prints_port=True),
        HttpServer(
            ON_TRIO, lambda _: [python, servers_py, "ours-http", "--loop", "trio"], prints_port=True
        ),
        HttpServer("limit", lambda _: [python, servers_py, "limit-http"], prints_port=True),
        HttpServer(
            CEILING_ASYNCIO, lambda _: [python, servers_py, "ceiling-asyncio"], prints_port=True
        ),
        HttpServer(
            CEILING_UVLOOP, lambda _: [python, servers_py, "ceiling-uvloop"], prints_port=True
        ),
        HttpServer(CEILING_TRIO, lambda _: [python, servers_py, "ceiling-trio"], prints_port=True),
        HttpServer(INFO_LOGS, lambda _: [python, servers_py, "ours-http-info"], prints_port=True),
        HttpServer(WITH_OTEL, lambda _: [python, servers_py, "ours-http-otel"], prints_port=True),
        HttpServer(RECORDING, lambda _: [python, servers_py, "ours-http-record"], prints_port=True),
        HttpServer(ASGI_UVICORN, lambda port: [python, servers_py, "asgi-uvicorn", str(port)]),
        HttpServer(
            ASGI_UVICORN_H11, lambda port: [python, servers_py, "asgi-uvicorn-plain", str(port)]
        ),
        HttpServer(ASGI_HYPERCORN, lambda port: [python, servers_py, "asgi-hypercorn", str(port)]),
        HttpServer(SDK_TASKS, lambda port: [python, sdk_tasks, str(port)]),
    ]
    if peers_python:
        fastmcp = str(HERE / "peers" / "fastmcp_tasks_server.py")
        sdk = str(HERE / "peers" / "sdk_server.py")
        found += [
            HttpServer(
                "fastmcp-tasks", lambda port: [peers_python, fastmcp, str(port)], env=PEERS_ENV
            ),
            HttpServer("official SDK", lambda port: [peers_python, sdk, "http", str(port)]),
        ]
        found += _typescript_server()
    return found


def _typescript_server() -> list[HttpServer]:
    """The TypeScript SDK's server, where tests/interop/npm is installed (Node and all)."""
    ts_peer = _load("ts_peer")
    try:
        node = ts_peer.node()
        for package in (*ts_peer.PACKAGES["v2"], "zod"):
            ts_peer.package_version(package)
    except RuntimeError as missing:
        print(f"without the {TS_SDK} server: {missing}", file=sys.stderr)
        return []
    server = str(ts_peer.SERVER)
    return [HttpServer(TS_SDK, lambda port: [node, server, "v2", str(port)])]


def stdio_commands(peers_python: str | None) -> dict[str, list[str]]:
    python, servers_py = sys.executable, str(HERE / "servers.py")
    commands = {
        "mcp_tasks": [python, servers_py, "ours-stdio"],
        ON_TRIO: [python, servers_py, "ours-stdio", "--loop", "trio"],
        "limit": [python, servers_py, "limit-stdio"],
        CEILING_STDIO: [python, servers_py, "ceiling-stdio"],
    }
    commands[LEGACY] = commands["mcp_tasks"]
    if peers_python:
        commands["official SDK"] = [peers_python, str(HERE / "peers" / "sdk_server.py"), "stdio"]
        commands[SDK_LEGACY] = commands["official SDK"]
    return commands


# --- the runs -----------------------------------------------------------------------------


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    best = dict(max(runs, key=lambda run: run["per_second"]))
    best["every_run_per_second"] = [round(run["per_second"], 1) for run in runs]
    return best


def throughput(
    servers: dict[str, Running], plan: Plan, log: Callable[[str], None], only: str | None = None
) -> Any:
    """Every HTTP workload (or `only` that one), interleaved over the servers that have it."""
    task_ids = {
        name: completed_task(server)
        for name, server in servers.items()
        if name not in (*FIXED, "official SDK", TS_SDK)
    }
    task_ids.update(dict.fromkeys(FIXED, "tsk_limitlimitlimitlimitlimitlimit"))
    with_tasks = ["mcp_tasks", ON_TRIO, "fastmcp-tasks", *FIXED, *EMBEDDED, *OBSERVED]
    workloads: dict[str, tuple[list[str], Callable[[Running], dict[str, Any]]]] = {
        "tasks/get": (
            with_tasks,
            lambda s: loadgen.wrk_requests(
                s.port, loadgen.task_poll(s.port, task_ids[s.name]), plan.warmup, plan.seconds
            ),
        ),
        "task creations": (
            with_tasks,
            lambda s: loadgen.wrk_requests(
                s.port, loadgen.task_creation(s.port), plan.warmup, plan.seconds
            ),
        ),
        "task lives": (
            with_tasks,
            lambda s: loadgen.wrk_lives(s.port, plan.warmup, plan.seconds),
        ),
        "sync tool calls (HTTP)": (
            ["mcp_tasks", ON_TRIO, "official SDK", TS_SDK, "fastmcp-tasks", *FIXED, *OBSERVED],
            lambda s: loadgen.wrk_requests(
                s.port, loadgen.greet_call(s.port), plan.warmup, plan.seconds
            ),
        ),
        LEGACY_POLLS: (
            [MODERN_PAIR, "mcp_tasks"],
            lambda s: loadgen.wrk_requests(
                s.port,
                loadgen.task_poll(s.port, task_ids["mcp_tasks"])
                if s.name == MODERN_PAIR
                else loadgen.legacy_task_poll(s.port, legacy_tasks[s.name], sessions[s.name]),
                plan.warmup,
                plan.seconds,
            ),
        ),
        LEGACY_HTTP: (
            [MODERN_PAIR, "mcp_tasks", "official SDK"],
            lambda s: loadgen.wrk_requests(
                s.port,
                loadgen.greet_call(s.port)
                if s.name == MODERN_PAIR
                else loadgen.legacy_greet_call(s.port, sessions[s.name]),
                plan.warmup,
                plan.seconds,
            ),
        ),
    }
    sessions = {
        name: legacy_session(servers[name])
        for name in ("mcp_tasks", "official SDK")
        if name in servers and (only is None or only in (LEGACY_HTTP, LEGACY_POLLS))
    }
    legacy_tasks = {
        name: legacy_completed_task(servers[name], session_id)
        for name, session_id in sessions.items()
        if name == "mcp_tasks"
    }
    if "mcp_tasks" in servers:  # the same process, by another name (`MODERN_PAIR`)
        ours = servers["mcp_tasks"]
        servers = {**servers, MODERN_PAIR: Running(MODERN_PAIR, ours.process, ours.port)}
    for server in servers.values():
        server.pause()
    figures: dict[str, Any] = {}
    for workload, (names, run) in workloads.items():
        if only is not None and workload != only:
            continue
        if workload == LEGACY_POLLS and "mcp_tasks" in legacy_tasks:  # tasks live 15 minutes,
            ours = servers["mcp_tasks"]  # and this workload comes that long after the first
            ours.resume()
            try:
                task_ids["mcp_tasks"] = completed_task(ours)
                legacy_tasks["mcp_tasks"] = legacy_completed_task(ours, sessions["mcp_tasks"])
            finally:
                ours.pause()
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names if name in servers}
        for round_ in range(plan.rounds):
            for name, results in runs.items():
                servers[name].resume()
                try:
                    result = run(servers[name])
                finally:
                    servers[name].pause()
                results.append(result)
                log(f"{workload}, round {round_ + 1}: {name} {result['per_second']:,.0f}/s")
        figures[workload] = {name: _best(results) for name, results in runs.items()}
    for server in servers.values():
        server.resume()
    return figures


def stdio(
    peers_python: str | None,
    plan: Plan,
    log: Callable[[str], None],
    names: set[str] | None = None,
) -> Any:
    """Synchronous tool calls over stdio: a fresh child process per run, 16 lines in flight
    (the servers of `names` only, if given)."""
    commands = {
        name: command
        for name, command in stdio_commands(peers_python).items()
        if names is None or name in names
    }
    line = loadgen.message("tools/call", {"name": "greet", "arguments": {"name": "bench"}})
    legacy_line = loadgen.legacy_message(
        "tools/call", {"name": "greet", "arguments": {"name": "bench"}}
    )
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in commands}
    for round_ in range(plan.rounds):
        for name, command in commands.items():
            pinned = ["taskset", "-c", str(SERVER_CPU), *command] if _can_pin() else command
            if name in (LEGACY, SDK_LEGACY):
                result = loadgen.stdio_requests(
                    pinned, legacy_line, plan.warmup, plan.seconds, prelude=loadgen.LEGACY_OPENING
                )
            else:
                result = loadgen.stdio_requests(pinned, line, plan.warmup, plan.seconds)
            runs[name].append(result)
            log(f"stdio, round {round_ + 1}: {name} {result['per_second']:,.0f}/s")
    return {name: _best(results) for name, results in runs.items()}


def _can_pin() -> bool:
    return hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2


def stored_tasks(server: HttpServer, plan: Plan, log: Callable[[str], None]) -> dict[str, Any]:
    """A fresh server filled with finished tasks up to each count of `plan.stored`: resident
    memory per stored task (against the first count) and `tasks/get` latency at each."""
    points: list[dict[str, Any]] = []
    with server.started() as running:
        task_id = completed_task(running)
        poll = loadgen.task_poll(running.port, task_id)
        create = loadgen.task_creation(running.port)
        stored = 1
        for count in plan.stored:
            filled = fill(
                running, create, stored, count, limit_seconds=plan.fill_limit_seconds, log=log
            )
            stored = count
            if filled["last_task_id"]:  # tasks run about in order: the last one, last
                wait_until_completed(running, filled["last_task_id"], plan.fill_limit_seconds)
            settled = running.settle()
            rss = running.rss_kib()
            gets = [
                loadgen.fixed_requests(running.port, poll, plan.warmup, plan.seconds)
                for _ in range(plan.rounds)
            ]
            point = {
                "stored": count,
                "rss_kib": rss,
                "settled": settled,
                "fill_per_second": filled["per_second"],
                "tasks_get_per_second": max(run["per_second"] for run in gets),
                "tasks_get_p50_ms": statistics.median(run["p50_ms"] for run in gets),
                "tasks_get_p99_ms": statistics.median(run["p99_ms"] for run in gets),
                "tasks_get_every_p99_ms": [round(run["p99_ms"], 3) for run in gets],
            }
            if points:
                first = points[0]
                point["bytes_per_task"] = (
                    (rss - first["rss_kib"]) * 1024 / (count - first["stored"])
                )
            points.append(point)
            log(
                f"{server.name}: {count:,} tasks stored, RSS {rss / 1024:,.1f} MiB, "
                f"tasks/get p99 {point['tasks_get_p99_ms']:.2f} ms"
            )
    return {"points": points}


def fill(
    server: Running,
    create: bytes,
    stored: int,
    wanted: int,
    *,
    limit_seconds: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Create tasks on `server` from `stored` up to `wanted`, in steps of at most 10,000
    (a line of progress each); the figures of the whole fill."""
    started = time.monotonic()
    created = 0
    filled: dict[str, Any] = {}
    while stored + created < wanted:
        step = min(10_000, wanted - stored - created)
        left = limit_seconds - (time.monotonic() - started)
        filled = loadgen.fill(server.port, create, step, left)
        if filled["failures"] or filled["count"] < step:
            raise RuntimeError(f"{server.name}: storing {wanted:,} tasks failed: {filled}")
        created += step
        if wanted - stored > 10_000:
            log(f"{server.name}: {stored + created:,} of {wanted:,} tasks created "
                f"({filled['per_second']:,.0f}/s)")  # fmt: skip
    seconds = time.monotonic() - started
    return {**filled, "count": created, "seconds": seconds, "per_second": created / seconds}


# --- the report ---------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = "unknown"
    with contextlib.suppress(OSError, IndexError):
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / 1024 / 1024:.1f} GiB"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pinned": _can_pin(),
    }


def versions(peers_python: str | None) -> dict[str, str]:
    found = {name: version(name) for name in ("mcp-tasks", "trio", "h11", "msgspec")}
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        found["mcp-tasks"] += f" ({commit})"
    if peers_python:
        script = (
            "import json, importlib.metadata as m; print(json.dumps({n: m.version(n) for n in "
            "('fastmcp', 'fastmcp-tasks', 'mcp', 'pydocket', 'uvicorn', 'starlette')}))"
        )
        out = subprocess.run(
            [peers_python, "-c", script], capture_output=True, text=True, check=True
        )
        found.update(json.loads(out.stdout))
        with contextlib.suppress(RuntimeError):  # the TypeScript SDK server's, if installed
            package = "@modelcontextprotocol/server"
            found[package] = _load("ts_peer").package_version(package)
    return found


def run_all(peers_python: str | None, plan: Plan, log: Callable[[str], None]) -> dict[str, Any]:
    if _can_pin():
        os.sched_setaffinity(0, {LOAD_CPU})
    started = time.monotonic()
    figures: dict[str, Any] = {
        "machine": machine(),
        "versions": versions(peers_python),
        "plan": plan.__dict__,
        "connections": loadgen.CONNECTIONS,
    }
    with contextlib.ExitStack() as stack:
        servers = {
            server.name: stack.enter_context(server.started())
            for server in http_servers(peers_python)
        }
        figures["http"] = throughput(servers, plan, log)
    figures["stdio"] = stdio(peers_python, plan, log)
    figures["stored"] = {
        server.name: stored_tasks(server, plan, log)
        for server in http_servers(peers_python)
        if server.name in ("mcp_tasks", "fastmcp-tasks")
    }
    figures["split"] = where_the_time_goes(log)
    figures["workers"] = more_than_one_core(plan, log)
    figures["seconds"] = time.monotonic() - started
    figures["aims"] = aims(figures)
    return figures


def where_the_time_goes(log: Callable[[str], None]) -> dict[str, Any]:
    """`split.py` on each loop, on the server's core: CPU us a request, part by part."""
    found = {}
    for loop in ("asyncio", "trio"):
        command = [sys.executable, str(HERE / "split.py"), "--loop", loop]
        if _can_pin():
            command = ["taskset", "-c", str(SERVER_CPU), *command]
        found[loop] = json.loads(subprocess.run(command, check=True, capture_output=True).stdout)
        log(f"where the time goes, {loop}: {found[loop]}")
    return found


def more_than_one_core(plan: Plan, log: Callable[[str], None]) -> dict[str, Any] | None:
    """`serve --workers 2` beside one worker, on Redis (without redis-server: not) and on
    SQLite (`workers.py`). Nothing is pinned: the workers are to use both cores."""
    pinned = os.sched_getaffinity(0) if _can_pin() else None
    if pinned is not None:  # the workers (and wrk) inherit it: let them have every core
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    try:
        figures: dict[str, Any] = _load("workers").workers_figures(plan.seconds, log)
    finally:
        if pinned is not None:
            os.sched_setaffinity(0, pinned)
    return figures


HTTP_WORKLOADS = (
    "tasks/get",
    "task creations",
    "task lives",
    "sync tool calls (HTTP)",
    LEGACY_HTTP,
    LEGACY_POLLS,
)
ONLY = ("stdio", *HTTP_WORKLOADS)
"""What `--only` can measure alone."""


def run_one(
    only: str,
    names: set[str] | None,
    peers_python: str | None,
    plan: Plan,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """One figure of `run_all` (`--only`), over every server or those of `names`: to measure
    a change quickly. No aims: they need every figure."""
    if _can_pin():
        os.sched_setaffinity(0, {LOAD_CPU})
    figures: dict[str, Any] = {"plan": plan.__dict__, "only": only}
    if only == "stdio":
        figures["stdio"] = stdio(peers_python, plan, log, names)
        return figures
    with contextlib.ExitStack() as stack:
        servers = {
            server.name: stack.enter_context(server.started())
            for server in http_servers(peers_python)
            if names is None or server.name in names
        }
        figures["http"] = throughput(servers, plan, log, only)
    return figures


@dataclass(frozen=True)
class Aim:
    figure: str
    ratio: float | None
    against: str
    target: float
    at_most: bool = False

    @property
    def met(self) -> bool | None:
        if self.ratio is None:
            return None
        return self.ratio <= self.target if self.at_most else self.ratio >= self.target

    @property
    def margin(self) -> float | None:
        """How far past the aim (above 1: met), the same way up for every aim."""
        if not self.ratio:
            return None
        return self.target / self.ratio if self.at_most else self.ratio / self.target


def _ratio(entry: dict[str, Any], ours: str, other: str, key: str = "per_second") -> Any:
    if ours not in entry or other not in entry or not entry[other][key]:
        return None
    return entry[ours][key] / entry[other][key]


LOOP_WORKLOADS = ("tasks/get", "task creations", "task lives", "sync tool calls (HTTP)")


def _ceiling_aims(http: dict[str, Any]) -> list[Aim]:
    """`serve` read against the fixed-answer ceiling of the loop it runs on, each workload
    against the ceiling's own figure for it: `tasks/get` and sync calls at 0.3 of it, task
    creations at 0.2, whole task lives at 0.15."""
    targets = {"tasks/get": 0.3, "sync tool calls (HTTP)": 0.3, "task creations": 0.2,
               "task lives": 0.15}  # fmt: skip
    found = []
    for ours, ceiling, loop in (("mcp_tasks", CEILING_ASYNCIO, "asyncio"),
                                (ON_TRIO, CEILING_TRIO, "trio")):  # fmt: skip
        for workload, target in targets.items():
            ratio = _ratio(http[workload], ours, ceiling)
            found.append(Aim(f"{workload}/s on {loop}", ratio, ceiling, target))
    for workload in ("tasks/get", "task lives"):  # the generator is not what limits them
        for ceiling in CEILINGS:
            share = http[workload].get(ceiling, {}).get("load_cpu_share")
            found.append(Aim(f"wrk's share of its core, {ceiling}, {workload}", share,
                             "one core", 0.9, at_most=True))  # fmt: skip
    return found


def aims(figures: dict[str, Any]) -> list[dict[str, Any]]:
    http, stdio_, stored = figures["http"], figures["stdio"], figures["stored"]
    ours = stored["mcp_tasks"]["points"]
    found = _ceiling_aims(http)
    peer_workloads = {"tasks/get": "tasks/get req/s", "task creations": "task creations/s",
                      "task lives": "task lives/s",
                      "sync tool calls (HTTP)": "sync tool calls/s, HTTP"}  # fmt: skip
    for workload, label in peer_workloads.items():  # 10x fastmcp-tasks wherever both serve
        found.append(Aim(label, _ratio(http[workload], "mcp_tasks", "fastmcp-tasks"),
                         "fastmcp-tasks", 10))  # fmt: skip
    found += [
        Aim(
            "sync tool calls/s, HTTP",
            _ratio(http["sync tool calls (HTTP)"], "mcp_tasks", "official SDK"),
            "official SDK",
            5,
        ),
        Aim(
            "sync tool calls/s, HTTP",
            _ratio(http["sync tool calls (HTTP)"], "mcp_tasks", TS_SDK),
            TS_SDK,
            5,
        ),
        Aim(
            "sync tool calls/s, stdio",
            _ratio(stdio_, "mcp_tasks", "official SDK"),
            "official SDK",
            20,
        ),
        Aim(
            "sync tool calls/s, stdio",
            _ratio(stdio_, "mcp_tasks", CEILING_STDIO),
            CEILING_STDIO,
            0.35,
        ),
        Aim(  # the generator is not what limits the echo
            f"loadgen's share of its core, {CEILING_STDIO}",
            stdio_.get(CEILING_STDIO, {}).get("load_cpu_share"),
            "one core",
            0.9,
            at_most=True,
        ),
    ]
    task_workloads = {"tasks/get": "tasks/get req/s", "task creations": "task creations/s",
                      "task lives": "task lives/s"}  # fmt: skip
    for workload, label in task_workloads.items():
        entry = http[workload]
        ratio = _ratio(entry, "mcp_tasks", ASGI_UVICORN)  # the built-in at least as fast
        found.append(Aim(f"{label}, built-in server", ratio, ASGI_UVICORN, 1.0))
        found.append(
            Aim(
                f"{label}, SDK + TasksExtension",
                _ratio(entry, SDK_TASKS, "fastmcp-tasks"),
                "fastmcp-tasks",
                3,
            )
        )
    logged = [
        ("tasks/get", "tasks/get req/s", CEILING_ASYNCIO, 0.3),
        ("task creations", "task creations/s", "fastmcp-tasks", 10),
        ("task lives", "task lives/s", "fastmcp-tasks", 10),
        ("sync tool calls (HTTP)", "sync tool calls/s, HTTP", "official SDK", 5),
    ]
    for workload, label, other, target in logged:
        ratio = _ratio(http[workload], INFO_LOGS, other)
        found.append(Aim(f"{label}, logging at INFO", ratio, other, target))
    on_loops = [*((workload, http[workload]) for workload in LOOP_WORKLOADS), ("stdio", stdio_)]
    for workload, entry in on_loops:  # `serve` on asyncio (its default) at least as fast
        found.append(Aim(f"{workload}, asyncio vs trio", _ratio(entry, "mcp_tasks", ON_TRIO),
                         ON_TRIO, 1.0))  # fmt: skip
    recorded = _ratio(http["tasks/get"], RECORDING, "mcp_tasks")
    found.append(Aim("tasks/get req/s, recording a journal", recorded, "mcp_tasks", 0.85))
    legacy = _ratio(stdio_, LEGACY, "mcp_tasks")
    found.append(Aim("sync tool calls/s, stdio, 2025 session", legacy, "2026-07-28 client", 0.9))
    for workload, modern_workload, label in (
        (LEGACY_HTTP, "sync tool calls (HTTP)", "sync tool calls/s, HTTP, 2025 session"),
        (LEGACY_POLLS, "tasks/get", "tasks/get req/s, HTTP, 2025 session"),
    ):
        if workload in http and "mcp_tasks" in http[workload]:
            found.append(Aim(label, _session_ratio(http, workload, modern_workload),
                             "2026-07-28 client", 0.9))  # fmt: skip
    peer = stored.get("fastmcp-tasks", {}).get("points")
    for index, point in enumerate(ours[1:], start=1):
        ratio = point["bytes_per_task"] / peer[index]["bytes_per_task"] if peer else None
        label = f"memory per finished task, {point['stored']:,} stored"
        found.append(Aim(label, ratio, "fastmcp-tasks", 0.1, at_most=True))
    p99_ratio = ours[-1]["tasks_get_p99_ms"] / ours[0]["tasks_get_p99_ms"]
    label = f"tasks/get p99, {ours[-1]['stored']:,} stored vs {ours[0]['stored']:,}"
    found.append(Aim(label, p99_ratio, f"itself at {ours[0]['stored']:,}", 1.2, at_most=True))
    return [
        {
            "figure": a.figure,
            "ratio": a.ratio,
            "against": a.against,
            "target": a.target,
            "at_most": a.at_most,
            "met": a.met,
            "margin": a.margin,
        }
        for a in found
    ]


def recording_only(plan: Plan, log: Callable[[str], None]) -> dict[str, Any]:
    """tasks/get on ours recording a journal and on ours not recording, alone (the other
    servers are not started): runs alternate, every run is logged, the best of each counts."""
    if _can_pin():
        os.sched_setaffinity(0, {LOAD_CPU})
    pair = [server for server in http_servers(None) if server.name in ("mcp_tasks", RECORDING)]
    with contextlib.ExitStack() as stack:
        servers = {server.name: stack.enter_context(server.started()) for server in pair}
        task_ids = {name: completed_task(server) for name, server in servers.items()}
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        for server in servers.values():
            server.pause()
        for round_ in range(plan.rounds):
            for name, server in servers.items():
                server.resume()
                try:
                    poll = loadgen.task_poll(server.port, task_ids[name])
                    result = loadgen.fixed_requests(server.port, poll, plan.warmup, plan.seconds)
                finally:
                    server.pause()
                runs[name].append(result)
                log(f"tasks/get, round {round_ + 1}: {name} {result['per_second']:,.0f}/s")
        for server in servers.values():
            server.resume()
    best = {name: _best(results) for name, results in runs.items()}
    return {"tasks/get": best, "ratio": _ratio(best, RECORDING, "mcp_tasks")}


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"
    return text + unit


def _aim_text(aim: dict[str, Any]) -> str:
    sign = "<=" if aim["at_most"] else ">="
    return f"{sign} {aim['target']:g}x"


def _loop_table(figures: dict[str, Any]) -> list[str]:
    """`serve` on asyncio (its default) against trio; nothing for figures measured before
    ours ran on both."""
    loops = [(name, figures["http"][name]) for name in LOOP_WORKLOADS]
    loops.append(("sync tool calls (stdio)", figures["stdio"]))
    if not any(ON_TRIO in entry for _, entry in loops):
        return []
    out = ["| event loop (per second) | asyncio (mcp_tasks) | trio | asyncio / trio |"]
    out.append("| --- | ---: | ---: | ---: |")
    for name, entry in loops:
        cells = [_number(entry[c]["per_second"]) if c in entry else "-" for c in LOOPS_SHOWN]
        ratio = _number(_ratio(entry, "mcp_tasks", ON_TRIO))
        out.append(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
    return [*out, ""]


LOOPS_SHOWN = ("mcp_tasks", ON_TRIO)


def _session_ratio(http: dict[str, Any], workload: str, modern_workload: str) -> float:
    """Ours in a 2025 session against the 2026-07-28 client of the same rounds
    (`MODERN_PAIR`; figures measured before it: the modern workload's)."""
    entry = http[workload]
    modern = entry.get(MODERN_PAIR) or http[modern_workload]["mcp_tasks"]
    return float(entry["mcp_tasks"]["per_second"] / modern["per_second"])


def _split_table(figures: dict[str, Any]) -> list[str]:
    """Where a request's CPU time goes (`split.py`), on each loop."""
    split = figures.get("split")
    if not split:
        return ["Where the time goes: not measured in this run.", ""]
    out = ["| where the time goes (CPU us a request) | whole connection | server.handle | "
           "head read | HTTP layer, head too |", "| --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for loop, workloads in split.items():
        for workload, parts in workloads.items():
            cells = [parts[key] for key in ("connection_us", "server_us", "head_us")]
            cells.append(parts["transport_us"])
            out.append(f"| {workload}, {loop} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    return [*out, *_apart(figures, "split"), ""]


def _apart(figures: dict[str, Any], key: str) -> list[str]:
    """A line naming when a section was measured, if not in the run of the rest."""
    when = figures.get("measured_apart", {}).get(key)
    return ["", f"(Measured apart from the rest of this page: {when}.)"] if when else []


def _workers_table(figures: dict[str, Any]) -> list[str]:
    """`serve --workers 2` beside one worker (`workers.py`), on each store measured."""
    workers = figures.get("workers")
    if not workers:
        return ["`serve --workers`: not measured in this run.", ""]
    out = ["| `serve --workers` (per second) | 1 worker | 2 workers | 2 / 1 |",
           "| --- | ---: | ---: | ---: |"]  # fmt: skip
    for name, measured in (("Redis", workers), ("SQLite", workers.get("sqlite") or {})):
        for workload in ("greet", "tasks/get"):
            entry = measured.get(workload)
            if entry is None:
                continue
            one, two = entry["workers_1"]["per_second"], entry["workers_2"]["per_second"]
            out.append(
                f"| {workload}, {name} | {_number(one)} | {_number(two)} | {entry['ratio']:.2f} |"
            )
    return [*out, *_apart(figures, "workers"), ""]


def _legacy_table(figures: dict[str, Any]) -> list[str]:
    """Sync tool calls over stdio from a 2025 client (`initialize` first) beside a
    2026-07-28 one, ours and the official SDK's; nothing for figures measured before."""
    entry = figures["stdio"]
    if LEGACY not in entry:
        return []
    out = ["| sync tool calls, stdio (per second) | 2026-07-28 client | 2025 session | "
           "2025 / 2026 |", "| --- | ---: | ---: | ---: |"]  # fmt: skip
    for server, legacy in (("mcp_tasks", LEGACY), ("official SDK", SDK_LEGACY)):
        cells = [_number(entry[c]["per_second"]) if c in entry else "-" for c in (server, legacy)]
        ratio = _number(_ratio(entry, legacy, server))
        out.append(f"| {server} | " + " | ".join(cells) + f" | {ratio} |")
    out.append("")
    http = figures["http"]
    if LEGACY_HTTP in http:
        modern, sessions = http["sync tool calls (HTTP)"], http[LEGACY_HTTP]
        out += ["| sync tool calls, HTTP (per second) | 2026-07-28 client | 2025 session | "
                "2025 / 2026 |", "| --- | ---: | ---: | ---: |"]  # fmt: skip
        for server in ("mcp_tasks", "official SDK"):
            paired = sessions.get(MODERN_PAIR) if server == "mcp_tasks" else None
            pair = [paired or modern.get(server), sessions.get(server)]
            cells = ["-" if c is None else _number(c["per_second"]) for c in pair]
            both = pair[0] is not None and pair[1] is not None and pair[0]["per_second"]
            ratio = _number(pair[1]["per_second"] / pair[0]["per_second"] if both else None)  # type: ignore[index]
            out.append(f"| {server} | " + " | ".join(cells) + f" | {ratio} |")
        out.append("")
    if LEGACY_POLLS in http and MODERN_PAIR in http[LEGACY_POLLS]:
        polls = http[LEGACY_POLLS]
        cells = [_number(polls[c]["per_second"]) for c in (MODERN_PAIR, "mcp_tasks")]
        ratio = _number(_ratio(polls, "mcp_tasks", MODERN_PAIR))
        out += ["| tasks/get, HTTP (per second) | 2026-07-28 client | 2025 session | "
                "2025 / 2026 |", "| --- | ---: | ---: | ---: |",
                f"| mcp_tasks | {cells[0]} | {cells[1]} | {ratio} |", ""]  # fmt: skip
    return out


def tables(figures: dict[str, Any]) -> str:
    """The figures as Markdown tables."""
    out = []
    columns = ["mcp_tasks", "fastmcp-tasks", "official SDK", TS_SDK, "limit", *CEILINGS,
               CEILING_STDIO]  # fmt: skip
    out.append("| figure | " + " | ".join(columns) + " | ours / ceiling |")
    out.append("| --- |" + " ---: |" * (len(columns) + 1))
    rows = [(name, entry) for name, entry in figures["http"].items()]
    rows.append(("sync tool calls (stdio)", figures["stdio"]))
    for name, entry in rows:
        unit = "lives/s" if name == "task lives" else "req/s"
        cells = [_number(entry[c]["per_second"]) if c in entry else "-" for c in columns]
        ceiling = _ratio(entry, "mcp_tasks", CEILING_STDIO if entry is figures["stdio"]
                         else CEILING_ASYNCIO)  # fmt: skip
        out.append(f"| {name} ({unit}) | " + " | ".join(cells) + f" | {_number(ceiling)} |")
        if "p50_ms" in entry.get("mcp_tasks", {}):
            cells = [
                f"{entry[c]['p50_ms']:.2f} / {entry[c]['p99_ms']:.2f}" if c in entry else "-"
                for c in columns
            ]
            what = "p50 / p99 of a request" if name == "task lives" else "p50 / p99"
            out.append(f"| {name}: {what} (ms) | " + " | ".join(cells) + " | |")
    out.append("")
    embedding = ["mcp_tasks", *EMBEDDED, "fastmcp-tasks"]
    out.append("| embedded (per second) | " + " | ".join(embedding) + " |")
    out.append("| --- |" + " ---: |" * len(embedding))
    for name in ("tasks/get", "task creations", "task lives"):
        entry = figures["http"][name]
        cells = [_number(entry[c]["per_second"]) if c in entry else "-" for c in embedding]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out.append("")
    observed = ["mcp_tasks", *OBSERVED]
    out.append(
        "| logs, telemetry, journal (per second) | " + " | ".join(observed)
        + " | INFO logs / none | OpenTelemetry / none | recording / none |"
    )  # fmt: skip
    out.append("| --- |" + " ---: |" * (len(observed) + 3))
    for name, entry in figures["http"].items():
        cells = [_number(entry[c]["per_second"]) if c in entry else "-" for c in observed]
        costs = [_number(_ratio(entry, c, "mcp_tasks")) for c in OBSERVED]
        out.append(f"| {name} | " + " | ".join(cells + costs) + " |")
    out.append("")
    out.extend(_loop_table(figures))
    out.extend(_legacy_table(figures))
    out.extend(_split_table(figures))
    out.extend(_workers_table(figures))
    out.append(
        "| stored finished tasks | server | RSS (MiB) | bytes per task | "
        "tasks/get req/s | p50 (ms) | p99 (ms) |"
    )
    out.append("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, entry in figures["stored"].items():
        for point in entry["points"]:
            out.append(
                f"| {point['stored']:,} | {name} | {point['rss_kib'] / 1024:,.1f} | "
                f"{_number(point.get('bytes_per_task'))} | "
                f"{_number(point['tasks_get_per_second'])} | {point['tasks_get_p50_ms']:.2f} | "
                f"{point['tasks_get_p99_ms']:.2f} |"
            )
    out.append("")
    out.append("| aim | ratio | against | aim | met |")
    out.append("| --- | ---: | --- | ---: | --- |")
    for aim in figures["aims"]:
        met = {True: "yes", False: "**no**", None: "-"}[aim["met"]]
        out.append(
            f"| {aim['figure']} | {_number(aim['ratio'])} | {aim['against']} | "
            f"{_aim_text(aim)} | {met} |"
        )
    return "\n".join(out)


def chart(figures: dict[str, Any], path: Path) -> None:
    """Each aim's ratio over its target (right of 1: met), on a log scale."""
    import matplotlib  # noqa: PLC0415  (the `bench` extra; only writing the docs needs it)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: PLC0415

    shown = [aim for aim in figures["aims"] if aim["margin"]]
    labels = [f"{a['figure']}\nvs {a['against']}" for a in shown]
    margins = [a["margin"] for a in shown]
    figure, axes = plt.subplots(figsize=(9, 0.55 * len(shown) + 1.4))
    colours = ["#2a9d8f" if a["met"] else "#e76f51" for a in shown]
    axes.barh(range(len(shown)), margins, color=colours)
    axes.set_yticks(range(len(shown)), labels, fontsize=8)
    axes.invert_yaxis()
    axes.set_xscale("log")
    axes.axvline(1.0, color="black", linewidth=1)
    for index, aim in enumerate(shown):
        text = f" {aim['ratio']:.3g}x (aim {_aim_text(aim)})"
        axes.text(aim["margin"], index, text, va="center", fontsize=8)
    axes.set_xlabel("ratio / aim (log scale; right of the line: aim met)")
    axes.set_title(f"mcp_tasks vs peers and the limit ({figures['machine']['cores']} cores)")
    low, high = min(0.5, min(margins) * 0.8), max(margins) * 2.5
    axes.set_xlim(low, high)
    axes.set_xticks([tick for tick in (0.25, 0.5, 1, 2, 4, 8, 16) if low <= tick <= high])
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.xaxis.set_minor_formatter(NullFormatter())
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_docs(figures: dict[str, Any], page: Path, image: Path) -> None:
    chart(figures, image)
    m, v = figures["machine"], figures["versions"]
    plan = figures["plan"]
    version_list = ", ".join(f"{name} {number}" for name, number in v.items())
    text = PAGE_TEMPLATE.format(
        cpu=m["cpu"],
        cores=m["cores"],
        memory=m["memory"],
        platform=m["platform"],
        python=m["python"],
        versions=version_list,
        minutes=figures["seconds"] / 60,
        warmup=plan["warmup"],
        seconds=plan["seconds"],
        rounds=plan["rounds"],
        tables=tables(figures),
        image=image.name,
        pinned="server on core 0, load generator on core 1" if m["pinned"] else "not pinned",
    )
    page.write_text(text)
    page.with_suffix(".json").write_text(json.dumps(figures, indent=1) + "\n")


PAGE_TEMPLATE = """\
# Benchmarks: side by side with fastmcp-tasks, the official SDK and the ceilings

Written by `benchmarks/run` (the whole run took {minutes:.0f} minutes); the raw figures are in
`benchmarks.json` next to this page. Re-run it to see your own machine.

![each aim's ratio against its target]({image})

## The figures

{tables}

Ratios are ours over the peer's (memory: ours over fastmcp-tasks', lower is better). The
ceilings answer fixed results (msgspec decodes each request; a result of the right shape
goes back) behind httptools, the C parser our server uses too: as an asyncio `Protocol` on
asyncio's loop and on uvloop, and on trio's sockets. They are the most Python does here on
each loop, and `serve` is read against the one of the loop it runs on (asyncio: the plain
loop's, though `serve` runs on uvloop). The limit column is the same fixed answer on trio
with h11, the pure-Python parser the built-in server used before issue 33 (over stdio, a
minimal trio echo). Over stdio the ceiling is an echo: the same fixed answer to every line,
from an asyncio `Protocol` on uvloop's pipes that answers all the lines of a read in one
write, with no task and no `await`: the most Python does over a pipe, and what `serve` over
stdio is read against (the last column of the stdio row). The load generator's share of its
core on that echo (`load_cpu_share`) is kept too, and an aim checks it stays under 0.9.

## What is measured

* **tasks/get**: polls of one completed task (its result inlined), again and again.
* **task creations**: `tools/call` of `slow_compute` with `seconds: 0`, answered with a task handle.
* **task lives**: create a task with no work, `tasks/get` it at once until it is `completed`,
  then the next; a life is two or more round trips (the latencies are of its requests).
* **sync tool calls**: `tools/call` of `greet`, over HTTP and over stdio (16 lines in flight
  on one pipe, a fresh process per run).
* **embedded**: the task workloads again, served by ours as an ASGI app (`mcp_tasks.asgi`,
  the same `Server`) under uvicorn (with uvloop and httptools, as `uvicorn[standard]`
  installs; and with asyncio's loop and h11) and under hypercorn's trio worker, against the
  built-in server; and by the official SDK's `MCPServer` with our `TasksExtension`
  (served by `TasksExtension.streamable_http_app`, under uvicorn with h11 like the peers),
  against fastmcp-tasks.
* **logs and telemetry**: every HTTP workload again, served by ours logging at INFO (one
  line per task status change, formatted and written; to /dev/null, so the lines' cost and
  not a disk's), and logging at INFO with OpenTelemetry on (`mcp_tasks.otel`: the SDK's
  providers, a span per request and per task batched to an exporter that drops them, the
  metrics read every 10 s), against ours with neither.
* **2025 sessions**: a 2025-11-25 client in the session its `initialize` opened
  (`Mcp-Session-Id`, no `_meta`): `tools/call` of `greet` over HTTP and stdio, and
  `tasks/get` of a completed task of the 2025 tasks utility over HTTP, beside the official
  SDK's `MCPServer` serving the same client. Ours is read against a 2026-07-28 client of
  the same workload: over stdio as another server of the rounds; over HTTP on the same
  server process, its rounds alternating with the 2025 client's (`mcp_tasks, 2026-07-28
  client` in `benchmarks.json`), since runs minutes apart drift here by more than the
  margin the aim measures.
* **stored finished tasks**: a fresh server is filled with finished tasks up to each count;
  resident memory (RSS) per task against the first count, once the server is idle, and
  `tasks/get` latency (median p99 of {rounds} runs) at each count.

Load: 16 keep-alive connections over 127.0.0.1, one request in flight on each; {warmup:g} s of
warm-up, then {seconds:g} s counted; runs alternate between the servers ({rounds} rounds), the
ones not measured paused (SIGSTOP), and the best run of each counts. A fixed request again
and again (tasks/get, task creations, sync tool calls) is sent by wrk, a C load generator on
one thread; its share of its core is kept with each figure (`load_cpu_share`), and an aim
checks it stays under 0.9 for every ceiling, so the generator is not what limits them. On
this machine's two cores that check fails for the uvloop ceiling's fixed requests and the
asyncio and uvloop ceilings' lives, and not through wrk: `benchmarks/generators.py` drives
the uvloop ceiling's `tasks/get` from wrk and from h2load (nghttp2's C generator) in
alternate rounds, and on 2026-12-06 wrk read 112,200 a second at 0.93 of its core, h2load
113,000 at 0.98. A fixed answer costs the server about what the request costs the
generator (a read, a parse, a write), so no generator on one core shows such a server's
limit; a third core would, or pipelined requests, which change what every server is
measured on. Task
lives, which read each answer to send the next request, are driven by wrk as well: one
thread and 16 connections, whose Lua script reads each answer (a task handle: its poll is
queued for the next free connection; `completed`: a life, and a new task's creation next),
so 16 lives are under way at once. That costs wrk more per request than a fixed request
does (the answer handed to Lua), and the fastest ceilings' lives take nearly all of wrk's
core: there the ceiling's figure is what wrk reaches, less than the ceiling could (its
share is in the aims). Until issue 33's eleventh session each connection had a thread of
its own, so that its script could follow its task: 16 threads on wrk's one core, a switch
an answer, and the ceilings' lives read lower: asyncio's 38,800 in the run before the
change against 51,500 in the one after, uvloop's 37,500 against 59,300, while ours moved
from 6,900 to 7,500. So the asyncio lives aim, met at 0.18 against the slower reading,
reads 0.14-0.15 since (6,600 against 46,100 in this run). wrk times
requests, not lives: a life's latencies are those of its requests. Each workload is read
against the ceiling's figure for the same workload. Every answer is checked (status 200
or 202, no JSON-RPC error). Pinning: {pinned}.

## Where the time goes

`benchmarks/split.py` measures each part of a request alone, in CPU microseconds, without
a profiler (which inflates every call alike) and without a socket (whose kernel work a
server under wrk shares with the load generator): one connection answering thousands of
requests from an in-memory stream (each read a real suspension of the loop, no system
call), `Server.handle` alone on the same request, and the request's head read alone from
its bytes; the HTTP layer is the connection less the server. Its table is above ("where the
time goes"). A head costs llhttp and a Python pass over its fields, about 10 us, but only
the first time on a connection: a client polling one task sends the same head each time,
and a head that repeats one of the last four the connection read, byte for byte, is not
read again (nor is what the rules said of it, but for a token, which is checked on every
request). A task's life takes turns between its call and its poll: with only the last head
kept, each of its heads was read anew, 5.6 us of a 20 us `tasks/get` in-process. A poll
of another task sends the head of the poll before it but for `Mcp-Name` (task ids are all
as long): a head that differs from a kept one only within one header's value (that header
sent once and not one llhttp reads itself, its new line of visible ASCII, spaces and tabs,
which llhttp takes in any value) is read from the kept one, in 2.3 us, and what the rules
said of the kept one holds unless they read that header: a poll of a new task went from
27.7 to 24.7 us in-process, and a life from about 132 to 127. So the `head read`
column is a head's first reading, and the whole connection costs less than its parts. A
`tasks/get` then spends about a third of its time in the core and the runtime (the store
read, the era and header checks; its params decoded once, its encoded task kept from one
poll to the next) and the rest in the connection's own layers: the body taken, the answer
written (a JSON answer's head made once a status), the coroutines resumed per request.
Measured by hand under wrk on 2026-12-05, in a quiet moment: `serve` answered 20,800
`tasks/get` a second; with `Server.handle` replaced by a fixed reply, 31,900 (so the server
costs about 17 us a request in place, though 11 alone: called in a tight loop, it finds its
code and data in the processor's caches); a task per connection on the same asyncio stream
answering fixed replies, without `HttpConnection`, 58,600; the uvloop ceiling 80,000. So a
request spends about 12.5 us in the loop and the system calls, 4.5 in our stream's task and
future, about 14 in the connection's Python and 17 in the server; 0.3 of the asyncio ceiling
is 40 to 52 us a request, as its figure varies from run to run. This machine is shared:
later the same day the same code answered 16,100-17,000 a second while the ceiling's figure
did not move (a server that runs more code loses more to a neighbour's use of the caches);
on a quiet day (the run of issue 33's sixth session) the same code answered 37,700 against
the ceiling's 99,800. On trio the loop itself costs more, and its ceiling is under half of
asyncio's: `serve` on trio meets every aim, task creations too since its answers are
written in batches (0.26 in this run, 0.19 before).

A task creation costs four to five times a `tasks/get` in the server (the `task creations`
rows): the tool runs twice (in the request, where it answers that it becomes a task, then
in the task), the record is made (an id from the system's random source, its times
formatted) and saved twice (working, then completed) under the store's limits, the task's
run is started (an asyncio task, or a trio nursery's child, in a shielded cancel scope of
its own) and the core decides three times (the call, the handler's answer, the outcome).
Taken apart by hand in-process (`split.py`'s connection figure, one part at a time made a
no-op): 73 us through the connection on asyncio, 86 on trio; without the task's run at all,
35 and 40 (the request: the tool's first run, the record, its save, the handle). The run is
the rest: its cancel scope 9 and 12 us (the first scope of a task, where anyio and trio set
up the task's cancel state: 4.4 and 5.4 us more than the task alone, measured apart), the
outcome's save 16 and 15 (the core's decision, the result encoded, the record made anew,
the store's write), and the task's start, its context and the tool's second run some 13 and
20. The scope is what `tasks/cancel`, expiry and the shutdown grace stop a run by;
asyncio's own `Task.cancel` would cost nothing, but it cuts through a handler's shielded
sections (a cleanup under `anyio.CancelScope(shield=True)` stops at its first wait), so the
scope stays. anyio's task group, used before, gave each child a cancel scope and an event
more (16 us a creation); a record's byte count made a generator per answer map (4 us).
Compiled with mypyc, the core's modules without a msgspec Struct of their own (the deciding
ones) made a creation slower, 65 us in the server against 60: every record, call and effect
is a Struct, which compiled code reaches through the generic attribute look-up. A few
long-lived runner tasks taking the runs from a queue (no task made a run, and no task's
first scope) were no faster under wrk: 9,400-10,000 creations a second against
9,000-9,800, so they were dropped. Task ids are drawn 256 at a time from the system's
random source (0.3 us an id against 1.0). 0.2 of the asyncio ceiling is about 50 us a
creation under wrk, the socket and the loop included: less than the server alone spends on
one in-process. Under wrk with the task's run made a no-op, the requests alone reached
15,100 a second (66 us each, 0.15 of the ceiling): no work on the run could bring
creations to 0.2, and the request part costs twice what it does in-process, as every
request does under load. Much of that is the kernel's, measured with perf under wrk on
2026-12-05: 27 % of the server's time on creations (about 29 us of a creation's 111), a
third of it waking wrk's thread as each answer arrives (an interrupt to the other core,
dear in this virtual machine: about 10 us an answer). Against the ceiling wrk's thread
never sleeps, and the same wake costs 0.9 us a request. So 0.2 of the ceiling, about 50
us a creation, leaves some 20 us for the Python of a request and a run that cost 70
in-process. A life pays the wake twice (20 us of its 200 under perf).
Since the tenth session the answers of one turn of the loop (one scheduling batch on trio)
are written together at its end, so wrk's thread is woken once for several: under wrk
(six-second runs, alternated) creations went from 8,100-9,800 a second to 10,900-12,000 on
uvloop and from 6,900-8,000 to 9,900-10,300 on trio, sync calls from 24,000-30,000 to
25,000-36,000 (trio 22,000-24,000 to 26,800-28,800), lives from 5,000-5,800 to 5,300-6,100
(trio 4,100-5,000 to 4,600-5,500); wrk's share of its core fell from 0.21 to 0.13 on
creations, the wakes it no longer takes.
Making the run's cancel scope a no-op gave 13 % more creations, the outcome's save 7 %.
A whole life adds a `tasks/get` to it; its
aim reads ours against the ceiling's lives, which wrk itself limits (it reads every answer
in Lua, at 0.88 of its core on the asyncio ceiling, 0.96 on uvloop's, in this run): the
ceiling's true
figure is higher, so that ratio flatters us if anything.

Over stdio the server's CPU time per answer (`cpu_us_per_answer` in `benchmarks.json`, read
from `/proc`, which other work on the machine sways less than answers/s) is the figure to
watch. Most of a `greet` call's is `Server.handle` (the core and the tool's context):
in-process about 9 us alone, and 14.8 us of CPU an answer the whole process spends in this
run, against the echo's 2.9 (14.4 to 15.6 in issue 33's eleventh session, 16.5 in its
tenth, 21 in its sixth, 56 before the issue); the rest is the
transport and the loop. The transport makes no task for a line
whose request never waits (a `greet`, a `tasks/get`): the pump runs `handle` for it at once
and goes on to the next line. Only a request that does wait gets a task (the one it began
in; the pump goes on in a new one), which is what keeps a slow call from holding up the
next line; each of these tasks has a cancel scope, which is the request's once it is alone
there, so `notifications/cancelled` needs no scope around each handler (such a scope cost 4
us a call, a fifth of one). The replies of one read went out in one write after the read's
last line; with 16 requests in flight the client then waited while the server worked, and
the server while the client read. A reply now waits at most 0.15 ms behind the later lines
of its read (`HOLD_SECONDS`), so both sides work at once, for one write more every 0.15 ms:
43,000 to 58,000 calls a second, measured alone. Since issue 33's eleventh session, on
asyncio the pump writes a read's replies itself before it reads on (the loop's pipe writes
without waiting), so the writer's task no longer runs once a read: 17.3 to 16.0 us of CPU
an answer in alternated runs. A sound `tools/call`'s params are decoded once (their head
taken from them, 0.4 us), the common `async def tool(ctx, args)` is awaited without a
coroutine between, and a line is searched for the mark of a notification only when room
is short (0.2 us): 14.1 to 12.8 us a line in-process. The first full run after it (on
d632f38) read 68,800 calls a second, 0.37 of the echo (aim 0.35; the echo's rounds ran at
165,000 to 184,000), against 60,200 and 0.28 in the run before; the next, on a busier
machine, read 63,000 against an echo whose rounds ran at 119,000 to 198,000: 0.32. This
run (twelfth session, the same code but for the pump sorting each line once) reads 65,000
against an echo of 134,000 to 146,000: 0.44. At 14.8 us an answer, 0.35 holds while the
echo answers fewer than about 186,000 a second.

A 2025 session's request costs what the 2026-07-28 one does, plus the session: its
record read from the store (its idle time started again), the session's `_meta` written in
front of the request's params, and `resultType` cut from the end of the answer. Counted in
server instructions (callgrind, one call at a time), an HTTP tool call takes 755k in a
session against 721k, and 314k against 291k over stdio. A 2025-11-25 tool call may stream
resumably and outlive its POST; the built-in server runs it in the POST's own task all the
same (its transport lets it outlive the POST), the ASGI app in a task of its own (a task
and an event more, about 15 us).

Logging at INFO writes two lines per task created (`created`, `completed`), each about 7.5 us
in-process (the `LogRecord`, the text format, the write), about twice that under load; the
lines skip `logging`'s walk up the stack for the caller's name (`_observe._write` names it)
and format the date once a second (`TextFormatter`).

## Machine and versions

* CPU: {cpu}, {cores} cores; memory {memory}; {platform}; Python {python}
* {versions}

## Commands

    benchmarks/run            # installs the peers (benchmarks/.peers-venv), runs, writes this page
    benchmarks/run --quick    # a smoke run; prints the figures, leaves this page alone
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--peers-python",
        default=str(HERE / ".peers-venv" / "bin" / "python"),
        help="the peers' interpreter, or 'none' to measure ours and the limit",
    )
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--write-docs", action="store_true", help="write benchmarks.md, .json and .png"
    )
    parser.add_argument(
        "--docs-dir", type=Path, default=ROOT / "docs", help="where --write-docs writes"
    )
    parser.add_argument(
        "--from-json", type=Path, help="measure nothing: report the figures of this file"
    )
    parser.add_argument(
        "--recording",
        action="store_true",
        help="only tasks/get recording a journal vs not (its aim), printed as JSON",
    )
    parser.add_argument(
        "--only", choices=ONLY, help="measure this figure alone (prints JSON; no aims, no docs)"
    )
    parser.add_argument(
        "--server",
        action="append",
        help="with --only: this server, by name (e.g. 'mcp_tasks, INFO logs'); again for more",
    )
    args = parser.parse_args(argv)
    if args.server and not args.only:
        parser.error("--server goes with --only")
    if args.only and (args.write_docs or args.from_json):
        parser.error("--only measures one figure: it cannot write the docs or read figures")
    peers_python = None if args.peers_python == "none" else args.peers_python
    if peers_python and not Path(peers_python).exists():
        sys.exit(f"no peers' interpreter at {peers_python}: run benchmarks/run first")
    plan = Plan.quick() if args.quick else Plan()

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.recording:
        print(json.dumps(recording_only(plan, log), indent=1))
        return
    if args.only:
        names = set(args.server) if args.server else None
        figures = run_one(args.only, names, peers_python, plan, log)
        print(json.dumps(figures, indent=1))
        return
    if args.from_json:  # the page again from figures already measured, read against
        figures = json.loads(args.from_json.read_text())  # today's aims (a figure not
        figures["aims"] = aims(figures)  # measured then: an aim without a ratio, "-")
    else:
        figures = run_all(peers_python, plan, log)
    if args.write_docs:
        write_docs(figures, args.docs_dir / "benchmarks.md", args.docs_dir / "benchmarks.png")
    print(json.dumps(figures, indent=1) if args.json else tables(figures))


if __name__ == "__main__":
    main()
