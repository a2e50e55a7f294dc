"""Journals keep no secret and are the operator's alone, in real processes.

A tool marks `password` sensitive; clients call it spelling the method, the tool, the keys
and the secret in JSON's escape forms and naming keys twice (PHP writes `"tools\\/call"`).
Every call is served (the tool checks the password it got), and the journal, written by
`mcp-tasks serve --record` as a subprocess and by `Server.record` behind a real HTTP
server, holds no spelling of the secret, and still replays. The journal's file and the
folder made for it are 0600 and 0700 whatever the umask, and a symbolic link at the
journal's path is refused, never followed."""

from __future__ import annotations

import http.client
import json
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from redis_server import free_port

from mcp_tasks import Server, ToolContext
from mcp_tasks.replay import replay
from mcp_tasks.transports._http_server import HttpConfig, serve_http

SECRET = "hunter2/s3cr3t"
VERSION = "2026-07-28"
SERVER_FILE = f'''
from mcp_tasks import Server, ToolContext

server = Server("logins", "1.0")


@server.tool(sensitive=["password"])
async def log_in(ctx: ToolContext, user: str, password: str) -> str:
    """Log in."""
    return f"hello, {{user}}" if password == {SECRET!r} else "wrong password"
'''
META = json.dumps(
    {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "php", "version": "1.0"},
    }
)
SECRET_ESCAPED = "".join(f"\\u{ord(char):04x}" for char in SECRET)
CALLS = [
    # As most clients write it.
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"log_in",'
    f'"_meta":{META},"arguments":{{"user":"ada","password":"{SECRET}"}}}}}}',
    # PHP's json_encode escapes every slash.
    '{"jsonrpc":"2.0","id":2,"method":"tools\\/call","params":{"name":"log_in",'
    f'"_meta":{META},"arguments":{{"user":"ada","password":"hunter2\\/s3cr3t"}}}}}}',
    # Escaped method, tool, keys and secret.
    '{"jsonrpc":"2.0","id":3,"\\u006dethod":"\\u0074ools/call","p\\u0061rams":{'
    f'"n\\u0061me":"log\\u005fin","_meta":{META},"argu\\u006dents":'
    f'{{"user":"ada","pass\\u0077ord":"{SECRET_ESCAPED}"}}}}}}',
    # Keys named twice: the core reads the last of each, the first must go too.
    '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"log_in",'
    '"arguments":{"password":"hunter2/s3cr3t-shadowed"},'
    f'"_meta":{META},"arguments":{{"password":"{SECRET}-x","user":"ada",'
    f'"password":"{SECRET}"}}}}}}',
]


def post(port: int, body: str) -> tuple[int, str]:
    """POST one JSON-RPC message to 127.0.0.1:`port`/mcp, as a raw HTTP client would."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "log_in",
    }
    try:
        connection.request("POST", "/mcp", body.encode(), headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def strings_in(value: Any) -> Iterator[str]:
    """Every string of a decoded JSON value, keys too, and of a string that is JSON."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, str):
        yield value
        try:
            inner = json.loads(value)
        except ValueError:
            return
        if isinstance(inner, dict | list):
            yield from strings_in(inner)


def assert_private_and_without_secret(journal: Path) -> None:
    data = journal.read_bytes()
    assert b"s3cr3t" not in data
    for line in data.splitlines():
        assert not any("s3cr3t" in text for text in strings_in(json.loads(line))), line
    assert data.count(b'"password":"[redacted]"') >= len(CALLS)
    assert replay(journal).calls >= len(CALLS)


def assert_every_call_served(port: int) -> None:
    for body in CALLS:
        status, answer = post(port, body)
        assert status == 200, answer
        assert "hello, ada" in answer, answer  # served, with the secret as sent


@contextmanager
def serving(tmp_path: Path, journal: Path) -> Iterator[subprocess.Popen[str]]:
    """`mcp-tasks serve --record journal` with umask 0, until it says it serves."""
    target = tmp_path / "logins.py"
    target.write_text(SERVER_FILE)
    port = free_port()
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", str(target)]
    command += ["--http", f"127.0.0.1:{port}", "--record", str(journal)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, umask=0)
    process.port = port  # type: ignore[attr-defined]
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def wait_serving(process: subprocess.Popen[str]) -> None:
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "Streamable HTTP on" in line:
            return
    raise AssertionError("the server ended before serving: " + "".join(seen))


def test_serve_record_writes_no_spelling_of_a_secret_in_a_private_file(tmp_path: Path) -> None:
    journal = tmp_path / "made" / "journals" / "j.jsonl"
    with serving(tmp_path, journal) as process:
        wait_serving(process)
        assert_every_call_served(process.port)  # type: ignore[attr-defined]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    assert_private_and_without_secret(journal)
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    for folder in (journal.parent, journal.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


async def test_server_record_behind_real_http_writes_no_spelling_of_a_secret(
    tmp_path: Path,
) -> None:
    server = Server("logins", "1.0")

    @server.tool(sensitive=["password"])
    async def log_in(ctx: ToolContext, user: str, password: str) -> str:
        """Log in."""
        return f"hello, {user}" if password == SECRET else "wrong password"

    journal = tmp_path / "j.jsonl"
    server.record(journal)
    config = HttpConfig(drain_timeout_seconds=2.0)
    async with server.running(), trio.open_nursery() as nursery:
        port = await nursery.start(partial(serve_http, server, "127.0.0.1", 0, config=config))
        await trio.to_thread.run_sync(assert_every_call_served, port)
        nursery.cancel_scope.cancel()
    assert_private_and_without_secret(journal)
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600


@pytest.mark.parametrize("target_exists", [True, False], ids=["to-a-file", "dangling"])
def test_serve_refuses_a_symbolic_link_at_the_record_path(
    tmp_path: Path, target_exists: bool
) -> None:
    target = tmp_path / "victim"
    if target_exists:
        target.write_text("precious\n")
    journal = tmp_path / "j.jsonl"
    journal.symlink_to(target)
    with serving(tmp_path, journal) as process:
        _, errors = process.communicate(timeout=20)
    assert process.returncode == 1, errors
    assert "symbolic link" in errors and "Traceback" not in errors, errors
    assert journal.is_symlink()
    if target_exists:
        assert target.read_text() == "precious\n"
    else:
        assert not target.exists()
