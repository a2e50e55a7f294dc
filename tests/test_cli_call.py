"""`mcp-tasks call` and `mcp-tasks task`: argument parsing, questions and result printing in
process; then the command as a real process against a real HTTP server (and a stdio one),
and in a pseudo-terminal for an elicitation answered by typing and for Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import queue
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import trio

from mcp_tasks.cli import parse_arguments
from mcp_tasks.cli._terminal import ask_elicitation, describe_result
from mcp_tasks.client import connect_http
from mcp_tasks.core._wire import (
    AudioContent,
    CallToolResult,
    ElicitParams,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    ResourceContents,
    ResourceLink,
    TextContent,
    WorkingTask,
)

ROOT = Path(__file__).parent.parent
TIMEOUT = 20.0


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcp_tasks.cli", *args]


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(*args),
        check=False,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=ROOT,
    )


# --- in process: arguments, questions, results ----------------------------------------------


def test_key_value_arguments_are_json_when_they_parse_and_strings_otherwise() -> None:
    words = ["n=3", "x=1.5", "ok=true", 'o={"a": [1]}', "name=W", "empty=", "eq=a=b"]
    assert parse_arguments(words, '{"n": 1, "keep": null}') == {
        "n": 3,
        "keep": None,
        "x": 1.5,
        "ok": True,
        "o": {"a": [1]},
        "name": "W",
        "empty": "",
        "eq": "a=b",
    }


@pytest.mark.parametrize(
    ("words", "json_object", "message"),
    [(["name"], None, "not KEY=VALUE"), (["=1"], None, "not KEY=VALUE"),
     ([], "[1]", "must be a JSON object"), ([], "{", "not JSON")],
)  # fmt: skip
def test_bad_arguments_are_usage_errors(
    words: list[str], json_object: str | None, message: str
) -> None:
    with pytest.raises(click.BadParameter, match=message):
        parse_arguments(words, json_object)


class Script:
    """Answers typed in advance; what was shown, in order."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.shown: list[str] = []

    async def ask(self, prompt: str) -> str | None:
        self.shown.append(prompt)
        return self.answers.pop(0)

    def tell(self, text: str) -> None:
        self.shown.append(text)


FORM = ElicitParams(
    message="About you?",
    requested_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "as on your badge"},
            "age": {"type": "integer"},
            "size": {"type": "string", "enum": ["small", "large"]},
            "ratio": {"type": "number"},
            "subscribe": {"type": "boolean"},
        },
        "required": ["name", "age", "size"],
    },
)


async def test_a_form_asks_each_field_enforcing_types_and_required_ones() -> None:
    script = Script("", "Ann", "old", "42", "3", "2", "", "yes")
    result = await ask_elicitation(FORM, script.ask, script.tell)
    assert result.action == "accept"
    assert result.content == {"name": "Ann", "age": 42, "size": "large", "subscribe": True}
    shown = "\n".join(script.shown)
    assert "the server asks: About you?" in shown and ":decline declines" in shown
    assert "as on your badge" in shown and "Name [string]: " in shown
    assert "an answer is required" in shown and "a whole number, please" in shown
    assert "1. small" in shown and "2. large" in shown and "choose a number from 1 to 2" in shown
    assert "ratio [number, optional]: " in shown and "subscribe [y/n, optional]: " in shown


@pytest.mark.parametrize(
    ("answers", "action"), [((":decline",), "decline"), (("Ann", ":cancel"), "cancel"),
                            (("Ann", None), "cancel")],
)  # fmt: skip
async def test_a_form_can_be_declined_or_cancelled_and_eof_cancels(
    answers: tuple[str | None, ...], action: str
) -> None:
    script = Script(*answers)
    result = await ask_elicitation(FORM, script.ask, script.tell)
    assert result.action == action and result.content is None


async def test_url_mode_shows_the_url_and_asks_to_accept() -> None:
    params = ElicitParams(message="Sign in", mode="url", url="https://example.com/login")
    script = Script("maybe", "n")
    result = await ask_elicitation(params, script.ask, script.tell)
    assert result.action == "decline"
    assert "  open: https://example.com/login" in script.shown
    script = Script("y")
    assert (await ask_elicitation(params, script.ask, script.tell)).action == "accept"


