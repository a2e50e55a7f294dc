"""The built-in server's health probes, access log and refusal log, on real 127.0.0.1 sockets.

`/healthz` and `/readyz` are answered before any rule (no Host or Origin check, no
authentication); readiness asks the server, whose store may hang or fail. Waits are on
events under `fail_after`; the drain test holds a request in flight with a gated tool and
starts a probe's head before the drain (`wait_all_tasks_blocked` lets the server read it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from test_http import (
    JOBS,
    HttpClient,
    Response,
    assert_refused,
    call,
    mcp_headers,
    probe_server,
    rpc,
    serving,
)

from mcp_tasks import Server
from mcp_tasks._support.logs import RateLimitedLog
from mcp_tasks.core import TaskRecord
from mcp_tasks.store import MemoryTaskStore
from mcp_tasks.transports import HttpConfig, Unauthorized, _http_access, serve_http
from mcp_tasks.transports._telemetry import Telemetry

WAIT = 5
OK = {"status": "ok"}
READY = {"status": "ready"}


async def get(port: int, path: str, *, method: str = "GET", headers: Any = ()) -> Response:
    """One request on a connection of its own."""
    return await (await HttpClient.connect(port)).exchange_once(method, path, headers, WAIT)


def assert_probe(response: Response, status: int, body: Mapping[str, str]) -> None:
    assert (response.status, response.json()) == (status, body), response
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "no-store"


# --- what the probes answer ---------------------------------------------------------------


async def test_liveness_and_readiness_of_a_running_server() -> None:
    async with serving(JOBS.server) as port:
        assert_probe(await get(port, "/healthz"), 200, OK)
        assert_probe(await get(port, "/readyz"), 200, READY)
        assert_probe(await get(port, "/readyz?verbose=1"), 200, READY)  # the query is ignored


async def test_head_gets_the_headers_only() -> None:
    async with serving(JOBS.server) as port:
        for path in ("/healthz", "/readyz"):
            response = await get(port, path, method="HEAD")
            assert (response.status, response.body) == (200, b"")
            assert response.headers["cache-control"] == "no-store"


async def test_other_methods_are_405_with_allow() -> None:
    async with serving(JOBS.server) as port:
        for method in ("POST", "PUT", "DELETE"):
            response = await get(port, "/readyz", method=method)
            assert response.status == 405, response
            assert response.headers["allow"] == "GET, HEAD"


async def test_probes_need_no_credentials_and_pass_any_host_and_origin() -> None:
    def nobody(headers: Mapping[str, str]) -> str:
        raise Unauthorized("nobody gets in")

    foreign = [("host", "10.1.2.3:8000"), ("origin", "https://evil.example")]
    async with serving(JOBS.server, authenticate=nobody) as port:
        assert_probe(await get(port, "/healthz", headers=foreign), 200, OK)
        assert_probe(await get(port, "/readyz", headers=foreign), 200, READY)
        client = await HttpClient.connect(port)
        with trio.fail_after(WAIT):
            assert_refused(await rpc(client, "server/discover"), 401, "nobody gets in")
            host = [("host", "10.1.2.3:8000"), *mcp_headers("server/discover")]
            assert_refused(await rpc(client, "server/discover", headers=host), 421, "Host")
        await client.aclose()


async def test_paths_are_configurable_and_none_turns_one_off() -> None:
    async with serving(JOBS.server, health_path="/live", ready_path=None) as port:
        assert_probe(await get(port, "/live"), 200, OK)
        for path in ("/healthz", "/readyz"):
            assert_refused(await get(port, path), 404, "Not found")


@pytest.mark.parametrize(
    "settings",
    [
        {"ready_path": "/mcp"},
        {"health_path": "/mcp"},
        {"health_path": "/same", "ready_path": "/same"},
        {"health_path": "healthz"},
        {"ready_path": ""},
        {"ready_timeout_seconds": 0},
    ],
)
def test_bad_probe_settings_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"path|positive"):
        HttpConfig(**settings)


# --- readiness: the store, the drain ------------------------------------------------------


class FlakyStore(MemoryTaskStore):
    """A memory store whose reads can be made to hang, or to fail."""

    def __init__(self) -> None:
        super().__init__()
        self.mode = "answer"
        self.freed = trio.Event()

    async def get(self, task_id: str) -> TaskRecord | None:
        if self.mode == "hang":
            await self.freed.wait()
        elif self.mode == "fail":
            raise ConnectionError("the store is down")
        return await super().get(task_id)


async def test_a_store_that_hangs_or_fails_is_not_ready_and_the_process_still_lives() -> None:
    store = FlakyStore()
    server = Server("flaky", "1.0", store=store, shutdown_grace_seconds=0.5)
    unreachable = {"status": "not ready", "reason": "store unreachable"}
    async with serving(server, ready_timeout_seconds=0.2) as port:
        assert_probe(await get(port, "/readyz"), 200, READY)
        store.mode = "hang"
        started = trio.current_time()
        assert_probe(await get(port, "/readyz"), 503, unreachable)
        assert 0.2 <= trio.current_time() - started < 2  # within the readiness timeout
        assert_probe(await get(port, "/healthz"), 200, OK)
        store.mode = "fail"
        assert_probe(await get(port, "/readyz"), 503, unreachable)
        store.mode = "answer"
        store.freed.set()
        assert_probe(await get(port, "/readyz"), 200, READY)


class Warming:
    """Not a `Server`: a handler with what the port (`MessageHandler`) declares, no more."""

    def __init__(self) -> None:
        self.telemetry = Refusals()
        self.asked: list[float] = []

    async def handle(self, data: bytes, **_: Any) -> None:
        return None

    def end_subscriptions(self, connection: object = None) -> None:
        pass

    async def readiness(self, timeout_seconds: float) -> str | None:
        self.asked.append(timeout_seconds)
        return "warming up"


async def test_any_handler_is_asked_its_readiness_and_told_its_refusals() -> None:
    handler = Warming()
    config = HttpConfig(ready_timeout_seconds=0.25)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(partial(serve_http, handler, "127.0.0.1", 0, config=config))
        with trio.fail_after(WAIT):
            warming = {"status": "not ready", "reason": "warming up"}
            assert_probe(await get(port, "/readyz"), 503, warming)
            foreign = [("host", "evil.example"), *mcp_headers("server/discover")]
            client = await HttpClient.connect(port)
            assert (await rpc(client, "server/discover", headers=foreign)).status == 421
            await client.aclose()
        nursery.cancel_scope.cancel()
    assert handler.asked == [0.25]
    assert handler.telemetry.reasons == ["host"]


async def test_readiness_is_503_draining_while_a_request_holds_the_drain() -> None:
    server, gate = probe_server()
    serve_scope = trio.CancelScope()

    async def serve(task_status: trio.TaskStatus[int]) -> None:
        with serve_scope:
            config = HttpConfig(drain_timeout_seconds=WAIT)
            await serve_http(server, "127.0.0.1", 0, config=config, task_status=task_status)

    async with server.running(), trio.open_nursery() as nursery:
        port: int = await nursery.start(serve)
        held = await HttpClient.connect(port)
        answers: list[Response] = []

        async def hold() -> None:
            answers.append(await call(held, "gated", {}))

        nursery.start_soon(hold)
        prober = await HttpClient.connect(port)
        with trio.fail_after(WAIT):
            await gate.started.wait()
            head = prober.encode("GET", [], target="/readyz")
            await prober.stream.send_all(head[:10])  # a probe begun before the drain
            await trio.testing.wait_all_tasks_blocked()  # the server has read it
            serve_scope.cancel()  # the drain begins; the gated request holds it open
            await trio.testing.wait_all_tasks_blocked()
            await prober.stream.send_all(head[10:])
            response = await prober.response()
            assert_probe(response, 503, {"status": "not ready", "reason": "draining"})
            assert response.headers["connection"] == "close"
            with pytest.raises(OSError):  # no new connection while draining: also not ready
                await trio.open_tcp_stream("127.0.0.1", port)
            gate.release.set()
        await prober.aclose()
    (answer,) = answers
    assert answer.status == 200 and answer.headers["connection"] == "close"
    await held.aclose()


# --- the access log -----------------------------------------------------------------------

SECRET = "Bearer s3cret-token"


def access_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "mcp_tasks.access"]


async def test_the_access_log_is_off_by_default(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with serving(JOBS.server) as port:
        client = await HttpClient.connect(port)
        with trio.fail_after(WAIT):
            assert (await rpc(client, "server/discover")).status == 200
        await client.aclose()
        assert (await get(port, "/healthz")).status == 200
    assert access_lines(caplog) == []


async def test_the_access_log_has_a_line_per_request_with_its_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_tasks.access")
    secret = [("authorization", SECRET), ("cookie", "session=s3cret-cookie")]
    async with serving(JOBS.server, access_log=True) as port:
        client = await HttpClient.connect(port)
        with trio.fail_after(WAIT):
            headers = [*secret, *mcp_headers("tools/call", "greet")]
            arguments = {"name": "greet", "arguments": {}}
            assert (await rpc(client, "tools/call", arguments, headers=headers)).status == 200
            foreign = [("host", "evil.example"), *mcp_headers("server/discover")]
            assert (await rpc(client, "server/discover", headers=foreign)).status == 421
        local_port = client.stream.socket.getsockname()[1]
        await client.aclose()
        assert (await get(port, "/readyz?token=s3cret-query")).status == 200
    called, refused, probed = access_lines(caplog)
    assert called.levelno == logging.INFO
    fields = {key: getattr(called, key) for key in ("method", "mcp_name", "http_status", "client")}
    assert fields == {
        "method": "tools/call",
        "mcp_name": "greet",
        "http_status": 200,
        "client": f"127.0.0.1:{local_port}",
    }
    assert isinstance(called.duration_ms, float) and called.duration_ms >= 0
    assert called.getMessage().startswith("POST /mcp tools/call greet 200 ")
    assert (refused.http_status, refused.method, refused.mcp_name) == (421, "server/discover", None)
    assert probed.getMessage().startswith("GET /readyz 200 ")  # no query: it may hold secrets
    for record in (called, refused, probed):
        assert "s3cret" not in record.getMessage() + repr(record.__dict__)


# --- refusals: rate-limited log lines, telemetry --------------------------------------------


class Refusals(Telemetry):
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def refused(self, reason: str) -> None:
        self.reasons.append(reason)


async def test_a_flood_of_refusals_costs_a_few_lines_then_one_that_counts_the_rest(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]
    logger = logging.getLogger("mcp_tasks.transports.http")
    limited = RateLimitedLog(logger, lines_per_window=5, window_seconds=10, clock=lambda: now[0])
    monkeypatch.setattr(_http_access, "refusals", limited)
    caplog.set_level(logging.INFO, logger="mcp_tasks.transports.http")
    server, _ = probe_server()
    telemetry = Refusals()
    server.use_telemetry(telemetry)
    foreign = [("host", "evil.example"), *mcp_headers("server/discover")]
    async with serving(server) as port:
        client = await HttpClient.connect(port)
        with trio.fail_after(WAIT):
            for _ in range(50):
                assert (await rpc(client, "server/discover", headers=foreign)).status == 421
            now[0] = 10.0  # the next window
            assert (await rpc(client, "server/discover", headers=foreign)).status == 421
            wrong_type = [("content-type", "text/plain"), *mcp_headers("server/discover")]
            await client.send("POST", wrong_type, b"{}")
            assert (await client.response()).status == 415
        await client.aclose()
    lines = [r for r in caplog.records if getattr(r, "reason", None) in ("host", "content_type")]
    assert [(r.reason, r.levelno, r.http_status) for r in lines] == [
        *[("host", logging.INFO, 421)] * 6,
        ("content_type", logging.INFO, 415),
    ]
    assert "(and 45 more like it in the last 10 s)" in lines[5].getMessage()
    assert all("evil" not in r.getMessage() for r in lines)  # no value the client sent
    assert lines[0].getMessage() == (
        "HTTP 421: refused a request with a Host that is not allowed (DNS rebinding protection)"
    )
    assert telemetry.reasons == ["host"] * 51 + ["content_type"]


async def test_a_refusal_of_the_servers_own_making_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_tasks.transports.http")
    limits = {"max_body_bytes": 4096, "max_body_bytes_in_flight": 4096, "body_wait_seconds": 0}
    headers = [("content-type", "application/json"), *mcp_headers("server/discover")]
    async with serving(JOBS.server, **limits) as port:
        holder, refused = await HttpClient.connect(port), await HttpClient.connect(port)
        with trio.fail_after(WAIT):
            whole = holder.encode("POST", headers, b" " * 4096)
            await holder.stream.send_all(whole[:-1])  # all its body but one byte
            await trio.testing.wait_all_tasks_blocked()  # the server holds what came
            await refused.send("POST", headers, b"{}")
            assert (await refused.response()).status == 503
        await holder.aclose()
        await refused.aclose()
    (line,) = [r for r in caplog.records if getattr(r, "reason", None) == "busy"]
    assert (line.levelno, line.http_status) == (logging.WARNING, 503)
