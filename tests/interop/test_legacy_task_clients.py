"""Real 2025-11-25 task clients against servers that offer the 2025-11-25 tasks utility.

The clients, pinned: `mcp` 1.30.0 (`session.experimental`), fastmcp 3.4.11
(`call_tool(..., task=True)`), both from tests/interop/legacy_tasks/.venv
(tests/interop/legacy_tasks/install), and `@modelcontextprotocol/sdk` 1.32.2 with zod 4
(`client.experimental.tasks`, from tests/interop/npm). Each driver (legacy_tasks/*_client.*)
runs the steps of legacy_tasks/tasks_scenario.py against one server, over stdio or
Streamable HTTP, and prints a summary (legacy_tasks/_driver.py); the tests read it.

The servers are SERVERS, one entry each: a function that starts it for a transport and
yields the driver's arguments. The reference servers of the same SDK lines (legacy-only,
legacy_tasks/mcp_server.py and ts_server.mjs) show the wire the clients expect; ours
(OUR_SERVER: `mcp-tasks serve legacy_tasks/ours.py`, the same tools written with our API)
must give every client what they give it.

Outside CI a missing (or out of date) venv or npm install skips these tests, saying how to
build it; in CI (`CI` set) it is a failure: `.ci/run` builds both before the tests.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal

import pytest

from .processes import MCP_TASKS, RUN_SECONDS, npm_node, pinned_python, run_to_end, started

LEGACY_TASKS = Path(__file__).resolve().parent / "legacy_tasks"
LEGACY_VENV = LEGACY_TASKS / ".venv"
LEGACY_PINS = [LEGACY_TASKS / name for name in ("requirements.txt", "constraints.txt")]
READY = r'^\{"ready": ?"(http://[^"]+)"\}'  # Python prints a space, node none

INSTALL_HINT = (
    "the 2025 task clients' virtual environment (tests/interop/legacy_tasks/.venv: mcp 1.30.0 "
    "and fastmcp 3.4.11, pinned) is missing or out of date: build it with "
    "tests/interop/legacy_tasks/install (needs PyPI)"
)

Transport = Literal["stdio", "http"]
Start = Callable[[Transport], AbstractContextManager[list[str]]]


def legacy_python() -> str:
    """The 2025 task clients' python; the test is skipped (failed in CI) when their venv is
    not built from today's pins."""
    return pinned_python(LEGACY_VENV, LEGACY_PINS, INSTALL_HINT)


@contextmanager
def _served(stdio: list[str], http: list[str], transport: Transport) -> Iterator[list[str]]:
    """The driver's arguments for a server run as `stdio` (spawned by the client) or as `http`
    (started here, used once it printed {"ready": URL}, stopped on the way out)."""
    if transport == "stdio":
        yield ["stdio", *stdio]
        return
    with started(http) as (_, output):
        yield ["http", output.wait_for("stdout", READY).group(1)]


@contextmanager
def mcp_reference(transport: Transport) -> Iterator[list[str]]:
    """legacy_tasks/mcp_server.py: the `mcp` 1.30.0 line's low-level Server with tasks."""
    server = [legacy_python(), str(LEGACY_TASKS / "mcp_server.py")]
    with _served([*server, "stdio"], [*server, "http"], transport) as argv:
        yield argv


@contextmanager
def ts_reference(transport: Transport) -> Iterator[list[str]]:
    """legacy_tasks/ts_server.mjs: the TypeScript SDK 1.32.2 McpServer with tasks."""
    server = [npm_node(), str(LEGACY_TASKS / "ts_server.mjs")]
    with _served([*server, "stdio"], [*server, "http"], transport) as argv:
        yield argv


@contextmanager
def our_server(transport: Transport) -> Iterator[list[str]]:
    """`mcp-tasks serve legacy_tasks/ours.py`: the same three tools written with our API."""
    serve = [MCP_TASKS, "serve", str(LEGACY_TASKS / "ours.py"), "--log-level", "warning"]
    if transport == "stdio":
        yield ["stdio", *serve, "--stdio"]
        return
    with started([*serve, "--http", "127.0.0.1:0"]) as (_, output):
        yield ["http", output.wait_for("stderr", r"serving .* on (http://\S+)").group(1)]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerEntry:
    start: Start
    transports: tuple[Transport, ...] = ("stdio", "http")
    cancelled_result: Literal["error", "empty"]
    """What `tasks/result` of a cancelled task reads (the spec leaves the payload undefined
    and says to answer a JSON-RPC error): "error", or "empty" (a result of `_meta` only)."""


