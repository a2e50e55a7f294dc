"""The official SDK's own client against an `MCPServer` with `TasksExtension`: as it comes
(it declares no tasks extension: optional tools run in place, required ones are -32021),
and with a small `ClientExtension` of the SDK's kind that claims `resultType: "task"` and
sees the task through with `tasks/get` and `tasks/update`. Over Streamable HTTP on a
loopback port, and in process (the SDK's direct dispatch: no HTTP headers at all)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import anyio
import pytest
from mcp.client import ClaimContext, Client, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, RequestParams, Result, TextContent
from mcp_types import Request as SdkRequest
from on_asyncio import run_asyncio
from pydantic import ConfigDict

from .sdk_app import TASKS, Gates, build, serving

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

Answer = Callable[[dict[str, Any]], dict[str, Any]]
"""An input request (`{method, params}`) -> the client's answer to it."""


class CreatedTask(Result):
    """`CreateTaskResult` as this client reads it."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str


class GetTask(SdkRequest[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class UpdateTask(SdkRequest[TaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class Ack(Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["complete"] = "complete"


class TaskState(Result):
    model_config = ConfigDict(extra="allow")
    status: str


class SdkTasks(ClientExtension):
    """Just enough of the Tasks extension for the SDK's client: declare it, and resolve a
    task handle by polling it to its end, answering its questions with `answer`."""

    identifier = TASKS

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer = answer
        self.seen: list[str] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._see_through)]

    async def _see_through(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        session, task_id = ctx.session, created.task_id
        while True:
            state = await session.send_request(
                GetTask(params=TaskParams(task_id=task_id)), TaskState
            )
            self.seen.append(state.status)
            extra = state.model_extra or {}
            if state.status == "completed":
                return CallToolResult.model_validate(extra["result"])
            if state.status in ("failed", "cancelled"):
                raise RuntimeError(f"task {state.status}: {extra.get('error')}")
            if state.status == "input_required" and self.answer is not None:
                answers = {key: self.answer(asked) for key, asked in extra["inputRequests"].items()}
                params = TaskParams(task_id=task_id, inputResponses=answers)
                await session.send_request(UpdateTask(params=params), Ack)
            await anyio.sleep(0.02)


def with_sdk_client(
    scenario: Callable[[Client, Gates], Awaitable[None]],
    *,
    over_http: bool = True,
    extensions: Sequence[ClientExtension] = (),
) -> None:
    async def main() -> None:
        gates = Gates()
        mcp, _ = build(gates)
        if not over_http:
            async with Client(mcp, extensions=extensions) as client:
                await scenario(client, gates)
            return
        async with serving(mcp) as url, Client(url, extensions=extensions) as client:
            await scenario(client, gates)

    run_asyncio(main)


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


@pytest.mark.parametrize("over_http", [True, False], ids=["http", "in-process"])
def test_the_plain_sdk_client_gets_in_place_results_and_32021_for_task_only_tools(
    over_http: bool,
) -> None:
    async def scenario(client: Client, gates: Gates) -> None:
        assert client.protocol_version == "2026-07-28"
        assert text_of(await client.call_tool("greet", {"name": "Ada"})) == "Hello, Ada!"
        assert text_of(await client.call_tool("slow", {"seconds": 0})) == "slept 0s"
        with pytest.raises(MCPError) as refused:
            await client.call_tool("gated")
        assert refused.value.code == -32021
        assert refused.value.data["requiredCapabilities"]["extensions"] == {TASKS: {}}

    with_sdk_client(scenario, over_http=over_http)


@pytest.mark.parametrize("over_http", [True, False], ids=["http", "in-process"])
def test_the_sdk_client_with_a_tasks_claim_sees_a_task_through(over_http: bool) -> None:
    tasks = SdkTasks()

    async def scenario(client: Client, gates: Gates) -> None:
        result = await client.call_tool("slow", {"seconds": 0.2})
        assert text_of(result) == "slept 0.2s"
        assert tasks.seen[0] == "working" and tasks.seen[-1] == "completed"

    with_sdk_client(scenario, over_http=over_http, extensions=[tasks])


def test_the_sdk_client_answers_a_question_asked_inside_the_task() -> None:
    def answer(asked: dict[str, Any]) -> dict[str, Any]:
        assert asked["method"] == "elicitation/create"
        name = "Grace" if asked["params"]["message"] == "What is your name?" else "G. Hopper"
        return {"action": "accept", "content": {"name": name}}

    tasks = SdkTasks(answer)

    async def scenario(client: Client, gates: Gates) -> None:
        result = await client.call_tool("ask_name")
        assert text_of(result) == "Hello, Grace / G. Hopper!"
        assert "input_required" in tasks.seen

    # The questions need the client to declare elicitation: give it a callback.
    async def main() -> None:
        gates = Gates()
        mcp, _ = build(gates)

        async def elicit(context: Any, params: Any) -> Any:
            raise AssertionError("asked through the task, not as a server-to-client request")

        async with (
            serving(mcp) as url,
            Client(url, extensions=[tasks], elicitation_callback=elicit) as client,
        ):
            await scenario(client, gates)

    run_asyncio(main)
