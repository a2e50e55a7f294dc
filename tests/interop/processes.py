"""The processes of the interop tests: each side in its own, over loopback HTTP or stdio.

The peers (fastmcp 4.1.4 + fastmcp-tasks 4.1.4, `mcp` 2.3.0) run with the python of their
own virtual environment, benchmarks/.peers-venv, built by benchmarks/peers/install. Outside
CI a missing (or out of date) one skips the tests, saying how to build it; in CI (`CI` set)
it is a failure: `.ci/run` builds it before the tests. The npm peers (the TypeScript SDK's
client, the MCP Inspector) likewise, from tests/interop/npm/node_modules, built by
tests/interop/npm/install, run with the node (>= 22) it recorded.

Nothing here sleeps and hopes: a server is used once it printed where it listens, and every
wait on a process's output or exit has a deadline.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
import trio

from mcp_tasks.client import Client

ROOT = Path(__file__).resolve().parents[2]
PEER_SCRIPTS = Path(__file__).resolve().parent / "peers"
FIXTURE = Path(__file__).resolve().parent / "fixture.py"
PEERS_VENV = ROOT / "benchmarks" / ".peers-venv"
PEERS_PINS = [
    ROOT / "benchmarks" / "peers" / name for name in ("requirements.txt", "constraints.txt")
]
MCP_TASKS = str(Path(sys.executable).parent / "mcp-tasks")
NPM_PEERS = Path(__file__).resolve().parent / "npm"

START_SECONDS = 30.0  # a server prints where it listens within this
RUN_SECONDS = 120.0  # a peer script runs all its steps within this
STOP_SECONDS = 10.0
CLIENT_SECONDS = 60.0  # all a test does through one of our clients

Connect = Callable[..., AbstractAsyncContextManager[Client]]

INSTALL_HINT = (
    "the peers' virtual environment (benchmarks/.peers-venv: fastmcp, fastmcp-tasks and mcp, "
    "pinned) is missing or out of date: build it with benchmarks/peers/install (needs PyPI)"
)


def peers_python() -> str:
    """The peers' python; the test is skipped (failed in CI) when their venv is not built
    from today's pins."""
    return pinned_python(PEERS_VENV, PEERS_PINS, INSTALL_HINT)


def pinned_python(venv: Path, pins: list[Path], hint: str) -> str:
    """The python of `venv`; the test is skipped (failed in CI) with `hint` unless the venv
    was built from the `pins` as they are now (its `.installed` stamp holds their hash)."""
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = hashlib.sha256(b"".join(path.read_bytes() for path in pins)).hexdigest()
    built = stamp.read_text().split()[:1] if stamp.is_file() else []
    if not python.exists() or built != [wanted]:
        if os.environ.get("CI"):
            pytest.fail(hint)
        pytest.skip(hint)
    return str(python)


NPM_INSTALL_HINT = (
    "the npm peers (tests/interop/npm/node_modules: @modelcontextprotocol/client and "
    "@modelcontextprotocol/inspector, pinned) are missing or out of date: install them with "
    "tests/interop/npm/install (needs the npm registry; installs Node 22 when node is older)"
)


def npm_node() -> str:
    """The node the npm peers run with; the test is skipped (failed in CI) when they are not
    installed from today's package-lock.json."""
    modules = NPM_PEERS / "node_modules"
    stamp, node = modules / ".installed", modules / ".node"
    wanted = hashlib.sha256((NPM_PEERS / "package-lock.json").read_bytes()).hexdigest()
    built = stamp.read_text().split()[:1] if stamp.is_file() else []
    path = Path(node.read_text().strip()) if node.is_file() else None
    if path is None or not os.access(path, os.X_OK) or built != [wanted]:
        if os.environ.get("CI"):
            pytest.fail(NPM_INSTALL_HINT)
        pytest.skip(NPM_INSTALL_HINT)
    return str(path)


def run_node(argv: Sequence[str], timeout: float = RUN_SECONDS) -> subprocess.CompletedProcess[str]:
    """Run `node argv...` (an npm peer) to its end, cut off after `timeout`."""
    return run_to_end([npm_node(), *argv], timeout)


