"""`TasksExtension` in an official-SDK `MCPServer`, served for real (uvicorn on a loopback
port, in the test's asyncio loop) and driven by our client, or by raw JSON-RPC for what our
client never sends: tasks for the tools named in `task_support`, none for the others, the
-32021/-32602/-32601 rules, input inside a task, cancellation, TTL and `max_tasks`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from on_asyncio import run_asyncio

from mcp_tasks import (
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    ListRootsResult,
    Root,
    TaskOptions,
    TextContent,
)
from mcp_tasks.client import Client, Task, TaskFailed, connect_http
from mcp_tasks.core import (
    CancelledTask,
    CompletedTask,
    InputRequiredTask,
    WorkingTask,
)

from .sdk_app import TASKS, WITH_TASKS, Gates, build, post, serving

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
both_ways = pytest.mark.parametrize("tasks_first", [False, True], ids=["sdk-stack", "tasks-first"])
"""For the tests of tasks/get|update|cancel: through the SDK's stack, and answered first."""

Scenario = Callable[[Client, str, Gates], Awaitable[None]]


def served(
    scenario: Scenario,
    *,
    tasks: TaskOptions | None = None,
    tasks_first: bool = False,
    **client: Any,
) -> None:
    """`scenario(client, url, gates)` under asyncio, against a fresh SDK server (served as
    `TasksExtension.streamable_http_app` when `tasks_first`)."""

    async def main() -> None:
        gates = Gates()
        mcp, extension = build(gates, tasks=tasks)
        first = extension if tasks_first else None
        async with (
            serving(mcp, tasks_first=first) as url,
            connect_http(url, **client) as our_client,
        ):
            await scenario(our_client, url, gates)

    run_asyncio(main)


async def unused(params: ElicitParams) -> ElicitResult:
    """Declares elicitation; the test answers with `update_task` itself."""
    raise AssertionError("answered by the test")


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


async def until(client: Client, task_id: str, kind: type) -> Task:
    """Poll `tasks/get` until the task is of `kind` (bounded by run_asyncio's deadline)."""
    while True:
        task = await client.get_task(task_id)
        if isinstance(task, kind):
            return task
        await anyio.sleep(0.02)


# --- which calls become tasks ------------------------------------------------------------------


def test_a_named_tool_becomes_a_task_with_progress_as_status_and_the_sdk_result() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        task = await client.call_tool_or_task("slow", {"seconds": 0.3})
        assert isinstance(task, WorkingTask) and task.result_type == "task"
        seen = await until(client, task.task_id, WorkingTask)
        while seen.status_message != "half way (1/2)":  # the tool's report_progress
            seen = await until(client, task.task_id, WorkingTask)
        done = await until(client, task.task_id, CompletedTask)
        assert text_of(done.result) == "slept 0.3s"
        assert done.result.structured_content == {"result": "slept 0.3s"}

    served(scenario)


def test_a_tool_not_named_stays_synchronous_for_a_client_with_the_extension() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        answer = await post(
            url,
            "tools/call",
            {"name": "greet", "arguments": {"name": "Ada"}},
            capabilities=WITH_TASKS,
        )
        assert answer.result["resultType"] == "complete"
        assert answer.result["content"][0]["text"] == "Hello, Ada!"
        assert "taskId" not in answer.result
        assert answer.result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "sdk-test"

    served(scenario)


def test_an_optional_tool_runs_in_place_for_a_client_without_the_extension() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        answer = await post(url, "tools/call", {"name": "slow", "arguments": {"seconds": 0}})
        assert answer.status == 200
        assert answer.result["resultType"] == "complete"
        assert answer.result["content"][0]["text"] == "slept 0s"
        assert gates.runs["slow"] == 1

    served(scenario)


def test_a_required_tool_is_refused_with_32021_to_a_client_without_the_extension() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        answer = await post(url, "tools/call", {"name": "gated", "arguments": {}})
        assert answer.status == 400
        assert answer.error["code"] == -32021
        assert answer.error["data"]["requiredCapabilities"]["extensions"] == {TASKS: {}}
        assert "gated" not in gates.runs  # refused before it ran

    served(scenario)


