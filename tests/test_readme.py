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


def first_command(section: str) -> str:
    """The first command of a README section."""
    text = README.read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", body, re.DOTALL)[0]


def test_the_test_command_installs_what_the_suite_needs_and_ci_runs_it_as_written() -> None:
    """`tests/install && .venv/bin/pytest`: a fresh clone runs the interop tests rather than
    skipping them; .ci/run installs with the same script and runs exactly that line."""
    command = first_command("Run the tests")
    assert command == "tests/install && .venv/bin/pytest"
    install = ROOT / "tests" / "install"
    assert os.access(install, os.X_OK)
    script = install.read_text()
    for part in (
        "pip install -q --disable-pip-version-check -e '.[dev]'",
        "benchmarks/peers/install",
        "tests/interop/npm/install",
        "tests/interop/legacy_tasks/install",
        "redis-server",
        "nginx-light",
    ):
        assert part in script, part
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in ci
    assert "tests/install" in ci[: ci.index(command)]  # installed (and timed) before the suite
    # No install of its own beside the script's.
    others = [
        line for line in ci if re.search(r"pip install|(peers|npm|legacy_tasks)/install", line)
    ]
    assert others == [], others


def test_the_install_instructions_say_checkout_or_wheel_until_published() -> None:
    """The package is not on PyPI yet: the README and the docs' shell commands install from
    a checkout or a built wheel, never `pip install mcp-tasks`."""
    text = README.read_text()
    assert first_command("Install") == "python3 -m venv .venv && .venv/bin/pip install -e ."
    assert "python3 -m build" in text and "dist/mcp_tasks-*.whl" in text
    assert "not on PyPI yet" in text
    index = (ROOT / "docs" / "index.md").read_text()
    assert "not on PyPI yet" in index and "dist/mcp_tasks-*.whl" in index
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    blocks = [
        (page.name, block)
        for page in pages
        for block in re.findall(r"```(?:sh|bash|console)\n(.*?)```", page.read_text(), re.DOTALL)
    ]
    assert len(blocks) > 10  # the shell blocks were found
    from_the_index = [
        name for name, block in blocks if re.search(r"pip install ['\"]?mcp-tasks", block)
    ]
    assert from_the_index == []
