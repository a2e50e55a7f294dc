"""Our client against servers that speak only the 2025 revisions, over Streamable HTTP: the
TypeScript SDK's v1 McpServer (@modelcontextprotocol/sdk 1.32.2, legacy_tasks/ts_server.mjs)
and the `mcp` 1.30.0 low-level Server (legacy_tasks/mcp_server.py), both pinned. Asked a
2026-07-28 request without a session, each refuses it (HTTP 400, a JSON-RPC error without
an id; `mcp` 1.30.0 first redirects `/mcp` to `/mcp/`); the client opens a 2025 session
and goes on in it: lists, ping, and the session ended on close; `mcp-tasks tools` works as
against a 2026-07-28 server. (Their tools all need the 2025-11-25 tasks utility: calling
them is for when the client speaks it.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import httpx2 as httpx
import pytest
import trio

from mcp_tasks.client import connect_http

from .processes import CLIENT_SECONDS, MCP_TASKS, run_to_end
from .test_legacy_task_clients import mcp_reference, ts_reference

Start = Callable[[str], AbstractContextManager[list[str]]]


@pytest.fixture(params=["ts-sdk-1.32.2", "mcp-1.30.0"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    start: Start = ts_reference if request.param.startswith("ts") else mcp_reference
    with start("http") as (_, address):
        yield address


async def test_the_client_opens_a_session_and_goes_on_in_it(url: str) -> None:
    with trio.fail_after(CLIENT_SECONDS):
        async with connect_http(url) as client:
            tools = {tool.name for tool in await client.list_tools()}
            assert {"slow", "ask", "fail"} <= tools
            assert (client.era, client.session.version) == ("legacy", "2025-11-25")
            await client.ping()
            assert (await client.discover())["serverInfo"]["name"]
            session = client.transport.session_id  # type: ignore[attr-defined]
            assert session
    # the session was ended on close: the server no longer knows it
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-session-id": session,
        "mcp-protocol-version": "2025-11-25",
    }
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    async with httpx.AsyncClient(follow_redirects=True) as raw:
        gone = await raw.post(url, content=ping, headers=headers)
    assert gone.status_code == 404


def test_mcp_tasks_tools_works_as_against_a_modern_server(url: str) -> None:
    listed = run_to_end([MCP_TASKS, "tools", url], CLIENT_SECONDS)
    assert listed.returncode == 0, listed.stderr
    assert "  slow(seconds: number, label: string)" in listed.stdout
