"""fastmcp 3.4.11's `Client` as a 2025-11-25 task client: `call_tool(..., task=True)` and its
`ToolTask`, `get_task_status`, `get_task_result`, `cancel_task`, `list_tasks`, through the
steps of tasks_scenario.py, against the server given on the command line.

    python fastmcp_client.py stdio CMD ARG...    # fastmcp's StdioTransport spawns CMD
    python fastmcp_client.py http URL            # fastmcp's StreamableHttpTransport

What its API shows and hides: a `ToolTask` keeps only the created task's id (so `created`
holds the id, `returned_immediately`, and no status); `ToolTask.wait(state=...)` polls
(every 0.5 s) until `input_required`; `ToolTask.result()` polls until terminal, then reads
`tasks/result` (used for `fail`); `list_tasks` falls back to the ids it submitted when the
server lists none (`list.from_server` says which it was). Its elicitation handler answers
the `ask` task's question with ANSWER and records it; `on_status_change` records
`notifications/tasks/status`. Prints the summary _driver.py describes.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import anyio

warnings.filterwarnings("ignore", message="The experimental tasks API is deprecated")

from _driver import (  # noqa: E402
    RELATED_TASK,
    TERMINAL,
    Summary,
    emit,
    list_record,
    poll,
    result_record,
    task_record,
)
from fastmcp import Client  # noqa: E402
from fastmcp.client.tasks import ToolTask  # noqa: E402
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport  # noqa: E402
from tasks_scenario import ANSWER, CALLS, STEP_SECONDS, TTL_MS  # noqa: E402


def transport(argv: list[str]) -> StdioTransport | StreamableHttpTransport:
    if argv[0] == "http":
        return StreamableHttpTransport(argv[1])
    return StdioTransport(command=argv[1], args=argv[2:], env=dict(os.environ))


def parsed_result_record(result: Any) -> dict[str, Any]:
    """fastmcp's own parsed CallToolResult as a RESULT record (no raw keys to show)."""
    return {
        "is_error": result.is_error,
        "text": [block.text for block in result.content if hasattr(block, "text")],
        "related_task": ((result.meta or {}).get(RELATED_TASK) or {}).get("taskId"),
        "keys": None,
    }


async def run(client: Client[Any], summary: Summary) -> None:
    async def create(call: str, **options: Any) -> ToolTask:
        task = await client.call_tool(
            CALLS[call]["tool"], CALLS[call]["arguments"], task=True, ttl=TTL_MS, **options
        )
        task.on_status_change(
            lambda status: summary["status_notifications"].append([status.taskId, status.status])
        )
        summary[call]["created"] = {
            "task_id": task.task_id,
            "status": None,
            "returned_immediately": task.returned_immediately,
        }
        return task

    async def read_result(task_id: str) -> dict[str, Any]:
        raw = await summary.blocking_result(task_id, lambda: client.get_task_result(task_id))
        return result_record(raw)

    async with summary.step("connect") as record:
        initialized = client.initialize_result
        assert initialized is not None
        capabilities = initialized.capabilities.model_dump(by_alias=True, exclude_none=True)
        record.update(
            protocol_version=initialized.protocolVersion,
            tasks=capabilities.get("tasks"),
            task_support={
                tool.name: tool.execution.taskSupport if tool.execution else None
                for tool in await client.list_tools()
            },
        )
    async with summary.step("slow") as record:
        task_id = (await create("slow")).task_id
        record["polled"] = [task_record(await client.get_task_status(task_id))]
        record["result"] = await read_result(task_id)
        record["after"] = task_record(await client.get_task_status(task_id))
    async with summary.step("cancel") as record:
        task_id = (await create("cancel")).task_id
        record["cancelled"] = task_record(await client.cancel_task(task_id))
        record["after"] = task_record(await client.get_task_status(task_id))
        record["result"] = await read_result(task_id)
    async with summary.step("ask") as record:
        task = await create("ask")
        waited = await task.wait(state="input_required", timeout=STEP_SECONDS)
        record["polled"] = [task_record(waited)]
        record["result"] = await read_result(task.task_id)
        record["after"] = task_record(await client.get_task_status(task.task_id))
    async with summary.step("fail") as record:
        task = await create("fail", raise_on_error=False)
        record["polled"] = await poll(client.get_task_status, task.task_id, TERMINAL)
        record["result"] = parsed_result_record(await task.result())
        record["after"] = task_record(await client.get_task_status(task.task_id))
    async with summary.step("list") as record:
        listed = await client.list_tasks()
        record.update(list_record(listed), from_server="_meta" in listed)


async def main(argv: list[str]) -> None:
    summary = Summary("fastmcp 3.4.11")

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        summary.question("elicitation/create", params.model_dump(by_alias=True, mode="json"))
        return {"answer": ANSWER}

    try:
        async with Client(transport(argv), elicitation_handler=on_elicit) as client:
            await run(client, summary)
    finally:
        emit(summary)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
