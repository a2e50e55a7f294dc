"""Made-up method names against `mcp-tasks serve --otel`: how many metric series, how much
memory?

What is measured
----------------
A server process, `mcp-tasks serve examples/jobs.py --http 127.0.0.1:0 --otel`, exporting
its spans and metrics over OTLP/HTTP to a receiver this script runs on a loopback port.
Over one keep-alive connection the script sends a few real requests (`tools/list`,
`tools/call slow_compute`), then `--huge` requests (default 150) whose method name is
`--huge-mib` MiB long (default 1; in the body only, no header holds that much), then
`--made-up` requests (default 3,000) each with a method name of its own (`made/up/N`).
After each phase it waits for the receiver to have every span (so the span exporter's
queue is empty; 30 s at most, the exporter may drop what it cannot send) and reads the server's
VmRSS from /proc/PID/status. At the end it stops the server (SIGTERM: the last metric
export) and reports, from that export, the series (data points) of
`mcp_tasks.server.request.duration` and of all metrics, and the longest attribute value
among metrics and spans. With `--no-traces` no span is exported (`OTEL_TRACES_EXPORTER=none`):
the memory is what the metrics keep. Loopback only; bounded by the request counts and 30 s
a phase.

    python soak/otel_series.py [--made-up 3000] [--huge 150] [--huge-mib 1] [--no-traces]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `_common`

import argparse
import http.client
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _common import ROOT, cli_command, print_rows, rss_kib, started_server
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PHASE_SECONDS = 30.0
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Receiver:
    """An OTLP/HTTP endpoint on 127.0.0.1: counts spans, keeps the last metric export."""

    def __init__(self) -> None:
        self.spans = 0
        self.longest_span_value = 0
        self.series: dict[str, int] = {}
        self.longest_metric_value = 0
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    receiver.took_spans(ExportTraceServiceRequest.FromString(body))
                elif self.path == "/v1/metrics":
                    receiver.took_metrics(ExportMetricsServiceRequest.FromString(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]

    def took_spans(self, request: ExportTraceServiceRequest) -> None:
        with self.changed:
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans += 1
                        lengths = [len(span.name)] + [_length(a) for a in span.attributes]
                        self.longest_span_value = max(self.longest_span_value, *lengths)
            self.changed.notify_all()

    def took_metrics(self, request: ExportMetricsServiceRequest) -> None:
        with self.changed:
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        kind = metric.WhichOneof("data")
                        points = getattr(metric, kind).data_points if kind else []
                        self.series[metric.name] = len(points)
                        for point in points:
                            for attribute in point.attributes:
                                length = _length(attribute)
                                self.longest_metric_value = max(self.longest_metric_value, length)
            self.changed.notify_all()

    def wait_for_spans(self, count: int, seconds: float) -> int:
        """Wait for `count` spans in all, `seconds` at most (the exporter drops a batch it
        could not send in time); how many came."""
        deadline = time.monotonic() + seconds
        with self.changed:
            while self.spans < count and (left := deadline - time.monotonic()) > 0:
                self.changed.wait(left)
            return self.spans

    @contextmanager
    def running(self) -> Iterator[Receiver]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()


def _length(attribute: Any) -> int:
    value = attribute.value
    kind = value.WhichOneof("value")
    return len(value.string_value) if kind == "string_value" else len(str(getattr(value, kind)))


class Caller:
    """One keep-alive HTTP/1.1 connection to the server."""

    def __init__(self, url: str) -> None:
        self.host, _, rest = url.removeprefix("http://").partition("/")
        self.path = "/" + rest
        self.connection = http.client.HTTPConnection(self.host, timeout=60)
        self.ids = 0

    def call(self, method: str, params: dict[str, Any] | None = None, header: bool = True) -> int:
        self.ids += 1
        message = {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": method,
            "params": {**(params or {}), "_meta": META},
        }
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
        }
        if header:
            headers["mcp-method"] = method
            if params and "name" in params:
                headers["mcp-name"] = params["name"]
        self.connection.request("POST", self.path, json.dumps(message).encode(), headers)
        response = self.connection.getresponse()
        response.read()
        return response.status


def run(made_up: int, huge: int, huge_mib: float, *, traces: bool) -> dict[str, Any]:
    command = cli_command("serve", str(ROOT / "examples" / "jobs.py"), "--http", "127.0.0.1:0")
    figures: dict[str, Any] = {"made_up": made_up, "huge": huge, "huge_mib": huge_mib}
    with Receiver().running() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_METRIC_EXPORT_INTERVAL": "3600000",  # one export: at shutdown
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "120",  # s: a last export of 150 MB, unfixed
            "OTEL_TRACES_EXPORTER": "otlp" if traces else "none",
        }
        with started_server([*command, "--otel"], env, cpu=None) as server:
            caller = Caller(server.url)
            sent = 0

            def phase(name: str) -> None:
                if traces:
                    receiver.wait_for_spans(sent, PHASE_SECONDS)
                figures[f"rss_mib_{name}"] = round(rss_kib(server.pid)[0] / 1024, 1)

            caller.call("tools/list")
            caller.call("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})
            sent += 2
            phase("start")
            name = "m" * int(huge_mib * 2**20)
            for number in range(huge):
                caller.call(f"{number}{name}", header=False)
            sent += huge
            phase("huge")
            for number in range(made_up):
                caller.call(f"made/up/{number}")
            sent += made_up
            phase("made_up")
            caller.connection.close()
            figures["peak_rss_mib"] = round(rss_kib(server.pid)[1] / 1024, 1)
        figures["request_series"] = receiver.series.get("mcp_tasks.server.request.duration")
        figures["all_series"] = sum(receiver.series.values())
        figures["longest_metric_value"] = receiver.longest_metric_value
        figures["longest_span_value"] = receiver.longest_span_value
        figures["spans"] = receiver.spans
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--made-up", type=int, default=3_000)
    parser.add_argument("--huge", type=int, default=150)
    parser.add_argument("--huge-mib", type=float, default=1.0)
    parser.add_argument("--no-traces", action="store_true", help="export metrics only")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args()
    figures = run(options.made_up, options.huge, options.huge_mib, traces=not options.no_traces)
    if options.json:
        print(json.dumps(figures))
        return
    rows = [
        ["series (request.duration / all)", "longest value (metric / span)", "VmRSS"],
        [
            f"{figures['request_series']} / {figures['all_series']}",
            f"{figures['longest_metric_value']:,} / {figures['longest_span_value']:,}",
            f"{figures['rss_mib_start']} MiB at start, {figures['rss_mib_huge']} after "
            f"{options.huge} huge, {figures['rss_mib_made_up']} after {options.made_up:,} more",
        ],
    ]
    print_rows(rows)


if __name__ == "__main__":
    main()
