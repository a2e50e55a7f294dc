"""A peer cannot make metric series, or hold memory, through OpenTelemetry.

A server with OpenTelemetry on (the SDK's in-memory reader and exporter) is sent, over
real HTTP on 127.0.0.1, thousands of made-up method names, method and tool names and ids of
a megabyte, and a few real calls. Each metric keeps a handful of attribute sets (the known
methods, `other`), no attribute value or span name is longer than `MAX_ATTRIBUTE_LENGTH`,
the principal appears nowhere, and the real methods and tools keep their names."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio
from transports.test_http import HttpClient, Response, mcp_headers, serving

from mcp_tasks import CallToolResult, ProtocolError, Server, ToolContext, ToolOutcome
from mcp_tasks.otel import MAX_ATTRIBUTE_LENGTH, OTHER
from runtime.helpers import request

from .test_otel import Telemetry, build

MADE_UP = 2_100  # past the SDK's own cap of 2,000 series a metric
HUGE = 1024 * 1024
PRINCIPAL = "alice@example.com"
KNOWN = {"tools/list", "tools/call", "tasks/get", "other"}


def authenticate(headers: Mapping[str, str]) -> str:
    return PRINCIPAL


async def post(
    client: HttpClient, body: bytes, method: str | None, name: str | None = None
) -> Response:
    headers = mcp_headers(method, name) if method is not None else mcp_headers("")[:2]
    return await client.post(body, headers)


def series(telemetry: Telemetry) -> dict[str, list[dict[str, Any]]]:
    """Each metric's attribute sets, one a series."""
    data = telemetry.reader.get_metrics_data()
    assert data is not None
    found: dict[str, list[dict[str, Any]]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = metric.data.data_points
                found[metric.name] = [dict(point.attributes or {}) for point in points]
    return found


def longest(values: Any) -> int:
    lengths = [len(value) if isinstance(value, str) else longest_of(value) for value in values]
    return max(lengths, default=0)


def longest_of(value: Any) -> int:
    return longest(value) if isinstance(value, list | tuple) else len(str(value))


async def test_made_up_and_huge_names_make_no_series_and_are_cut() -> None:
    telemetry = Telemetry()
    huge = "m" * HUGE
    with trio.fail_after(120):
        async with serving(build(telemetry), authenticate=authenticate) as port:
            client = await HttpClient.connect(port)
            listed = await post(client, request("tools/list"), "tools/list")
            assert listed.status == 200
            greet = request("tools/call", {"name": "greet", "arguments": {}})
            assert (await post(client, greet, "tools/call", "greet")).json()["result"]
            for number in range(MADE_UP):
                method = f"made/up/{number}"
                refused = await post(client, request(method), method)
                assert refused.json()["error"]["code"] == -32601
            for number in range(3):  # too long for a header: in the body only
                answer = await post(client, request(f"{number}{huge}"), None)
                assert answer.json()["error"]["code"] < 0
            nobody = request("tools/call", {"name": huge, "arguments": {}}, request_id=huge)
            assert (await post(client, nobody, "tools/call")).json()["error"]
            get = request("tasks/get", {"taskId": huge})
            assert (await post(client, get, "tasks/get")).json()["error"]
            await client.aclose()

    found = series(telemetry)
    durations = found["mcp_tasks.server.request.duration"]
    assert len(durations) <= 10, len(durations)
    assert {point["mcp.method.name"] for point in durations} == KNOWN
    for name, points in found.items():
        assert len(points) <= 10, (name, len(points))
        for point in points:
            assert longest(point.values()) <= MAX_ATTRIBUTE_LENGTH, name
            assert PRINCIPAL not in json.dumps(point, default=str), name
    refusals = {point["mcp_tasks.refusal.reason"] for point in found["mcp_tasks.refusals"]}
    assert "-32601" in refusals

    spans = telemetry.finished()
    assert len(spans) == MADE_UP + 7
    for span in spans:
        assert len(span.name) <= MAX_ATTRIBUTE_LENGTH
        attributes = dict(span.attributes or {})
        assert longest(attributes.values()) <= MAX_ATTRIBUTE_LENGTH, span.name
        assert PRINCIPAL not in json.dumps(attributes, default=str)
        description = span.status.description or ""
        assert len(description) <= MAX_ATTRIBUTE_LENGTH
    names = {span.name for span in spans}
    assert {"tools/list", "tools/call greet", "tools/call", "tasks/get", OTHER} == names
    (called,) = [s for s in spans if s.name == "tools/call"]
    tool = called.attributes["gen_ai.tool.name"]  # type: ignore[index]
    assert isinstance(tool, str) and tool.startswith("mmm") and len(tool) == MAX_ATTRIBUTE_LENGTH


def coded(telemetry: Telemetry, tools: int) -> Server:
    """`tools` tools, each failing with the JSON-RPC code its caller asks for (a handler
    that lets a peer choose its error code: the worst a server's own values can be)."""
    server = Server("coded", "1")
    server.use_telemetry(telemetry.server)

    def handler(ctx: ToolContext, code: int = 0) -> ToolOutcome:
        if code:
            raise ProtocolError(code, "as asked")
        return CallToolResult.text("fine")

    for number in range(tools):
        server.tool(name=f"tool_{number}")(handler)
    return server


async def test_values_the_server_names_stop_at_max_metric_values() -> None:
    telemetry = Telemetry(max_metric_values=3)
    with trio.fail_after(60):
        async with serving(coded(telemetry, tools=5)) as port:
            client = await HttpClient.connect(port)
            for number in range(5):
                name = f"tool_{number}"
                body = request("tools/call", {"name": name, "arguments": {}})
                assert (await post(client, body, "tools/call", name)).json()["result"]
            for code in range(1, 11):
                arguments = {"code": code}
                body = request("tools/call", {"name": "tool_0", "arguments": arguments})
                assert (await post(client, body, "tools/call", "tool_0")).json()["error"]
            await client.aclose()
    codes = {
        point.get("rpc.jsonrpc.error_code")
        for point in series(telemetry)["mcp_tasks.server.request.duration"]
    }
    assert codes == {None, 1, 2, 3, OTHER}
    reasons = {
        point["mcp_tasks.refusal.reason"] for point in series(telemetry)["mcp_tasks.refusals"]
    }
    assert reasons == {"1", "2", "3", OTHER}
    named = {span.name for span in telemetry.finished()}
    assert named == {"tools/call tool_0", "tools/call tool_1", "tools/call tool_2", "tools/call"}


def test_serve_otel_as_a_process_keeps_its_series_and_memory() -> None:
    """`soak/otel_series.py`, small: `mcp-tasks serve --otel` as a process, its OTLP
    export read by a receiver on loopback, after made-up and megabyte-long methods."""
    script = Path(__file__).parent.parent.parent / "soak" / "otel_series.py"
    command = [sys.executable, str(script), "--made-up", "200", "--huge", "3", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.splitlines()[-1])
    assert figures["spans"] == 200 + 3 + 2
    assert figures["request_series"] <= 4  # tools/list, tools/call, other (two codes)
    assert figures["longest_metric_value"] <= MAX_ATTRIBUTE_LENGTH
    assert figures["longest_span_value"] <= MAX_ATTRIBUTE_LENGTH
