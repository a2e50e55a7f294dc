"""An official-SDK server with `TasksExtension` for the tests, served for real: the SDK's
Streamable HTTP app under uvicorn on a free loopback port, in the test's own asyncio loop
(so a tool and the test share events), and a raw JSON-RPC poster for what a client of ours
would never send (no extension declared, a wrong header)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)
from on_asyncio import serving_asgi
from pydantic import BaseModel

from mcp_tasks import TaskOptions
from mcp_tasks.integrations.mcp_sdk import TasksExtension, start_task
from mcp_tasks.store import TaskStore

PROTOCOL_VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"extensions": {TASKS: {}}}
TASK_SUPPORT = {
    "slow": "optional",
    "gated": "required",
    "ask_name": "required",
    "ask_model": "required",
    "two_questions": "required",
    "book": "optional",
    "noisy": "required",
    "crash": "required",
    "refuse": "required",
    "tally": "required",
    "open_link": "required",
}


class Name(BaseModel):
    name: str


@dataclass
class Gates:
    """What the tools wait on and report, shared with the test (one asyncio loop)."""

    release: anyio.Event = field(default_factory=anyio.Event)
    started: anyio.Event = field(default_factory=anyio.Event)
    cancelled: anyio.Event = field(default_factory=anyio.Event)
    finished: anyio.Event = field(default_factory=anyio.Event)
    runs: dict[str, int] = field(default_factory=dict)

    def ran(self, tool: str) -> None:
        self.runs[tool] = self.runs.get(tool, 0) + 1


def _ask(message: str, name: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))  # type: ignore[arg-type]


def _content(ctx: Context, key: str) -> dict[str, Any] | None:
    answer = (ctx.input_responses or {}).get(key)
    if getattr(answer, "action", None) != "accept":
        return None
    return dict(getattr(answer, "content", None) or {})


def build(  # noqa: PLR0915 - one tool after another
    gates: Gates,
    *,
    store: TaskStore | None = None,
    tasks: TaskOptions | None = None,
    lifespan: bool = True,
    shutdown_grace_seconds: float = 5.0,
) -> tuple[MCPServer, TasksExtension]:
    """The server the tests drive: its tools, and the extension that gives some tasks."""
    extension = TasksExtension(
        task_support=TASK_SUPPORT,  # type: ignore[arg-type]
        store=store,
        tasks=tasks,
        input_first={"book"},
        shutdown_grace_seconds=shutdown_grace_seconds,
    )
    mcp = MCPServer(
        "sdk-test",
        version="1.0.0",
        extensions=[extension],
        lifespan=extension.lifespan if lifespan else None,
    )

    @mcp.tool()
    def greet(name: str) -> str:
        """Never a task: not named in task_support."""
        gates.ran("greet")
        return f"Hello, {name}!"

    @mcp.tool()
    async def slow(ctx: Context, seconds: float = 0.2) -> str:
        """An optional task that reports progress half way."""
        gates.ran("slow")
        await ctx.report_progress(1, 2, "half way")
        await anyio.sleep(seconds)
        return f"slept {seconds:g}s"

    @mcp.tool()
    async def gated() -> str:
        """A required task that waits for the test to release it."""
        gates.ran("gated")
        gates.started.set()
        try:
            await gates.release.wait()
        except anyio.get_cancelled_exc_class():
            gates.cancelled.set()
            raise
        gates.finished.set()
        return "released"

    @mcp.tool()
    async def ask_name(ctx: Context) -> str:
        """Asks with ctx.elicit inside its task, twice."""
        gates.ran("ask_name")
        first = await ctx.elicit("What is your name?", Name)
        if first.action != "accept":
            return f"no name ({first.action})"
        again = await ctx.elicit(f"Really {first.data.name}?", Name)
        last = again.data.name if again.action == "accept" else "?"
        return f"Hello, {first.data.name} / {last}!"

    @mcp.tool()
    async def ask_model(ctx: Context) -> str:
        """Asks the client's model and its roots inside its task."""
        gates.ran("ask_model")
        message = SamplingMessage(role="user", content=TextContent(type="text", text="2+2?"))
        answer = await ctx.session.create_message([message], max_tokens=5)  # type: ignore[call-overload]
        roots = await ctx.session.list_roots()
        text = answer.content.text if isinstance(answer.content, TextContent) else "?"
        return f"model said {text}; roots {[str(root.uri) for root in roots.roots]}"

    @mcp.tool()
    async def two_questions(ctx: Context) -> str | InputRequiredResult:
        """Two questions at once (an InputRequiredResult inside its task)."""
        gates.ran("two_questions")
        first, second = _content(ctx, "first"), _content(ctx, "second")
        if first is None or second is None:
            return InputRequiredResult(
                input_requests={
                    "first": _ask("First?", "answer"),
                    "second": _ask("Second?", "answer"),
                },
                request_state="asked-once",
            )
        assert ctx.request_state == "asked-once", ctx.request_state
        return f"answers {first['answer']} and {second['answer']}"

    @mcp.tool()
    async def book(ctx: Context, city: str) -> str | InputRequiredResult:
        """Asks for a date before its task exists, then books inside the task."""
        gates.ran("book")
        when = _content(ctx, "date")
        if when is None:
            return InputRequiredResult(input_requests={"date": _ask(f"When in {city}?", "date")})
        start_task()
        await anyio.sleep(0.05)
        return f"booked {city} on {when['date']}"

    @mcp.tool()
    async def noisy(ctx: Context) -> str:
        """Logs inside its task (dropped) and reports progress (its status message)."""
        gates.ran("noisy")
        await ctx.info("a log line nobody receives")
        await ctx.report_progress(3, 4, "nearly")
        await gates.release.wait()
        return "quiet now"

    @mcp.tool()
    async def open_link(ctx: Context) -> str:
        """A URL elicitation inside its task."""
        answer = await ctx.elicit_url("Sign in, please", "https://example.com/login", "sign-in-1")
        return f"sign-in {answer.action}"

    @mcp.tool()
    def tally(numbers: list[int]) -> int:
        """A plain (sync) function: the SDK runs it in a worker thread, inside the task."""
        gates.ran("tally")
        return sum(numbers)

    @mcp.tool()
    async def crash() -> str:
        """A tool error: its task still completes, with isError."""
        raise ToolError("the disk is full")

    @mcp.tool()
    async def refuse() -> str:
        """A JSON-RPC error: its task fails."""
        raise MCPError(-32603, "the upstream refused")

    return mcp, extension


