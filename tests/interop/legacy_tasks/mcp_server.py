"""The reference server of the `mcp` 1.30.0 line: its low-level `Server` with the
2025-11-25 tasks utility (`server.experimental.enable_tasks()`), legacy-only, written as a
user of that SDK would, to show the wire a 2025 task client expects.

    python mcp_server.py stdio     # one session on stdin/stdout
    python mcp_server.py http      # Streamable HTTP (stateful sessions) on a free loopback
                                   # port; prints {"ready": URL} once it listens

Its three tools, all `execution.taskSupport: "required"` (TOOLS in tasks_scenario.py):
`slow` sleeps `seconds` and answers "<label> done"; `ask` asks its `question` by a form
elicitation inside its task (the task goes `input_required` until the answer) and answers
"answer: <the answer>"; `fail` fails its task as the 2025-11-25 spec says a tool error
does: status `failed`, `statusMessage` the reason, and `tasks/result` the tool's `isError`
result (the SDK's own path for a raised exception stores no result at all, so its
`tasks/result` would carry nothing but `_meta`).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.experimental.task_context import ServerTaskContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import Mount

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "peers"))

from _serving import serve_http
from tasks_scenario import TOOLS

server = Server("mcp-1.30-tasks")
support = server.experimental.enable_tasks()


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], isError=is_error
    )


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name=name,
            description=tool["description"],
            inputSchema=tool["input_schema"],
            execution=types.ToolExecution(taskSupport="required"),
        )
        for name, tool in TOOLS.items()
    ]


async def _slow(task: ServerTaskContext, arguments: dict[str, Any]) -> types.CallToolResult:
    await anyio.sleep(float(arguments["seconds"]))
    return _text(f"{arguments['label']} done")


async def _ask(task: ServerTaskContext, arguments: dict[str, Any]) -> types.CallToolResult:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    }
    answer = await task.elicit(message=arguments["question"], requestedSchema=schema)
    return _text(f"answer: {(answer.content or {}).get('answer', answer.action)}")


async def _fail(task: ServerTaskContext, arguments: dict[str, Any]) -> types.CallToolResult:
    result = _text(arguments["reason"], is_error=True)
    await support.store.store_result(task.task_id, result)
    await task.fail(arguments["reason"])
    return result


WORK = {"slow": _slow, "ask": _ask, "fail": _fail}


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> types.CreateTaskResult:
    context = server.request_context
    context.experimental.validate_task_mode("required")
    work = WORK[name]

    async def run(task: ServerTaskContext) -> types.CallToolResult:
        return await work(task, arguments)

    return await context.experimental.run_task(run)


async def serve_stdio() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app() -> Starlette:
    manager = StreamableHTTPSessionManager(app=server)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)


if __name__ == "__main__":
    if sys.argv[1:] == ["stdio"]:
        anyio.run(serve_stdio)
    else:
        serve_http(http_app())
