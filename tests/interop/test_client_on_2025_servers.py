"""Our client against servers that speak only the 2025 revisions, over Streamable HTTP: the
TypeScript SDK's v1 McpServer (@modelcontextprotocol/sdk 1.32.2, legacy_tasks/ts_server.mjs)
and the `mcp` 1.30.0 low-level Server (legacy_tasks/mcp_server.py), both pinned. Asked a
2026-07-28 request without a session, each refuses it (HTTP 400, a JSON-RPC error without
an id; `mcp` 1.30.0 first redirects `/mcp` to `/mcp/`); the client opens a 2025 session
and goes on in it: lists, ping, and the session ended on close. Their tools all need the
2025-11-25 tasks utility and run as such tasks (an elicitation on the `tasks/result`
stream, answered by the client's handler); `mcp-tasks call` and `mcp-tasks tools` work as
against a 2026-07-28 server. Over stdio the same servers are found by the probe."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import httpx2 as httpx
import pytest
import trio

from mcp_tasks.client import connect_http, connect_stdio
from mcp_tasks.core._wire import ElicitParams, ElicitResult

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


async def answer(params: ElicitParams) -> ElicitResult:
    assert params.message == "Proceed?"
    return ElicitResult(action="accept", content={"answer": "yes"})


async def test_tool_calls_run_as_2025_11_25_tasks(url: str) -> None:
    """Every tool of these servers needs a task: the call says `params.task`, the client
    polls `tasks/get` and reads `tasks/result`, on whose stream the elicitation comes."""
    statuses: list[str] = []
    with trio.fail_after(CLIENT_SECONDS):
        async with connect_http(url, on_elicit=answer) as client:
            done = await client.call_tool(
                "slow",
                {"seconds": 0.2, "label": "now"},
                on_status=lambda t: statuses.append(t.status),
            )
            asked = await client.call_tool("ask", {"question": "Proceed?"})
            failed = await client.call_tool("fail", {"reason": "out of paper"})
    assert done.content[0].text == "now done"  # type: ignore[union-attr]
    assert statuses[0] == "working" and statuses[-1] == "completed"
    assert asked.content[0].text == "answer: yes"  # type: ignore[union-attr]
    assert failed.is_error is True and failed.content[0].text == "out of paper"  # type: ignore[union-attr]


def test_mcp_tasks_call_and_tools_work_as_against_a_modern_server(url: str) -> None:
    done = run_to_end([MCP_TASKS, "call", url, "slow", "seconds=0", "label=cli"], CLIENT_SECONDS)
    assert (done.returncode, done.stdout) == (0, "cli done\n"), done.stderr
    assert re.search(r"task \S+ completed", done.stderr)
    asked = run_to_end(
        [MCP_TASKS, "call", url, "ask", "question=Proceed?"], CLIENT_SECONDS, stdin="yes\n"
    )
    assert (asked.returncode, asked.stdout) == (0, "answer: yes\n"), asked.stderr
    listed = run_to_end([MCP_TASKS, "tools", url], CLIENT_SECONDS)
    assert listed.returncode == 0, listed.stderr
    assert "  slow(seconds: number, label: string)" in listed.stdout


@pytest.mark.parametrize(
    "start", [ts_reference, mcp_reference], ids=["ts-sdk-1.32.2", "mcp-1.30.0"]
)
async def test_over_stdio_the_probe_finds_a_2025_server_and_its_tasks_run(start: Start) -> None:
    """`server/discover` answered -32601 (or not at all): a fresh process, a session."""
    with start("stdio") as argv, trio.fail_after(CLIENT_SECONDS):
        async with connect_stdio(argv[1:], stderr="capture", on_elicit=answer) as client:
            assert client.era == "legacy"
            done = await client.call_tool("slow", {"seconds": 0.1, "label": "piped"})
            asked = await client.call_tool("ask", {"question": "Proceed?"})
            await client.ping()
    assert done.content[0].text == "piped done"  # type: ignore[union-attr]
    assert asked.content[0].text == "answer: yes"  # type: ignore[union-attr]


def test_mcp_tasks_call_over_stdio_reaches_a_2025_server() -> None:
    with ts_reference("stdio") as argv:
        command = shlex.join(argv[1:])
        done = run_to_end(
            [MCP_TASKS, "call", "--stdio", command, "slow", "seconds=0", "label=cli"],
            CLIENT_SECONDS,
        )
    assert (done.returncode, done.stdout) == (0, "cli done\n"), done.stderr
