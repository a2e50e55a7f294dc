"""A client waits through a server restart (issue 30, point 5): `mcp-tasks call` runs a task
on a real `mcp-tasks serve` process with a durable store; the server is killed (SIGKILL)
while the task runs and started again on the same port and store; the call shows that it is
trying again, and prints the result of the task the new process ran again (a resumable
tool), exit 0. On SQLite and on Redis."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from redis_server import free_port

from .served import ROOT, TIMEOUT, Served, serving


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/tasks.db"
    else:
        redis_url = request.getfixturevalue("redis_url")
        yield f"{redis_url}?prefix=r{secrets.token_hex(4)}"


async def test_a_call_waits_through_a_restart_and_prints_the_result(
    store_url: str, tmp_path: Path
) -> None:
    port = free_port()
    options = ("--http", f"127.0.0.1:{port}", "--lease-seconds", "1")
    runs = tmp_path / "runs"
    url = f"http://127.0.0.1:{port}/mcp"
    command = [sys.executable, "-m", "mcp_tasks.cli", "call", url, "resumable_counter"]
    async with serving(store_url, options=options) as first:
        call = await trio.lowlevel.open_process(
            [*command, f"path={runs}"],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        caller = Served(call)
        assert call.stdout is not None
        stdout = call.stdout
        try:
            found = await caller.stderr_line(r"task (tsk_\S+) working .*first run: blocking")
            await first.kill()
            await caller.stderr_line(
                r"tasks/get: the (server cannot be reached|connection to the server broke)"
                r"; trying again in \d+\.\d s"
            )
            async with serving(store_url, options=options):
                with trio.fail_after(TIMEOUT):
                    printed = b""
                    while chunk := await stdout.receive_some():
                        printed += chunk
                    code = await call.wait()
                    await caller.drain()
        finally:
            if call.returncode is None:
                call.kill()
    shown = caller.err.decode()
    assert (code, printed) == (0, b"ran 2 times\n"), shown
    assert f"task {found.group(1)} completed" in shown
    assert len(runs.read_text().splitlines()) == 2  # the second process ran it again
