"""OpenTelemetry for servers and clients: spans, metrics, W3C trace context in `_meta`.

Install the extra (`pip install 'mcp-tasks[otel]'`) and hand an `OpenTelemetry` to the
server (`server.use_telemetry(OpenTelemetry())`) or the client (`Client(...,
telemetry=OpenTelemetry())`). Without one, nothing here is imported and nothing is paid.

Spans
-----
* a SERVER span per incoming message, `tools/call greet`, `tasks/get`...: `mcp.method.name`,
  `gen_ai.tool.name`, `mcp.task.id`, `jsonrpc.request.id`, and on an error
  `rpc.jsonrpc.error_code` with the status ERROR. Its parent is the W3C trace context the
  client put in `params._meta` (`traceparent`, `tracestate`), if any;
* a span per task, `task greet`, from its creation to its end, a child of the request that
  created it, with an event per input round (`input requested`, `input answered`) and the
  handler's own spans inside it. The process that created the task holds it; a handler run
  on another process (answers delivered there, a task taken over) gets a span `task run
  greet` whose parent is the trace context stored with the task;
* a CLIENT span per request `Client` sends, whose context travels in `_meta`.

Metrics (names as exported)
---------------------------
    mcp_tasks.tasks.created            counter        gen_ai.tool.name
    mcp_tasks.tasks.finished           counter        gen_ai.tool.name, mcp.task.status
    mcp_tasks.tasks.active             up-down        gen_ai.tool.name
    mcp_tasks.task.duration            histogram, s   gen_ai.tool.name, mcp.task.status
    mcp_tasks.task.input_wait          histogram, s   gen_ai.tool.name
    mcp_tasks.server.request.duration  histogram, s   mcp.method.name, rpc.jsonrpc.error_code
    mcp_tasks.store.operation.duration histogram, s   mcp_tasks.store, mcp_tasks.store.operation
    mcp_tasks.listen.streams           up-down
    mcp_tasks.refusals                 counter        mcp_tasks.refusal.reason

What a peer sends
-----------------
A metric keeps one series per set of attribute values, for as long as the process lives, so
no metric attribute takes a value a peer chose: a method is one this server knows, else
`other`; a tool name is one the server itself named (a task's, or one a `tools/call` was
answered for without a JSON-RPC error), else `other`; error codes and refusal reasons come
from the server, and past `MAX_METRIC_VALUES` distinct ones they too are `other`. A
principal, a task id, a request id or an argument is never a metric attribute. Span names
follow the same rule (tracing back ends group by them); span attributes say what the peer
sent, and every string this module writes (a span's name, attribute or status message) is
cut to `MAX_ATTRIBUTE_LENGTH` characters, so a megabyte of method name costs a span 256.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import msgspec
from msgspec import UNSET, Struct, UnsetType, field
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from . import __version__
from .core import TaskEvent, TaskStatus
from .core._envelope import KNOWN_METHODS
from .core.wire import IncomingMessage
from .store._legacy import COORDINATION_METHODS, PreSplitStore
from .transports._telemetry import Telemetry

if TYPE_CHECKING:
    from .core import (
        Reply,
        TaskRecord,
    )
    from .core.wire import (
        RequestMeta,
    )
    from .store import TaskStore

__all__ = [
    "MAX_ATTRIBUTE_LENGTH",
    "MAX_METRIC_VALUES",
    "MAX_OPEN_TASK_SPANS",
    "OTHER",
    "OpenTelemetry",
    "configure_from_environment",
]

INSTRUMENTATION_NAME: Final = "mcp_tasks"
MAX_OPEN_TASK_SPANS: Final = 10_000
"""Task spans held open at once; past it the oldest ends early, marked truncated."""
MAX_ATTRIBUTE_LENGTH: Final = 256
"""The longest span name, string attribute or status message written; longer ones are cut
to it, their last character `…`."""
MAX_METRIC_VALUES: Final = 1_000
"""Distinct tool names, and distinct error codes or refusal reasons, a metric attribute
takes; past them a new one is counted as `OTHER`."""
OTHER: Final = "other"
"""A metric attribute's value (and a span name's) for a method this server does not know,
a tool it never named, or a value past `MAX_METRIC_VALUES`."""
_METHODS: Final = KNOWN_METHODS | {
    "initialize",  # a client of an earlier revision: answered with an error, worth counting
    "ping",
    "notifications/cancelled",
    "notifications/initialized",
    "notifications/progress",
    "notifications/roots/list_changed",
}

_propagator: Final = TraceContextTextMapPropagator()


class _Params(Struct):
    name: str | UnsetType = UNSET
    taskId: str | UnsetType = UNSET  # noqa: N815 (the wire's own name)
    meta: dict[str, Any] | UnsetType = field(default=UNSET, name="_meta")


class _Envelope(Struct):
    method: str | UnsetType = UNSET
    id: str | int | UnsetType | None = UNSET
    params: _Params | UnsetType = UNSET


_envelope: Final = msgspec.json.Decoder(_Envelope)
_params: Final = msgspec.json.Decoder(_Params)


def _envelope_of(data: bytes | IncomingMessage) -> _Envelope:
    """What a span tells of a message: its bytes read, or the message a host decoded."""
    if not isinstance(data, IncomingMessage):
        return _envelope.decode(data)
    method = data.method if isinstance(data.method, str) else UNSET
    request_id = data.id if isinstance(data.id, str | int) else UNSET
    params = UNSET if data.params is UNSET else _params.decode(data.params)
    return _Envelope(method, request_id, params)


def _cut(text: str) -> str:
    """`text`, or its first characters and `…`: at most MAX_ATTRIBUTE_LENGTH in all."""
    if len(text) <= MAX_ATTRIBUTE_LENGTH:
        return text
    return text[: MAX_ATTRIBUTE_LENGTH - 1] + "\N{HORIZONTAL ELLIPSIS}"


class _Known:
    """The values one metric attribute may take: those fixed from the start, and up to
    `room` more the server itself names (`admit`); any other value is `OTHER`. A metric
    thus keeps at most `len(fixed) + room + 1` series by this attribute, whatever is sent."""

    __slots__ = ("_room", "_values")

    def __init__(self, fixed: Iterable[str | int] = (), room: int = 0) -> None:
        self._values: set[str | int] = set(fixed)
        self._room = room

    def admit(self, value: str | int) -> str | int:
        """`value`, named by the server (not a peer), known from now on while there is
        room; what to report for it."""
        values = self._values
        if value not in values and self._room > 0:
            values.add(value)
            self._room -= 1
        return value if value in values else OTHER

    def __call__(self, value: str | int) -> str | int:
        return value if value in self._values else OTHER


@dataclass
class _OpenTask:
    span: Span
    tool: str
    input_since: float | None = None


class OpenTelemetry(Telemetry):
    """Spans and metrics through OpenTelemetry's API: the global providers, or the ones
    given (a test's in-memory exporters).

    `max_open_task_spans` task spans are held open at once; `max_metric_values` distinct
    tool names (and error codes, and refusal reasons) become metric attributes, the rest
    `OTHER` (see "What a peer sends" above)."""

    enabled = True

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        max_open_task_spans: int = MAX_OPEN_TASK_SPANS,
        max_metric_values: int = MAX_METRIC_VALUES,
    ) -> None:
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider)
        self.max_open_task_spans = max_open_task_spans
        self._tasks: OrderedDict[str, _OpenTask] = OrderedDict()
        self._methods = _Known(_METHODS)
        self._tools = _Known(room=max_metric_values)
        self._codes = _Known(room=max_metric_values)
        self._reasons = _Known(room=max_metric_values)
        self._created = meter.create_counter(
            "mcp_tasks.tasks.created", unit="{task}", description="Tasks created"
        )
        self._finished = meter.create_counter(
            "mcp_tasks.tasks.finished", unit="{task}", description="Tasks that ended, by status"
        )
        self._active = meter.create_up_down_counter(
            "mcp_tasks.tasks.active", unit="{task}", description="Tasks working or waiting"
        )
        self._duration = meter.create_histogram(
            "mcp_tasks.task.duration", unit="s", description="From creation to the end"
        )
        self._input_wait = meter.create_histogram(
            "mcp_tasks.task.input_wait",
            unit="s",
            description="From a task's questions to the last answer",
        )
        self._request_duration = meter.create_histogram(
            "mcp_tasks.server.request.duration", unit="s", description="Answering one message"
        )
        self._store_duration = meter.create_histogram(
            "mcp_tasks.store.operation.duration", unit="s", description="One store operation"
        )
        self._listen = meter.create_up_down_counter(
            "mcp_tasks.listen.streams", unit="{stream}", description="Open listen streams"
        )
        self._refusals = meter.create_counter(
            "mcp_tasks.refusals", unit="{request}", description="Requests refused, by reason"
        )

    # --- server requests ---------------------------------------------------------------

    @contextlib.contextmanager
    def request(
        self, data: bytes | IncomingMessage, principal: str | None
    ) -> Iterator[_RequestSpan]:
        try:
            envelope = _envelope_of(data)
        except msgspec.DecodeError:  # the core answers it; the span says what little it can
            envelope = _Envelope()
        method = _cut(envelope.method) if isinstance(envelope.method, str) else "unknown"
        params = envelope.params if isinstance(envelope.params, _Params) else _Params()
        attributes: dict[str, Any] = {"mcp.method.name": method}
        known = str(self._methods(method))
        name = known
        tool = None
        if isinstance(params.name, str) and method == "tools/call":
            tool = attributes["gen_ai.tool.name"] = _cut(params.name)
            if self._tools(tool) == tool:
                name = f"{method} {tool}"
        if isinstance(params.taskId, str):
            attributes["mcp.task.id"] = _cut(params.taskId)
        if isinstance(envelope.id, str | int):
            attributes["jsonrpc.request.id"] = _cut(str(envelope.id))
        parent = _context_of(params.meta if isinstance(params.meta, dict) else None)
        span = self._tracer.start_span(
            name, context=parent, kind=SpanKind.SERVER, attributes=attributes
        )
        observation = _RequestSpan(span, known, self, tool)
        with trace.use_span(span, end_on_exit=True, record_exception=True):
            yield observation

    # --- tasks ---------------------------------------------------------------------------

    def task_saved(
        self, record: TaskRecord, event: TaskEvent | None, *, created: bool, now: float
    ) -> None:
        tool = {"gen_ai.tool.name": self._tool_of(record)}
        if created:
            self._created.add(1, tool)
            self._active.add(1, tool)
            self._open_task_span(record)
            return
        held = self._tasks.get(record.task_id)
        if event is TaskEvent.NEED_INPUT:
            if held is not None:
                keys = sorted(_cut(key) for key in record.input_requests or ())
                held.span.add_event("input requested", {"mcp.task.input_keys": keys}, _ns(now))
                if held.input_since is None:
                    held.input_since = now
        elif event is TaskEvent.INPUT_ANSWERED:
            if held is not None:
                waited = None if held.input_since is None else now - held.input_since
                held.input_since = None
                attributes = {} if waited is None else {"mcp.task.input_wait_s": waited}
                held.span.add_event("input answered", attributes, _ns(now))
                if waited is not None:
                    self._input_wait.record(waited, tool)
        elif event is TaskEvent.RESTART:
            if held is not None:
                held.span.add_event("restarted", timestamp=_ns(now))
        elif record.status.is_terminal:
            self._finish(record, record.status.value, now)

    def task_removed(self, record: TaskRecord | None, *, expired: bool, now: float) -> None:
        if record is None:
            return
        if expired:
            self._finish(record, "expired", now)
            return
        held = self._tasks.pop(record.task_id, None)  # it ended on another process
        if held is not None:
            held.span.set_attribute("mcp.task.status", record.status.value)
            held.span.end(_ns(now))

    def _answered(self, tool: str) -> bool:
        """A `tools/call` of `tool` was answered without an error: a registered tool. True
        while it may be named (MAX_METRIC_VALUES)."""
        return self._tools.admit(tool) == tool

    def _tool_of(self, record: TaskRecord) -> str:
        """The tool of a task the server made: a registered one (or, past
        MAX_METRIC_VALUES names, `OTHER`)."""
        return str(self._tools.admit(_cut(record.tool_name)))

    def _open_task_span(self, record: TaskRecord) -> None:
        tool = self._tool_of(record)
        task_id = _cut(record.task_id)
        span = self._tracer.start_span(
            f"task {tool}",
            attributes={"mcp.task.id": task_id, "gen_ai.tool.name": _cut(record.tool_name)},
            start_time=_ns(record.created_at),
        )
        trace.get_current_span().set_attribute("mcp.task.id", task_id)
        tasks = self._tasks
        tasks[record.task_id] = _OpenTask(span, record.tool_name)
        while len(tasks) > self.max_open_task_spans:
            _, oldest = tasks.popitem(last=False)
            oldest.span.set_attribute("mcp_tasks.task.span_truncated", True)
            oldest.span.end()

    def _finish(self, record: TaskRecord, status: str, now: float) -> None:
        tool = self._tool_of(record)
        attributes = {"gen_ai.tool.name": tool, "mcp.task.status": status}
        self._finished.add(1, attributes)
        self._active.add(-1, {"gen_ai.tool.name": tool})
        self._duration.record(max(0.0, now - record.created_at), attributes)
        held = self._tasks.pop(record.task_id, None)
        if held is None:
            return
        span = held.span
        span.set_attribute("mcp.task.status", status)
        if record.error is not None:
            span.set_attribute("rpc.jsonrpc.error_code", record.error.code)
        if status in (TaskStatus.FAILED, "expired"):
            message = None if record.error is None else record.error.message
            span.set_status(Status(StatusCode.ERROR, _cut(message or status)))
        span.end(_ns(now))

    @contextlib.contextmanager
    def task_context(self, task_id: str, tool_name: str, meta: RequestMeta) -> Iterator[None]:
        held = self._tasks.get(task_id)
        if held is not None:
            with trace.use_span(held.span, end_on_exit=False):
                yield
            return
        carrier: dict[str, Any] = {"traceparent": meta.traceparent, "tracestate": meta.tracestate}
        tool = _cut(tool_name)
        span = self._tracer.start_span(
            f"task run {self._tools.admit(tool)}",
            context=_context_of(carrier),
            attributes={"mcp.task.id": _cut(task_id), "gen_ai.tool.name": tool},
        )
        with trace.use_span(span, end_on_exit=True, record_exception=True):
            yield

    # --- the rest --------------------------------------------------------------------------

    def refused(self, reason: str) -> None:
        self._refusals.add(1, {"mcp_tasks.refusal.reason": self._reasons.admit(_cut(reason))})

    def listen_changed(self, delta: int) -> None:
        self._listen.add(delta)

    def wrap_store(self, store: TaskStore) -> TaskStore:
        if isinstance(store, _TimedStore):
            store = store.inner
        timed: TaskStore = _TimedStore(store, self._store_duration)
        return timed

    @contextlib.contextmanager
    def client_request(self, method: str, params: dict[str, Any] | None) -> Iterator[_ClientSpan]:
        method = _cut(method)
        attributes: dict[str, Any] = {"mcp.method.name": method}
        name = method
        tool = None if params is None else params.get("name")
        if method == "tools/call" and isinstance(tool, str):
            tool = attributes["gen_ai.tool.name"] = _cut(tool)
            name = _cut(f"{method} {tool}")
        task_id = None if params is None else params.get("taskId")
        if isinstance(task_id, str):  # the server's word, on a task it made
            attributes["mcp.task.id"] = _cut(task_id)
        span = self._tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        with trace.use_span(span, end_on_exit=True, record_exception=True):
            carrier: dict[str, str] = {}
            _propagator.inject(carrier)
            yield _ClientSpan(span, carrier)


class _RequestSpan:
    """A server span, and the point it records in `mcp_tasks.server.request.duration`.

    A `tools/call` span is named after its tool once the tool is known to be registered:
    answered (without a JSON-RPC error) this time or before."""

    __slots__ = ("_attributes", "_owner", "_started", "_tool", "span")

    def __init__(self, span: Span, method: str, owner: OpenTelemetry, tool: str | None) -> None:
        self.span = span
        self._owner = owner
        self._tool = tool
        self._attributes: dict[str, Any] = {"mcp.method.name": method}
        self._started = time.perf_counter()

    def finish(self, reply: Reply | None) -> None:
        owner = self._owner
        code = None if reply is None else reply.error_code
        if code is not None:
            self.span.set_attribute("rpc.jsonrpc.error_code", code)
            self.span.set_status(Status(StatusCode.ERROR, f"JSON-RPC error {code}"))
            self._attributes["rpc.jsonrpc.error_code"] = owner._codes.admit(code)
        elif reply is not None and self._tool is not None and owner._answered(self._tool):
            self.span.update_name(f"tools/call {self._tool}")
        owner._request_duration.record(time.perf_counter() - self._started, self._attributes)


class _ClientSpan:
    __slots__ = ("meta", "span")

    def __init__(self, span: Span, meta: dict[str, str]) -> None:
        self.span = span
        self.meta = meta

    def failed(self, code: int, message: str) -> None:
        self.span.set_attribute("rpc.jsonrpc.error_code", code)
        self.span.set_status(Status(StatusCode.ERROR, _cut(message)))


_TIMED: Final = frozenset(
    {"get", "save", "delete", "count", "pop_due", "next_deadline", *COORDINATION_METHODS}
)


class _TimedStore:
    """The store (or its coordination), each of its operations timed into
    `mcp_tasks.store.operation.duration`, named after the store."""

    def __init__(self, inner: Any, histogram: Any, store_name: str | None = None) -> None:
        self.inner = inner
        self._histogram = histogram
        if store_name is None:  # the store: its coordination is timed too, under its name
            store_name = type(inner.old if isinstance(inner, PreSplitStore) else inner).__name__
            self.coordination = _TimedStore(inner.coordination, histogram, store_name)
        self._store_name = store_name

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if name not in _TIMED:
            return found
        attributes = {"mcp_tasks.store": self._store_name, "mcp_tasks.store.operation": name}
        histogram = self._histogram

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await found(*args, **kwargs)
            finally:
                histogram.record(time.perf_counter() - started, attributes)

        return timed


def _context_of(meta: dict[str, Any] | None) -> otel_context.Context | None:
    """The trace context a peer sent in `_meta`; None (the current one) when it sent none."""
    if not meta:
        return None
    carrier = {
        key: value
        for key in ("traceparent", "tracestate")
        if isinstance(value := meta.get(key), str)
    }
    if "traceparent" not in carrier:
        return None
    return _propagator.extract(carrier)


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def configure_from_environment(service_name: str | None = None) -> None:
    """Set the global tracer and meter providers from the standard `OTEL_*` environment
    variables, as `mcp-tasks serve --otel` does: `OTEL_TRACES_EXPORTER` and
    `OTEL_METRICS_EXPORTER` (`otlp`, the default; `console`, written to stderr, never to
    stdout, which `serve --stdio` speaks on; `none`),
    `OTEL_EXPORTER_OTLP_ENDPOINT` and the rest of the OTLP exporter's variables,
    `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_METRIC_EXPORT_INTERVAL`."""
    attributes = {} if service_name is None else {"service.name": service_name}
    if "OTEL_SERVICE_NAME" in os.environ:
        attributes = {}  # the environment's name wins over the server's
    resource = Resource.create(attributes)
    traces = _exporter_choice("OTEL_TRACES_EXPORTER")
    span_exporter: SpanExporter | None = None
    if traces == "otlp":
        # Imported only when chosen: the OTLP exporters bring protobuf and requests.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )

        span_exporter = OTLPSpanExporter()
    elif traces == "console":
        span_exporter = ConsoleSpanExporter(out=sys.stderr)  # (stdout may be the stdio stream)
    tracer_provider = TracerProvider(resource=resource)
    if span_exporter is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(tracer_provider)
    metrics_choice = _exporter_choice("OTEL_METRICS_EXPORTER")
    metric_exporter: MetricExporter | None = None
    if metrics_choice == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: PLC0415
            OTLPMetricExporter,
        )

        metric_exporter = OTLPMetricExporter()
    elif metrics_choice == "console":
        metric_exporter = ConsoleMetricExporter(out=sys.stderr)
    readers = [] if metric_exporter is None else [PeriodicExportingMetricReader(metric_exporter)]
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))


def shutdown_providers() -> None:
    """Flush and stop the global providers `configure_from_environment` set."""
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        shutdown = getattr(provider, "shutdown", None)
        if shutdown is not None:
            shutdown()


def _exporter_choice(variable: str) -> str:
    value = os.environ.get(variable, "otlp").strip().lower() or "otlp"
    if value not in ("otlp", "console", "none"):
        raise ValueError(f"{variable}={value!r}: mcp-tasks knows otlp, console and none")
    return value
