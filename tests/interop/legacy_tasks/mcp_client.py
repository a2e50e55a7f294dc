"""The `mcp` 1.30.0 client as a 2025-11-25 task client: its `session.experimental` API
(`call_tool_as_task`, `get_task`, `get_task_result`, `list_tasks`, `cancel_task`) through the
steps of tasks_scenario.py, against the server given on the command line.

    python mcp_client.py stdio CMD ARG...    # spawns CMD with the SDK's stdio_client
    python mcp_client.py http URL            # the SDK's streamable_http_client

Its `elicitation_callback` answers the `ask` task's question with ANSWER and records it;
its `message_handler` records `notifications/tasks/status`. Prints the summary _driver.py
describes.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

warnings.filterwarnings("ignore", message="The experimental tasks API is deprecated")

from _driver import TERMINAL, Summary, emit, list_record, poll, result_record, task_record  # noqa: E402
from mcp import (  # noqa: E402
    ClientSession,
    StdioServerParameters,
    types,
)
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from tasks_scenario import ANSWER, CALLS, TTL_MS  # noqa: E402


@asynccontextmanager
async def connect(argv: list[str]) -> AsyncIterator[tuple[Any, Any]]:
    if argv[0] == "http":
        async with streamable_http_client(argv[1]) as (read, write, _):
            yield read, write
    else:
        parameters = StdioServerParameters(command=argv[1], args=argv[2:], env=dict(os.environ))
        async with stdio_client(parameters) as (read, write):
            yield read, write


async def run(session: ClientSession, summary: Summary) -> None:
    tasks = session.experimental

    async def create(call: str) -> str:
        created = await tasks.call_tool_as_task(
            CALLS[call]["tool"], CALLS[call]["arguments"], ttl=TTL_MS
        )
        summary[call]["created"] = task_record(created.task)
        return created.task.taskId

    async def read_result(task_id: str, kind: type[types.Result] = types.CallToolResult) -> Any:
        return result_record(
            await summary.blocking_result(task_id, lambda: tasks.get_task_result(task_id, kind))
        )

    async with summary.step("connect") as record:
        initialized = await session.initialize()
        capabilities = initialized.capabilities.model_dump(by_alias=True, exclude_none=True)
        listed = await session.list_tools()
        record.update(
            protocol_version=initialized.protocolVersion,
            tasks=capabilities.get("tasks"),
            task_support={
                tool.name: tool.execution.taskSupport if tool.execution else None
                for tool in listed.tools
            },
        )
    async with summary.step("slow") as record:
        task_id = await create("slow")
        record["polled"] = [task_record(await tasks.get_task(task_id))]
        record["result"] = await read_result(task_id)
        record["after"] = task_record(await tasks.get_task(task_id))
    async with summary.step("cancel") as record:
        task_id = await create("cancel")
        record["cancelled"] = task_record(await tasks.cancel_task(task_id))
        record["after"] = task_record(await tasks.get_task(task_id))
        # what a cancelled task's tasks/result carries is not defined: read it unparsed
        record["result"] = await read_result(task_id, types.GetTaskPayloadResult)
    async with summary.step("ask") as record:
        task_id = await create("ask")
        record["polled"] = await poll(tasks.get_task, task_id, {"input_required", *TERMINAL})
        record["result"] = await read_result(task_id)
        record["after"] = task_record(await tasks.get_task(task_id))
    async with summary.step("fail") as record:
        task_id = await create("fail")
        record["polled"] = await poll(tasks.get_task, task_id, TERMINAL)
        record["result"] = await read_result(task_id)
        record["after"] = task_record(await tasks.get_task(task_id))
    async with summary.step("list") as record:
        record.update(list_record(await tasks.list_tasks()))


async def main(argv: list[str]) -> None:
    summary = Summary("mcp 1.30.0")

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        summary.question("elicitation/create", params.model_dump(by_alias=True, mode="json"))
        return types.ElicitResult(action="accept", content={"answer": ANSWER})

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.TaskStatusNotification
        ):
            params = message.root.params
            summary["status_notifications"].append([params.taskId, params.status])

    try:
        async with (
            connect(argv) as (read, write),
            ClientSession(
                read, write, elicitation_callback=on_elicit, message_handler=on_message
            ) as session,
        ):
            await run(session, summary)
    finally:
        emit(summary)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
