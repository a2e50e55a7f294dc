"""Integrations with other MCP libraries, one module each, imported by name so that
`import mcp_tasks` never loads them:

* `mcp_tasks.integrations.mcp_sdk`: `TasksExtension`, the Tasks extension for servers of
  the official MCP Python SDK (`pip install 'mcp-tasks[sdk]'`).
"""

__all__: list[str] = []
