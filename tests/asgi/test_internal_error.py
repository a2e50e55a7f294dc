"""A bug behind `handle` is answered with the same bytes on every transport: the core's
-32603 reply (`core.internal_error_reply`), with the request's id, over HTTP with 500.
Each transport is a real process (served_failing.py): the built-in HTTP server, the ASGI
app under uvicorn, and stdio on pipes."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from runtime.helpers import request
from transports.test_http import mcp_headers

from .processes import HERE, serving
from .test_asgi import JSON, exchange

WAIT = 30
BOOM = request("tools/call", {"name": "greet", "arguments": {"name": "boom"}}, request_id=7)
FINE = request("tools/call", {"name": "greet", "arguments": {"name": "you"}}, request_id=8)
NOTIFIED = b'{"jsonrpc": "2.0", "method": "notifications/boom"}'
EXPECTED = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "Internal error"}}


def post(body: bytes) -> tuple[str, str, list[Any], bytes]:
    return ("POST", "/mcp", [JSON, *mcp_headers("tools/call", "greet")], body)


def over_stdio(*lines: bytes) -> list[bytes]:
    """The lines the stdio server answers `lines` with (it ends at the end of its stdin)."""
    done = subprocess.run(
        [sys.executable, str(HERE / "served_failing.py"), "stdio"],
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        timeout=WAIT,
        check=True,
    )
    return done.stdout.splitlines()


@pytest.mark.parametrize("kind", ["failing-builtin", "failing-uvicorn"])
async def test_a_failing_handle_is_answered_over_http_with_the_same_body_as_over_stdio(
    kind: str,
) -> None:
    stdio_boom, stdio_fine = over_stdio(BOOM, NOTIFIED, FINE)  # no reply to the notification
    assert json.loads(stdio_boom) == EXPECTED
    assert json.loads(stdio_fine)["id"] == 8
    with serving(kind) as served:
        failed = await exchange(served, post(BOOM))
        assert (failed.status, failed.headers["content-type"]) == (500, "application/json")
        assert failed.body == stdio_boom  # the very same bytes
        notified = await exchange(served, post(NOTIFIED))
        assert notified.status == 500  # HTTP must answer: the same reply, without an id
        assert notified.json() == {k: v for k, v in EXPECTED.items() if k != "id"}
        assert (await exchange(served, post(FINE))).status == 200  # the server carries on
    assert "a bug, on purpose" in served.log  # the traceback is logged, not sent
    assert "a bug" not in failed.body.decode()
