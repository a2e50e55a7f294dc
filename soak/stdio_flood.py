"""stdio flood: a client that writes requests as fast as the server takes them and never
reads stdout. How big does the server get?

What is measured
----------------
A server process, `mcp-tasks serve examples/jobs.py --stdio`, pinned to core 0 on a machine
with two cores or more. This process, pinned to core 1, writes `tools/call greet` requests
whose name is `--name-bytes` long (so each reply is about as long: "Hello, NAME!") into the
server's stdin from one thread, as fast as the pipe accepts them, and never reads the
server's stdout. Every second it samples the server's VmRSS from /proc/PID/status and how
many requests the server has taken so far. The run ends after `--seconds` (at most 60), or
as soon as the server's RSS passes `--max-rss-mib`, so that a server without back-pressure
cannot take the machine down.

Then the client starts reading: a second thread reads stdout to its end, the writer finishes
the request it was blocked on and closes stdin, and the script checks that every request the
server took got exactly one reply (nothing lost), and that the server exits 0.

    python soak/stdio_flood.py [--seconds 30] [--name-bytes 4000] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `_common`

import argparse
import json
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from _common import ROOT, cli_command, pin, print_rows, rss_kib

MAX_SECONDS = 60.0
REPLY_TIMEOUT_SECONDS = 120.0


@dataclass
class Flood:
    """The writer thread's side: how many requests the server's stdin has taken."""

    stdin: IO[bytes]
    name_bytes: int
    taken: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def run(self) -> None:
        name = "x" * self.name_bytes
        try:
            while not self.stop.is_set():
                self.stdin.write(request_line(self.taken, name))
                self.stdin.flush()  # blocks once the pipe is full and the server does not read
                self.taken += 1
            self.stdin.close()
        except BaseException as error:  # reported by the main thread
            self.error = error


def request_line(request_id: int, name: str) -> bytes:
    params = {
        "name": "greet",
        "arguments": {"name": name},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message).encode() + b"\n"


def read_replies(stdout: IO[bytes], ids: list[int]) -> None:
    for raw in stdout:
        ids.append(json.loads(raw)["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--name-bytes", type=int, default=4000)
    parser.add_argument("--max-rss-mib", type=float, default=2048.0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args()
    seconds = min(options.seconds, MAX_SECONDS)
    pin(1)
    command = cli_command("serve", "examples/jobs.py", "--stdio")
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
        )
        assert process.stdin is not None and process.stdout is not None
        pin(0, process.pid)
        try:
            figures = measure(process, options.name_bytes, seconds, options.max_rss_mib)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    report(figures, options.json)


def measure(
    process: subprocess.Popen[bytes], name_bytes: int, seconds: float, max_rss_mib: float
) -> dict[str, Any]:
    assert process.stdin is not None and process.stdout is not None
    flood = Flood(process.stdin, name_bytes)
    writer = threading.Thread(target=flood.run, daemon=True)
    started = time.monotonic()
    writer.start()
    samples: list[dict[str, float]] = []
    while (elapsed := time.monotonic() - started) < seconds:
        time.sleep(1.0)
        rss, _ = rss_kib(process.pid)
        samples.append({"seconds": round(elapsed + 1), "rss_mib": rss / 1024, "taken": flood.taken})
        if rss / 1024 > max_rss_mib:
            break
    peak_kib = rss_kib(process.pid)[1]
    flood.stop.set()  # the client starts reading: everything taken must be answered
    ids: list[int] = []
    reader = threading.Thread(target=read_replies, args=(process.stdout, ids), daemon=True)
    reader.start()
    writer.join(REPLY_TIMEOUT_SECONDS)
    reader.join(REPLY_TIMEOUT_SECONDS)
    exit_code = process.wait(REPLY_TIMEOUT_SECONDS)
    return {
        "name_bytes": name_bytes,
        "samples": samples,
        "peak_rss_mib": peak_kib / 1024,
        "requests_taken": flood.taken,
        "replies": len(ids),
        "every_request_answered_once": sorted(ids) == list(range(flood.taken)),
        "writer_error": None if flood.error is None else repr(flood.error),
        "exit_code": exit_code,
    }


def report(figures: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(figures, indent=2))
        return
    rows = [["seconds", "server RSS", "requests taken"]]
    for sample in figures["samples"]:
        rows.append(
            [f"{sample['seconds']:.0f}", f"{sample['rss_mib']:.0f} MiB", f"{sample['taken']:,}"]
        )
    print_rows(rows)
    print(
        f"\npeak RSS {figures['peak_rss_mib']:.0f} MiB; {figures['requests_taken']:,} requests "
        f"taken, {figures['replies']:,} replies read once the client read; every request "
        f"answered once: {figures['every_request_answered_once']}; "
        f"exit code {figures['exit_code']}"
    )


if __name__ == "__main__":
    main()
