"""The MCP Inspector's CLI (`@modelcontextprotocol/inspector` 2.12.0) against our server over
stdio, with its defaults.

`mcp-inspector --cli CMD ARG... --method ...` spawns the server itself; an ad-hoc target runs
in the legacy era by default (an `initialize` for 2025-11-25). The server runs behind
peers/stdio_tee.py, so the test also reads what the Inspector sent. Its default output: the
result, pretty-printed JSON on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .processes import NPM_PEERS, ours, peer_script, run_node, serving_ours


def inspect(tmp_path: Path, *method: str) -> tuple[Any, list[dict[str, Any]]]:
    """Run the Inspector's CLI on our server; what it printed (as JSON) and what it sent."""
    record = tmp_path / "sent.jsonl"
    server = [sys.executable, peer_script("stdio_tee.py"), str(record), *ours("--stdio")]
    launcher = NPM_PEERS / "node_modules" / ".bin" / "mcp-inspector"
    done = run_node([str(launcher), "--cli", *server, *method])
    assert done.returncode == 0, f"the Inspector exited {done.returncode}\n{done.stderr[-3000:]}"
    sent = [json.loads(line) for line in record.read_text().splitlines() if line.strip()]
    return json.loads(done.stdout), sent


def opened_with(sent: list[dict[str, Any]]) -> tuple[str, str]:
    first = sent[0]
    return first["method"], first["params"]["protocolVersion"]


def test_it_lists_our_tools_after_a_2025_initialize(tmp_path: Path) -> None:
    printed, sent = inspect(tmp_path, "--method", "tools/list")
    assert opened_with(sent) == ("initialize", "2025-11-25")
    names = {tool["name"] for tool in printed["tools"]}
    assert {"greet", "slow_compute", "test_error_handling", "test_tool_with_progress"} <= names
    (greet,) = [tool for tool in printed["tools"] if tool["name"] == "greet"]
    assert greet["inputSchema"]["properties"]["name"] == {"type": "string", "default": "world"}


def test_it_calls_a_tool_with_an_argument(tmp_path: Path) -> None:
    printed, sent = inspect(
        tmp_path, "--method", "tools/call", "--tool-name", "greet", "--tool-arg", "name=Ada"
    )
    assert opened_with(sent) == ("initialize", "2025-11-25")
    assert printed["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert not printed.get("isError")
    (call,) = [message for message in sent if message.get("method") == "tools/call"]
    assert call["params"]["name"] == "greet" and call["params"]["arguments"] == {"name": "Ada"}


def test_it_calls_a_tool_over_http_in_a_2025_session() -> None:
    """The Inspector given our URL (its transport auto-detected from `/mcp`: Streamable
    HTTP), with its defaults: a 2025-11-25 session on our HTTP endpoint."""
    launcher = NPM_PEERS / "node_modules" / ".bin" / "mcp-inspector"
    with serving_ours() as url:
        listed = run_node([str(launcher), "--cli", url, "--method", "tools/list"])
        called = run_node(
            [str(launcher), "--cli", url, "--method", "tools/call", "--tool-name", "greet",
             "--tool-arg", "name=Ada"]
        )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "greet" in {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
    assert called.returncode == 0, called.stderr[-3000:]
    assert json.loads(called.stdout)["content"] == [{"type": "text", "text": "Hello, Ada!"}]