REFERENCE_SERVERS = {
    "mcp-1.30.0": ServerEntry(start=mcp_reference, cancelled_result="empty"),
    "ts-sdk-1.32.2": ServerEntry(start=ts_reference, cancelled_result="error"),
}
OUR_SERVER = ServerEntry(start=our_server, cancelled_result="error")
SERVERS = {**REFERENCE_SERVERS, "mcp-tasks": OUR_SERVER}


def _python_driver(script: str) -> Callable[[], list[str]]:
    return lambda: [legacy_python(), str(LEGACY_TASKS / script)]


CLIENTS: dict[str, Callable[[], list[str]]] = {
    "mcp-1.30.0": _python_driver("mcp_client.py"),
    "fastmcp-3.4.11": _python_driver("fastmcp_client.py"),
    "ts-sdk-1.32.2": lambda: [npm_node(), str(LEGACY_TASKS / "ts_client.mjs")],
}

CASES = [
    pytest.param((client, server, transport), id=f"{client}-on-{server}-{transport}")
    for server, entry in SERVERS.items()
    for transport in entry.transports
    for client in CLIENTS
]

with (LEGACY_TASKS / "scenario.json").open() as scenario_file:
    SCENARIO: dict[str, Any] = json.load(scenario_file)


def run_driver(client: str, server_argv: list[str]) -> dict[str, Any]:
    """Run one client driver to its end against a server; its summary."""
    done = run_to_end([*CLIENTS[client](), *server_argv], RUN_SECONDS)
    assert done.returncode == 0, f"{client} exited {done.returncode}\n{done.stderr[-3000:]}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{client} printed no summary\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


class Run(dict[str, Any]):
    """One driver's summary, with the server entry it ran against."""

    def __init__(self, summary: dict[str, Any], entry: ServerEntry) -> None:
        super().__init__(summary)
        self.entry = entry

    def step(self, name: str) -> dict[str, Any]:
        """The step's record; fails, saying what it raised, when it raised."""
        record: dict[str, Any] = self[name]
        assert "error" not in record, f"step {name!r} failed: {record['error']}\n{self}"
        return record

    def task_id(self, name: str) -> str:
        task_id: str = self[name]["created"]["task_id"]
        return task_id


@pytest.fixture(scope="module", params=CASES)
def run(request: pytest.FixtureRequest) -> Run:
    client, server, transport = request.param
    entry = SERVERS[server]
    with entry.start(transport) as server_argv:
        return Run(run_driver(client, server_argv), entry)