def run_to_end(
    argv: Sequence[str], timeout: float, *, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `argv` to its end, with `stdin` as its input (none by default), its output kept;
    cut off after `timeout`."""
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
    )


def peer_script(name: str) -> str:
    return str(PEER_SCRIPTS / name)


def ours(*options: str) -> list[str]:
    """`mcp-tasks serve` on the interop fixture, advising a 0.1 s poll interval (so a task's
    end is seen soon); `options` add `--stdio` or `--http`, `--accept-missing-task-name`."""
    return [MCP_TASKS, "serve", str(FIXTURE), "--poll-interval", "0.1", *options]


class Output:
    """A process's stdout and stderr, read line by line by two threads; every line kept."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._queues: dict[str, queue.Queue[str | None]] = {}
        self._readers: list[threading.Thread] = []
        for name, stream in (("stdout", process.stdout), ("stderr", process.stderr)):
            if stream is not None:
                self._queues[name] = queue.Queue()
                reader = threading.Thread(target=self._read, args=(name, stream), daemon=True)
                reader.start()
                self._readers.append(reader)

    def _read(self, name: str, stream: IO[str]) -> None:
        for line in stream:
            self._queues[name].put(line.rstrip("\n"))
        self._queues[name].put(None)

    def wait_for(self, stream: str, pattern: str, timeout: float = START_SECONDS) -> re.Match[str]:
        """The first new line of `stream` that `pattern` matches; fails at the deadline or
        when the stream ends first."""
        deadline = time.monotonic() + timeout
        lines = self._queues[stream]
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no {stream} line matching {pattern!r} in {timeout} s\n{self}")
            if line is None:
                lines.put(None)  # ended: so says every later wait
                pytest.fail(f"{stream} ended before a line matching {pattern!r}\n{self}")
            self.lines[stream].append(line)
            found = re.search(pattern, line)
            if found is not None:
                return found

    def join(self, timeout: float = STOP_SECONDS) -> None:
        """Wait for both readers to reach the end of their streams (the process exited)."""
        deadline = time.monotonic() + timeout
        for reader in self._readers:
            reader.join(max(0.0, deadline - time.monotonic()))

    def __str__(self) -> str:
        return "\n".join(f"[{name}] {line}" for name, lines in self.lines.items() for line in lines)


@contextmanager
def started(argv: Sequence[str]) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    """Run `argv`; on the way out stop it (SIGTERM, then SIGKILL after 10 s) if it still runs."""
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    output = Output(process)
    try:
        yield process, output
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_SECONDS)
        output.join()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def serving_ours(*options: str) -> Iterator[str]:
    """Our fixture over HTTP on a free loopback port; yields its URL."""
    with started(ours("--http", "127.0.0.1:0", "--log-level", "warning", *options)) as (_, out):
        yield out.wait_for("stderr", r"serving .* on (http://\S+)").group(1)


@contextmanager
def serving_peer(script: str) -> Iterator[str]:
    """A peer server script of peers/ over HTTP on a free loopback port; yields its URL."""
    with started([peers_python(), peer_script(script), "http"]) as (_, out):
        yield out.wait_for("stdout", r'^\{"ready": "(http://[^"]+)"\}').group(1)


class Steps(dict[str, dict[str, Any]]):
    """What a peer script reported, by step name (see peers/_lines.py); other lines too."""

    def __init__(self, stdout: str, stderr: str) -> None:
        super().__init__()
        self.others: list[dict[str, Any]] = []
        self.stderr = stderr
        for line in stdout.splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if "step" in record:
                self[record.pop("step")] = record
            else:
                self.others.append(record)

    def value(self, name: str) -> Any:
        """The step's value; fails, saying what it raised instead, when it did not succeed."""
        record = self.get(name)
        assert record is not None, f"no step {name!r}: got {list(self)}\n{self.stderr[-3000:]}"
        assert record["ok"], f"step {name!r} failed: {record['error']}"
        return record["value"]

    def error(self, name: str) -> dict[str, Any]:
        """The error the step raised; fails when it succeeded."""
        record = self.get(name)
        assert record is not None, f"no step {name!r}: got {list(self)}\n{self.stderr[-3000:]}"
        assert not record["ok"], f"step {name!r} succeeded: {record['value']}"
        error: dict[str, Any] = record["error"]
        return error


def run_peer(script: str, *args: str, timeout: float = RUN_SECONDS) -> Steps:
    """Run a peer client script of peers/ to its end; what it reported."""
    done = run_to_end([peers_python(), peer_script(script), *args], timeout)
    assert done.returncode == 0, f"{script} exited {done.returncode}\n{done.stderr[-3000:]}"
    return Steps(done.stdout, done.stderr)


def bounded(connect: Connect) -> Connect:
    """`connect` (e.g. a `connect_http` with its URL), with all that is done through the
    client it opens cut off after `CLIENT_SECONDS`."""

    @asynccontextmanager
    async def connect_bounded(**options: Any) -> AsyncIterator[Client]:
        with trio.fail_after(CLIENT_SECONDS):
            async with connect(**options) as client:
                yield client

    return connect_bounded
