"""The official SDK's client (`mcp` 2.3.0) against a server of ours; runs with the peers' python.

    python sdk_client.py http URL         # Streamable HTTP
    python sdk_client.py stdio CMD ARG... # spawns CMD and talks to it over stdio

The server is the interop fixture (tests/interop/fixture.py: examples/jobs.py and the
conformance base fixtures). Each step prints one JSON line (see _lines.py): tools, greet,
input rounds, an `x-mcp-header` tool, prompts, resources, completion, progress, listen; then
an old-era `initialize` (`mode="legacy"`), and every step again in that session (`legacy_` +
the step's name).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import mcp_types as types
from _lines import describe, emit, step
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ToolsListChanged

ANSWERS: dict[str, Any] = {"name": "Ada", "color": "blue", "context": "interop", "ok": True}
"""What the user types, by the elicited field's name."""

STEP_SECONDS = 20  # no step of a loopback server takes a tenth of this


class Recorder:
    """The HTTP statuses and `Mcp-Param-*` headers of the requests since the last `take`."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.param_headers: list[dict[str, str]] = []

    async def on_response(self, response: httpx2.Response) -> None:
        self.statuses.append(response.status_code)
        sent = response.request.headers
        params = {k.lower(): v for k, v in sent.items() if k.lower().startswith("mcp-param-")}
        if params:
            self.param_headers.append(params)

    def take(self) -> dict[str, Any]:
        seen = {"statuses": self.statuses, "param_headers": self.param_headers}
        self.statuses, self.param_headers = [], []
        return seen


async def answer(context: ClientRequestContext, params: Any) -> types.ElicitResult:
    properties = params.requested_schema.get("properties", {})
    content = {key: ANSWERS[key] for key in properties if key in ANSWERS}
    return types.ElicitResult(action="accept", content=content)


def texts(blocks: list[Any]) -> list[str]:
    return [block.text for block in blocks if getattr(block, "text", None) is not None]


def read_contents(contents: Any) -> dict[str, Any]:
    return {
        "uri": contents.uri,
        "mime_type": contents.mime_type,
        "text": getattr(contents, "text", None),
        "blob": getattr(contents, "blob", None) is not None,
    }


def open_client(argv: list[str], recorder: Recorder, **options: Any) -> Client:
    if argv[0] == "http":
        http = httpx2.AsyncClient(event_hooks={"response": [recorder.on_response]})
        return Client(streamable_http_client(argv[1], http_client=http), **options)
    command, *args = argv[1:]
    return Client(StdioServerParameters(command=command, args=args), **options)


async def run_steps(client: Client, recorder: Recorder, prefix: str = "") -> None:
    # Every step, each reported under `prefix` + its name.

    async def bounded(name: str, run: Callable[[], Awaitable[Any]]) -> None:
        async def within() -> Any:
            with anyio.fail_after(STEP_SECONDS):
                return await run()

        await step(prefix + name, within)

    async def connected() -> dict[str, Any]:
        info = client.server_info
        return {"protocol_version": client.protocol_version, "server": info and info.name}

    async def tools() -> list[str]:
        return sorted(tool.name for tool in (await client.list_tools()).tools)

    async def call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await client.call_tool(name, arguments or {})
        return {"is_error": result.is_error, "text": texts(result.content)}

    async def header(region: str) -> dict[str, Any]:
        recorder.take()
        called = await call("test_custom_header_tool", {"region": region})
        return called | recorder.take()

    async def prompts() -> list[str]:
        return sorted(prompt.name for prompt in (await client.list_prompts()).prompts)

    async def prompt(name: str, arguments: dict[str, str] | None = None) -> list[Any]:
        result = await client.get_prompt(name, arguments)
        return [
            getattr(message.content, "text", message.content.type) for message in result.messages
        ]

    async def resources() -> dict[str, list[str]]:
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        return {
            "resources": sorted(resource.uri for resource in listed.resources),
            "templates": sorted(t.uri_template for t in templates.resource_templates),
        }

    async def read(uri: str) -> list[dict[str, Any]]:
        return [read_contents(contents) for contents in (await client.read_resource(uri)).contents]

    async def complete() -> list[str]:
        reference = types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
        result = await client.complete(reference, {"name": "arg1", "value": "par"})
        return result.completion.values

    async def progress() -> dict[str, Any]:
        seen: list[list[Any]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            seen.append([done, total, message])

        result = await client.call_tool(
            "test_tool_with_progress", {}, progress_callback=on_progress
        )
        return {"text": texts(result.content), "progress": seen}

    async def listen() -> dict[str, Any]:
        async with client.listen(tools_list_changed=True) as subscription:
            honored = subscription.honored
            await client.call_tool("test_trigger_tool_change", {})
            async for event in subscription:
                return {
                    "honored_tools": honored is not None and bool(honored.tools_list_changed),
                    "event": type(event).__name__,
                    "tools_changed": isinstance(event, ToolsListChanged),
                }
        return {"event": None}

    await bounded("connect", connected)
    await bounded("tools", tools)
    await bounded("greet", lambda: call("greet", {"name": "Ada"}))
    await bounded("tool_error", lambda: call("test_error_handling"))
    await bounded("task_optional_in_place", lambda: call("slow_compute", {"seconds": 0.1}))
    await bounded("input_round", lambda: call("test_input_required_result_elicitation"))
    await bounded("input_rounds_two", lambda: call("test_input_required_result_multi_round"))
    await bounded("header", lambda: header("eu-west"))
    await bounded("header_base64", lambda: header("Zürich"))
    await bounded("prompts", prompts)
    await bounded(
        "prompt", lambda: prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
    )
    await bounded("prompt_input_round", lambda: prompt("test_input_required_result_prompt"))
    await bounded("resources", resources)
    await bounded("read_text", lambda: read("test://static-text"))
    await bounded("read_binary", lambda: read("test://static-binary"))
    await bounded("read_template", lambda: read("test://template/42/data"))
    await bounded("complete", complete)
    await bounded("progress", progress)
    await bounded("listen", listen)


async def main(argv: list[str]) -> None:
    recorder = Recorder()
    try:
        async with open_client(argv, recorder, elicitation_callback=answer) as client:
            await run_steps(client, recorder)
    except Exception as error:
        emit(step="session", ok=False, error=describe(error))

    async def legacy() -> dict[str, Any]:
        recorder.take()
        try:
            with anyio.fail_after(STEP_SECONDS):
                async with open_client(argv, recorder, mode="legacy") as old:
                    return {"connected": old.protocol_version}
        finally:
            emit(legacy_http=recorder.take())

    await step("legacy_initialize", legacy)
    updated: list[str] = []
    told = anyio.Event()

    async def on_message(message: Any) -> None:
        found = getattr(message, "root", message)
        if type(found).__name__ == "ResourceUpdatedNotification":
            updated.append(str(found.params.uri))
            told.set()

    async def subscription(old: Client) -> dict[str, Any]:
        await old.subscribe_resource("test://static-text")
        await old.call_tool("touch_resource", {"uri": "test://static-text"})
        await told.wait()
        await old.unsubscribe_resource("test://static-text")
        return {"updated": updated}

    try:  # the same steps in a 2025-11-25 session, and a resource subscription
        options = {"mode": "legacy", "elicitation_callback": answer, "message_handler": on_message}
        async with open_client(argv, recorder, **options) as old:
            await run_steps(old, recorder, prefix="legacy_")

            async def subscribed() -> dict[str, Any]:
                with anyio.fail_after(STEP_SECONDS):
                    return await subscription(old)

            await step("legacy_subscription", subscribed)
    except Exception as error:
        emit(step="legacy_session", ok=False, error=describe(error))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
