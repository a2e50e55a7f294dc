"""The fastmcp-tasks client (fastmcp 4.1.4 + fastmcp-tasks 4.1.4) against a server of ours;
runs with the peers' python.

    python fastmcp_tasks_client.py http URL          # Streamable HTTP
    python fastmcp_tasks_client.py stdio CMD ARG...  # spawns CMD and talks to it over stdio
    python fastmcp_tasks_client.py strict URL        # one task call, to see it refused

The server is the interop fixture (examples/jobs.py's tools among others). Every task tool
of examples/jobs.py is called through fastmcp's `call_tool`, which polls the task and
answers its input requests through the elicitation handler; then a task is cancelled with
fastmcp-tasks' own handle. Each step prints one JSON line (see _lines.py).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from _lines import step
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp_tasks.client import call_tool_task

ANSWERS: dict[str, Any] = {
    "name": "Ada",
    "colour": "blue",
    "confirm": True,
    "answer": "yes",
}
"""What the user types, by the elicited field's name."""

STEP_SECONDS = 20  # the slowest tool here works for 1 s


async def answer(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
    properties = params.requested_schema.get("properties", {})
    return {key: ANSWERS[key] for key in properties if key in ANSWERS}


def open_client(argv: list[str]) -> Client[Any]:
    if argv[0] == "stdio":
        command, *args = argv[1:]
        return Client(StdioTransport(command, args), elicitation_handler=answer)
    return Client(argv[1], elicitation_handler=answer)


async def call(client: Client[Any], name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(STEP_SECONDS):
        result = await client.call_tool(name, arguments, raise_on_error=False)
    texts = [getattr(block, "text", None) for block in result.content]
    return {"is_error": result.is_error, "text": texts}


async def cancel(client: Client[Any]) -> dict[str, Any]:
    """A long task, cancelled: what tasks/get says afterwards."""
    with anyio.fail_after(STEP_SECONDS):
        task = await call_tool_task(client, "slow_compute", {"seconds": 60})
        before = (await task.status()).status
        await task.cancel()
        after = await task.wait(timeout=STEP_SECONDS)
    return {"before": before, "after": after.status}


async def main(argv: list[str]) -> None:
    tools: dict[str, dict[str, Any]] = {
        "slow_compute": {"seconds": 0.3, "label": "interop"},
        "failing_job": {},
        "protocol_error_job": {},
        "confirm_delete": {"filename": "notes.txt"},
        "multi_input": {},
        "interview": {},
        "test_tool_with_task": {},
    }
    if argv[0] == "strict":
        tools = {"slow_compute": tools["slow_compute"]}
    async with open_client(argv) as client:
        for name, arguments in tools.items():
            await step(name, lambda name=name, arguments=arguments: call(client, name, arguments))
        if argv[0] != "strict":
            await step("cancel", lambda: cancel(client))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
