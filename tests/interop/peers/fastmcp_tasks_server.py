"""A fastmcp-tasks server (fastmcp 4.1.4 + fastmcp-tasks 4.1.4, in-memory backend) for our
client and `mcp-tasks call`; runs with the peers' python.

    python fastmcp_tasks_server.py http    # prints {"ready": URL}, serves Streamable HTTP
    python fastmcp_tasks_server.py stdio   # serves stdio

Task tools: `slow_compute` (works `seconds`), `failing_job` (raises a ToolError),
`confirm_delete` (asks a yes/no question the way fastmcp-tasks can: by returning an
`InputRequiredResult`, and is run again from the top with the answer).
"""

from __future__ import annotations

import sys
from datetime import timedelta

import anyio
import mcp_types as types
from _serving import serve_http
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

server = FastMCP("peer-fastmcp-tasks")
server.add_extension(TasksExtension(url="memory://"))
# Advised to pollers; fastmcp-tasks' default, 5 s, would make each task here last 5 s.
TASK = TaskConfig(mode="optional", poll_interval=timedelta(milliseconds=100))


@server.tool
def greet(name: str) -> str:
    return f"Hello, {name}!"


@server.tool(task=TASK)
async def slow_compute(seconds: float = 1.0, label: str = "") -> str:
    if seconds > 0:
        await anyio.sleep(seconds)
    return f"{label or 'job'} done after {seconds:g}s"


@server.tool(task=TASK)
async def failing_job() -> str:
    raise ToolError("the job failed: the input file is empty")


@server.tool(task=TASK)
async def confirm_delete(filename: str, ctx: Context) -> str | types.InputRequiredResult:
    answer = (ctx.input_responses or {}).get("confirm")
    if answer is None:
        schema = {
            "type": "object",
            "properties": {"confirm": {"type": "boolean"}},
            "required": ["confirm"],
        }
        params = types.ElicitRequestFormParams(
            message=f"Delete {filename}?", requested_schema=schema
        )
        return types.InputRequiredResult(
            input_requests={"confirm": types.ElicitRequest(params=params)}
        )
    content = getattr(answer, "content", None) or {}
    accepted = getattr(answer, "action", None) == "accept" and content.get("confirm")
    return f"Deleted {filename}" if accepted else f"Kept {filename}"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run(transport="stdio", show_banner=False, log_level="warning")
    else:
        serve_http(server.http_app(path="/mcp"))
