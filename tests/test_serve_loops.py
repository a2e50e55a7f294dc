"""`mcp-tasks serve --loop asyncio|trio`: the example server and tools written for one loop,
served as real processes over stdio and HTTP on each loop.

A tool that awaits `asyncio.sleep` works on asyncio (the default), one that awaits
`trio.sleep` on trio; on the other loop each fails (-32603) and the log names the tool and
the fix, once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from runtime.helpers import request
from schema_check import check_reply
from test_cli import JOBS, Child, cli, spawn

from mcp_tasks import TASKS_EXTENSION

TOOLS = f"""
import asyncio

import trio

from mcp_tasks import ToolContext
from mcp_tasks.cli import load_server

server = load_server({str(JOBS)!r})


@server.tool()
async def asyncio_nap(ctx: ToolContext) -> str:
    \"\"\"Written for asyncio, as any tool on httpx's asyncio side or an asyncio driver.\"\"\"
    await asyncio.sleep(0.001)
    return "slept on asyncio"


@server.tool()
async def trio_nap(ctx: ToolContext) -> str:
    \"\"\"Written for trio.\"\"\"
    await trio.sleep(0.001)
    return "slept on trio"
"""
TASKS = {"extensions": {TASKS_EXTENSION: {}}}
LOOPS = ["asyncio", "trio"]
NATIVE = {"asyncio": "asyncio_nap", "trio": "trio_nap"}
OTHER = {"asyncio": "trio_nap", "trio": "asyncio_nap"}


class Session:
    """A served process and how to send it a request (stdio lines, or HTTP POSTs)."""

    def __init__(self, child: Child, url: str | None) -> None:
        self.child = child
        self.url = url

    async def call(self, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if self.url is None:
            return await self.child.exchange(method, params, **kw)
        body = request(method, params, **kw)
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": method,
        }
        name = params.get("name") or params.get("taskId")
        if name is not None:
            headers["mcp-name"] = name
        post = urllib.request.Request(self.url, data=body, headers=headers)

        def send() -> bytes:
            try:
                with urllib.request.urlopen(post) as answer:
                    data: bytes = answer.read()
                    return data
            except urllib.error.HTTPError as refused:  # a JSON-RPC error with its status
                data = refused.read()
                return data

        with trio.fail_after(20):
            reply = await trio.to_thread.run_sync(send)
        check_reply(method, reply)
        answer: dict[str, Any] = json.loads(reply)
        return answer


@asynccontextmanager
async def served(tmp_path: Path, loop: str, transport: str) -> AsyncIterator[Session]:
    (tmp_path / "loop_tools.py").write_text(TOOLS)
    target = str(tmp_path / "loop_tools.py")
    where = ["--stdio"] if transport == "stdio" else ["--http", "127.0.0.1:0"]
    async with spawn(*cli("serve", target, "--loop", loop, *where)) as child:
        if transport == "stdio":
            await child.stderr_line("serving jobs 0.1.0 on stdio")
            yield Session(child, None)
        else:
            found = await child.stderr_line(
                r"serving jobs 0\.1\.0 on (http://127\.0\.0\.1:\d+/mcp)"
            )
            yield Session(child, found.group(1))


async def finish(session: Session) -> str:
    """Stop the server with SIGTERM; it exits 0. All it wrote on stderr."""
    session.child.process.send_signal(signal.SIGTERM)
    code, rest, errors = await session.child.finish()
    assert code == 0 and rest == "", errors
    return errors


def text_of(reply: dict[str, Any]) -> str:
    text: str = reply["result"]["content"][0]["text"]
    return text


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("loop", LOOPS)
async def test_the_example_serves_calls_and_tasks_on_either_loop(
    tmp_path: Path, loop: str, transport: str
) -> None:
    async with served(tmp_path, loop, transport) as session:
        greeted = await session.call("tools/call", {"name": "greet", "arguments": {"name": loop}})
        assert text_of(greeted) == f"Hello, {loop}!"
        params = {"name": "slow_compute", "arguments": {"seconds": 0.05}}
        created = await session.call("tools/call", params, caps=TASKS)
        assert created["result"]["resultType"] == "task"
        task_id = created["result"]["taskId"]
        with trio.fail_after(20):
            while True:
                got = await session.call("tasks/get", {"taskId": task_id}, caps=TASKS)
                if got["result"]["status"] != "working":
                    break
                await trio.sleep(0.02)
        assert got["result"]["status"] == "completed", got
        errors = await finish(session)
    assert "Traceback" not in errors


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("loop", LOOPS)
async def test_a_tool_runs_on_its_loop_and_on_the_other_the_log_names_it_and_the_fix(
    tmp_path: Path, loop: str, transport: str
) -> None:
    native, other = NATIVE[loop], OTHER[loop]
    async with served(tmp_path, loop, transport) as session:
        slept = await session.call("tools/call", {"name": native, "arguments": {}})
        assert text_of(slept) == f"slept on {loop}"
        for _ in range(2):
            failed = await session.call("tools/call", {"name": other, "arguments": {}})
            assert failed["error"]["code"] == -32603, failed
        written_for = "trio" if loop == "asyncio" else "asyncio"
        await session.child.stderr_line(
            rf"WARNING.*tool '{other}' awaited {written_for}, but this server runs on {loop}"
            rf".*serve it with --loop {written_for}.*write it with anyio"
        )
        errors = await finish(session)
    assert errors.count(f"tool '{other}' awaited") == 1  # once per tool
    assert f"tool '{native}' awaited" not in errors


@pytest.mark.parametrize("loop", LOOPS)
def test_stdio_reads_and_writes_regular_files_on_either_loop(tmp_path: Path, loop: str) -> None:
    """`serve --stdio < requests.jsonl > replies.jsonl`: files, which no loop can wait on."""
    requests = tmp_path / "requests.jsonl"
    calls = [request("tools/call", {"name": "greet", "arguments": {"name": str(n)}}, caps={})
             for n in range(3)]  # fmt: skip
    requests.write_bytes(b"\n".join(calls) + b"\n")
    replies = tmp_path / "replies.jsonl"
    with requests.open("rb") as stdin, replies.open("wb") as stdout:
        command = cli("serve", str(JOBS), "--stdio", "--loop", loop)
        done = subprocess.run(command, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                              timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    texts = sorted(text_of(json.loads(line)) for line in replies.read_bytes().splitlines())
    assert texts == ["Hello, 0!", "Hello, 1!", "Hello, 2!"]
