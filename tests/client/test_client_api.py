"""What a Python user of the Client gets, over both real transports against conformance
/server.py's fixtures (HTTP on a loopback socket; stdio to a `mcp-tasks serve` process):
task objects with `.status` and a decoded result, `is_error` False when left out, and the
typed helpers for prompts, resources and completion, through their input rounds."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from mcp_tasks import (
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    ElicitResult,
    InputRequired,
    RequestContext,
    TextContent,
)
from mcp_tasks.client import Client, Task, connect_http, connect_stdio
from mcp_tasks.core import (
    CancelledTask,
    CompletedTask,
    FailedTask,
    InputRequiredTask,
    PromptReference,
    ResourceTemplateReference,
    TaskStatus,
    WorkingTask,
)
from mcp_tasks.server import Server
from mcp_tasks.transports import serve_http

from .conformance_target import build

ROOT = Path(__file__).parent.parent.parent
TARGET = str(ROOT / "tests" / "client" / "conformance_target.py")
TIMEOUT = 30


def build_with_a_resource_that_asks() -> Server:
    """The fixtures, and over HTTP a resource that asks for context before it is read."""
    server = build()

    @server.resource("test://asks", mime_type="text/plain")
    async def asks(ctx: RequestContext) -> str | InputRequired:
        answer = ctx.elicit_response("context")
        if answer is None or not isinstance(answer.content, dict):
            ask = ElicitParams(message="Which context?", requested_schema={"type": "object"})
            return InputRequired(requests={"context": ElicitRequest(params=ask)})
        return f"read in {answer.content['context']}"

    return server


@asynccontextmanager
async def http_client(**options: Any) -> AsyncIterator[Client]:
    server = build_with_a_resource_that_asks()
    async with server.running(), trio.open_nursery() as nursery:
        port = await nursery.start(serve_http, server, "127.0.0.1", 0)
        async with connect_http(f"http://127.0.0.1:{port}/mcp", **options) as client:
            yield client
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def stdio_client(**options: Any) -> AsyncIterator[Client]:
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", TARGET, "--stdio"]
    async with connect_stdio(command, stderr="capture", **options) as client:
        yield client


CONNECT = {"http": http_client, "stdio": stdio_client}


@pytest.fixture(params=sorted(CONNECT))
def connect(request: pytest.FixtureRequest) -> Any:
    return CONNECT[request.param]


async def answer_context(params: ElicitParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"context": "the moon"})


async def until(client: Client, task_id: str, status: TaskStatus) -> Task:
    """Poll until the task is in `status` (bounded by the caller's deadline); a task that
    ended in another status fails the test."""
    while (task := await client.get_task(task_id)).status != status:
        assert not task.status.is_terminal, task
        await trio.sleep(0.05)
    return task


async def test_every_task_has_its_status_and_a_completed_one_its_decoded_result(
    connect: Any,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(on_elicit=answer_context) as client:
            arguments = {"seconds": 0.2, "label": "sum"}
            started = await client.call_tool_or_task("slow_compute", arguments)
            assert isinstance(started, WorkingTask) and started.status == "working"
            done = await until(client, started.task_id, TaskStatus.COMPLETED)
            assert isinstance(done, CompletedTask) and done.status.is_terminal
            assert isinstance(done.result, CallToolResult) and done.result.is_error is False
            assert done.result.content == [TextContent(text="sum done after 0.2s")]

            failing = await client.call_tool_or_task("failing_job")
            assert not isinstance(failing, CallToolResult)
            tool_error = await until(client, failing.task_id, TaskStatus.COMPLETED)
            assert isinstance(tool_error, CompletedTask) and tool_error.result.is_error is True

            broken = await client.call_tool_or_task("protocol_error_job")
            assert not isinstance(broken, CallToolResult)
            failed = await until(client, broken.task_id, TaskStatus.FAILED)
            assert isinstance(failed, FailedTask) and failed.error.code == -32603

            asking = await client.call_tool_or_task("confirm_delete", {"filename": "f"})
            assert not isinstance(asking, CallToolResult)
            waiting = await until(client, asking.task_id, TaskStatus.INPUT_REQUIRED)
            assert isinstance(waiting, InputRequiredTask) and list(waiting.input_requests)
            await client.cancel_task(asking.task_id)
            cancelled = await client.get_task(asking.task_id)
            assert isinstance(cancelled, CancelledTask) and cancelled.status == "cancelled"


async def test_is_error_is_false_when_the_server_leaves_it_out(connect: Any) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect() as client:
            raw = await client.request("tools/call", {"name": "greet", "arguments": {"name": "W"}})
            assert "isError" not in raw
            assert (await client.call_tool("greet", {"name": "W"})).is_error is False
            assert (await client.call_tool("test_error_handling")).is_error is True


async def test_prompts_resources_and_completion_have_typed_helpers(connect: Any) -> None:
    with trio.fail_after(TIMEOUT):
        async with connect(on_elicit=answer_context) as client:
            prompts = {prompt.name for prompt in await client.list_prompts()}
            assert {"test_simple_prompt", "test_input_required_result_prompt"} <= prompts
            prompt = await client.get_prompt(
                "test_prompt_with_arguments", {"arg1": "a", "arg2": "b"}
            )
            assert prompt.messages[0].content == TextContent(
                text="Prompt with arguments: arg1='a', arg2='b'"
            )
            asked = await client.get_prompt("test_input_required_result_prompt")  # a round
            assert asked.messages[0].content == TextContent(text="Use this context: the moon")

            resources = {resource.uri for resource in await client.list_resources()}
            assert {"test://static-text", "test://static-binary"} <= resources
            templates = await client.list_resource_templates()
            assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
            read = await client.read_resource("test://static-text")
            assert read.contents[0].text == "This is the content of the static text resource."
            assert read.ttl_ms >= 0 and read.cache_scope in ("public", "private")

            ref = PromptReference(name="test_prompt_with_arguments")
            completion = await client.complete(ref, "arg1", "par")
            assert completion.values == ["paris", "park", "party"]
            template = ResourceTemplateReference(uri="test://template/{id}/data")
            assert (await client.complete(template, "id", "1")).values == []  # no completer


async def test_read_resource_answers_its_input_rounds() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_client(on_elicit=answer_context) as client:
            read = await client.read_resource("test://asks")
    assert read.contents[0].text == "read in the moon"