def test_the_created_task_is_stored_before_the_handle_is_sent_and_carries_the_sdk_server_info() -> (
    None
):
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        created = await post(
            url, "tools/call", {"name": "gated", "arguments": {}}, capabilities=WITH_TASKS
        )
        handle = created.result
        assert handle["resultType"] == "task" and handle["status"] == "working"
        assert set(handle) >= {"taskId", "createdAt", "lastUpdatedAt", "ttlMs"}
        assert handle["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "sdk-test"
        got = await post(url, "tasks/get", {"taskId": handle["taskId"]}, capabilities=WITH_TASKS)
        assert got.result["taskId"] == handle["taskId"] and got.result["resultType"] == "complete"
        gates.release.set()
        done = await until(client, handle["taskId"], CompletedTask)
        assert text_of(done.result) == "released"

    served(scenario)


# --- tasks/get, tasks/update, tasks/cancel: the error codes --------------------------------------


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
@both_ways
def test_task_methods_need_the_extension_on_the_request_before_the_task_is_looked_up(
    method: str,
    tasks_first: bool,
) -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        answer = await post(url, method, {"taskId": "gate-test", "inputResponses": {}})
        assert (answer.status, answer.error["code"]) == (400, -32021)
        assert answer.error["data"]["requiredCapabilities"]["extensions"] == {TASKS: {}}

    served(scenario, tasks_first=tasks_first)


@both_ways
def test_a_task_read_names_the_sdk_server_whichever_way_it_is_answered(tasks_first: bool) -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        task = await client.call_tool_or_task("slow", {"seconds": 0})
        assert isinstance(task, WorkingTask)
        answer = await post(url, "tasks/get", {"taskId": task.task_id}, capabilities=WITH_TASKS)
        info = answer.result["_meta"]["io.modelcontextprotocol/serverInfo"]
        assert (info["name"], info["version"]) == ("sdk-test", "1.0.0"), info

    served(scenario, tasks_first=tasks_first)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
@both_ways
def test_an_unknown_task_is_32602(method: str, tasks_first: bool) -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        params = {"taskId": "tsk_nobody", "inputResponses": {}}
        answer = await post(url, method, params, capabilities=WITH_TASKS)
        assert answer.error["code"] == -32602
        assert "tsk_nobody" in answer.error["message"]

    served(scenario, tasks_first=tasks_first)


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
def test_removed_task_methods_are_32601_with_404(method: str) -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        answer = await post(url, method, {"taskId": "x"}, capabilities=WITH_TASKS)
        assert (answer.status, answer.error["code"]) == (404, -32601)

    served(scenario)


@both_ways
def test_a_task_name_header_that_does_not_match_is_32020(tasks_first: bool) -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        task = await client.call_tool_or_task("gated")
        assert isinstance(task, WorkingTask)
        wrong = {"Mcp-Name": "not-" + task.task_id}
        answer = await post(
            url, "tasks/get", {"taskId": task.task_id}, capabilities=WITH_TASKS, headers=wrong
        )
        assert (answer.status, answer.error["code"]) == (400, -32020)
        gates.release.set()

    served(scenario, tasks_first=tasks_first)


@both_ways
def test_cancel_stops_the_sdk_tool_and_a_finished_task_acks_cancel_again(tasks_first: bool) -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        task = await client.call_tool_or_task("gated")
        assert isinstance(task, WorkingTask)
        await gates.started.wait()
        ack = await post(url, "tasks/cancel", {"taskId": task.task_id}, capabilities=WITH_TASKS)
        assert ack.result == {"resultType": "complete", "_meta": ack.result["_meta"]}
        await gates.cancelled.wait()  # the cancellation reached the tool's await
        await until(client, task.task_id, CancelledTask)
        again = await post(url, "tasks/cancel", {"taskId": task.task_id}, capabilities=WITH_TASKS)
        assert again.result["resultType"] == "complete"  # an ack, not an error
        assert not gates.finished.is_set()

    served(scenario, tasks_first=tasks_first)


def test_a_synchronous_sdk_tool_runs_as_a_task_with_its_structured_result() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        task = await client.call_tool_or_task("tally", {"numbers": [1, 2, 3]})
        assert isinstance(task, WorkingTask)
        done = await until(client, task.task_id, CompletedTask)
        assert text_of(done.result) == "6" and done.result.structured_content == {"result": 6}

    served(scenario)


def test_a_tool_error_completes_with_is_error_and_an_mcp_error_fails_the_task() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        crashed = await client.call_tool("crash")
        assert crashed.is_error is True and "the disk is full" in text_of(crashed)
        with pytest.raises(TaskFailed) as failed:
            await client.call_tool("refuse")
        assert (failed.value.code, failed.value.message) == (-32603, "the upstream refused")

    served(scenario)


# --- input inside a task -----------------------------------------------------------------------


@both_ways
def test_ctx_elicit_inside_a_task_is_input_required_answered_with_tasks_update(
    tasks_first: bool,
) -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        task = await client.call_tool_or_task("ask_name")
        assert isinstance(task, WorkingTask)
        asked = await until(client, task.task_id, InputRequiredTask)
        [(key, request)] = asked.input_requests.items()
        assert request.params.message == "What is your name?"
        assert request.params.requested_schema["properties"]["name"]["type"] == "string"
        await client.update_task(
            task.task_id, {key: ElicitResult(action="accept", content={"name": "Ada"})}
        )
        again = await until(client, task.task_id, InputRequiredTask)
        while key in again.input_requests:  # the first answer was taken; the next question
            again = await until(client, task.task_id, InputRequiredTask)
        [(second, request)] = again.input_requests.items()
        assert request.params.message == "Really Ada?"
        await client.update_task(
            task.task_id, {second: ElicitResult(action="accept", content={"name": "Ada L."})}
        )
        done = await until(client, task.task_id, CompletedTask)
        assert text_of(done.result) == "Hello, Ada / Ada L.!"
        assert gates.runs["ask_name"] == 1  # waited in place: never run again

    served(scenario, on_elicit=unused, tasks_first=tasks_first)


def test_a_task_asking_what_the_client_cannot_answer_fails_with_32021() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        with pytest.raises(TaskFailed) as failed:
            await client.call_tool("ask_name")  # this client declares no elicitation
        assert failed.value.code == -32021
        assert failed.value.data == {"requiredCapabilities": {"elicitation": {}}}

    served(scenario)


def test_a_declined_elicitation_reaches_the_tool_as_the_sdk_declined_result() -> None:
    async def decline(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="decline")

    async def scenario(client: Client, url: str, gates: Gates) -> None:
        assert text_of(await client.call_tool("ask_name")) == "no name (decline)"

    served(scenario, on_elicit=decline)


def test_sampling_and_roots_inside_a_task_are_its_questions() -> None:
    async def sample(params: CreateMessageParams) -> CreateMessageResult:
        assert params.max_tokens == 5
        return CreateMessageResult(
            role="assistant", content={"type": "text", "text": "4"}, model="m"
        )

    async def roots() -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri="file:///work")])

    async def scenario(client: Client, url: str, gates: Gates) -> None:
        result = await client.call_tool("ask_model")
        assert text_of(result) == "model said 4; roots ['file:///work']"

    served(scenario, on_sample=sample, on_roots=roots)


