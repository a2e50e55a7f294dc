"""The ASGI app's health probes, access log and refusal log: under uvicorn, hypercorn and a
Starlette mount, answered as the built-in server answers them; and in this process, the
app called directly with ASGI messages, for the drain and the log lines.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing
from runtime.helpers import request
from transports.test_http import TASKS_CAPS, Response

from mcp_tasks import CallToolResult, Server, ToolContext, ToolOutcome
from mcp_tasks.asgi import AsgiApp, asgi_app
from mcp_tasks.transports import HttpConfig, Unauthorized

from .processes import Served, serving
from .test_asgi import HttpClient

WAIT = 10
FOREIGN = [("host", "10.1.2.3:8000"), ("origin", "https://evil.example")]
PROBES = [
    ("GET", "/healthz", []),
    ("GET", "/readyz", []),
    ("HEAD", "/readyz", []),
    ("GET", "/readyz?check=1", FOREIGN),
    ("POST", "/healthz", []),
]
COMPARED = ("content-type", "cache-control", "allow", "content-length")


async def probe(served: Served, method: str, path: str, headers: Any = ()) -> Response:
    """One request under the path the app is mounted at, on a connection of its own."""
    return await (await HttpClient.to(served)).exchange_once(method, path, headers, WAIT)


@pytest.mark.parametrize(("method", "path", "headers"), PROBES)
async def test_probes_are_answered_as_the_built_in_server_answers_them(
    method: str, path: str, headers: Any, asgi: Served, built_in: Served
) -> None:
    theirs = await probe(asgi, method, path, headers)
    ours = await probe(built_in, method, path, headers)
    assert ours.status in (200, 405), ours
    assert (theirs.status, theirs.body) == (ours.status, ours.body)
    for name in COMPARED:
        assert theirs.headers.get(name) == ours.headers.get(name), name


async def test_without_lifespan_it_lives_but_is_not_ready() -> None:
    with serving("uvicorn", env={"UVICORN_LIFESPAN": "off"}) as served:
        live, ready = await probe(served, "GET", "/healthz"), await probe(served, "GET", "/readyz")
    assert (live.status, live.json()) == (200, {"status": "ok"})
    assert (ready.status, ready.json()) == (503, {"status": "not ready", "reason": "not running"})


# --- the app called directly --------------------------------------------------------------


class Exchange:
    """One request to the app: its messages out, its answer in; `disconnect()` ends it."""

    def __init__(self, method: str, path: str, headers: Any, body: bytes) -> None:
        raw = [(name.encode(), value.encode()) for name, value in headers]
        self.scope = {
            "type": "http",
            "method": method,
            "path": path.partition("?")[0],
            "raw_path": path.partition("?")[0].encode(),
            "query_string": path.partition("?")[2].encode(),
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1:8000"), *raw],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8000),
        }
        self.body = body
        self.sent: list[Mapping[str, Any]] = []
        self.started = trio.Event()
        self._gone = trio.Event()

    async def receive(self) -> dict[str, Any]:
        if self.body is not None:
            body, self.body = self.body, None  # type: ignore[assignment]
            return {"type": "http.request", "body": body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Mapping[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.start":
            self.started.set()

    def disconnect(self) -> None:
        """The client leaves: the app's next `receive` is `http.disconnect`."""
        self._gone.set()

    async def run(self, app: AsgiApp) -> Response:
        await app(self.scope, self.receive, self.send)
        self._gone.set()
        start, *bodies = self.sent
        headers = {name.decode(): value.decode() for name, value in start["headers"]}
        return Response(start["status"], headers, b"".join(m.get("body", b"") for m in bodies))


def tool_call(name: str) -> Exchange:
    body = request("tools/call", {"name": name, "arguments": {}}, caps=TASKS_CAPS)
    headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", name),
        ("authorization", "Bearer s3cret"),
    ]
    return Exchange("POST", "/mcp", headers, body)


