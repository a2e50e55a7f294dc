"""The servers of `compare.py` that run in the project's environment: ours, and the limit.

    python benchmarks/servers.py ours-http      # mcp_tasks, Streamable HTTP; prints PORT n
    python benchmarks/servers.py ours-http --loop trio  # ... on trio (ours-*: asyncio, the
                                                # default of `mcp-tasks serve`, uvloop's loop)
    python benchmarks/servers.py ours-http-info # ... logging at INFO (to /dev/null)
    python benchmarks/servers.py ours-http-otel # ... and OpenTelemetry on (SDK, batched)
    python benchmarks/servers.py ours-http-record # ... recording a journal (a real file)
    python benchmarks/servers.py ours-stdio     # mcp_tasks over stdin/stdout
    python benchmarks/servers.py limit-http     # minimal h11 + trio + msgspec; prints PORT n
    python benchmarks/servers.py ceiling-asyncio  # a fixed answer: asyncio + httptools Protocol
    python benchmarks/servers.py ceiling-uvloop   # ... the same on uvloop
    python benchmarks/servers.py ceiling-trio     # ... trio sockets + httptools
    python benchmarks/servers.py limit-stdio    # minimal trio stdio echo
    python benchmarks/servers.py ceiling-stdio  # the fastest echo: uvloop pipes, a Protocol
    python benchmarks/servers.py asgi-uvicorn PORT      # ours as an ASGI app under uvicorn
    python benchmarks/servers.py asgi-hypercorn PORT    # ... under hypercorn's trio worker

Ours serves the two tools every server of the comparison has: `greet` (synchronous) and
`slow_compute` (a task whenever the client holds tasks; `seconds=0` is a task with no work).
Its options are the defaults, but for room to store the 100,000 tasks the memory figure asks
for, and a TTL of 15 minutes like fastmcp-tasks'.

The limit and ceiling servers do no MCP at all: they read each request, decode its id (and,
over HTTP, its method and tool name) and answer a fixed result of the right shape: a
greeting, a task handle (`working`), or a completed task. The ceilings are what Python does
here at best on each loop with the C parser (httptools: what uvicorn runs on); the limit is
the same on trio with h11, the pure-Python parser the built-in server ran on before. Over
stdio the limit is a minimal trio echo, and the ceiling the fastest echo Python does: a
`Protocol` on uvloop's pipes, every line of a read answered in one write.
"""

# ruff: noqa: E402  (the imports must follow the sys.path fix below)
from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import tempfile

# Run as a script, this file's folder comes first on sys.path, and the benchmark `http.py`
# next to it would stand in for the standard library's `http`: take the folder off first.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]

import asyncio
import contextlib
import logging
import typing
from collections.abc import Callable
from functools import partial

import anyio
import h11
import httptools
import msgspec
import trio

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    Server,
    TaskOptions,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks._support.logs import configure_logging
from mcp_tasks.asgi import asgi_app
from mcp_tasks.cli._serving import LOOPS, run_on_loop
from mcp_tasks.transports import serve_http, serve_stdio

LIFETIME_SECONDS = 3600  # a server left behind stops by itself
STORED_TASKS_ROOM = 1_000_000
"""Every task a run makes stays stored (their TTL outlasts the run): creations and lives
at 10,000 a second or so make some 400,000 over their rounds, and a store that is full
refuses them. About a gigabyte at most, in memory."""

server = Server(
    "bench",
    "1.0.0",
    tasks=TaskOptions(ttl_ms=900_000, poll_interval_ms=1000, max_tasks=STORED_TASKS_ROOM),
)


class Greeting(msgspec.Struct):
    name: str = "world"


class SlowArgs(msgspec.Struct):
    seconds: float = 1.0
    label: str = ""


@server.tool()
async def greet(ctx: ToolContext, args: Greeting) -> ToolOutcome:
    """Say hello at once."""
    return CallToolResult.text(f"Hello, {args.name}!")


