"""`mcp-tasks serve --log-format json --access-log --otel` as a real process: its JSON log
lines on stderr, and the spans and metrics its OTLP exporter posts to a receiver on a
loopback port (configured by the standard OTEL_* variables)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from redis_server import free_port

from mcp_tasks.client import connect_http
from mcp_tasks.core._client import PollPolicy

ROOT = Path(__file__).parent.parent
JOBS = ROOT / "examples" / "jobs.py"


class Receiver:
    """An OTLP/HTTP endpoint: keeps what is posted to /v1/traces and /v1/metrics."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.metrics: list[str] = []
        self.got_spans = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            receiver.spans.extend(scope.spans)
                    receiver.got_spans.set()
                elif self.path == "/v1/metrics":
                    metrics = ExportMetricsServiceRequest.FromString(body)
                    for resource in metrics.resource_metrics:
                        for scope in resource.scope_metrics:
                            receiver.metrics.extend(metric.name for metric in scope.metrics)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]

    @contextmanager
    def running(self) -> Iterator[Receiver]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()


@contextmanager
def serve(port: int, *flags: str, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", str(JOBS)]
    command += ["--http", f"127.0.0.1:{port}", *flags]
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env={**os.environ, **env}
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def wait_for_line(process: subprocess.Popen[str], needle: str) -> list[str]:
    """stderr lines up to the one containing `needle` (the process started serving)."""
    assert process.stderr is not None
    seen: list[str] = []
    for line in process.stderr:
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"the server ended before saying {needle!r}: {''.join(seen)}")


def test_serve_with_json_logs_access_log_and_otel_exports_a_task() -> None:
    with Receiver().running() as receiver:
        port = free_port()
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_SERVICE_NAME": "jobs-under-test",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_METRIC_EXPORT_INTERVAL": "60000",  # the last export, at shutdown, is enough
        }
        flags = ("--log-format", "json", "--access-log", "--otel")
        with serve(port, *flags, env=env) as process:
            lines = wait_for_line(process, "serving")

            async def call() -> str:
                poll = PollPolicy(min_interval_ms=20, max_interval_ms=100)
                async with connect_http(f"http://127.0.0.1:{port}/mcp", poll=poll) as client:
                    result = await client.call_tool("slow_compute", {"seconds": 0.2})
                text = result.content[0].text  # type: ignore[union-attr]
                assert isinstance(text, str)
                return text

            assert trio.run(call) == "job done after 0.2s"
            process.send_signal(signal.SIGTERM)
            _, rest = process.communicate(timeout=30)
        assert process.returncode == 0, rest
    lines += rest.splitlines()

    # stderr: one JSON object a line, the task's life and the access log among them.
    logged = [json.loads(line) for line in lines if line.startswith("{")]
    assert logged, "no JSON lines"
    task_lines = [line for line in logged if line["logger"] == "mcp_tasks.tasks"]
    assert [line["event"] for line in task_lines] == ["create", "complete"]
    task_id = task_lines[0]["task_id"]
    assert {line["task_id"] for line in task_lines} == {task_id}
    assert task_lines[1]["status"] == "completed" and task_lines[1]["tool"] == "slow_compute"
    access = [line for line in logged if line["logger"] == "mcp_tasks.access"]
    assert {line["method"] for line in access} >= {"tools/call", "tasks/get"}
    assert all(line["http_status"] == 200 and "duration_ms" in line for line in access)

    # The OTLP receiver: the spans of that task, and its metrics.
    names = {span.name for span in receiver.spans}
    assert {"tools/call slow_compute", "task slow_compute", "tasks/get"} <= names
    (task_span,) = [span for span in receiver.spans if span.name == "task slow_compute"]
    attributes = {item.key: item.value.string_value for item in task_span.attributes}
    assert attributes["mcp.task.id"] == task_id
    assert {"mcp_tasks.tasks.created", "mcp_tasks.tasks.finished"} <= set(receiver.metrics)


def test_otel_with_an_unknown_exporter_is_a_usage_error() -> None:
    env = {"OTEL_TRACES_EXPORTER": "zipkin"}
    result = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", "serve", str(JOBS), "--otel"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "OTEL_TRACES_EXPORTER='zipkin'" in result.stderr


def test_access_log_is_for_http_only() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", "serve", str(JOBS), "--stdio", "--access-log"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--access-log is for --http" in result.stderr


@pytest.mark.parametrize("level", ["info", "debug"])
def test_json_log_lines_carry_the_level_and_logger(level: str) -> None:
    port = free_port()
    with serve(port, "--log-format", "json", "--log-level", level, env={}) as process:
        lines = wait_for_line(process, "serving")
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=30)
    logged = [json.loads(line) for line in lines + rest.splitlines() if line.strip()]
    started = next(line for line in logged if "Streamable HTTP on" in line["message"])
    serving = next(line for line in logged if line["message"].startswith("serving jobs"))
    assert serving["logger"] == "mcp_tasks.serve"  # every line JSON: the CLI's own too
    assert started["level"] == "INFO" and started["logger"] == "mcp_tasks.transports.http"
    assert started["time"].endswith("Z")


def test_console_telemetry_on_stdio_goes_to_stderr_not_into_the_stream() -> None:
    """`serve --stdio --otel` with the console exporters: stdout carries JSON-RPC only (a
    span there would break the client), the spans and metrics are on stderr."""
    env = {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console"}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    result = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", "serve", str(JOBS), "--stdio", "--otel"],
        input=json.dumps(listing) + "\n",
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [answer["id"] for answer in answers] == [1] and answers[0]["result"]["tools"]
    assert '"name": "tools/list"' in result.stderr  # the span, on stderr
    assert "mcp_tasks.requests" in result.stderr or "resource_metrics" in result.stderr
