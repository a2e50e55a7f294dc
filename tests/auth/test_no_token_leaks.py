"""No access token leaks out of our server: with the access log on, every logger at DEBUG,
a journal recording and OpenTelemetry spans and metrics, requests with good tokens (a tool
call, a task) and bad ones (tampered, another audience, too few scopes, garbage) leave
no token, and no token's signature, in any log line, journal byte, span or metric
attribute, or answer. And a flood of refused requests costs the log a few lines, not one
a request.

Real sockets on loopback and oidc-provider 9.13.3 (see realm.py); skipped, saying how to
install them, when Node 22 or the npm peers are not installed; a failure instead in CI."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx2
import pytest
import trio
from interop.processes import CLIENT_SECONDS
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_tasks import START_TASK, CallToolResult, Server, ToolContext, ToolOutcome
from mcp_tasks._support.logs import RateLimitedLog
from mcp_tasks.auth import IntrospectionVerifier, current_access_token
from mcp_tasks.client import connect_http
from mcp_tasks.otel import OpenTelemetry
from mcp_tasks.transports import _http_access

from .realm import ProtectedRealm, protected_realm
from .test_tokens_e2e import OTHER_RESOURCE, REQUEST, b64, claims_of, unb64

WAIT = 30
"""The most one test waits for its servers and requests."""
FLOOD = 50
"""Refused requests in a flood."""
HEADERS = {"content-type": "application/json", "accept": "application/json"}


def build_server() -> Server:
    server = Server("protected", "1.0.0")

    @server.tool()
    async def whoami(ctx: ToolContext) -> str:
        """The subject of the request's token."""
        access = current_access_token()
        assert access is not None
        return access.subject

    @server.tool(task_support="required")
    async def job(ctx: ToolContext) -> ToolOutcome:
        """A task that says whom it ran for."""
        if not ctx.in_task:
            return START_TASK
        access = current_access_token()
        return CallToolResult.text(f"done for {access.subject if access else None}")

    return server


def log_text(caplog: pytest.LogCaptureFixture) -> str:
    """Every captured record: its line with any traceback, and every attribute it has."""
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(
        formatter.format(record) + " " + repr(record.__dict__) for record in caplog.records
    )


def leaked(secrets: list[str], text: str) -> list[str]:
    return [secret for secret in secrets if secret in text]


async def call(world: ProtectedRealm, token: str, tool: str) -> str:
    headers = {"Authorization": f"Bearer {token}"}
    async with connect_http(world.url, headers=headers, timeout_seconds=CLIENT_SECONDS) as client:
        result = await client.call_tool(tool)
    assert isinstance(result, CallToolResult) and not result.is_error, result
    return result.content[0].text  # type: ignore[union-attr]


async def test_no_token_in_logs_journal_telemetry_or_answers(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Good and bad tokens, through the access log, every logger at DEBUG, the journal and
    OpenTelemetry: no token, nor a token's signature, is written anywhere, nor answered."""
    caplog.set_level(logging.DEBUG)
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    server = build_server()
    server.use_telemetry(
        OpenTelemetry(
            tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
        )
    )
    journal = tmp_path / "journal"
    server.record(journal)
    answers: list[str] = []
    tokens: list[str] = []
    with trio.fail_after(WAIT):
        async with protected_realm(
            server,
            config={"access_log": True},
            provider_options={"resources": [OTHER_RESOURCE]},
        ) as world:
            good = await world.token("mcp:read mcp:write")
            assert await call(world, good, "whoami") == "svc"
            assert await call(world, good, "job") == "done for svc"

            header, payload, signature = good.split(".")
            claims = json.loads(unb64(payload)) | {"sub": "admin"}
            tampered = f"{header}.{b64(json.dumps(claims).encode())}.{signature}"
            theirs = await world.token(resource=OTHER_RESOURCE)
            unscoped = await world.token("mcp:write")
            assert "mcp:read" not in claims_of(unscoped)["scope"]
            garbage = "not-a-token-" + signature[::-1]
            tokens += [good, tampered, theirs, unscoped, garbage]
            refused = {tampered: 401, theirs: 401, unscoped: 403, garbage: 401}
            async with httpx2.AsyncClient(timeout=CLIENT_SECONDS) as http:
                for token, status in refused.items():
                    response = await http.post(
                        world.url,
                        content=REQUEST,
                        headers=HEADERS | {"authorization": f"Bearer {token}"},
                    )
                    assert response.status_code == status, response.text
                    answers.append(response.text + repr(response.headers))
                two = await http.post(
                    world.url,
                    content=REQUEST,
                    headers=HEADERS | {"authorization": f"Bearer {good} {good}"},
                )
                assert two.status_code == 400
                answers.append(two.text + repr(two.headers))
    spans_text = "\n".join(span.to_json() for span in spans.get_finished_spans())
    metrics = reader.get_metrics_data()
    assert metrics is not None
    journal_bytes = b"".join(path.read_bytes() for path in sorted(tmp_path.iterdir()))

    assert journal_bytes and spans_text and caplog.records  # (each was written to)
    assert b"svc" in journal_bytes  # (the principal is: the token is not)
    assert any(record.name == "mcp_tasks.access" for record in caplog.records)
    assert any(record.name == "mcp_tasks.transports.http" for record in caplog.records)
    secrets = tokens + [token.split(".")[-1] for token in tokens if token.count(".") == 2]
    assert leaked(secrets, log_text(caplog)) == []
    assert leaked(secrets, journal_bytes.decode("utf-8", "replace")) == []
    assert leaked(secrets, spans_text) == []
    assert leaked(secrets, metrics.to_json()) == []
    assert leaked(secrets, "\n".join(answers)) == []


def refusal_lines(caplog: pytest.LogCaptureFixture, reason: str) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name == "mcp_tasks.transports.http" and getattr(record, "reason", None) == reason
    ]