@server.tool(task_support="optional")
async def slow_compute(ctx: ToolContext, args: SlowArgs) -> ToolOutcome:
    """Work for `seconds`: a task when the client holds tasks."""
    if not ctx.in_task:
        return START_TASK
    if args.seconds > 0:
        await anyio.sleep(args.seconds)
    return CallToolResult.text(f"{args.label or 'job'} done after {args.seconds:g}s")


asgi = asgi_app(server)
"""The same server as an ASGI application, for uvicorn and hypercorn."""


async def _ours_http() -> None:
    async with server.running(), anyio.create_task_group() as nursery:
        port = await nursery.start(partial(serve_http, server, "127.0.0.1", 0))
        print(f"PORT {port}", flush=True)


async def _ours_http_info() -> None:
    """Ours logging at INFO, as `mcp-tasks serve` does: each task's changes formatted and
    written (to /dev/null: the cost of the lines, not of a disk)."""
    configure_logging("info")
    logging.getLogger().handlers[0].setStream(open(os.devnull, "w"))  # noqa: SIM115
    await _ours_http()


async def _ours_http_record() -> None:
    """Ours recording a journal (`serve --record`, its default rotation: 64 MiB files, five
    kept) to a real file in a temporary folder: the cost of writing every call down."""
    folder = tempfile.mkdtemp(prefix="mcp-tasks-bench-journal-")

    def remove_journal(*_: object) -> None:  # stopped with SIGTERM, or at the end
        shutil.rmtree(folder, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, remove_journal)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    server.record(os.path.join(folder, "journal.jsonl"))
    await _ours_http()


async def _ours_http_otel() -> None:
    """Ours logging at INFO with OpenTelemetry on: the SDK's providers, spans batched and
    metrics read every 10 s by exporters that drop what they are given (no network)."""
    from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415  (this role only)
    from opentelemetry.sdk.metrics.export import (  # noqa: PLC0415
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from mcp_tasks.otel import OpenTelemetry  # noqa: PLC0415

    class DropSpans(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class DropMetrics(MetricExporter):
        def export(self, metrics_data: object, **_: object) -> MetricExportResult:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 0) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 0, **_: object) -> None:
            pass

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(DropSpans()))
    reader = PeriodicExportingMetricReader(DropMetrics(), export_interval_millis=10_000)
    server.use_telemetry(
        OpenTelemetry(
            tracer_provider=tracer_provider,
            meter_provider=MeterProvider(metric_readers=[reader]),
        )
    )
    await _ours_http_info()


async def _ours_stdio() -> None:
    async with server.running():
        await serve_stdio(server)


# --- the limit ----------------------------------------------------------------------------


class _Params(msgspec.Struct):
    name: str | None = None


class _Request(msgspec.Struct):
    id: int | str | None = None
    method: str = ""
    params: _Params | None = None


_decode_request = msgspec.json.Decoder(_Request).decode
_GREETING = msgspec.Raw(
    b'{"resultType":"complete","content":[{"type":"text","text":"Hello, bench!"}]}'
)
_TASK = (
    b'{"taskId":"tsk_limitlimitlimitlimitlimitlimit","status":"%s",'
    b'"createdAt":"2026-11-29T00:00:00Z","lastUpdatedAt":"2026-11-29T00:00:00Z",'
    b'"ttlMs":900000,"pollIntervalMs":1000'
)
_HANDLE = msgspec.Raw((_TASK % b"working") + b',"resultType":"task"}')
_COMPLETED = msgspec.Raw(
    (_TASK % b"completed")
    + b',"result":{"resultType":"complete","content":[{"type":"text","text":"done"}]}'
    + b',"resultType":"complete"}'
)


def _limit_answer(body: bytes | bytearray) -> bytes:
    request = _decode_request(body)
    if request.method == "tasks/get":
        result = _COMPLETED
    elif request.params is not None and request.params.name == "slow_compute":
        result = _HANDLE
    else:
        result = _GREETING
    return msgspec.json.encode({"jsonrpc": "2.0", "id": request.id, "result": result})