def gated_server() -> tuple[Server, trio.Event, trio.Event]:
    server = Server("gated", "1.0", shutdown_grace_seconds=0.5)
    started, release = trio.Event(), trio.Event()

    @server.tool()
    async def gated(ctx: ToolContext) -> ToolOutcome:
        started.set()
        await release.wait()
        return CallToolResult.text("released")

    return server, started, release


async def test_readiness_is_503_draining_during_the_lifespans_shutdown() -> None:
    server, started, release = gated_server()
    app = asgi_app(server, HttpConfig(drain_timeout_seconds=WAIT))
    leave = trio.Event()
    answers: list[Response] = []

    async def live() -> None:
        async with app.lifespan():
            await leave.wait()

    async def hold() -> None:
        answers.append(await tool_call("gated").run(app))

    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(live)
            await trio.testing.wait_all_tasks_blocked()
            assert (await Exchange("GET", "/readyz", [], b"").run(app)).status == 200
            nursery.start_soon(hold)
            await started.wait()
            leave.set()  # the shutdown begins; the gated request holds the drain
            await trio.testing.wait_all_tasks_blocked()
            ready = await Exchange("GET", "/readyz", FOREIGN, b"").run(app)
            assert (ready.status, ready.json()) == (
                503,
                {"status": "not ready", "reason": "draining"},
            )
            live_answer = await Exchange("GET", "/healthz", [], b"").run(app)
            assert live_answer.status == 200
            release.set()
    (answer,) = answers
    assert answer.status == 200


async def test_probes_need_no_credentials() -> None:
    def nobody(headers: Mapping[str, str]) -> str:
        raise Unauthorized("nobody gets in")

    server, _, _ = gated_server()
    app = asgi_app(server, HttpConfig(authenticate=nobody, health_path="/live", ready_path=None))
    async with server.running():
        with trio.fail_after(WAIT):
            assert (await Exchange("GET", "/live", [], b"").run(app)).status == 200
            assert (await Exchange("GET", "/readyz", [], b"").run(app)).status == 404
            assert (await tool_call("gated").run(app)).status == 401


async def test_access_log_and_refusal_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    server, _, release = gated_server()
    release.set()
    quiet, logged = asgi_app(server), asgi_app(server, HttpConfig(access_log=True))
    async with server.running():
        with trio.fail_after(WAIT):
            assert (await tool_call("gated").run(quiet)).status == 200
            assert not [r for r in caplog.records if r.name == "mcp_tasks.access"]
            assert (await tool_call("gated").run(logged)).status == 200
            foreign = tool_call("gated")
            foreign.scope["headers"][0] = (b"host", b"evil.example")
            assert (await foreign.run(logged)).status == 421
    called, refused = [r for r in caplog.records if r.name == "mcp_tasks.access"]
    fields = ("method", "mcp_name", "http_status", "client")
    assert {key: getattr(called, key) for key in fields} == {
        "method": "tools/call",
        "mcp_name": "gated",
        "http_status": 200,
        "client": "127.0.0.1:40000",
    }
    assert called.getMessage().startswith("POST /mcp tools/call gated 200 ")
    assert called.duration_ms >= 0 and refused.http_status == 421
    (host_line,) = [r for r in caplog.records if getattr(r, "reason", None) == "host"]
    assert host_line.levelno == logging.INFO and "evil" not in host_line.getMessage()
    for record in caplog.records:
        assert "s3cret" not in record.getMessage() + repr(record.__dict__)


async def test_not_running_is_a_warning_once_reasoned(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcp_tasks")
    server, _, _ = gated_server()
    with trio.fail_after(WAIT):
        assert (await tool_call("gated").run(asgi_app(server))).status == 503
    (line,) = [r for r in caplog.records if getattr(r, "reason", None) == "not_running"]
    assert (line.levelno, line.http_status) == (logging.WARNING, 503)
