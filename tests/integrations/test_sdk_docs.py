"""Every Python snippet of docs/sdk.md runs, and does what the page says: each is executed
as written, and the server it builds is served (uvicorn on a loopback port) and called."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from doc_snippets import Page
from on_asyncio import run_asyncio

from mcp_tasks import ElicitParams, ElicitResult, TextContent
from mcp_tasks.client import RpcError, connect_http
from mcp_tasks.core import WorkingTask

from .sdk_app import post, serving

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

PAGE = Page("sdk.md")
snippet = PAGE.run


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def test_the_page_has_the_snippets_these_tests_run() -> None:
    assert len(PAGE.snippets) == 7


def test_the_few_lines_give_tasks_to_the_named_tools_only() -> None:
    names = snippet('"render": "optional"')

    async def main() -> None:
        async with serving(names["mcp"]) as url, connect_http(url) as client:
            task = await client.call_tool_or_task("render", {"scene": "intro"})
            assert isinstance(task, WorkingTask)
            assert text_of(await client.await_task(task)) == "intro rendered"
            assert text_of(await client.call_tool("export", {"scene": "intro"})) == "intro.mp4"
            assert text_of(await client.call_tool_or_task("ping")) == "pong"
            refused = await post(url, "tools/call", {"name": "export", "arguments": {"scene": "x"}})
            assert (refused.status, refused.error["code"]) == (400, -32021)
            in_place = await post(
                url, "tools/call", {"name": "render", "arguments": {"scene": "y"}}
            )
            assert in_place.result["content"][0]["text"] == "y rendered"
            with pytest.raises(RpcError) as gone:
                await client.get_task("tsk_unknown")
            assert gone.value.code == -32602

    run_asyncio(main)


def test_the_app_that_answers_task_requests_first_serves_a_whole_task() -> None:
    names = snippet("tasks.streamable_http_app(mcp)")
    assert callable(names["app"])

    async def main() -> None:
        async with (
            serving(names["mcp"], tasks_first=names["tasks"]) as url,
            connect_http(url) as client,
        ):
            task = await client.call_tool_or_task("transcode", {"path": "a.mp4"})
            assert isinstance(task, WorkingTask)
            assert text_of(await client.await_task(task)) == "a.mp4.webm"

    run_asyncio(main)


def test_a_lifespan_of_your_own_runs_the_extension() -> None:
    names = snippet("async def lifespan(app: MCPServer)")

    async def main() -> None:
        async with serving(names["mcp"]) as url, connect_http(url) as client:
            assert names["tasks"].server.is_running
            assert text_of(await client.call_tool("nightly")) == "done"
        assert not names["tasks"].server.is_running

    run_asyncio(main)


def test_ctx_elicit_in_a_task_is_answered_through_the_task() -> None:
    names = snippet("Deploy {service} to production?")

    async def approve(params: ElicitParams) -> ElicitResult:
        assert params.message == "Deploy api to production?"
        return ElicitResult(action="accept", content={"approve": True})

    async def main() -> None:
        async with serving(names["mcp"]) as url, connect_http(url, on_elicit=approve) as client:
            assert text_of(await client.call_tool("deploy", {"service": "api"})) == "api deployed"

    run_asyncio(main)


def test_an_input_required_result_in_a_task_asks_both_questions() -> None:
    names = snippet("def provision(")
    answers = {"Region?": "eu-west", "Size?": "large"}

    async def answer(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"value": answers[params.message]})

    async def main() -> None:
        async with serving(names["mcp"]) as url, connect_http(url, on_elicit=answer) as client:
            result = await client.call_tool("provision")
            assert text_of(result) == "a large machine in eu-west"

    run_asyncio(main)


def test_an_input_first_tool_asks_then_books_as_a_task() -> None:
    names = snippet("input_first={")

    async def when(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"date": "May 1"})

    async def main() -> None:
        async with serving(names["mcp"]) as url, connect_http(url, on_elicit=when) as client:
            first = await post(
                url,
                "tools/call",
                {"name": "book", "arguments": {"city": "Oslo"}},
                capabilities={
                    "elicitation": {},
                    "extensions": {"io.modelcontextprotocol/tasks": {}},
                },
            )
            assert first.result["resultType"] == "input_required"
            assert (
                text_of(await client.call_tool("book", {"city": "Oslo"})) == "Oslo booked for May 1"
            )

    run_asyncio(main)


def test_the_store_snippet_keeps_tasks_in_a_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    names = snippet("SQLiteTaskStore(")
    tasks = names["tasks"]
    options = tasks.server.core.task_options
    assert (options.ttl_ms, options.poll_interval_ms, options.max_tasks) == (
        3_600_000,
        2_000,
        10_000,
    )

    async def main() -> None:
        await tasks.server.store.aclose()

    run_asyncio(main)
    assert (tmp_path / "tasks.db").exists()