async def _limit_connection(stream: trio.SocketStream) -> None:
    connection = h11.Connection(h11.SERVER)
    body = b""
    with contextlib.suppress(trio.BrokenResourceError):  # the generator ends mid-request
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                connection.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                reply = _limit_answer(body)
                headers = [
                    ("content-type", "application/json"),
                    ("content-length", str(len(reply))),
                ]
                out = connection.send(h11.Response(status_code=200, headers=headers)) or b""
                out += connection.send(h11.Data(data=reply)) or b""
                out += connection.send(h11.EndOfMessage()) or b""
                await stream.send_all(out)
                connection.start_next_cycle()
                body = b""
            elif isinstance(event, h11.ConnectionClosed):
                return


async def _limit_http() -> None:
    async with trio.open_nursery() as nursery:
        serve = partial(trio.serve_tcp, host="127.0.0.1")
        listeners = await nursery.start(serve, _limit_connection, 0)
        print(f"PORT {listeners[0].socket.getsockname()[1]}", flush=True)


_ANSWER_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"


class _FixedAnswers:
    """A request parsed by httptools (its callbacks), answered a fixed result once whole."""

    def __init__(self, write: Callable[[bytes], object]) -> None:
        self.write = write
        self.body: list[bytes] = []
        self.parser = httptools.HttpRequestParser(self)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        reply = _limit_answer(b"".join(self.body))
        self.body.clear()
        self.write(_ANSWER_HEAD % len(reply) + reply)


class _CeilingProtocol(asyncio.Protocol):
    """The ceiling on asyncio: a `Protocol`, each request answered from `data_received`."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.answers = _FixedAnswers(typing.cast(asyncio.Transport, transport).write)

    def data_received(self, data: bytes) -> None:
        self.answers.parser.feed_data(data)


async def _ceiling_asyncio() -> None:
    server = await asyncio.get_running_loop().create_server(_CeilingProtocol, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.sleep(LIFETIME_SECONDS)


async def _ceiling_trio_connection(stream: trio.SocketStream) -> None:
    out: list[bytes] = []
    answers = _FixedAnswers(out.append)
    with contextlib.suppress(trio.BrokenResourceError):  # the generator ends mid-request
        while data := await stream.receive_some(65536):
            answers.parser.feed_data(data)
            if out:
                await stream.send_all(b"".join(out))
                out.clear()


async def _ceiling_trio() -> None:
    async with trio.open_nursery() as nursery:
        serve = partial(trio.serve_tcp, host="127.0.0.1")
        listeners = await nursery.start(serve, _ceiling_trio_connection, 0)
        print(f"PORT {listeners[0].socket.getsockname()[1]}", flush=True)


def _run_ceiling_on_asyncio(loop: str, ceiling: Callable[[], typing.Awaitable[None]]) -> None:
    if loop == "uvloop":
        import uvloop  # noqa: PLC0415  (this role only)

        uvloop.run(ceiling())
    else:
        asyncio.run(ceiling())


async def _limit_stdio() -> None:
    """Every line in, its answer out: whatever came in one read is answered in one write."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    partial_line = b""
    while data := await stdin.receive_some(65536):
        *lines, partial_line = (partial_line + data).split(b"\n")
        answers = [_limit_answer(line) + b"\n" for line in lines if line.strip()]
        if answers:
            await stdout.send_all(b"".join(answers))


