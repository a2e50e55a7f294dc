"""The snippets of docs/embedding.md run, and serve what the page says: each is executed as
written, and the app it builds is served by uvicorn on a loopback port in an asyncio loop,
lifespan on, and called with our client."""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from on_asyncio import run_asyncio, wait_until

from mcp_tasks import TextContent
from mcp_tasks.client import Task, connect_http

PAGE = Path(__file__).parent.parent.parent / "docs" / "embedding.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)


def snippet(marker: str) -> dict[str, Any]:
    [code] = [text for text in SNIPPETS if marker in text]
    namespace: dict[str, Any] = {"__name__": "embedding_docs_snippet"}
    exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[int]:
    """`app` under uvicorn (lifespan on) on a free 127.0.0.1 port; stopped on the way out."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [listener])
        await wait_until(lambda: server.started or server.should_exit)
        assert server.started, "uvicorn did not start"
        try:
            yield listener.getsockname()[1]
        finally:
            server.should_exit = True


def test_the_page_has_the_snippets_these_tests_run() -> None:
    assert len(SNIPPETS) == 2


def test_the_asgi_app_serves_a_task_to_its_end() -> None:
    names = snippet("app = asgi_app(server)")

    async def main() -> None:
        async with (
            serving(names["app"]) as port,
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
        async with serving(names["site"]) as port:
            assert names["server"].is_running
            async with connect_http(f"http://127.0.0.1:{port}/api/mcp") as client:
                assert await client.list_tools() == []

    run_asyncio(main)
