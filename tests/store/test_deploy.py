"""docs/deploy.md's setup, run for real: three `mcp-tasks serve` processes on one Redis,
behind nginx with examples/deploy/nginx.conf (its ports swapped for free ones), and a
client that only ever talks to nginx.

Outside CI a machine without nginx skips these with a hint; `.ci/run` installs it.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path

import pytest
import trio
from redis_server import free_port

from mcp_tasks import CallToolResult, ElicitParams, ElicitResult, TextContent
from mcp_tasks.client import connect_http
from mcp_tasks.core import FailedTask, InputRequiredTask, WorkingTask

from .served import (
    ORPHANED,
    ROOT,
    Served,
    connect,
    is_completed,
    serving,
    start,
    status_starts,
    text_of,
    wait_for,
)

CONFIG = ROOT / "examples" / "deploy" / "nginx.conf"
BACKENDS = ("127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003")
NGINX_HINT = "nginx is not installed (Debian/Ubuntu: sudo apt-get install nginx-light)"


def nginx_binary() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(NGINX_HINT)
        pytest.skip(NGINX_HINT)
    return found


def config_for(backends: list[str], listen: str, *, route_on_name: bool = False) -> str:
    """The example config with its addresses replaced (and, if asked, its commented
    `hash $http_mcp_name consistent;` line switched on)."""
    text = CONFIG.read_text()
    assert all(address in text for address in BACKENDS) and "listen 127.0.0.1:8000;" in text
    for example, real in zip(BACKENDS, backends, strict=True):
        text = text.replace(f"server {example};", f"server {real};")
    text = text.replace("listen 127.0.0.1:8000;", f"listen {listen};")
    if route_on_name:
        text, switched = re.subn(
            r"# header that names it: (hash \$http_mcp_name consistent;)", r"\n        \1", text
        )
        assert switched == 1
    return text


@asynccontextmanager
async def deployment(
    redis_url: str, tmp_path: Path, *, route_on_name: bool = False
) -> AsyncIterator[tuple[str, list[Served]]]:
    """Three servers on one Redis prefix behind nginx: (nginx's URL, the servers)."""
    nginx = nginx_binary()
    store = f"{redis_url}?prefix=deploy{secrets.token_hex(4)}"
    async with AsyncExitStack() as stack:
        servers = [
            await stack.enter_async_context(serving(store, options=["--lease-seconds", "1.5"]))
            for _ in range(3)
        ]
        backends = [server.url.removeprefix("http://").removesuffix("/mcp") for server in servers]
        listen = f"127.0.0.1:{free_port()}"
        config = tmp_path / "nginx.conf"
        config.write_text(config_for(backends, listen, route_on_name=route_on_name))
        command = [nginx, "-p", str(tmp_path), "-c", str(config)]
        command += ["-g", f"daemon off; pid {tmp_path / 'nginx.pid'};"]
        nursery = await stack.enter_async_context(trio.open_nursery())
        run = partial(
            trio.run_process, command, check=False, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        process: trio.Process = await nursery.start(run)
        try:
            url = f"http://{listen}/mcp"
            await _until_answering(url)
            yield url, servers
        finally:
            process.terminate()


async def _until_answering(url: str) -> None:
    with trio.fail_after(20):
        while True:
            try:
                async with connect(url) as client:
                    await client.discover()
                    return
            except OSError:
                await trio.sleep(0.05)
            except Exception as error:  # httpx wraps the refused connection
                if "connect" not in str(error).lower() and "502" not in str(error):
                    raise
                await trio.sleep(0.05)


NAME = {"action": "accept", "content": {"name": "bo"}}


async def test_round_robin_any_process_answers_for_any_task(redis_url: str, tmp_path: Path) -> None:
    async with deployment(redis_url, tmp_path) as (url, servers), connect(url) as client:
        pids = {server.process.pid for server in servers}
        task_ids = [await start(client, "asks_in_place") for _ in range(6)]
        for task_id in task_ids:  # every poll and answer may land on any of the three
            await wait_for(client, task_id, lambda t: isinstance(t, InputRequiredTask), "asking")
            await client.update_task(task_id, {"input-1": NAME})
        ran_on = set()
        for task_id in task_ids:
            text = text_of(await wait_for(client, task_id, is_completed, "completed"))
            assert text.startswith("hello bo from process ")
            ran_on.add(int(text.rsplit(" ", 1)[1]))
        assert ran_on <= pids and len(ran_on) >= 2  # created all over, answered all over


async def test_input_rounds_before_a_task_cross_processes(redis_url: str, tmp_path: Path) -> None:
    """An MRTR round sealed by one process is opened by whichever gets the retry: the
    processes share the store's sealing key."""

    async def answer(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"name": "round"})

    async with (
        deployment(redis_url, tmp_path) as (url, _),
        connect_http(url, on_elicit=answer) as client,
    ):
        for _ in range(4):  # round robin: retries land on other processes
            result = await client.call_tool("asks_first")
            assert result.content == [TextContent(text="hello round")]


async def test_routing_on_mcp_name_keeps_a_tool_on_one_process(
    redis_url: str, tmp_path: Path
) -> None:
    async with (
        deployment(redis_url, tmp_path, route_on_name=True) as (url, _),
        connect(url) as client,
    ):
        task_ids = [await start(client, "asks_in_place") for _ in range(4)]
        ran_on = set()
        for task_id in task_ids:
            await wait_for(client, task_id, lambda t: isinstance(t, InputRequiredTask), "asking")
            await client.update_task(task_id, {"input-1": NAME})
            text = text_of(await wait_for(client, task_id, is_completed, "completed"))
            ran_on.add(text.rsplit(" ", 1)[1])
        assert len(ran_on) == 1  # every tools/call named asks_in_place went to one process


async def test_a_dead_process_costs_its_running_tasks_and_nothing_else(
    redis_url: str, tmp_path: Path
) -> None:
    async with deployment(redis_url, tmp_path) as (url, servers), connect(url) as client:
        running_on: dict[str, int] = {}
        while len(set(running_on.values())) < 2:  # until two processes run one at least
            assert len(running_on) < 12, f"nginx sent every task to one process: {running_on}"
            task_id = await start(client, "blocks")
            task = await wait_for(client, task_id, lambda t: status_starts(t, "blocking"), "busy")
            assert isinstance(task.status_message, str)
            running_on[task_id] = int(task.status_message.rsplit(" ", 1)[1])
        (dead,) = [s for s in servers if s.process.pid == next(iter(running_on.values()))]
        await dead.kill()
        for _ in range(6):  # nginx passes over the dead one
            result = await client.call_tool_or_task("quick", {"text": "x"})
            assert not isinstance(result, CallToolResult)
            done = await wait_for(client, result.task_id, is_completed, "completed")
            assert text_of(done) == "X"
        for task_id, pid in running_on.items():
            if pid == dead.process.pid:  # failed by a survivor once the lease lapsed
                failed = await wait_for(
                    client, task_id, lambda t: isinstance(t, FailedTask), "failed"
                )
                assert isinstance(failed, FailedTask) and ORPHANED in failed.error.message
            else:
                assert isinstance(await client.get_task(task_id), WorkingTask)
