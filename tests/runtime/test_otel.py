"""OpenTelemetry over real HTTP: one task followed through its log lines, its spans (client,
server, task, the handler's own) and its metric points, read from the SDK's in-memory
exporters."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
import trio
from doc_snippets import Page
from msgspec import Raw
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    ElicitParams,
    ElicitResult,
    Server,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.client import Client, RpcError, connect_http
from mcp_tasks.core import (
    PROTOCOL_VERSION,
    ClientCapabilities,
    RequestMeta,
    SubscriptionFilter,
    TaskRecord,
    TaskStatus,
)
from mcp_tasks.core._client import PollPolicy
from mcp_tasks.core.wire import IncomingMessage
from mcp_tasks.otel import OpenTelemetry
from mcp_tasks.transports import serve_http

FAST = PollPolicy(min_interval_ms=10, max_interval_ms=50)


class Telemetry:
    def __init__(self, **options: Any) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = self.spans_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = tracer_provider.get_tracer("test")
        self.server = OpenTelemetry(
            tracer_provider=tracer_provider, meter_provider=meter_provider, **options
        )
        self.client = OpenTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


def build(telemetry: Telemetry, *, observed: bool = True) -> Server:
    server = Server("t", "1")
    if observed:
        server.use_telemetry(telemetry.server)

    @server.tool(task_support="required")
    async def asks(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        with telemetry.tracer.start_as_current_span("handler work"):
            answer = await ctx.elicit("name?", {"type": "object", "properties": {}})
        return CallToolResult.text(f"hello {(answer.content or {}).get('name')}")

    @server.tool()
    async def greet(ctx: ToolContext) -> ToolOutcome:
        return CallToolResult.text("hi")

    return server


@asynccontextmanager
async def served(telemetry: Telemetry, **options: Any) -> AsyncIterator[Client]:
    server = build(telemetry)
    async with server.running(), trio.open_nursery() as nursery:
        port = await nursery.start(serve_http, server, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{port}/mcp"
        async with connect_http(url, telemetry=telemetry.client, poll=FAST, **options) as client:
            yield client
        nursery.cancel_scope.cancel()


async def named(params: ElicitParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"name": "Ada"})


async def test_one_task_through_logs_spans_and_metrics(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcp_tasks.tasks")
    telemetry = Telemetry()
    with trio.fail_after(30):
        async with served(telemetry, on_elicit=named) as client:
            result = await client.call_tool("asks")
    assert result.content[0].text == "hello Ada"  # type: ignore[union-attr]
    spans = telemetry.finished()
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)

    # The client's span of the call, the server's span under it (through `_meta`).
    (client_call,) = [s for s in by_name["tools/call asks"] if s.kind is SpanKind.CLIENT]
    (server_call,) = [s for s in by_name["tools/call asks"] if s.kind is SpanKind.SERVER]
    assert server_call.parent is not None and client_call.context is not None
    assert server_call.parent.span_id == client_call.context.span_id
    assert server_call.context.trace_id == client_call.context.trace_id
    task_id = server_call.attributes["mcp.task.id"]  # type: ignore[index]

    # The task's span: a child of the request that created it, with its input round.
    (task_span,) = by_name["task asks"]
    assert task_span.parent is not None
    assert task_span.parent.span_id == server_call.context.span_id
    assert task_span.attributes["mcp.task.id"] == task_id  # type: ignore[index]
    assert task_span.attributes["mcp.task.status"] == "completed"  # type: ignore[index]
    assert [event.name for event in task_span.events] == ["input requested", "input answered"]
    assert task_span.start_time is not None and task_span.end_time is not None
    assert task_span.end_time >= task_span.start_time

    # The handler's own span runs inside the task's.
    (work,) = by_name["handler work"]
    assert work.parent is not None and work.parent.span_id == task_span.context.span_id

    # Every tasks/get and the tasks/update: a server span under a client span.
    client_ids = {s.context.span_id for s in spans if s.kind is SpanKind.CLIENT}
    polls = [
        s for s in spans if s.kind is SpanKind.SERVER and s.name in ("tasks/get", "tasks/update")
    ]
    assert {s.name for s in polls} == {"tasks/get", "tasks/update"}
    for poll in polls:
        assert poll.parent is not None and poll.parent.span_id in client_ids
        assert poll.attributes["mcp.task.id"] == task_id  # type: ignore[index]

    # Metrics.
    tool = {"gen_ai.tool.name": "asks"}
    (created,) = telemetry.points("mcp_tasks.tasks.created")
    assert (created.value, dict(created.attributes)) == (1, tool)
    (finished,) = telemetry.points("mcp_tasks.tasks.finished")
    assert finished.value == 1
    assert dict(finished.attributes) == {**tool, "mcp.task.status": "completed"}
    (active,) = telemetry.points("mcp_tasks.tasks.active")
    assert active.value == 0
    (duration,) = telemetry.points("mcp_tasks.task.duration")
    assert duration.count == 1
    (waited,) = telemetry.points("mcp_tasks.task.input_wait")
    assert waited.count == 1
    assert waited.sum <= duration.sum
    methods = {
        point.attributes["mcp.method.name"]
        for point in telemetry.points("mcp_tasks.server.request.duration")
    }
    assert {"tools/list", "tools/call", "tasks/get", "tasks/update"} <= methods
    operations = {
        (point.attributes["mcp_tasks.store"], point.attributes["mcp_tasks.store.operation"])
        for point in telemetry.points("mcp_tasks.store.operation.duration")
    }
    assert {("MemoryTaskStore", "save"), ("MemoryTaskStore", "get")} <= operations
    # Its coordination's operations too, named after the store.
    assert ("MemoryTaskStore", "shared_key") in operations

    # The log lines of the same task.
    events = [r.event for r in caplog.records if getattr(r, "task_id", None) == task_id]  # type: ignore[attr-defined]
    assert events == ["create", "need_input", "input_answered", "complete"]


async def test_an_error_marks_the_spans_and_counts_as_a_refusal() -> None:
    telemetry = Telemetry()
    with trio.fail_after(30):
        async with served(telemetry) as client:
            with pytest.raises(RpcError):
                await client.get_task("tsk_nobody")
    spans = telemetry.finished()
    (server_get,) = [s for s in spans if s.name == "tasks/get" and s.kind is SpanKind.SERVER]
    assert server_get.status.status_code is StatusCode.ERROR
    assert server_get.attributes["rpc.jsonrpc.error_code"] == -32602  # type: ignore[index]
    (client_get,) = [s for s in spans if s.name == "tasks/get" and s.kind is SpanKind.CLIENT]
    assert client_get.status.status_code is StatusCode.ERROR
    (refusal,) = telemetry.points("mcp_tasks.refusals")
    assert (refusal.value, dict(refusal.attributes)) == (1, {"mcp_tasks.refusal.reason": "-32602"})


async def test_a_run_on_another_process_joins_the_trace_stored_with_the_task() -> None:
    telemetry = Telemetry()
    with telemetry.tracer.start_as_current_span("caller") as caller:
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
    meta = RequestMeta(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(),
        traceparent=carrier["traceparent"],
    )
    with telemetry.server.task_context("tsk_elsewhere", "asks", meta):
        trace.get_current_span().set_attribute("inside", True)
    (run,) = [s for s in telemetry.finished() if s.name == "task run asks"]
    assert run.parent is not None
    assert run.parent.span_id == caller.get_span_context().span_id
    assert run.attributes["inside"] is True  # type: ignore[index]


async def test_without_telemetry_nothing_is_recorded() -> None:
    telemetry = Telemetry()
    server = build(telemetry, observed=False)
    async with server.running(), trio.open_nursery() as nursery:
        port = await nursery.start(serve_http, server, "127.0.0.1", 0)
        async with connect_http(f"http://127.0.0.1:{port}/mcp", poll=FAST) as client:
            assert (await client.call_tool("greet")).content[0].text == "hi"  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()
    assert telemetry.finished() == []


def record(task_id: str, status: TaskStatus) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        version=1,
        tool_name="asks",
        status=status,
        created_at=1_000.0,
        last_updated_at=1_000.0,
        ttl_ms=60_000,
        poll_interval_ms=None,
    )


def test_a_task_span_ends_when_its_record_goes_or_too_many_are_open() -> None:
    telemetry = Telemetry()
    observer = OpenTelemetry(
        tracer_provider=telemetry.spans_provider,
        meter_provider=MeterProvider(),
        max_open_task_spans=2,
    )
    for name in ("tsk_a", "tsk_b", "tsk_c"):  # tsk_a is cut off when tsk_c opens
        observer.task_saved(record(name, TaskStatus.WORKING), None, created=True, now=1_000.0)
    # tsk_b ended on another process; this one removes its record at its TTL.
    observer.task_removed(record("tsk_b", TaskStatus.CANCELLED), expired=False, now=1_060.0)
    ended = {s.attributes["mcp.task.id"]: s for s in telemetry.finished()}  # type: ignore[index]
    assert set(ended) == {"tsk_a", "tsk_b"}
    assert ended["tsk_a"].attributes["mcp_tasks.task.span_truncated"] is True  # type: ignore[index]
    assert ended["tsk_b"].attributes["mcp.task.status"] == "cancelled"  # type: ignore[index]
    assert ended["tsk_b"].end_time == 1_060 * 10**9


def test_the_operations_page_snippets_set_up_telemetry() -> None:
    page = Page("operations.md")
    server = page.run("server.use_telemetry")["server"]
    assert isinstance(server.telemetry, OpenTelemetry)
    client_side = page.run("connect_http")
    assert isinstance(client_side["telemetry"], OpenTelemetry)
    assert callable(client_side["call"])


async def test_listen_streams_and_http_refusals_are_counted() -> None:
    telemetry = Telemetry()
    with trio.fail_after(30):
        async with served(telemetry) as client:
            acknowledged = trio.Event()
            counts: list[int] = []

            async def heard(message: dict[str, Any]) -> None:
                if message["method"] == "notifications/subscriptions/acknowledged":
                    counts.append(telemetry.points("mcp_tasks.listen.streams")[0].value)
                    acknowledged.set()

            async with trio.open_nursery() as nursery:
                wanted = SubscriptionFilter(tools_list_changed=True)
                nursery.start_soon(client.listen, wanted, heard)
                await acknowledged.wait()
                nursery.cancel_scope.cancel()  # the client leaves: the stream closes
            port = client.transport.url.split(":")[2].split("/")[0]  # type: ignore[attr-defined]
            stream = await trio.open_tcp_stream("127.0.0.1", int(port))
            await stream.send_all(
                b"POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 0\r\n\r\n"
            )
            answer = await stream.receive_some(4096)
            assert answer.startswith(b"HTTP/1.1 421")
            await stream.aclose()
            with trio.fail_after(10):  # the server sees the listen stream's client leave
                while telemetry.points("mcp_tasks.listen.streams")[0].value != 0:
                    await trio.sleep(0.01)
    assert counts == [1]
    refusals = {
        point.attributes["mcp_tasks.refusal.reason"]: point.value
        for point in telemetry.points("mcp_tasks.refusals")
    }
    assert refusals == {"host": 1}


async def test_a_message_a_host_decoded_is_spanned_as_its_bytes_are() -> None:
    """`Server.handle` takes the message a host decoded (`IncomingMessage`, as the SDK
    integration hands it): its span names the method, the tool and the request id alike."""
    telemetry = Telemetry()
    server = build(telemetry)
    meta = RequestMeta(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
    params = {"name": "greet", "arguments": {}, "_meta": msgspec.to_builtins(meta)}
    message = {"jsonrpc": "2.0", "id": "r1", "method": "tools/call", "params": params}
    decoded = IncomingMessage("2.0", "r1", "tools/call", Raw(msgspec.json.encode(params)))
    async with server.running():
        by_bytes = await server.handle(json.dumps(message).encode())
        by_message = await server.handle(decoded)
    assert by_bytes is not None and by_message is not None
    assert json.loads(by_message.body) == json.loads(by_bytes.body)
    spans = [span for span in telemetry.finished() if span.kind is SpanKind.SERVER]
    assert len(spans) == 2
    first, second = spans
    assert first.name == second.name == "tools/call greet"
    assert first.attributes == second.attributes
    assert second.attributes is not None and second.attributes["jsonrpc.request.id"] == "r1"