def test_it_opens_a_2025_11_25_session_with_the_tasks_capability(run: Run) -> None:
    connect = run.step("connect")
    assert connect["protocol_version"] == "2025-11-25"
    assert connect["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert connect["task_support"] == {"slow": "required", "ask": "required", "fail": "required"}


def test_the_task_created_is_the_one_polled_read_and_listed(run: Run) -> None:
    slow = run.step("slow")
    task_id = run.task_id("slow")
    assert task_id
    assert [task["task_id"] for task in slow["polled"]] == [task_id] * len(slow["polled"])
    assert slow["after"]["task_id"] == task_id
    assert slow["result"]["related_task"] == task_id
    assert task_id in run.step("list")["ids"]
    assert slow["created"].get("returned_immediately", False) is False


def test_its_statuses_go_from_working_to_completed(run: Run) -> None:
    """fastmcp's `ToolTask` keeps no status of the created task: its first poll stands."""
    slow = run.step("slow")
    seen = [slow["created"]["status"], *(task["status"] for task in slow["polled"])]
    seen = [status for status in seen if status is not None] + [slow["after"]["status"]]
    assert seen[0] == "working" and seen[-1] == "completed"
    assert set(seen) == {"working", "completed"}
    assert seen == sorted(seen, key=["working", "completed"].index)  # never working again
    assert all(task["timestamps"] for task in [*slow["polled"], slow["after"]])


def test_the_blocking_tasks_result_reads_the_tools_result(run: Run) -> None:
    """The tool's `CallToolResult`: `content`, and `isError` (the reference servers write
    it always; ours leaves out a false one, the schema's default)."""
    result = dict(run.step("slow")["result"])
    keys = result.pop("keys")
    assert result == {
        "is_error": False,
        "text": ["slow-1 done"],
        "related_task": run.task_id("slow"),
    }
    assert keys in (["content", "isError"], ["content"])


def test_a_cancelled_task_reads_cancelled(run: Run) -> None:
    cancel, task_id = run["cancel"], run.task_id("cancel")
    assert cancel["created"]["task_id"] == task_id
    assert cancel["cancelled"]["task_id"] == task_id
    assert cancel["cancelled"]["status"] == cancel["after"]["status"] == "cancelled"
    assert run.step("list")["statuses"][task_id] == "cancelled"
    if run.entry.cancelled_result == "error":
        assert isinstance(cancel.get("error", {}).get("code"), int), cancel
    else:
        assert cancel["result"] == {
            "is_error": False,
            "text": [],
            "related_task": task_id,
            "keys": [],
        }


def test_the_question_arrives_on_the_tasks_result_stream_and_its_answer_reaches_the_tool(
    run: Run,
) -> None:
    ask, task_id = run.step("ask"), run.task_id("ask")
    last = ask["polled"][-1]
    assert (last["task_id"], last["status"]) == (task_id, "input_required")
    assert run["questions"] == [
        {
            "method": "elicitation/create",
            "message": SCENARIO["calls"]["ask"]["arguments"]["question"],
            "fields": ["answer"],
            "related_task": task_id,
            "during_result": task_id,
        }
    ]
    assert ask["result"]["text"] == [f"answer: {SCENARIO['answer']}"]
    assert ask["result"]["related_task"] == task_id and not ask["result"]["is_error"]
    assert ask["after"]["status"] == "completed"


def test_a_failing_tool_fails_its_task_and_tasks_result_reads_the_tool_error(run: Run) -> None:
    fail, task_id = run.step("fail"), run.task_id("fail")
    reason = SCENARIO["calls"]["fail"]["arguments"]["reason"]
    assert fail["polled"][-1]["status"] == fail["after"]["status"] == "failed"
    assert fail["result"]["is_error"] and fail["result"]["text"] == [reason]
    assert fail["result"]["related_task"] == task_id
    assert run.step("list")["statuses"][task_id] == "failed"
    if "stream_error" in fail:  # the TS client's stream skips tasks/result of a failed task
        assert fail["stream_error"]["code"] == -32603


def test_tasks_list_lists_the_sessions_four_tasks_from_the_server(run: Run) -> None:
    listed = run.step("list")
    created = [run.task_id(name) for name in ("slow", "cancel", "ask", "fail")]
    assert sorted(listed["ids"]) == sorted(created)
    assert listed["statuses"] == dict(
        zip(created, ["completed", "cancelled", "completed", "failed"], strict=True)
    )
    assert listed["next_cursor"] is None
    assert listed.get("from_server", True), "fastmcp fell back to the ids it submitted"


@pytest.fixture
def no_legacy_venv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    venv = tmp_path / ".venv"
    monkeypatch.setattr(sys.modules[__name__], "LEGACY_VENV", venv)
    return venv


@pytest.mark.parametrize(
    ("ci", "outcome"), [(None, pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
def test_without_the_venv_the_tests_skip_saying_how_to_build_it_and_fail_in_ci(
    no_legacy_venv: Path, monkeypatch: pytest.MonkeyPatch, ci: str | None, outcome: type
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="build it with tests/interop/legacy_tasks/install"):
        legacy_python()


def test_a_venv_built_from_other_pins_is_out_of_date(
    no_legacy_venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (no_legacy_venv / "bin").mkdir(parents=True)
    (no_legacy_venv / "bin" / "python").touch()
    (no_legacy_venv / ".installed").write_text("0" * 64 + "  -\n")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="missing or out of date"):
        legacy_python()


def test_the_install_script_leaves_an_up_to_date_venv_alone() -> None:
    python = Path(legacy_python())
    before = python.parent.stat().st_ino, (LEGACY_VENV / ".installed").read_text()
    done = subprocess.run(
        [str(LEGACY_TASKS / "install")], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (python.parent.stat().st_ino, (LEGACY_VENV / ".installed").read_text()) == before
