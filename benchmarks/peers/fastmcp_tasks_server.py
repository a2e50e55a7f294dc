"""The fastmcp-tasks peer: fastmcp 4.1.4 with the fastmcp-tasks extension on its in-memory
backend, over Streamable HTTP. Runs in the peers' virtual environment (benchmarks/run).

    python fastmcp_tasks_server.py PORT      # serves http://127.0.0.1:PORT/mcp

The same two tools as every server of the comparison: `greet` (synchronous) and
`slow_compute` (a task when the client holds tasks; `seconds=0` is a task with no work).
"""

import sys

import anyio
from fastmcp import FastMCP
from fastmcp_tasks import TasksExtension

server = FastMCP("peer-fastmcp-tasks")
server.add_extension(TasksExtension(url="memory://"))


@server.tool
def greet(name: str) -> str:
    return f"Hello, {name}!"


@server.tool(task=True)
async def slow_compute(seconds: float = 1.0, label: str = "") -> str:
    if seconds > 0:
        await anyio.sleep(seconds)
    return f"{label or 'job'} done after {seconds:g}s"


if __name__ == "__main__":
    server.run(
        transport="http",
        host="127.0.0.1",
        port=int(sys.argv[1]),
        path="/mcp",
        log_level="warning",
        show_banner=False,
    )
