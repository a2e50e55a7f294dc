"""Our client and `mcp-tasks call` against a fastmcp-tasks server (fastmcp 4.1.4 +
fastmcp-tasks 4.1.4), over HTTP and stdio.

The server (peers/fastmcp_tasks_server.py) runs in the peers' python, in its own process;
our client runs here, `mcp-tasks call` and `mcp-tasks task` in processes of their own.
fastmcp-tasks asks for input inside a task only by returning an input request and running
the tool again from the top with the answers (confirm_delete does so).
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import trio

from mcp_tasks import CallToolResult, ElicitParams, ElicitResult, TextContent
from mcp_tasks.client import TaskCancelled, connect_http, connect_stdio

from .processes import (
    MCP_TASKS,
    ROOT,
    STOP_SECONDS,
    Connect,
    bounded,
    peer_script,
    peers_python,
    serving_peer,
    started,
)

CALL_SECONDS = 60.0


@pytest.fixture(scope="module")
def fastmcp_tasks_url() -> Iterator[str]:
    with serving_peer("fastmcp_tasks_server.py") as url:
        yield url


def stdio_command() -> list[str]:
    return [peers_python(), peer_script("fastmcp_tasks_server.py"), "stdio"]


@pytest.fixture(params=["http", "stdio"])
def connect(request: pytest.FixtureRequest) -> Connect:
    """Open our client to the server: its HTTP endpoint, or a process of its own on stdio."""
    if request.param == "http":
        return bounded(partial(connect_http, request.getfixturevalue("fastmcp_tasks_url")))
    return bounded(partial(connect_stdio, stdio_command(), stderr="capture"))


@pytest.fixture(params=["http", "stdio"])
def endpoint(request: pytest.FixtureRequest) -> list[str]:
    """How `mcp-tasks call` and `mcp-tasks task` name the server: a URL, or `--stdio CMD`."""
    if request.param == "http":
        return [request.getfixturevalue("fastmcp_tasks_url")]
    return ["--stdio", shlex.join(stdio_command())]


def text_of(result: Any) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


def answering(confirm: bool) -> Callable[[ElicitParams], Any]:
    async def answer(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"confirm": confirm})

    return answer


# --- our client ---------------------------------------------------------------------------------


async def test_a_task_is_waited_for_to_its_result(connect: Connect) -> None:
    seen: list[str] = []
    async with connect() as client:
        result = await client.call_tool(
            "slow_compute",
            {"seconds": 0.2, "label": "interop"},
            on_status=lambda task: seen.append(str(task.status)),
        )
    assert text_of(result) == ["interop done after 0.2s"] and result.is_error is False
    assert seen[0] == "working" and seen[-1] == "completed"


async def test_a_tool_error_in_a_task_is_an_error_result(connect: Connect) -> None:
    async with connect() as client:
        result = await client.call_tool("failing_job", {})
    assert result.is_error is True
    assert text_of(result) == ["the job failed: the input file is empty"]


@pytest.mark.parametrize(("confirm", "outcome"), [(True, "Deleted"), (False, "Kept")])
async def test_a_question_inside_a_task_is_answered(
    connect: Connect, confirm: bool, outcome: str
) -> None:
    async with connect(on_elicit=answering(confirm)) as client:
        result = await client.call_tool("confirm_delete", {"filename": "notes.txt"})
    assert text_of(result) == [f"{outcome} notes.txt"]


async def test_a_task_is_cancelled(connect: Connect) -> None:
    async with connect() as client:
        task = await client.call_tool_or_task("slow_compute", {"seconds": 60})
        assert not isinstance(task, CallToolResult)
        await client.cancel_task(task.task_id)
        assert str((await client.get_task(task.task_id)).status) == "cancelled"


async def test_cancelling_the_wait_cancels_the_task(connect: Connect) -> None:
    """The caller gives up (its cancel scope is cancelled once the task works): the client
    sends `tasks/cancel` on its way out, and the server has the task cancelled."""
    started_ids: list[str] = []
    async with connect() as client:
        with trio.CancelScope() as scope:

            def on_status(task: Any) -> None:
                started_ids.append(task.task_id)
                scope.cancel()

            await client.call_tool("slow_compute", {"seconds": 60}, on_status=on_status)
        assert scope.cancelled_caught and started_ids
        with pytest.raises(TaskCancelled):
            await client.await_task(started_ids[0])


# --- mcp-tasks call and mcp-tasks task -------------------------------------------------------


def mcp_tasks(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCP_TASKS, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=CALL_SECONDS,
        check=False,
        cwd=ROOT,
    )


def test_call_waits_for_a_task_and_prints_its_result(endpoint: list[str]) -> None:
    done = mcp_tasks("call", *endpoint, "slow_compute", "seconds=0.2", "label=cli")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "cli done after 0.2s"
    assert " completed " in done.stderr


def test_call_of_a_failing_task_tool_prints_the_error_and_exits_1(endpoint: list[str]) -> None:
    done = mcp_tasks("call", *endpoint, "failing_job")
    assert done.returncode == 1, done.stderr
    assert "the job failed: the input file is empty" in done.stderr
    assert done.stdout == ""


def test_call_asks_the_tasks_question_on_the_terminal(endpoint: list[str]) -> None:
    done = mcp_tasks("call", *endpoint, "confirm_delete", "filename=notes.txt", stdin="y\n")
    assert done.returncode == 0, done.stderr
    assert "the server asks: Delete notes.txt?" in done.stderr
    assert done.stdout.splitlines()[0] == "Deleted notes.txt"


def test_task_get_shows_a_completed_task_with_its_result(fastmcp_tasks_url: str) -> None:
    done = mcp_tasks("call", "--output", "json", fastmcp_tasks_url, "slow_compute", "seconds=0")
    assert done.returncode == 0, done.stderr
    found = re.search(r"task (\S+) completed", done.stderr)
    assert found is not None, done.stderr
    task_id = found.group(1)
    shown = mcp_tasks("task", "get", fastmcp_tasks_url, task_id)
    assert shown.returncode == 0, shown.stderr
    assert '"status": "completed"' in shown.stdout
    assert '"text": "job done after 0s"' in shown.stdout


def test_task_cancel_ends_the_call_that_waits_for_it(fastmcp_tasks_url: str) -> None:
    argv = [MCP_TASKS, "call", fastmcp_tasks_url, "slow_compute", "seconds=60"]
    with started(argv) as (call, output):
        task_id = output.wait_for("stderr", r"task (\S+) working").group(1)
        cancelled = mcp_tasks("task", "cancel", fastmcp_tasks_url, task_id)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.strip() == "cancel acknowledged"
        output.wait_for("stderr", rf"task {task_id} was cancelled")
        assert call.wait(timeout=CALL_SECONDS) == 1
    shown = mcp_tasks("task", "get", fastmcp_tasks_url, task_id)
    assert '"status": "cancelled"' in shown.stdout


def test_ctrl_c_cancels_the_task_and_exits_130(endpoint: list[str]) -> None:
    argv = [MCP_TASKS, "call", *endpoint, "slow_compute", "seconds=60"]
    with started(argv) as (call, output):
        task_id = output.wait_for("stderr", r"task (\S+) working").group(1)
        call.send_signal(signal.SIGINT)
        assert call.wait(timeout=STOP_SECONDS) == 130
        output.wait_for("stderr", rf"cancelled task {task_id}")
    if endpoint[0] != "--stdio":  # over stdio the server went away with the call
        shown = mcp_tasks("task", "get", *endpoint, task_id)
        assert '"status": "cancelled"' in shown.stdout
