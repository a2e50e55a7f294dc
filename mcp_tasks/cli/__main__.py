"""`python -m mcp_tasks.cli`: the `mcp-tasks` command."""

from . import run_command

run_command()
