"""The dual-era client over stdio (issue 30, point 1): nothing but the answer tells the
era, so `connect_stdio` asks `server/discover` first. A result or a modern error code
(-32020, -32021, -32022) keeps that process, modern; any other error (-32601 included), the
process ending or silence makes it start a fresh process for a 2025 session. Scripted
servers (small Python scripts that note each start in a file), then our own server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from mcp_tasks.client import connect_stdio

SCRIPT = r"""
import json, sys
with open(sys.argv[1], "a") as starts:
    starts.write("start\n")
mode = sys.argv[2]
for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue
    if method == "server/discover":
        if mode == "silent":
            continue
        if mode == "exits":
            sys.exit(3)
        if mode == "modern":
            result = {"supportedVersions": ["2026-07-28"], "capabilities": {},
                      "ttlMs": 0, "cacheScope": "private"}
            print(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}), flush=True)
            continue
        code = {"unknown": -32601, "refuses": -32022}[mode]
        error = {"code": code, "message": "no"}
        print(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}), flush=True)
    elif method == "initialize":
        result = {"protocolVersion": "2025-03-26", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "old-stdio", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}), flush=True)
    elif method == "tools/list":
        print(json.dumps({"jsonrpc": "2.0", "id": request_id,
                          "result": {"tools": [{"name": "t", "inputSchema": {}}]}}), flush=True)
    else:
        error = {"code": -32601, "message": method}
        print(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}), flush=True)
"""


@pytest.mark.parametrize(
    ("mode", "era", "starts"),
    [
        ("modern", "modern", 1),
        ("refuses", "modern", 1),  # -32022: a modern server, the request to be fixed
        ("unknown", "legacy", 2),  # -32601 to discover: a 2025 server
        ("silent", "legacy", 2),
        ("exits", "legacy", 2),
    ],
)
async def test_the_probe_decides_the_era_and_a_2025_server_gets_a_fresh_process(
    tmp_path: Path, mode: str, era: str, starts: int
) -> None:
    script = tmp_path / "server.py"
    script.write_text(SCRIPT)
    log = tmp_path / "starts"
    command = [sys.executable, str(script), str(log), mode]
    with trio.fail_after(20):
        async with connect_stdio(command, stderr="capture", probe_seconds=1) as client:
            assert client.era == era
            if era == "legacy":
                assert [tool.name for tool in await client.list_tools()] == ["t"]
                assert client.session.version == "2025-03-26"
    assert log.read_text().splitlines() == ["start"] * starts


async def test_our_server_over_stdio_is_modern_or_a_session_as_asked() -> None:
    jobs = Path(__file__).parent.parent.parent / "examples" / "jobs.py"
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", str(jobs), "--stdio"]
    with trio.fail_after(30):
        async with connect_stdio(command, stderr="capture") as client:
            assert client.era == "modern"
            assert (await client.call_tool("greet", {"name": "M"})).content[0].text == "Hello, M!"  # type: ignore[union-attr]
        async with connect_stdio(command, stderr="capture", era="legacy") as client:
            done = await client.call_tool("slow_compute", {"seconds": 0.1, "label": "s"})
            assert done.content[0].text == "s done after 0.1s"  # type: ignore[union-attr]
            assert client.session.version == "2025-11-25"
            assert json.dumps(client.session.server_info)
