"""`python -m mcp_tasks.cli`: the `mcp-tasks` command."""

from . import main

main()
