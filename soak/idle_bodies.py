"""Idle bodies: connections that declare a 4 MiB body and send 10 bytes of it. Does anyone
else still get served, and how fast?

What is measured
----------------
A server process serving this file's `server` with the default `HttpConfig` (4 MiB bodies,
64 MiB of bodies in flight, 5 s of waiting for room, 1024 bytes/s after a 5 s grace):
either the built-in one (`mcp-tasks serve soak/idle_bodies.py --http 127.0.0.1:0`) or the
ASGI app under uvicorn (`uvicorn --app-dir soak idle_bodies:app`, its default parser).

One client sends `tools/list` requests one after the other on a keep-alive connection
for `--seconds` (at most `--requests` of them), in `--rounds` rounds of two phases (after
50 unmeasured ones): alone, then while `--idle` connections (default 64) each hold a POST
head declaring `Content-Length: 4194304` and its first 10 bytes. Alternating phases, what
else the machine runs weighs on both alike. An idle connection the server cuts
(408, or closed) is opened again at once, as an attacker would: there are always
`--idle` of them. It reports each phase's p50 and p99, the statuses, the ratio of the
loaded p99 to the unloaded one, and how many idle connections were cut. Loopback only;
every phase is bounded by `--seconds` and `--requests`, the whole run by 180 s.

    python soak/idle_bodies.py [--server builtin|uvicorn] [--idle 64] [--seconds 8] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `_common`

import argparse
import collections
import json
import re
import subprocess
import tempfile
import time
from collections import Counter
from typing import Any

import h11
import trio
from _common import ROOT, cli_command, percentile, port_in_log, print_rows

from mcp_tasks import Server
from mcp_tasks.asgi import asgi_app

DEADLINE_SECONDS = 180.0
DECLARED = 4 * 1024 * 1024
_LISTENING = re.compile(r"(?:serving .* on|Uvicorn running on) http://127\.0\.0\.1:(\d+)")

server = Server("idle-bodies", "1.0.0")
app = asgi_app(server)

_LIST = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
).encode()


def _headers(port: int, length: int) -> list[tuple[str, str]]:
    return [
        ("host", f"127.0.0.1:{port}"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("content-length", str(length)),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ]


async def measure(port: int, seconds: float, most: int, took: list[float]) -> Counter[str]:
    """Requests one after the other on one connection for `seconds` (at most `most`),
    their times appended to `took` (ms); their statuses."""
    statuses: Counter[str] = collections.Counter()
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    connection = h11.Connection(h11.CLIENT)
    end = time.monotonic() + seconds
    async with stream:
        for _ in range(most):
            if time.monotonic() >= end:
                break
            started = time.perf_counter()
            status = await _exchange(stream, connection, port)
            took.append((time.perf_counter() - started) * 1000)
            statuses[str(status)] += 1
            if connection.our_state is h11.MUST_CLOSE or status != 200:
                break  # closed by the server: the phase ends there
            connection.start_next_cycle()
    return statuses


def _figures(took: list[float], statuses: Counter[str]) -> dict[str, Any]:
    took.sort()
    return {
        "requests": len(took),
        "p50_ms": percentile(took, 0.5),
        "p99_ms": percentile(took, 0.99),
        "statuses": dict(statuses),
    }


async def _exchange(stream: trio.SocketStream, connection: h11.Connection, port: int) -> int:
    out = connection.send(
        h11.Request(method="POST", target="/mcp", headers=_headers(port, len(_LIST)))
    )
    out = (out or b"") + (connection.send(h11.Data(data=_LIST)) or b"")
    await stream.send_all(out + (connection.send(h11.EndOfMessage()) or b""))
    status = 0
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return status


async def hold_idle(port: int, cut: collections.Counter[str]) -> None:
    """One idle body, opened again each time the server cuts it, until cancelled."""
    head = h11.Connection(h11.CLIENT).send(
        h11.Request(method="POST", target="/mcp", headers=_headers(port, DECLARED))
    )
    while True:
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            cut["could not connect"] += 1
            await trio.sleep(0.1)
            continue
        async with stream:
            try:
                await stream.send_all((head or b"") + b'{"jsonrpc"')
                answer = await stream.receive_some(65536)
                while answer and not answer.startswith(b"HTTP/1.1 "):
                    answer = await stream.receive_some(65536)
                status = answer[9:12].decode() if answer else "closed"
            except (trio.BrokenResourceError, OSError):
                status = "reset"
        cut[status] += 1


async def run(port: int, idle: int, seconds: float, most: int, rounds: int) -> dict[str, Any]:
    """`rounds` of (alone, loaded), so that what else runs on the machine weighs on both."""
    took: dict[str, list[float]] = {"alone": [], "loaded": []}
    statuses: dict[str, Counter[str]] = {"alone": Counter(), "loaded": Counter()}
    cut: Counter[str] = collections.Counter()
    with trio.fail_after(DEADLINE_SECONDS):
        await measure(port, 30, 50, [])  # warm up
        for _ in range(rounds):
            statuses["alone"] += await measure(port, seconds, most, took["alone"])
            async with trio.open_nursery() as nursery:
                for _ in range(idle):
                    nursery.start_soon(hold_idle, port, cut)
                await trio.sleep(0.5)  # the heads are in (the grace is 5 s)
                statuses["loaded"] += await measure(port, seconds, most, took["loaded"])
                nursery.cancel_scope.cancel()
    alone, loaded = (_figures(took[phase], statuses[phase]) for phase in ("alone", "loaded"))
    ratio = None
    if alone["p99_ms"] and loaded["p99_ms"]:
        ratio = round(loaded["p99_ms"] / alone["p99_ms"], 2)
    return {
        "idle": idle,
        "alone": alone,
        "loaded": loaded,
        "p99_ratio": ratio,
        "idle_cut": dict(cut),
    }


def _command(kind: str) -> list[str]:
    if kind == "builtin":
        return cli_command("serve", str(Path(__file__).resolve()), "--http", "127.0.0.1:0")
    return [
        sys.executable, "-m", "uvicorn", "--app-dir", str(Path(__file__).resolve().parent),
        "idle_bodies:app", "--host", "127.0.0.1", "--port", "0", "--no-access-log",
        "--timeout-graceful-shutdown", "2",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=["builtin", "uvicorn"], default="builtin")
    parser.add_argument("--idle", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=6.0, help="of each phase")
    parser.add_argument("--requests", type=int, default=10_000, help="at most, each phase")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args()
    with tempfile.TemporaryFile("w+") as log:
        command = _command(options.server)
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=log)
        try:
            port = port_in_log(process, log, _LISTENING)
            figures = trio.run(
                run, port, options.idle, options.seconds, options.requests, options.rounds
            )
        finally:
            process.terminate()
            process.wait(30)
    figures["server"] = options.server
    if options.json:
        print(json.dumps(figures))
        return
    rows = [["server", "idle bodies", "requests", "p50", "p99", "answers"]]
    for phase, count in (("alone", 0), ("loaded", options.idle)):
        found = figures[phase]
        answers = ", ".join(f"{n} x {status}" for status, n in found["statuses"].items())
        p50, p99 = found["p50_ms"], found["p99_ms"]
        rows.append(
            [
                options.server,
                str(count),
                str(found["requests"]),
                f"{p50:.2f} ms",
                f"{p99:.2f} ms",
                answers,
            ]
        )
    print_rows(rows)
    print(
        f"p99 loaded / alone: {figures['p99_ratio']}; idle connections cut: {figures['idle_cut']}"
    )


if __name__ == "__main__":
    main()