def test_results_print_text_and_summarise_everything_else() -> None:
    result = CallToolResult(
        content=[
            TextContent(text="hello"),
            ImageContent(data="aGVsbG8=", mime_type="image/png"),
            AudioContent(data="AAAA", mime_type="audio/wav"),
            EmbeddedResource(resource=ResourceContents(uri="file:///a.txt", text="a")),
            ResourceLink(uri="file:///b.txt", name="b"),
        ],
        structured_content={"n": 1},
    )
    assert describe_result(result) == [
        "hello",
        "[image: image/png, 5 bytes]",
        "[audio: audio/wav, 3 bytes]",
        "[resource: file:///a.txt]",
        "[resource link: file:///b.txt]",
        '{\n  "n": 1\n}',
    ]


# --- a real server --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """The endpoint of `mcp-tasks serve examples/jobs.py` on a free loopback port."""
    yield from _serving()


@pytest.fixture(scope="module")
def conformance_url() -> Iterator[str]:
    """The endpoint of conformance/server.py (its `x-mcp-header` tool among others)."""
    command = [sys.executable, "conformance/server.py", "--port", "0"]
    yield from _serving_command(command)


def _serving(*flags: str) -> Iterator[str]:
    serve = ("serve", "examples/jobs.py", "--http", "127.0.0.1:0", "--log-level", "warning")
    yield from _serving_command(cli(*serve, *flags))


def _serving_command(command: list[str]) -> Iterator[str]:
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert server.stderr is not None
    lines: queue.Queue[str] = queue.Queue()

    def drain() -> None:  # reads stderr to its end, so the server never blocks on it
        for line in server.stderr or ():
            lines.put(line)

    threading.Thread(target=drain, daemon=True).start()
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            if found := re.search(r"on (http://127\.0\.0\.1:\d+/mcp)", line):
                break
        yield found.group(1)
    finally:
        server.send_signal(signal.SIGINT)
        server.send_signal(signal.SIGINT)  # the second one: no grace for what still runs
        server.wait(TIMEOUT)


def test_a_plain_tool_prints_its_text(url: str) -> None:
    done = run("call", url, "greet", "name=W")
    assert (done.returncode, done.stdout, done.stderr) == (0, "Hello, W!\n", "")


def test_a_task_prints_its_result_and_its_status_lines(url: str) -> None:
    done = run("call", url, "slow_compute", "seconds=1", "--json", '{"label": "sum"}')
    assert done.returncode == 0 and done.stdout == "sum done after 1s\n"
    statuses = re.findall(r"mcp-tasks: task tsk_\S+ (\w+) \(\d+s\)", done.stderr)
    assert statuses[0] == "working" and statuses[-1] == "completed", done.stderr
    assert "\r" not in done.stderr  # not a terminal: plain lines, not redrawn in place


def test_a_tool_error_goes_to_stderr_and_exits_1(url: str) -> None:
    done = run("call", url, "failing_job")
    assert done.returncode == 1 and done.stdout == ""
    assert "the job failed: the input file is empty" in done.stderr


def test_a_failed_task_and_an_rpc_error_say_their_code_and_exit_1(url: str) -> None:
    done = run("call", url, "protocol_error_job")
    assert done.returncode == 1
    assert "failed: the upstream service crashed (code -32603)" in done.stderr
    done = run("call", url, "no_such_tool")
    assert done.returncode == 1 and "(code -32602)" in done.stderr


