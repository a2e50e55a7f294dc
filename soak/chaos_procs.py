"""The processes of a `soak/chaos.py` round: redis-server, `mcp-tasks serve` processes, and
reading what a store still holds.

Each process keeps its port and its command across kills, so clients reach it again at the
same URL once it is back: `Proc.start` launches it and waits until it serves (its `serving`
line on stderr, or a `PONG` from redis-server); `Proc.kill` is SIGKILL and a wait;
`Proc.stop` is SIGTERM, a bounded wait, then SIGKILL. Its stderr goes to a log file in the
round's directory, appended to across restarts.

redis-server runs with `appendonly yes` and `appendfsync always`: every write is in the
append-only file before Redis answers it, so a SIGKILL loses nothing it acknowledged (with
`everysec` a SIGKILL loses nothing either, unless a slow fsync had made Redis hold back a
write for up to 2 s; a power cut loses up to 1 s; with no persistence, everything).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import redis
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import POLL_ENV, ROOT, TTL_ENV, cli_command

START_SECONDS = 30.0
STOP_SECONDS = 10.0
SERVER_FILE = Path(__file__).resolve().parent / "chaos_server.py"
_SERVING = re.compile(rb"serving .* on (http://127\.0\.0\.1:\d+/\S*)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Proc:
    """One process of the round, started again after each kill with the same command."""

    def __init__(self, name: str, command: Sequence[str], log: Path, env: Mapping[str, str]):
        self.name = name
        self.command = list(command)
        self.log = log
        self.env = {**os.environ, **env}
        self.process: trio.Process | None = None

    async def start(self) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:
            self.process = await trio.lowlevel.open_process(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=self.env,
                cwd=ROOT,
            )
        with trio.fail_after(START_SECONDS):
            while not await self.ready(offset):
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited before serving:\n{self.tail()}")
                await trio.sleep(0.02)

    async def ready(self, offset: int) -> bool:
        with self.log.open("rb") as log:
            log.seek(offset)
            return _SERVING.search(log.read()) is not None

    async def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        with trio.fail_after(STOP_SECONDS):
            await self.process.wait()

    async def stop(self) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        with trio.move_on_after(STOP_SECONDS):
            await self.process.wait()
            return
        await self.kill()

    def tail(self, lines: int = 15) -> str:
        if not self.log.exists():
            return ""
        text = self.log.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(f"    {line}" for line in text)


class RedisProc(Proc):
    """redis-server on `port`, its append-only file in `folder`."""

    def __init__(self, port: int, folder: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        options = ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder)]
        options += ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]
        super().__init__("redis-server", [binary, *options], folder / "redis.log", {})
        self.port = port

    async def ready(self, offset: int) -> bool:
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        except OSError:
            return False
        async with stream:
            try:
                await stream.send_all(b"PING\r\n")
                with trio.move_on_after(1):
                    # A loading Redis answers -LOADING: not ready yet.
                    return (await stream.receive_some(16)).startswith(b"+PONG")
            except trio.BrokenResourceError:
                return False
        return False


def server_proc(
    name: str, port: int, store: str, folder: Path, *, ttl_ms: int, lease_seconds: float
) -> Proc:
    """`mcp-tasks serve soak/chaos_server.py` on 127.0.0.1:`port` with the store URL."""
    command = cli_command("serve", str(SERVER_FILE), "--http", f"127.0.0.1:{port}")
    command += ["--store", store, "--lease-seconds", str(lease_seconds)]
    env = {TTL_ENV: str(ttl_ms), POLL_ENV: "100"}
    return Proc(name, command, folder / f"{name.replace(' ', '-')}.log", env)


# --- what a store still holds ------------------------------------------------------------

_NOT_RECORDS = ("state_key", "signals")


def redis_leftover(port: int, prefix: str) -> list[str]:
    """The keys under `prefix` that hold something of a task (blocking: run in a thread)."""
    found = []
    with contextlib.closing(redis.Redis(host="127.0.0.1", port=port)) as client:
        for raw in client.scan_iter(f"{prefix}:*"):
            key = raw.decode()
            part = key.removeprefix(f"{prefix}:")
            if part in _NOT_RECORDS or part.startswith("used:"):
                continue
            if part == "bytes" and int(client.get(key) or 0) == 0:  # type: ignore[arg-type]
                continue
            found.append(f"key {key} ({client.type(key).decode()})")  # type: ignore[union-attr]
    return sorted(found)


def sqlite_leftover(path: Path) -> list[str]:
    """The rows of the tasks and leases tables (blocking: run in a thread)."""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        found = []
        for table in ("tasks", "leases"):
            (count,) = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
            if count:
                found.append(f"{count} rows in table {table}")
        return found
