"""The servers of the ASGI tests, each a real process on a free 127.0.0.1 port.

`KINDS` names the ways `served.py` is served; `serving(kind)` starts one, waits for the line
that says where it listens (never a sleep), and stops it with SIGTERM (SIGKILL if it has not
ended within `STOP_SECONDS`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
START_SECONDS = 30.0
STOP_SECONDS = 15.0

COMMANDS: dict[str, list[str]] = {
    "builtin": [sys.executable, str(HERE / "served.py")],
    "uvicorn": [
        sys.executable, "-m", "uvicorn", "--app-dir", str(HERE), "served:app",
        "--host", "127.0.0.1", "--port", "0", "--timeout-graceful-shutdown", "3",
    ],
    "uvicorn-h11": [
        sys.executable, "-m", "uvicorn", "--app-dir", str(HERE), "served:app", "--http", "h11",
        "--host", "127.0.0.1", "--port", "0", "--timeout-graceful-shutdown", "3",
    ],
    "uvicorn-httptools": [
        sys.executable, "-m", "uvicorn", "--app-dir", str(HERE), "served:app",
        "--http", "httptools",
        "--host", "127.0.0.1", "--port", "0", "--timeout-graceful-shutdown", "3",
    ],
    "hypercorn-trio": [
        sys.executable, "-m", "hypercorn", "--worker-class", "trio",
        "--bind", "127.0.0.1:0", "--graceful-timeout", "3", "served:app",
    ],
    "starlette-mount": [
        sys.executable, "-m", "uvicorn", "--app-dir", str(HERE), "served:mounted",
        "--host", "127.0.0.1", "--port", "0", "--timeout-graceful-shutdown", "3",
    ],
    "failing-builtin": [sys.executable, str(HERE / "served_failing.py"), "http"],
    "failing-uvicorn": [
        sys.executable, "-m", "uvicorn", "--app-dir", str(HERE), "served_failing:app",
        "--host", "127.0.0.1", "--port", "0", "--timeout-graceful-shutdown", "3",
    ],
}  # fmt: skip
ENDPOINTS = {"starlette-mount": "/api/mcp"}
ASGI_KINDS = ["uvicorn", "hypercorn-trio", "starlette-mount"]
_LISTENING = re.compile(r"(?:Uvicorn running on|Running on|serving on) http://127\.0\.0\.1:(\d+)")


@dataclass
class Served:
    """A server process: its port and endpoint, and every line it wrote to stderr."""

    process: subprocess.Popen[str]
    port: int
    endpoint: str
    lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.endpoint}"

    def stop(self) -> int:
        """SIGTERM, and the exit code once it has ended (SIGKILL after STOP_SECONDS)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the server did not stop on SIGTERM: {self.log}") from None

    @property
    def log(self) -> str:
        return "".join(self.lines)


@contextmanager
def serving(kind: str, *, env: Mapping[str, str] | None = None) -> Iterator[Served]:
    """`served.py` served the `kind` way, in a process of its own."""
    environment = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    command = COMMANDS[kind]
    with subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=HERE,
        env=environment, start_new_session=True,
    ) as process:  # fmt: skip
        fresh: queue.Queue[str] = queue.Queue()
        lines: list[str] = []

        def drain() -> None:  # reads stderr to its end, so the server never blocks on it
            for line in process.stderr or ():
                lines.append(line)
                fresh.put(line)

        drainer = threading.Thread(target=drain, daemon=True)
        drainer.start()
        try:
            port = _port_in(fresh, lines)
            yield Served(process, port, ENDPOINTS.get(kind, "/mcp"), lines)
        finally:  # the whole group: a worker it spawned must not hold stderr open
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            drainer.join(STOP_SECONDS)


def _port_in(fresh: queue.Queue[str], lines: list[str]) -> int:
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            line = fresh.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"the server did not start: {''.join(lines)}") from None
        if found := _LISTENING.search(line):
            return int(found.group(1))