def test_an_input_required_result_inside_a_task_asks_both_at_once_and_runs_again_with_answers() -> (
    None
):
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        task = await client.call_tool_or_task("two_questions")
        asked = await until(client, task.task_id, InputRequiredTask)
        assert sorted(asked.input_requests) == ["first", "second"]
        await client.update_task(
            task.task_id, {"first": ElicitResult(action="accept", content={"answer": "a"})}
        )
        partial = await client.get_task(task.task_id)
        assert isinstance(partial, InputRequiredTask) and sorted(partial.input_requests) == [
            "second"
        ]
        await client.update_task(
            task.task_id, {"second": ElicitResult(action="accept", content={"answer": "b"})}
        )
        done = await until(client, task.task_id, CompletedTask)
        assert text_of(done.result) == "answers a and b"
        assert gates.runs["two_questions"] == 2

    served(scenario, on_elicit=unused)


def test_an_input_first_tool_asks_before_its_task_then_runs_as_a_task_with_the_answer() -> None:
    async def when(params: ElicitParams) -> ElicitResult:
        assert params.message == "When in Oslo?"
        return ElicitResult(action="accept", content={"date": "May 1"})

    async def scenario(client: Client, url: str, gates: Gates) -> None:
        first = await post(
            url,
            "tools/call",
            {"name": "book", "arguments": {"city": "Oslo"}},
            capabilities={"elicitation": {}, **WITH_TASKS},
        )
        assert first.result["resultType"] == "input_required" and "taskId" not in first.result
        assert list(first.result["inputRequests"]) == ["date"]
        task = await client.call_tool_or_task("book", {"city": "Oslo"})
        assert isinstance(task, WorkingTask)  # round 2 made the task
        done = await until(client, task.task_id, CompletedTask)
        assert text_of(done.result) == "booked Oslo on May 1"

    served(scenario, on_elicit=when)


