"""`TasksExtension` on every store of ours: a SQLite file and a real Redis hold what the
SDK server's tasks do (a question answered in place, a cancel), two SDK servers on one
Redis prefix answer for each other's tasks as two processes would, and the fixture server
of conformance/sdk_server.py, in a process of its own, drains a running task into its
SQLite file on SIGTERM and serves it again after a restart."""

from __future__ import annotations

import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
from on_asyncio import run_asyncio

from mcp_tasks import ElicitParams, ElicitResult, TextContent
from mcp_tasks.client import Client, connect_http
from mcp_tasks.core import CancelledTask, CompletedTask, InputRequiredTask, TaskStatus, WorkingTask
from mcp_tasks.store import RedisTaskStore, SQLiteTaskStore, TaskStore

from .sdk_app import Gates, build, serving

ROOT = Path(__file__).parent.parent.parent
SDK_SERVER = ROOT / "conformance" / "sdk_server.py"


async def answer_name(params: ElicitParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"name": "Ada"})


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


async def until(client: Client, task_id: str, kind: type) -> Any:
    """Poll until the task is of `kind` (bounded by run_asyncio's deadline)."""
    while not isinstance(task := await client.get_task(task_id), kind):
        await anyio.sleep(0.02)
    return task


def _result_text(record: Any) -> str:
    raw = record.result
    return str(msgspec.json.decode(raw)["content"][0]["text"])


def lives_in(open_store: Callable[[], TaskStore]) -> None:
    """A question answered in place and a cancel, through the SDK server; then what a fresh
    store on the same data reads."""

    async def main() -> None:
        gates = Gates()
        store = open_store()
        mcp, _ = build(gates, store=store)
        async with serving(mcp) as url, connect_http(url, on_elicit=answer_name) as client:
            asked = await client.call_tool_or_task("ask_name")
            answered = await client.await_task(asked)
            assert text_of(answered) == "Hello, Ada / Ada!"
            gated = await client.call_tool_or_task("gated")
            await gates.started.wait()
            await client.cancel_task(gated.task_id)
            await until(client, gated.task_id, CancelledTask)
        await store.aclose()
        reopened = open_store()
        try:
            done = await reopened.get(asked.task_id)
            assert done is not None and done.status is TaskStatus.COMPLETED
            assert _result_text(done) == "Hello, Ada / Ada!"
            cancelled = await reopened.get(gated.task_id)
            assert cancelled is not None and cancelled.status is TaskStatus.CANCELLED
        finally:
            await reopened.aclose()

    run_asyncio(main)


def test_a_sqlite_file_holds_the_sdk_servers_tasks(tmp_path: Path) -> None:
    lives_in(lambda: SQLiteTaskStore(tmp_path / "tasks.db"))


def test_redis_holds_the_sdk_servers_tasks(redis_url: str) -> None:
    prefix = "sdk" + secrets.token_hex(6)
    lives_in(lambda: RedisTaskStore(redis_url, prefix=prefix))


def test_two_sdk_servers_on_one_redis_prefix_answer_for_each_others_tasks(redis_url: str) -> None:
    async def main() -> None:
        prefix = "sdk" + secrets.token_hex(6)
        gates_a, gates_b = Gates(), Gates()
        store_a, store_b = (
            RedisTaskStore(redis_url, prefix=prefix),
            RedisTaskStore(redis_url, prefix=prefix),
        )
        server_a, _ = build(gates_a, store=store_a)
        server_b, _ = build(gates_b, store=store_b)
        try:
            async with (
                serving(server_a) as url_a,
                serving(server_b) as url_b,
                connect_http(url_a, on_elicit=answer_name) as on_a,
                connect_http(url_b, on_elicit=answer_name) as on_b,
            ):
                asked = await on_a.call_tool_or_task("ask_name")
                assert isinstance(asked, WorkingTask)
                waiting = await until(on_b, asked.task_id, InputRequiredTask)  # read at B
                (key,) = waiting.input_requests
                await on_b.update_task(
                    asked.task_id, {key: ElicitResult(action="accept", content={"name": "Bo"})}
                )
                waiting = await until(on_b, asked.task_id, InputRequiredTask)
                while key in waiting.input_requests:
                    waiting = await until(on_b, asked.task_id, InputRequiredTask)
                (second,) = waiting.input_requests
                await on_b.update_task(
                    asked.task_id, {second: ElicitResult(action="accept", content={"name": "B."})}
                )
                done = await until(on_b, asked.task_id, CompletedTask)
                assert text_of(done.result) == "Hello, Bo / B.!"
                assert gates_a.runs == {"ask_name": 1} and gates_b.runs == {}  # it ran at A only

                gated = await on_a.call_tool_or_task("gated")
                await gates_a.started.wait()
                await on_b.cancel_task(gated.task_id)
                await gates_a.cancelled.wait()  # the cancel crossed over to A's tool
                await until(on_a, gated.task_id, CancelledTask)
        finally:
            await store_a.aclose()
            await store_b.aclose()

    run_asyncio(main)


# --- the fixture server in a process of its own ------------------------------------------------


@contextmanager
def sdk_server(store_url: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """conformance/sdk_server.py on a free port, tasks in `store_url`: its URL, its process."""
    command = [
        sys.executable,
        str(SDK_SERVER),
        "--port",
        "0",
        "--store",
        store_url,
        "--log-level",
        "INFO",
    ]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=ROOT) as process:
        try:
            assert process.stderr is not None
            for line in process.stderr:
                found = re.search(r"on (http://127\.0\.0\.1:\d+/mcp)", line)
                if found:
                    break
            else:
                raise AssertionError(f"the server exited ({process.wait()}) before it listened")
            yield found[1], process
        finally:
            if process.poll() is None:
                process.kill()


def test_the_sdk_fixture_server_drains_a_task_on_sigterm_and_serves_it_after_a_restart(
    tmp_path: Path,
) -> None:
    store_url = f"sqlite:///{tmp_path / 'tasks.db'}"

    async def start(url: str) -> str:
        async with connect_http(url) as client:
            task = await client.call_tool_or_task(
                "slow_compute", {"seconds": 1, "label": "drained"}
            )
            assert isinstance(task, WorkingTask)
            return task.task_id

    async def read(url: str, task_id: str) -> str:
        async with connect_http(url) as client:
            done = await client.get_task(task_id)
            assert isinstance(done, CompletedTask), done
            return text_of(done.result)

    with sdk_server(store_url) as (url, process):
        task_id = run_outside_trio(lambda: start(url))
        process.send_signal(signal.SIGTERM)  # while the task runs: the grace period lets it finish
        stopped_gracefully(process)
    with sdk_server(store_url) as (url, process):
        assert run_outside_trio(lambda: read(url, task_id)) == "drained done after 1s"
        process.send_signal(signal.SIGTERM)
        stopped_gracefully(process)


def stopped_gracefully(process: subprocess.Popen[str]) -> None:
    """uvicorn ran the app's shutdown (the lifespan: tasks drained) and then, as it does,
    raised the SIGTERM it had caught again."""
    assert process.wait(timeout=30) in (0, -signal.SIGTERM)
    assert process.stderr is not None
    rest = process.stderr.read()
    assert "Application shutdown complete." in rest, rest
    assert "Traceback" not in rest and "was destroyed" not in rest, rest


def run_outside_trio(main: Callable[[], Awaitable[str]]) -> str:
    """`main()` under asyncio, from this (synchronous) test."""
    found: list[str] = []

    async def go() -> None:
        found.append(await main())

    run_asyncio(go)
    return found[0]
