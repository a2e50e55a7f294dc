"""The fastmcp-tasks client (fastmcp 4.1.4 + fastmcp-tasks 4.1.4) against our server.

fastmcp-tasks' client sends `Mcp-Name` on `tools/call` but not on `tasks/get`,
`tasks/update` and `tasks/cancel`, which the 2026-07-28 spec requires of it. So over HTTP
it works with `mcp-tasks serve --accept-missing-task-name`, and our strict default refuses
its first `tasks/get` with -32020. Over stdio there are no headers, and the default serves
it. peers/fastmcp_tasks_client.py calls every task tool of examples/jobs.py (answering
their questions through fastmcp's elicitation handler) and cancels a task.
"""

from __future__ import annotations

import pytest

from .processes import Steps, ours, run_peer, serving_ours


@pytest.fixture(scope="module", params=["http --accept-missing-task-name", "stdio"])
def fastmcp_tasks_client(request: pytest.FixtureRequest) -> Steps:
    if request.param == "stdio":
        stdio = ours("--stdio", "--log-level", "warning")
        return run_peer("fastmcp_tasks_client.py", "stdio", *stdio)
    with serving_ours("--accept-missing-task-name") as url:
        return run_peer("fastmcp_tasks_client.py", "http", url)


def test_a_task_runs_to_its_result(fastmcp_tasks_client: Steps) -> None:
    assert fastmcp_tasks_client.value("slow_compute") == {
        "is_error": False,
        "text": ["interop done after 0.3s"],
    }


def test_a_tool_error_in_a_task_is_an_error_result(fastmcp_tasks_client: Steps) -> None:
    assert fastmcp_tasks_client.value("failing_job") == {
        "is_error": True,
        "text": ["the job failed: the input file is empty"],
    }


def test_a_failed_task_becomes_an_error_result_on_the_peers_side(
    fastmcp_tasks_client: Steps,
) -> None:
    """Our task ends `failed` with a JSON-RPC error; fastmcp-tasks' `call_tool` turns every
    failed task into an `isError` result carrying the error's message (its choice)."""
    assert fastmcp_tasks_client.value("protocol_error_job") == {
        "is_error": True,
        "text": ["the upstream service crashed"],
    }


def test_questions_inside_a_task_are_answered_by_its_elicitation_handler(
    fastmcp_tasks_client: Steps,
) -> None:
    """A task that asks and is run again (confirm_delete), one that asks two questions at
    once (multi_input) and one that waits for its answers in place, twice (interview)."""
    assert fastmcp_tasks_client.value("confirm_delete")["text"] == ["Deleted notes.txt"]
    assert fastmcp_tasks_client.value("multi_input")["text"] == ["Answers: accept, accept"]
    assert fastmcp_tasks_client.value("interview")["text"] == ["Ada likes blue"]


def test_a_question_before_the_task_then_the_task(fastmcp_tasks_client: Steps) -> None:
    """test_tool_with_task asks in an input round of `tools/call`, then creates its task."""
    assert fastmcp_tasks_client.value("test_tool_with_task") == {
        "is_error": False,
        "text": ["Hello, Ada! (from inside the task)"],
    }


def test_a_task_is_cancelled(fastmcp_tasks_client: Steps) -> None:
    assert fastmcp_tasks_client.value("cancel") == {"before": "working", "after": "cancelled"}


def test_the_strict_default_refuses_its_tasks_get_saying_how_to_accept_it() -> None:
    """Pins today's behaviour, where the peer is at fault: fastmcp-tasks 4.1.4 omits
    `Mcp-Name` on `tasks/get`, so over HTTP our default answers its first poll with -32020,
    and the message names the header and says that the server can be set to accept it."""
    with serving_ours() as url:
        steps = run_peer("fastmcp_tasks_client.py", "strict", url)
    error = steps.error("slow_compute")
    assert error["code"] == -32020
    assert "Mcp-Name header is missing" in error["message"]
    assert "--accept-missing-task-name" in error["message"]