def test_an_input_first_tool_runs_whole_in_place_for_a_client_without_the_extension() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        params: dict[str, Any] = {"name": "book", "arguments": {"city": "Rome"}}
        first = await post(url, "tools/call", params, capabilities={"elicitation": {}})
        assert first.result["resultType"] == "input_required"
        answered = {
            **params,
            "inputResponses": {"date": {"action": "accept", "content": {"date": "June 2"}}},
            "requestState": first.result["requestState"],
        }
        done = await post(url, "tools/call", answered, capabilities={"elicitation": {}})
        assert done.result["resultType"] == "complete"
        assert done.result["content"][0]["text"] == "booked Rome on June 2"

    served(scenario)


def test_logging_inside_a_task_is_dropped_and_progress_is_its_status() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        task = await client.call_tool_or_task("noisy")
        seen = await until(client, task.task_id, WorkingTask)
        while seen.status_message != "nearly (3/4)":
            seen = await until(client, task.task_id, WorkingTask)
        gates.release.set()
        done = await until(client, task.task_id, CompletedTask)
        assert text_of(done.result) == "quiet now"

    served(scenario)


# --- TTL and limits ----------------------------------------------------------------------------


@both_ways
def test_a_task_past_its_ttl_is_gone_32602(tasks_first: bool) -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        task = await client.call_tool_or_task("slow", {"seconds": 0})
        assert isinstance(task, WorkingTask) and task.ttl_ms == 300
        await until(client, task.task_id, CompletedTask)  # readable while its TTL runs

        async def gone() -> bool:
            answer = await post(url, "tasks/get", {"taskId": task.task_id}, capabilities=WITH_TASKS)
            return "error" in answer.body and answer.error["code"] == -32602

        while not await gone():
            await anyio.sleep(0.05)

    served(scenario, tasks=TaskOptions(ttl_ms=300, poll_interval_ms=50), tasks_first=tasks_first)


def test_max_tasks_refuses_one_more_until_one_expires() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        first = await client.call_tool_or_task("gated")
        assert isinstance(first, WorkingTask)
        refused = await post(
            url, "tools/call", {"name": "gated", "arguments": {}}, capabilities=WITH_TASKS
        )
        assert refused.error["code"] == -32603
        assert "Too many tasks" in refused.error["message"]
        assert refused.error["data"]["retryAfterMs"] >= 1000
        assert gates.runs["gated"] == 1  # the refused call never ran
        gates.release.set()

    served(scenario, tasks=TaskOptions(max_tasks=1, ttl_ms=60_000))


def test_the_task_options_shape_the_task_handle() -> None:
    async def scenario(client: Client, url: str, gates: Gates) -> None:
        task = await client.call_tool_or_task("slow", {"seconds": 0})
        assert (task.poll_interval_ms, task.ttl_ms) == (250, 45_000)

    served(scenario, tasks=TaskOptions(poll_interval_ms=250, ttl_ms=45_000))
