"""What docs/sdk.md says at the edges: tasks bound to the caller the SDK authenticated, a URL
elicitation inside a task, a connection of an earlier protocol revision left to the SDK,
and the answers to an `InputRequiredResult` that reach another process than the task's."""

from __future__ import annotations

import secrets
from typing import Any

import anyio
import pytest
from mcp.client import Client as SdkClient
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp_types import TextContent as SdkTextContent
from on_asyncio import run_asyncio

from mcp_tasks import ElicitParams, ElicitResult, TextContent
from mcp_tasks.client import Client, RpcError, connect_http
from mcp_tasks.core import CompletedTask, FailedTask, InputRequiredTask, WorkingTask
from mcp_tasks.integrations.mcp_sdk import TasksExtension
from mcp_tasks.store import RedisTaskStore

from .sdk_app import Gates, build, serving

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


async def until(client: Client, task_id: str, kind: type) -> Any:
    while not isinstance(task := await client.get_task(task_id), kind):
        await anyio.sleep(0.02)
    return task


class Tokens:
    """Two callers, each with its own bearer token."""

    async def verify_token(self, token: str) -> AccessToken | None:
        if token not in ("token-ada", "token-bob"):
            return None
        return AccessToken(token=token, client_id="app", scopes=[], subject=token[6:])


def test_a_task_answers_only_the_caller_the_sdk_authenticated() -> None:
    async def main() -> None:
        tasks = TasksExtension(task_support={"mine": "required"})
        auth = AuthSettings(issuer_url="https://auth.example.com", resource_server_url=None)
        mcp = MCPServer(
            "private",
            extensions=[tasks],
            lifespan=tasks.lifespan,
            auth=auth,
            token_verifier=Tokens(),
        )

        @mcp.tool()
        async def mine() -> str:
            return "secret"

        async with (
            serving(mcp) as url,
            connect_http(url, headers={"Authorization": "Bearer token-ada"}) as ada,
            connect_http(url, headers={"Authorization": "Bearer token-bob"}) as bob,
        ):
            task = await ada.call_tool_or_task("mine")
            assert isinstance(task, WorkingTask)
            done = await until(ada, task.task_id, CompletedTask)
            assert done.result.content[0].text == "secret"
            with pytest.raises(RpcError) as unknown:
                await bob.get_task(task.task_id)  # another caller: no such task
            assert unknown.value.code == -32602
            with pytest.raises(RpcError):
                await bob.cancel_task(task.task_id)

    run_asyncio(main)


def test_a_url_elicitation_inside_a_task_reaches_the_client_in_url_mode() -> None:
    async def sign_in(params: ElicitParams) -> ElicitResult:
        assert (params.mode, params.url, params.message) == (
            "url",
            "https://example.com/login",
            "Sign in, please",
        )
        return ElicitResult(action="accept")

    async def main() -> None:
        mcp, _ = build(Gates())
        async with serving(mcp) as url, connect_http(url, on_elicit=sign_in) as client:
            result = await client.call_tool("open_link")
            block = result.content[0]
            assert isinstance(block, TextContent) and block.text == "sign-in accept"

    run_asyncio(main)


def test_a_client_of_an_earlier_revision_gets_every_tool_as_the_sdk_runs_it() -> None:
    async def main() -> None:
        gates = Gates()
        mcp, _ = build(gates)
        async with serving(mcp) as url, SdkClient(url, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            result = await client.call_tool("tally", {"numbers": [4, 5]})  # "required" here
            block = result.content[0]
            assert isinstance(block, SdkTextContent) and block.text == "9"
            assert gates.runs["tally"] == 1

    run_asyncio(main)


def test_answers_to_an_input_required_result_at_another_process_fail_the_task(
    redis_url: str,
) -> None:
    async def main() -> None:
        prefix = "sdk" + secrets.token_hex(6)
        store_a, store_b = (RedisTaskStore(redis_url, prefix=prefix) for _ in range(2))
        server_a, _ = build(Gates(), store=store_a)
        server_b, _ = build(Gates(), store=store_b)

        async def unused(params: ElicitParams) -> ElicitResult:
            raise AssertionError("answered by the test")

        try:
            async with (
                serving(server_a) as url_a,
                serving(server_b) as url_b,
                connect_http(url_a, on_elicit=unused) as on_a,
                connect_http(url_b, on_elicit=unused) as on_b,
            ):
                task = await on_a.call_tool_or_task("two_questions")
                await until(on_b, task.task_id, InputRequiredTask)
                answers = {
                    key: ElicitResult(action="accept", content={"answer": key})
                    for key in ("first", "second")
                }
                await on_b.update_task(task.task_id, answers)  # B runs the tool again: it cannot
                failed = await until(on_a, task.task_id, FailedTask)
                assert "can run only in the process that started its task" in failed.error.message
        finally:
            await store_a.aclose()
            await store_b.aclose()

    run_asyncio(main)