@asynccontextmanager
async def serving(
    mcp: MCPServer, *, tasks_first: TasksExtension | None = None, **app_options: Any
) -> AsyncIterator[str]:
    """`mcp`'s Streamable HTTP app under uvicorn on a free 127.0.0.1 port: its URL. Shut
    down (the app's lifespan ends) on the way out. With `tasks_first`, the app is that
    extension's `streamable_http_app(mcp)`: tasks/* answered before the SDK's stack."""
    if tasks_first is None:
        app = mcp.streamable_http_app(**app_options)
    else:
        app = tasks_first.streamable_http_app(mcp, **app_options)
    async with serving_asgi(app) as port:
        yield f"http://127.0.0.1:{port}/mcp"


@dataclass
class Answer:
    status: int
    body: dict[str, Any]

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.body, self.body
        result: dict[str, Any] = self.body["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.body, self.body
        error: dict[str, Any] = self.body["error"]
        return error


async def post(
    url: str,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    capabilities: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """One JSON-RPC request, as a 2026-07-28 client sends it (`capabilities`: none by
    default), with the headers it needs unless `headers` replaces them."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": dict(capabilities or {}),
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {**(params or {}), "_meta": meta},
    }
    sent = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": method,
    }
    name = (params or {}).get("taskId", (params or {}).get("name"))
    if name is not None:
        sent["Mcp-Name"] = str(name)
    sent.update(headers or {})
    async with httpx2.AsyncClient(timeout=10) as client:
        response = await client.post(url, content=json.dumps(body), headers=sent)
    return Answer(response.status_code, _json_of(response.text))


def _json_of(text: str) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or SSE response body."""
    if text.lstrip().startswith("{"):
        loaded: dict[str, Any] = json.loads(text)
        return loaded
    for line in text.splitlines():
        if line.startswith("data:"):
            message: dict[str, Any] = json.loads(line[5:])
            if "id" in message:
                return message
    raise AssertionError(f"no JSON-RPC response in {text!r}")
