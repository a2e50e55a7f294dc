"""Real `mcp-tasks serve` processes for the store tests: start one on a free loopback port
with a store URL, read the URL it serves on, kill it (SIGKILL) or stop it (SIGTERM); a
client for it, and polling `tasks/get` under a deadline.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path

import trio

from mcp_tasks import CallToolResult, ElicitParams, ElicitResult, TextContent
from mcp_tasks.client import Client, connect_http
from mcp_tasks.core import CompletedTask, DetailedTask

ROOT = Path(__file__).parent.parent.parent
FIXTURE = "tests/store/fixture_server.py"
SERVING = r"mcp-tasks: serving store-fixture 1\.0\.0 on (http://127\.0\.0\.1:\d+/mcp)"
ORPHANED = "stopped before the task finished"
TIMEOUT = 20  # seconds any one wait may take, at most


def serve_command(store_url: str, *options: str) -> list[str]:
    http = ["--http", "127.0.0.1:0"]
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", FIXTURE, *http]
    return [*command, "--store", store_url, *options]


class Served:
    """A server process and the URL it said it serves on; its stderr is read throughout
    (so the pipe never fills) into `err`."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stderr is not None
        self.process = process
        self.stderr = process.stderr
        self.err = bytearray()
        self.url = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    async def stderr_line(self, pattern: str) -> re.Match[str]:
        """Wait for a line on stderr that matches (reading it as it comes)."""
        with trio.fail_after(TIMEOUT):
            while True:
                for text in self.err.decode(errors="replace").splitlines():
                    if found := re.search(pattern, text):
                        return found
                data = await self.stderr.receive_some()
                assert data, f"stderr ended without {pattern!r}:\n{self.err.decode()}"
                self.err += data

    async def drain(self) -> None:
        while data := await self.stderr.receive_some():
            self.err += data

    async def kill(self) -> None:
        """SIGKILL, and wait until the process is gone."""
        self.process.kill()
        with trio.fail_after(TIMEOUT):
            await self.process.wait()

    async def stop(self) -> int:
        """SIGTERM (a graceful shutdown); the exit code."""
        self.process.send_signal(signal.SIGTERM)
        with trio.fail_after(TIMEOUT):
            return await self.process.wait()


@asynccontextmanager
async def serving(
    store_url: str, env: Mapping[str, str] | None = None, options: Sequence[str] = ()
) -> AsyncIterator[Served]:
    """`mcp-tasks serve` the fixture on a free port with the store at `store_url`; killed
    on the way out, whatever happened."""
    run = partial(
        trio.run_process,
        serve_command(store_url, *options),
        check=False,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(run)
        served = Served(process)
        try:
            served.url = (await served.stderr_line(SERVING)).group(1)
            nursery.start_soon(served.drain)
            yield served
        finally:
            if process.returncode is None:
                process.kill()


async def never_called(params: ElicitParams) -> ElicitResult:
    raise AssertionError(f"the test answers input itself (update_task), not: {params!r}")


def connect(url: str) -> AbstractAsyncContextManager[Client]:
    """A client that declares elicitation (asks_in_place needs it); it answers nothing by
    itself: these tests call `update_task`."""
    return connect_http(url, on_elicit=never_called)


async def wait_for(
    client: Client,
    task_id: str,
    done: Callable[[DetailedTask], bool],
    what: str = "done",
    *,
    seconds: float = TIMEOUT,
) -> DetailedTask:
    """Poll `tasks/get` until `done(task)`; fail (showing the last state) after `seconds`."""
    seen: DetailedTask | None = None
    try:
        with trio.fail_after(seconds):
            while True:
                seen = await client.get_task(task_id)
                if done(seen):
                    return seen
                await trio.sleep(0.02)
    except trio.TooSlowError:
        raise AssertionError(f"task {task_id} never became {what}; last seen: {seen!r}") from None


async def start(client: Client, name: str, arguments: Mapping[str, object] | None = None) -> str:
    task = await client.call_tool_or_task(name, dict(arguments or {}))
    assert not isinstance(task, CallToolResult), f"{name} answered without a task: {task!r}"
    return task.task_id


def text_of(task: DetailedTask) -> str:
    assert isinstance(task, CompletedTask), task
    result = task.result
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent), result
    return result.content[0].text


def status_starts(task: DetailedTask, prefix: str) -> bool:
    return isinstance(task.status_message, str) and task.status_message.startswith(prefix)


def is_completed(task: DetailedTask) -> bool:
    return isinstance(task, CompletedTask)