def our_lines_but_the_access_log(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name.startswith("mcp_tasks") and record.name != "mcp_tasks.access"
    ]


async def flood(world: ProtectedRealm, token: str, status: int) -> None:
    """`FLOOD` requests with `token`, each answered `status`."""
    async with httpx2.AsyncClient(timeout=CLIENT_SECONDS) as http:
        for _ in range(FLOOD):
            response = await http.post(
                world.url, content=REQUEST, headers=HEADERS | {"authorization": f"Bearer {token}"}
            )
            assert response.status_code == status, response.text


@pytest.fixture
def fresh_refusal_log(monkeypatch: pytest.MonkeyPatch) -> RateLimitedLog:
    """The endpoint's refusal log as at start (no window of an earlier test's refusals)."""
    log = RateLimitedLog(_http_access.refusals.logger)
    monkeypatch.setattr(_http_access, "refusals", log)
    return log


async def test_a_flood_of_bad_tokens_costs_a_few_log_lines(
    caplog: pytest.LogCaptureFixture, fresh_refusal_log: RateLimitedLog
) -> None:
    """50 requests with a tampered token: 50 answers of 401 and 50 access log lines, but
    at most `lines_per_window` lines of refusal, and nothing else of ours."""
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(WAIT):
        async with protected_realm(build_server(), config={"access_log": True}) as world:
            token = await world.token()
            assert await call(world, token, "whoami") == "svc"
            header, payload, _ = token.split(".")
            caplog.clear()
            await flood(world, f"{header}.{payload}.{b64(b'not the signature')}", 401)
            lines = refusal_lines(caplog, "unauthorized")
            assert 1 <= len(lines) <= fresh_refusal_log.lines_per_window
            assert our_lines_but_the_access_log(caplog) == lines
            assert len([r for r in caplog.records if r.name == "mcp_tasks.access"]) == FLOOD


async def test_a_flood_during_a_key_set_outage_costs_one_fetch_and_a_few_lines(
    caplog: pytest.LogCaptureFixture, fresh_refusal_log: RateLimitedLog
) -> None:
    """The provider down before its keys were ever fetched: 50 requests with its token are
    503, at the cost of one fetch (the cooldown) and a few lines of log."""
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(WAIT):
        async with protected_realm(build_server()) as world:
            token = await world.token()
            await world.stop_provider()
            caplog.clear()
            await flood(world, token, 503)
            verifier = world.protection.verifier
            assert getattr(verifier, "fetches", None) == 1
            lines = refusal_lines(caplog, "auth_unavailable")
            assert 1 <= len(lines) <= fresh_refusal_log.lines_per_window
            assert all(line.levelno == logging.WARNING for line in lines)
            assert (
                len(our_lines_but_the_access_log(caplog)) <= 2 * fresh_refusal_log.lines_per_window
            )


async def test_a_flood_during_an_introspection_outage_costs_a_few_lines(
    caplog: pytest.LogCaptureFixture, fresh_refusal_log: RateLimitedLog
) -> None:
    """The introspection endpoint down: 50 requests with a token are 503, at the cost of a
    few lines of log and a few introspection attempts, not one of each a request."""
    caplog.set_level(logging.DEBUG)
    secret = "introspector-secret"

    def verifier(issuer: str, resource: str) -> IntrospectionVerifier:
        return IntrospectionVerifier(issuer, resource, client_id="mcp-server", client_secret=secret)

    options = {"opaque": True, "introspector": ["mcp-server", secret]}
    with trio.fail_after(WAIT):
        async with protected_realm(
            build_server(), verifier=verifier, provider_options=options
        ) as world:
            introspector = world.protection.verifier
            assert isinstance(introspector, IntrospectionVerifier)
            assert await call(world, await world.token(), "whoami") == "svc"
            assert introspector.introspections == 1
            token = await world.token()  # (never shown: its answer is not kept)
            await world.stop_provider()
            caplog.clear()
            await flood(world, token, 503)
            lines = our_lines_but_the_access_log(caplog)
            assert len(lines) <= 2 * fresh_refusal_log.lines_per_window, [
                line.getMessage() for line in lines
            ]
            assert introspector.introspections - 1 <= fresh_refusal_log.lines_per_window
