"""The README's "Check that it answers" commands work as written: the example served on a
free loopback port, each command run through the shell with that port (and this
interpreter's `mcp-tasks`), each prints the greeting."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from redis_server import free_port

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def check_commands() -> list[str]:
    text = README.read_text()
    section = text.split("## Check that it answers", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.DOTALL)


def test_the_readme_has_the_two_check_commands() -> None:
    commands = check_commands()
    assert len(commands) == 2
    assert commands[0].startswith(".venv/bin/mcp-tasks call http://127.0.0.1:8000/mcp")
    assert commands[1].startswith("curl ")


async def test_each_check_command_gets_the_greeting() -> None:
    if shutil.which("curl") is None:
        if os.environ.get("CI"):
            pytest.fail("curl is not installed: .ci/run installs it")
        pytest.skip("curl is not installed (Debian/Ubuntu: sudo apt-get install curl)")
    port = free_port()
    script = Path(sys.executable).parent / "mcp-tasks"
    serve = [str(script), "serve", "examples/jobs.py", "--http", f"127.0.0.1:{port}"]
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            lambda task_status: trio.run_process(
                serve, cwd=ROOT, check=False, stderr=subprocess.PIPE, task_status=task_status
            )
        )
        assert process.stderr is not None
        seen = b""
        with trio.fail_after(20):
            while b"serving jobs" not in seen:
                data = await process.stderr.receive_some()
                assert data, seen.decode()
                seen += data
        for written in check_commands():
            command = written.replace("8000", str(port)).replace(".venv/bin/mcp-tasks", str(script))
            with trio.fail_after(20):
                done = await trio.run_process(
                    ["bash", "-c", command], capture_stdout=True, check=False, cwd=ROOT
                )
            assert done.returncode == 0
            assert "Hello, you!" in done.stdout.decode(), done.stdout
        process.terminate()
