"""Our client against a server that speaks only the 2025 revisions: the TypeScript SDK's v1
McpServer (@modelcontextprotocol/sdk 1.32.2, pinned, legacy_tasks/ts_server.mjs) over
Streamable HTTP. Asked a 2026-07-28 request without a session, it answers HTTP 400 with a
JSON-RPC error whose `id` is null: that is the server's error to this request, raised as
`RpcError` with its code and message, and `mcp-tasks call` says so (exit 1), not that the
server cannot be reached (exit 2)."""

from __future__ import annotations

import pytest
import trio

from mcp_tasks.client import RpcError, connect_http

from .processes import CLIENT_SECONDS, MCP_TASKS, run_to_end
from .test_legacy_task_clients import ts_reference

NOT_INITIALIZED = -32000  # what the SDK's transport answers a request outside a session


async def test_a_2025_servers_refusal_without_an_id_is_its_error() -> None:
    with ts_reference("http") as (_, url), trio.fail_after(CLIENT_SECONDS):
        async with connect_http(url) as client:
            with pytest.raises(RpcError) as refused:
                await client.list_tools()
    assert refused.value.code == NOT_INITIALIZED
    assert refused.value.message


def test_mcp_tasks_call_prints_the_servers_error() -> None:
    with ts_reference("http") as (_, url):
        done = run_to_end([MCP_TASKS, "call", url, "slow", "seconds=0"], CLIENT_SECONDS)
    assert done.returncode == 1, done.stderr
    assert f"(code {NOT_INITIALIZED})" in done.stderr
    assert "cannot reach" not in done.stderr