class _StdioEcho(asyncio.Protocol):
    """The stdio ceiling: each read of stdin cut into lines in `data_received`, their answers
    written to stdout in one write, no task and no await."""

    def __init__(self, write: Callable[[bytes], object], done: asyncio.Future[None]) -> None:
        self.write, self.done, self.partial = write, done, b""

    def data_received(self, data: bytes) -> None:
        *lines, self.partial = (self.partial + data).split(b"\n")
        answers = [_limit_answer(line) + b"\n" for line in lines if line.strip()]
        if answers:
            self.write(b"".join(answers))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _ceiling_stdio() -> None:
    loop = asyncio.get_running_loop()
    stdin, stdout = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    out, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, stdout)
    done = loop.create_future()
    into, _ = await loop.connect_read_pipe(lambda: _StdioEcho(out.write, done), stdin)
    try:
        await asyncio.wait_for(done, LIFETIME_SECONDS)
    finally:
        into.close()
        out.close()
        await asyncio.sleep(0)  # the transports let go of their pipes


ROLES = {
    "ours-http": _ours_http,
    "ours-http-info": _ours_http_info,
    "ours-http-otel": _ours_http_otel,
    "ours-http-record": _ours_http_record,
    "ours-stdio": _ours_stdio,
    "limit-http": _limit_http,
    "ceiling-trio": _ceiling_trio,
    "limit-stdio": _limit_stdio,
}
ASYNCIO_CEILINGS = {"ceiling-asyncio": "asyncio", "ceiling-uvloop": "uvloop"}
"""The HTTP ceilings on asyncio's loop and on uvloop; `ceiling-stdio` runs on uvloop."""


async def _for_a_while(role: str) -> None:
    with anyio.move_on_after(LIFETIME_SECONDS):
        await ROLES[role]()


def _asgi_uvicorn(port: int, *, plain: bool = False) -> None:
    """The ASGI app under uvicorn: with uvloop and httptools (`uvicorn[standard]`, what
    uvicorn picks when they are installed), or `plain`: asyncio's loop and h11."""
    import uvicorn  # noqa: PLC0415  (only this role needs it)

    flavour = (
        {"loop": "asyncio", "http": "h11"} if plain else {"loop": "uvloop", "http": "httptools"}
    )
    uvicorn.run(asgi, host="127.0.0.1", port=port, log_level="warning", access_log=False, **flavour)


def _asgi_hypercorn(port: int) -> None:
    """The ASGI app under hypercorn's trio worker, in this process."""
    from hypercorn.config import Config  # noqa: PLC0415
    from hypercorn.trio import serve  # noqa: PLC0415

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.errorlog = None
    trio.run(serve, asgi, config)


ASGI_ROLES = {
    "asgi-uvicorn": _asgi_uvicorn,
    "asgi-uvicorn-plain": partial(_asgi_uvicorn, plain=True),
    "asgi-hypercorn": _asgi_hypercorn,
}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in ASGI_ROLES:
        ASGI_ROLES[sys.argv[1]](int(sys.argv[2]))
        sys.exit()
    if len(sys.argv) == 2 and sys.argv[1] in ASYNCIO_CEILINGS:
        _run_ceiling_on_asyncio(ASYNCIO_CEILINGS[sys.argv[1]], _ceiling_asyncio)
        sys.exit()
    if sys.argv[1:] == ["ceiling-stdio"]:
        _run_ceiling_on_asyncio("uvloop", _ceiling_stdio)
        sys.exit()
    role, *rest = sys.argv[1:] or [""]
    loop = rest[1] if rest[:1] == ["--loop"] and len(rest) == 2 else "asyncio"
    if role not in ROLES or loop not in LOOPS or len(rest) not in (0, 2):
        sys.exit(
            f"usage: {sys.argv[0]} {{{','.join(ROLES)}}} [--loop {{{','.join(LOOPS)}}}] | "
            f"{{{','.join(ASYNCIO_CEILINGS)}}} | ceiling-stdio | "
            f"{{{','.join(ASGI_ROLES)}}} PORT"
        )
    # The limit servers are written on trio; ours run on the loop asked for, as `serve` does.
    run_on_loop("trio" if role.startswith(("limit", "ceiling")) else loop, _for_a_while, role)