def test_output_json_prints_the_raw_result(url: str) -> None:
    done = run("call", url, "greet", "name=W", "--output", "json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["content"] == [{"type": "text", "text": "Hello, W!"}]


def _unused_port() -> int:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port: int = spare.getsockname()[1]  # nobody listens on it once closed
    return port


def test_an_unreachable_server_exits_2() -> None:
    url = f"http://127.0.0.1:{_unused_port()}/mcp"
    done = run("call", url, "greet", "name=W", "--reconnect", "0")
    assert done.returncode == 2 and "cannot reach the server" in done.stderr
    assert "Traceback" not in done.stderr and "trying again" not in done.stderr


def test_an_unreachable_server_is_tried_again_for_reconnect_seconds() -> None:
    url = f"http://127.0.0.1:{_unused_port()}/mcp"
    done = run("call", url, "greet", "name=W", "--reconnect", "1")
    waits = re.findall(
        r"tools/list: the server cannot be reached; trying again in (\d+\.\d) s", done.stderr
    )
    assert done.returncode == 2 and "cannot reach the server" in done.stderr, done.stderr
    # backing off from a quarter second, the waits add up to the second asked for
    assert len(waits) >= 3 and abs(sum(map(float, waits)) - 1.0) <= 0.05 * len(waits)


def test_stdio_spawns_the_server() -> None:
    server = f"{sys.executable} -m mcp_tasks.cli serve examples/jobs.py --stdio"
    done = run("call", "--stdio", server, "slow_compute", "seconds=0.2", "label=piped")
    assert done.returncode == 0 and done.stdout == "piped done after 0.2s\n", done.stderr


def test_answers_can_come_from_a_pipe(url: str) -> None:
    done = run("call", url, "confirm_delete", "filename=x", stdin="n\n")
    assert done.returncode == 0 and done.stdout == "Kept x\n"
    assert "the server asks: Delete x?" in done.stderr


async def test_task_get_and_task_cancel(url: str) -> None:
    async with connect_http(url) as client:
        task = await client.call_tool_or_task("slow_compute", {"seconds": 30})
    assert isinstance(task, WorkingTask)

    async def command(*args: str) -> str:
        with trio.fail_after(TIMEOUT):
            done = await trio.run_process(cli(*args), capture_stdout=True, cwd=ROOT)
        return done.stdout.decode()

    assert json.loads(await command("task", "get", url, task.task_id))["status"] == "working"
    assert await command("task", "cancel", url, task.task_id) == "cancel acknowledged\n"
    shown = json.loads(await command("task", "get", url, task.task_id))
    assert shown["status"] == "cancelled" and shown["taskId"] == task.task_id


async def never_answer(params: ElicitParams) -> ElicitResult:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def task_in(url: str, status: str, tool: str, arguments: dict[str, Any]) -> str:
    """The id of a new task of `tool`, once `tasks/get` shows it `status` (polled under the
    caller's deadline; a task that ends otherwise fails the test)."""
    async with connect_http(url, on_elicit=never_answer) as client:
        task = await client.call_tool_or_task(tool, arguments)
        assert not isinstance(task, CallToolResult)
        if status == "cancelled":
            await client.cancel_task(task.task_id)
        while (task := await client.get_task(task.task_id)).status != status:
            assert not task.status.is_terminal, task
            await trio.sleep(0.05)
    return task.task_id


def shown_result(text: str, *, is_error: bool) -> dict[str, Any]:
    """A completed task's result as `task get` prints it: `isError` only when true (the
    schema's default is false, and the JSON is the wire's)."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return {"result": result}


CRASHED = {"code": -32603, "message": "the upstream service crashed"}


@pytest.mark.parametrize(
    ("status", "tool", "arguments", "expected"),
    [
        ("working", "slow_compute", {"seconds": 30}, {}),
        ("input_required", "confirm_delete", {"filename": "x"}, {}),
        (
            "completed",
            "slow_compute",
            {"seconds": 0.1, "label": "s"},
            shown_result("s done after 0.1s", is_error=False),
        ),
        (
            "completed",
            "failing_job",
            {},
            shown_result("the job failed: the input file is empty", is_error=True),
        ),
        ("failed", "protocol_error_job", {}, {"error": CRASHED}),
        ("cancelled", "slow_compute", {"seconds": 30}, {}),
    ],
)
async def test_task_get_prints_a_task_in_every_status(
    url: str, status: str, tool: str, arguments: dict[str, Any], expected: dict[str, Any]
) -> None:
    with trio.fail_after(TIMEOUT):
        task_id = await task_in(url, status, tool, arguments)
    done = await trio.to_thread.run_sync(lambda: run("task", "get", url, task_id))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    shown = json.loads(done.stdout)
    assert shown["status"] == status and shown["taskId"] == task_id
    for key, value in expected.items():
        assert {k: shown[key][k] for k in value} == value, shown
    if status == "completed":
        assert shown["result"].get("isError", False) == (tool == "failing_job"), shown
    assert ("inputRequests" in shown) == (status == "input_required")


@pytest.mark.parametrize("command", ["get", "cancel"])
def test_a_task_id_may_start_with_a_dash(url: str, command: str) -> None:
    """Task ids are the server's to choose (fastmcp-tasks' may start with `-`): no option."""
    done = run("task", command, url, "-no-such-task")
    assert done.returncode == 1 and "(code -32602)" in done.stderr, done.stderr


@pytest.mark.parametrize("region", ["eu-west", "zürich", " padded "])
def test_a_tool_that_marks_an_argument_for_a_header_is_called(
    conformance_url: str, region: str
) -> None:
    done = run("call", conformance_url, "test_custom_header_tool", f"region={region}")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"region: {region}\n", "")


# --- in a pseudo-terminal -------------------------------------------------------------------


class Terminal:
    """`mcp-tasks ARGS` with a pty as its controlling terminal, as a user would run it."""

    def __init__(self, *args: str) -> None:
        # Started by `subprocess`, not `pty.fork`: forking this process (its threads, under
        # xdist) is unsafe. `setsid --ctty` makes the pty the child's controlling terminal,
        # so Ctrl-C typed into it is the child's SIGINT.
        fd, child_end = pty.openpty()
        try:
            self.process = subprocess.Popen(
                ["setsid", "--ctty", *cli(*args)],
                stdin=child_end,
                stdout=child_end,
                stderr=child_end,
                cwd=ROOT,
            )
        finally:
            os.close(child_end)
        self.fd = fd
        self.output = b""
        self.exit_code: int | None = None

    def read_until(self, pattern: bytes) -> re.Match[bytes]:
        deadline = time.monotonic() + TIMEOUT
        while not (found := re.search(pattern, self.output)):
            left = deadline - time.monotonic()
            assert left > 0, f"no {pattern!r} in {self.output!r}"
            assert self._read_some(left), f"ended without {pattern!r}: {self.output!r}"
        return found

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def wait(self) -> int:
        """Read to the end; the exit code."""
        deadline = time.monotonic() + TIMEOUT
        while self._read_some(deadline - time.monotonic()):
            pass
        self.exit_code = self.process.wait(TIMEOUT)
        return self.exit_code

    def _read_some(self, timeout: float) -> bool:
        """False at the end of output (Linux reads EIO once the child is gone)."""
        assert timeout > 0, f"timed out; output so far: {self.output!r}"
        ready, _, _ = select.select([self.fd], [], [], timeout)
        assert ready, f"timed out; output so far: {self.output!r}"
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:
            return False
        self.output += chunk
        return bool(chunk)

    def close(self) -> None:
        if self.exit_code is None:
            self.process.kill()
            self.process.wait(TIMEOUT)
        os.close(self.fd)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()


def test_a_question_is_answered_by_typing_in_the_terminal(
    url: str, terminals: list[Terminal]
) -> None:
    terminal = Terminal("call", url, "confirm_delete", "filename=x")
    terminals.append(terminal)
    terminal.read_until(rb"Delete x\?.*\r?\n.*\r?\n  confirm \[y/n\]: ")
    terminal.type(b"y\r")
    assert terminal.wait() == 0
    assert b"Deleted x" in terminal.output
    assert b"\r\x1b[K" in terminal.output  # the status line, redrawn in place


def test_ctrl_c_cancels_the_task_and_exits_130(url: str, terminals: list[Terminal]) -> None:
    terminal = Terminal("call", url, "slow_compute", "seconds=60")
    terminals.append(terminal)
    terminal.read_until(rb"task tsk_\S+ working")
    terminal.type(b"\x03")  # the pty's line discipline sends SIGINT
    assert terminal.wait() == 130
    found = re.search(rb"cancelled task (tsk_[\w-]+)", terminal.output)
    assert found, terminal.output
    done = run("task", "get", url, found.group(1).decode())
    assert json.loads(done.stdout)["status"] == "cancelled"


async def test_a_full_server_is_waited_for_and_the_wait_is_shown() -> None:
    """A server holding its one task refuses the next as busy (503, Retry-After); `mcp-tasks
    call` says so, waits until the held task expires, and then gets its answer."""
    with contextlib.contextmanager(_serving)("--max-tasks", "1", "--ttl", "2") as url:
        async with connect_http(url) as client:
            held = await client.call_tool_or_task("slow_compute", {"seconds": 30})
            assert not isinstance(held, CallToolResult)
        started = time.monotonic()
        done = await trio.to_thread.run_sync(
            lambda: run("call", url, "slow_compute", "seconds=0.1", "label=next")
        )
        assert done.returncode == 0 and done.stdout == "next done after 0.1s\n", done.stderr
        assert re.search(r"tools/call: Too many tasks: .*; trying again in \d+\.\d s", done.stderr)
        assert time.monotonic() - started >= 1.0
