"""What `soak/server.py`, `soak/load.py` and `soak/soak.py` share: the expected results,
the server's settings (environment variables), starting the server process, reading a
process's RSS and descriptors from /proc, pinning, percentiles.

Not a script: the three files import it (each puts this folder first on sys.path, as
running a script or `mcp-tasks serve soak/server.py` does)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SERVER_FILE = HERE / "server.py"

MAX_TASKS_ENV = "SOAK_MAX_TASKS"
"""The server's `TaskOptions.max_tasks` (default 1024, the library's default)."""
TTL_ENV = "SOAK_TTL_MS"
"""The server's `TaskOptions.ttl_ms` (default 3,600,000: nothing expires during a load run)."""
POLL_ENV = "SOAK_POLL_MS"
"""The server's `TaskOptions.poll_interval_ms`, the poll interval it advises (default 1000)."""
SAMPLES_ENV = "SOAK_SAMPLES"
"""When set (`python soak/server.py` only): the file the monitor appends its samples to."""
SAMPLE_EVERY_ENV = "SOAK_SAMPLE_SECONDS"
"""How often the monitor samples (default 1 s)."""

SERVER_LIFETIME_SECONDS = 3600.0  # a server left behind stops by itself
START_TIMEOUT_SECONDS = 30.0
ANSWER_FACTOR = 7
"""The `ask` tool's questions are answered with `n * ANSWER_FACTOR`."""
_SERVING = re.compile(r"serving .* on (http://\S+)")


def expected_text(label: str, n: int, answer: int | None = None) -> str:
    """The text a task of `label` and `n` (answered `answer`, for `ask`) completes with: a
    digest of its arguments, so a result mixed up with another task's is caught."""
    digest = hashlib.sha256(f"{label}|{n}|{answer}".encode()).hexdigest()[:16]
    return f"{label}:{digest}"


def percentile(sorted_values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of already sorted values (None for none)."""
    if not sorted_values:
        return None
    rank = min(len(sorted_values) - 1, max(0, int(len(sorted_values) * fraction)))
    return sorted_values[rank]


def pin(cpu: int, pid: int = 0) -> None:
    """Run `pid` (0: this process) on core `cpu`, when the machine has two cores or more."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, {cpu})


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of `pid` in KiB, from /proc/PID/status."""
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0])
    return found["VmRSS"], found["VmHWM"]


def open_fds(pid: int) -> int:
    """How many file descriptors `pid` has open (entries of /proc/PID/fd)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid: int) -> float:
    """User and system CPU time `pid` has used so far (from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """User and system CPU time of this process's children that have been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    url: str
    log: IO[str]

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 20) -> str:
        self.log.seek(0)
        return "".join(self.log.readlines()[-lines:])


@contextlib.contextmanager
def started_server(
    command: Sequence[str], env: Mapping[str, str], *, cpu: int | None = 0
) -> Iterator[ServerProcess]:
    """Start the server `command` (its stderr to a temporary log), wait for its
    `serving NAME VERSION on URL` line, pin it to `cpu`; SIGTERM it on the way out."""
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env={**os.environ, **env},
            cwd=ROOT,
        )
        try:
            url = _wait_for_url(process, log)
            if cpu is not None:
                pin(cpu, process.pid)
            yield ServerProcess(process, url, log)
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def _wait_for_url(process: subprocess.Popen[bytes], log: IO[str]) -> str:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        log.seek(0)
        text = log.read()
        found = _SERVING.search(text)
        if found:
            return found.group(1)
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}) before serving:\n{text}")
        time.sleep(0.05)
    raise RuntimeError("the server did not say where it serves in time")


def port_in_log(process: subprocess.Popen[bytes], log: IO[Any], pattern: re.Pattern[str]) -> int:
    """The port `pattern`'s first group finds in the server's `log`, once it says it serves
    (the server's exit, or 30 s, end the wait with a RuntimeError)."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        log.seek(0)
        found = pattern.search(log.read())
        if found:
            return int(found.group(1))
        if process.poll() is not None:
            raise RuntimeError("the server exited before it served")
        time.sleep(0.05)
    raise RuntimeError(f"the server did not start within {START_TIMEOUT_SECONDS:g} s")


def tools_call_body(tool: str, arguments: Mapping[str, Any], request_id: int) -> bytes:
    """A 2026-07-28 `tools/call` of `tool` (a client with no capabilities), encoded."""
    params = {
        "name": tool,
        "arguments": dict(arguments),
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message).encode()


def tools_call_headers(port: int, tool: str, body: bytes) -> list[tuple[str, str]]:
    """The HTTP headers of that call's POST to 127.0.0.1:`port`."""
    return [
        ("host", f"127.0.0.1:{port}"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("content-length", str(len(body))),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ]


def cli_command(*args: str) -> list[str]:
    """`mcp-tasks ARGS` with this interpreter (the console script next to it if installed)."""
    script = Path(sys.executable).parent / "mcp-tasks"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-c", "from mcp_tasks.cli import main; main()", *args]


def print_rows(rows: Sequence[Sequence[str]]) -> None:
    """A plain table: the first row is the head."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if n == 0:
            print("  ".join("-" * width for width in widths))


def ms(value: Any) -> str:
    return "-" if value is None else f"{value:.2f} ms"
