"""Client objects read like Python (issue 32, point 4): an optional field the server left
out reads `None`, never msgspec's `UNSET`; `is_error` is a bool. And the JSON the library
writes is the same bytes as before the fields became `None`: a `None` is left out."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio

from mcp_tasks import CallToolResult, ToolContext
from mcp_tasks.client import connect_http
from mcp_tasks.core._wire import ListToolsResult, json_encoder
from mcp_tasks.core.wire import (
    AudioContent,
    CompletedTask,
    Completion,
    CreateTaskResult,
    ElicitParams,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    Implementation,
    Prompt,
    PromptArgument,
    Resource,
    ResourceContents,
    ResourceLink,
    TextContent,
    Tool,
    WorkingTask,
)
from mcp_tasks.server import Server
from mcp_tasks.transports import serve_http

TIMEOUT = 30


def build(release: trio.Event) -> Server:
    server = Server("absent-fields", "0.1")

    @server.tool()
    async def plain(ctx: ToolContext) -> CallToolResult:
        return CallToolResult.text("hi")

    @server.tool(task_support="required")
    async def waits(ctx: ToolContext) -> CallToolResult:
        await release.wait()
        return CallToolResult.text("done")

    return server


async def test_absent_optional_fields_read_none_over_http() -> None:
    release = trio.Event()
    server = build(release)
    with trio.fail_after(TIMEOUT):
        async with server.running(), trio.open_nursery() as nursery:
            port = await nursery.start(serve_http, server, "127.0.0.1", 0)
            async with connect_http(f"http://127.0.0.1:{port}/mcp") as client:
                tools = {tool.name: tool for tool in await client.list_tools()}
                assert tools["plain"].description is None  # no docstring, no description
                assert tools["plain"].title is None and tools["plain"].output_schema is None

                result = await client.call_tool("plain")
                assert result.structured_content is None and result.meta is None
                assert result.is_error is False

                task = await client.call_tool_or_task("waits")
                assert isinstance(task, WorkingTask)
                assert task.status_message is None
                polled = await client.get_task(task.task_id)
                assert polled.status_message is None

                release.set()
                while not isinstance(polled := await client.get_task(task.task_id), CompletedTask):
                    await trio.sleep(0.02)
                assert polled.status_message is None
                assert polled.result.is_error is False
                assert polled.result.structured_content is None
            nursery.cancel_scope.cancel()


def test_a_decoded_object_reads_none_where_the_json_has_nothing() -> None:
    tool = msgspec.json.decode(b'{"name":"t","inputSchema":{}}', type=Tool)
    assert (tool.title, tool.description, tool.annotations, tool.meta) == (None,) * 4
    link = msgspec.json.decode(b'{"type":"resource_link","uri":"u","name":"n"}', type=ResourceLink)
    assert (link.mime_type, link.size, link.annotations) == (None, None, None)
    params = msgspec.json.decode(b'{"message":"m"}', type=ElicitParams)
    assert params.mode is None and params.effective_mode == "form"
    assert msgspec.json.decode(b'{"action":"cancel"}', type=ElicitResult).content is None
    page = msgspec.json.decode(
        b'{"ttlMs":0,"cacheScope":"public","tools":[]}', type=ListToolsResult
    )
    assert page.next_cursor is None and page.result_type == "complete"


# The bytes each object encoded to before the change, when its fields defaulted to UNSET.
BEFORE: list[tuple[Any, bytes]] = [
    (
        CallToolResult.text("hi"),
        b'{"content":[{"type":"text","text":"hi"}],"resultType":"complete"}',
    ),
    (
        CallToolResult.text("no", is_error=True),
        b'{"content":[{"type":"text","text":"no"}],"isError":true,"resultType":"complete"}',
    ),
    (
        CreateTaskResult(
            task_id="t", status="working", created_at="a", last_updated_at="b", ttl_ms=None
        ),
        b'{"taskId":"t","status":"working","createdAt":"a","lastUpdatedAt":"b","ttlMs":null,'
        b'"resultType":"task"}',
    ),
    (
        CompletedTask(
            task_id="t",
            created_at="a",
            last_updated_at="b",
            ttl_ms=5,
            poll_interval_ms=1000,
            result=CallToolResult.text("x"),
        ),
        b'{"status":"completed","taskId":"t","createdAt":"a","lastUpdatedAt":"b","ttlMs":5,'
        b'"pollIntervalMs":1000,"resultType":"complete",'
        b'"result":{"content":[{"type":"text","text":"x"}],"resultType":"complete"}}',
    ),
    (
        Tool(name="n", input_schema={"type": "object"}),
        b'{"name":"n","inputSchema":{"type":"object"}}',
    ),
    (
        ListToolsResult(ttl_ms=0, cache_scope="public", tools=[]),
        b'{"ttlMs":0,"cacheScope":"public","resultType":"complete","tools":[]}',
    ),
    (ElicitResult(action="decline"), b'{"action":"decline"}'),
    (Completion(values=[]), b'{"values":[]}'),
    (Implementation(name="n", version="1"), b'{"name":"n","version":"1"}'),
    (
        Prompt(name="p", arguments=[PromptArgument(name="a")]),
        b'{"name":"p","arguments":[{"name":"a"}]}',
    ),
    (Resource(uri="u", name="n"), b'{"uri":"u","name":"n"}'),
    (
        EmbeddedResource(resource=ResourceContents(uri="u", text="t")),
        b'{"type":"resource","resource":{"uri":"u","text":"t"}}',
    ),
    (
        ImageContent(data="d", mime_type="image/png"),
        b'{"type":"image","data":"d","mimeType":"image/png"}',
    ),
    (
        AudioContent(data="d", mime_type="audio/wav"),
        b'{"type":"audio","data":"d","mimeType":"audio/wav"}',
    ),
    (TextContent(text="t"), b'{"type":"text","text":"t"}'),
]


@pytest.mark.parametrize(("value", "before"), BEFORE)
def test_the_json_written_is_the_bytes_written_before(value: Any, before: bytes) -> None:
    assert json_encoder.encode(value) == before
