"""Abandoned plain-function tools: how many threads do they leave, and is a fresh call of a
quick tool still answered?

What is measured
----------------
A server process serving the two plain-function (`def`) tools of this file: `block`
sleeps `seconds` in its worker thread, deaf to cancellation, as blocking code is; `patient`
does the same but stops as soon as its call is cancelled (`ctx.wait_cancelled`). Two ways
of serving it:

* `--kind builtin`: `mcp-tasks serve soak/tool_threads.py --http 127.0.0.1:0 --loop trio`;
* `--kind asyncio`: the ASGI app under uvicorn (asyncio), `python soak/tool_threads.py
  --serve-asyncio`.

This script makes `--calls` calls (default 500) of `block(60)`, `--concurrency` at a time
(default 50): each POSTs its `tools/call`, and hangs up `--cut-after` seconds later (default
0.3) unless it was answered first (refused: the server had no thread for it). Meanwhile it
samples the server's OS threads (`Threads:` of /proc/PID/status) every 0.05 s. Then one
fresh call of `block(0.01)`, and the time until it is answered (any answer: a result, or a
retryable refusal), waited for at most `--fresh-timeout` seconds (default 30). With
`--tool patient` the cut-off calls are of the cooperative tool instead.

    python soak/tool_threads.py [--kind builtin|asyncio] [--calls 500] [--json]

Loopback only; bounded by the call count and a 300 s deadline. The server is stopped with
SIGTERM (SIGKILL after 30 s), taking its sleeping threads with it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `_common`

import argparse
import collections
import contextlib
import json
import re
import time
from typing import Any

import h11
import trio
from _common import (
    cli_command,
    print_rows,
    started_server,
    tools_call_body,
    tools_call_headers,
)

from mcp_tasks import Server, ToolContext

DEADLINE_SECONDS = 300.0
SAMPLE_SECONDS = 0.05

server = Server("tool-threads", "1.0.0")


@server.tool()
def block(ctx: ToolContext, seconds: float = 60.0) -> str:
    """Hold a worker thread for `seconds`, whatever happens to the call."""
    time.sleep(seconds)
    return f"slept {seconds:g} s"


@server.tool()
def patient(ctx: ToolContext, seconds: float = 60.0) -> str:
    """Hold a worker thread for `seconds`, or until the call is cancelled."""
    wait = getattr(ctx, "wait_cancelled", None)
    if wait is None:  # a server without cooperative cancellation: as `block`
        time.sleep(seconds)
    else:
        wait(seconds)
    return f"waited {seconds:g} s"


def call_body(tool: str, seconds: float, request_id: int) -> bytes:
    return tools_call_body(tool, {"seconds": seconds}, request_id)


def _request(connection: h11.Connection, port: int, tool: str, body: bytes) -> bytes:
    headers = tools_call_headers(port, tool, body)
    out = connection.send(h11.Request(method="POST", target="/mcp", headers=headers)) or b""
    out += connection.send(h11.Data(data=body)) or b""
    return out + (connection.send(h11.EndOfMessage()) or b"")


async def call(port: int, tool: str, seconds: float, *, hang_up_after: float) -> tuple[str, float]:
    """One call: its HTTP status ("cut off" if it was not answered within
    `hang_up_after`, then hung up), and how long it took."""
    started = time.monotonic()
    connection = h11.Connection(h11.CLIENT)
    request = _request(connection, port, tool, call_body(tool, seconds, 1))
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(request)
            with trio.move_on_after(hang_up_after):
                while True:
                    event = connection.next_event()
                    if event is h11.NEED_DATA:
                        connection.receive_data(await stream.receive_some(65536))
                    elif isinstance(event, h11.Response):
                        return str(event.status_code), time.monotonic() - started
        return "cut off", time.monotonic() - started
    except (OSError, trio.BrokenResourceError, h11.ProtocolError) as error:
        return type(error).__name__, time.monotonic() - started


def threads_of(pid: int) -> int:
    """The OS threads of `pid` (`Threads:` in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise RuntimeError(f"no Threads: line for {pid}")


async def flood(pid: int, port: int, options: argparse.Namespace) -> dict[str, Any]:
    statuses: collections.Counter[str] = collections.Counter()
    samples = [threads_of(pid)]
    baseline = samples[0]
    started = time.monotonic()
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:

            async def sample() -> None:
                while True:
                    samples.append(threads_of(pid))
                    await trio.sleep(SAMPLE_SECONDS)

            nursery.start_soon(sample)
            limiter = trio.CapacityLimiter(options.concurrency)

            async def one() -> None:
                async with limiter:
                    status, _ = await call(
                        port, options.tool, 60.0, hang_up_after=options.cut_after
                    )
                    statuses[status] += 1

            async with trio.open_nursery() as calls:
                for _ in range(options.calls):
                    calls.start_soon(one)
            flood_seconds = time.monotonic() - started
            await trio.sleep(0.5)  # the server hears of the last hang-ups
            after = threads_of(pid)
            fresh_status, fresh_seconds = await call(
                port, "block", 0.01, hang_up_after=options.fresh_timeout
            )
            nursery.cancel_scope.cancel()
    return {
        "kind": options.kind,
        "tool": options.tool,
        "calls": options.calls,
        "statuses": dict(statuses),
        "flood_seconds": round(flood_seconds, 1),
        "threads_before": baseline,
        "threads_peak": max(samples),
        "threads_after": after,
        "fresh_status": fresh_status,
        "fresh_seconds": round(fresh_seconds, 3),
    }


def serve_asyncio() -> None:
    """The ASGI app of `server` under uvicorn (asyncio) on a free loopback port."""
    import asyncio  # noqa: PLC0415
    import socket  # noqa: PLC0415

    import uvicorn  # noqa: PLC0415

    from mcp_tasks.asgi import asgi_app  # noqa: PLC0415

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = uvicorn.Config(asgi_app(server), lifespan="on", log_level="warning")
    served = uvicorn.Server(config)

    async def main() -> None:
        task = asyncio.create_task(served.serve([listener]))
        while not (served.started or task.done()):
            await asyncio.sleep(0.01)
        print(f"serving tool-threads 1.0.0 on http://127.0.0.1:{port}/mcp", file=sys.stderr)
        sys.stderr.flush()
        await task

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=("builtin", "asyncio"), default="builtin")
    parser.add_argument("--tool", choices=("block", "patient"), default="block")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--cut-after", type=float, default=0.3)
    parser.add_argument("--fresh-timeout", type=float, default=30.0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--serve-asyncio", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_asyncio:
        serve_asyncio()
        return
    if not 0 < options.calls <= 10_000 or not 0 < options.concurrency <= 500:
        parser.error("--calls must be in 1..10000 and --concurrency in 1..500")
    if options.kind == "builtin":
        here = str(Path(__file__).resolve())
        command = cli_command("serve", here, "--http", "127.0.0.1:0", "--loop", "trio")
    else:
        command = [sys.executable, str(Path(__file__).resolve()), "--serve-asyncio"]
    with started_server(command, {}, cpu=None) as process:
        port = int(re.sub(r".*:(\d+)/mcp$", r"\1", process.url))
        figures = trio.run(flood, process.pid, port, options)
    if options.json:
        print(json.dumps(figures))
        return
    answers = ", ".join(f"{count} x {status}" for status, count in figures["statuses"].items())
    rows = [
        ["kind", "calls", "answers", "threads before/peak/after", "fresh block(0.01)"],
        [
            f"{figures['kind']} ({figures['tool']})",
            str(figures["calls"]),
            answers,
            f"{figures['threads_before']}/{figures['threads_peak']}/{figures['threads_after']}",
            f"{figures['fresh_status']} in {figures['fresh_seconds']:.3f} s",
        ],
    ]
    print_rows(rows)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
