"""The snippets of docs/embedding.md run, and serve what the page says: each is executed as
written, and the app it builds is served by uvicorn on a loopback port in an asyncio loop,
lifespan on, and called with our client."""

from __future__ import annotations

from doc_snippets import Page
from on_asyncio import run_asyncio, serving_asgi

from mcp_tasks import TextContent
from mcp_tasks.client import Task, connect_http

PAGE = Page("embedding.md")
snippet = PAGE.run


def test_the_page_has_the_snippets_these_tests_run() -> None:
    assert len(PAGE.snippets) == 2


def test_the_asgi_app_serves_a_task_to_its_end() -> None:
    names = snippet("app = asgi_app(server)")

    async def main() -> None:
        async with (
            serving_asgi(names["app"]) as port,
            connect_http(f"http://127.0.0.1:{port}/mcp") as client,
        ):
            task = await client.call_tool_or_task("report")
            assert isinstance(task, Task)
            result = await client.await_task(task)
            assert isinstance(result.content[0], TextContent)
            assert result.content[0].text == "report ready"
        assert not names["server"].is_running  # the lifespan ended it

    run_asyncio(main)


def test_the_starlette_mount_serves_under_its_path_with_the_lifespan() -> None:
    names = snippet("Mount(")

    async def main() -> None:
        async with serving_asgi(names["site"]) as port:
            assert names["server"].is_running
            async with connect_http(f"http://127.0.0.1:{port}/api/mcp") as client:
                assert await client.list_tools() == []

    run_asyncio(main)
