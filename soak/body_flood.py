"""Body flood: many clients at once, each sending a large body to a tool answered in place
(no task), whose handler holds the request for a while. How big does the server get?

What is measured
----------------
A server process, `mcp-tasks serve soak/body_flood.py --http 127.0.0.1:0`, serving the one
tool `hold` of this file (it sleeps `seconds`, then answers with the size of what it was
sent). This script opens `--clients` connections (default 200) at once; each POSTs a
`tools/call hold` whose arguments carry `--body-mib` MiB (default 3.8, under the 4 MiB body
limit), then reads its answer. Every 0.2 s it samples the server's VmRSS from
/proc/PID/status; at the end it reports the peak (VmHWM), how many calls were answered
200, how many 503 (with `Retry-After`: the server had no room for their bodies), and
whether anything else happened (there must be nothing else). Loopback only; the run is
bounded by `--hold-seconds` and a 120 s deadline.

    python soak/body_flood.py [--clients 200] [--body-mib 3.8] [--hold-seconds 3] [--json]
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
import subprocess
import tempfile
import time
from typing import Any

import anyio
import h11
import trio
from _common import (
    ROOT,
    cli_command,
    port_in_log,
    print_rows,
    rss_kib,
    tools_call_body,
    tools_call_headers,
)

from mcp_tasks import CallToolResult, Server, ToolContext, ToolOutcome

DEADLINE_SECONDS = 120.0
_SERVING = re.compile(r"serving .* on http://127\.0\.0\.1:(\d+)/mcp")

server = Server("body-flood", "1.0.0")


@server.tool()
async def hold(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    """Hold the request (and so its body) for `seconds`, then say how much came."""
    await anyio.sleep(float(args.get("seconds", 3)))
    return CallToolResult.text(str(len(args.get("pad", ""))))


def call_body(pad_bytes: int, seconds: float, request_id: int) -> bytes:
    return tools_call_body("hold", {"seconds": seconds, "pad": "x" * pad_bytes}, request_id)


async def one_call(port: int, body: bytes, statuses: collections.Counter[str]) -> None:
    connection = h11.Connection(h11.CLIENT)
    headers = tools_call_headers(port, "hold", body)
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            out = connection.send(h11.Request(method="POST", target="/mcp", headers=headers))
            out = (out or b"") + (connection.send(h11.Data(data=body)) or b"")
            out += connection.send(h11.EndOfMessage()) or b""
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_send_quietly, stream, out)
                status = await _status(stream, connection)
                nursery.cancel_scope.cancel()  # refused: what is left unsent stays so
        statuses[str(status)] += 1
    except (OSError, trio.BrokenResourceError, h11.ProtocolError) as error:
        statuses[type(error).__name__] += 1


async def _send_quietly(stream: trio.SocketStream, data: bytes) -> None:
    # The server may answer (503) and close before it took it all.
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(data)


async def _status(stream: trio.SocketStream, connection: h11.Connection) -> int:
    status = 0
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.receive_some(65536))
            continue
        if isinstance(event, h11.Response):
            status = event.status_code
        if isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return status


async def flood(port: int, pid: int, clients: int, body: bytes) -> dict[str, Any]:
    statuses: collections.Counter[str] = collections.Counter()
    samples: list[float] = []
    started = time.monotonic()
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            for _ in range(clients):
                nursery.start_soon(one_call, port, body, statuses)

            async def sample() -> None:
                while True:
                    samples.append(rss_kib(pid)[0] / 1024)
                    await trio.sleep(0.2)

            sampler = trio.CancelScope()

            async def sampling() -> None:
                with sampler:
                    await sample()

            nursery.start_soon(sampling)
            while sum(statuses.values()) < clients:
                await trio.sleep(0.05)
            sampler.cancel()
    return {
        "clients": clients,
        "body_mib": round(len(body) / 2**20, 2),
        "seconds": round(time.monotonic() - started, 1),
        "peak_rss_mib": round(rss_kib(pid)[1] / 1024, 1),
        "rss_mib_samples_max": round(max(samples, default=0), 1),
        "statuses": dict(statuses),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--body-mib", type=float, default=3.8)
    parser.add_argument("--hold-seconds", type=float, default=3.0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args()
    body = call_body(int(options.body_mib * 2**20), options.hold_seconds, 1)
    command = cli_command("serve", str(Path(__file__).resolve()), "--http", "127.0.0.1:0")
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=log)
        try:
            port = port_in_log(process, log, _SERVING)
            figures = trio.run(flood, port, process.pid, options.clients, body)
        finally:
            process.terminate()
            process.wait(30)
    if options.json:
        print(json.dumps(figures))
        return
    rows = [["clients", "body", "peak RSS", "answers"]]
    answers = ", ".join(f"{count} x {status}" for status, count in figures["statuses"].items())
    rows.append(
        [
            str(figures["clients"]),
            f"{figures['body_mib']} MiB",
            f"{figures['peak_rss_mib']} MiB",
            answers,
        ]
    )
    print_rows(rows)


if __name__ == "__main__":
    main()
