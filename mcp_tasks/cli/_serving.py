"""`mcp-tasks serve`: the transports it serves on, OpenTelemetry when asked for, the
capacity line, the event loop (`--loop`), and running a server until a signal stops it."""

from __future__ import annotations

import importlib.util
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import anyio.abc
import click

from .._support.logs import JsonFormatter
from ..core import TaskOptions
from ..server import Server
from ..transports._stdio import serve_stdio
from ._serve_auth import protection_line

if TYPE_CHECKING:
    from ..auth import ResourceServer
    from ._workers import Seat

Serve = Callable[[Server], Awaitable[None]]
T = TypeVar("T")

LOOPS: Final = ("asyncio", "trio")
"""The event loops `serve` runs on (`--loop`): asyncio's (uvloop's when it is installed)
is the default, being what most tools' libraries are written for."""


def run_on_loop(loop: str, function: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`function(*args)` on a new event loop: `"asyncio"` (uvloop's when importable) or
    `"trio"`."""
    if loop == "trio":
        return anyio.run(function, *args, backend="trio")
    options = {"use_uvloop": importlib.util.find_spec("uvloop") is not None}
    return anyio.run(function, *args, backend="asyncio", backend_options=options)


def stdio_transport() -> Serve:
    async def serve(server: Server) -> None:
        say(f"serving {server.info.name} {server.info.version} on stdio")
        await serve_stdio(server)

    return serve


def use_otel(server: Server) -> None:
    try:  # the otel extra: imported only when asked for
        from ..otel import OpenTelemetry, configure_from_environment  # noqa: PLC0415
    except ImportError as error:
        raise click.ClickException(
            f"--otel needs OpenTelemetry: pip install 'mcp-tasks[otel]' ({error})"
        ) from None
    try:
        configure_from_environment(service_name=server.info.name)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    server.use_telemetry(OpenTelemetry())


def flush_otel() -> None:
    from ..otel import shutdown_providers  # noqa: PLC0415

    shutdown_providers()


def http_transport(
    host: str,
    port: int,
    allowed_hosts: Sequence[str] = (),
    access_log: bool = False,
    resource_server: ResourceServer | None = None,
    *,
    seat: Seat | None = None,
) -> Serve:
    """Streamable HTTP on `host:port`, protected by `resource_server` when given; a worker
    of `--workers N` serves on its `seat`'s sockets instead, and its supervisor says where."""
    try:  # imported here so that stdio never depends on it
        from ..transports._http_server import HttpConfig, serve_http  # noqa: PLC0415
    except ImportError as error:
        raise click.ClickException(f"the HTTP transport is not available: {error}") from None
    config = HttpConfig(
        allowed_hosts=frozenset(allowed_hosts),
        access_log=access_log,
        resource_server=resource_server,
    )
    endpoint = config.endpoint

    async def serve(server: Server) -> None:
        sockets = () if seat is None else seat.sockets
        start = partial(serve_http, server, host, port, config=config, sockets=sockets)
        async with anyio.create_task_group() as nursery:
            bound = await nursery.start(start)
            if seat is not None:
                seat.ready()
                nursery.start_soon(seat.watch_supervisor)
                return
            say(serving_line(server, host, bound, endpoint))
            if resource_server is not None:
                say(protection_line(resource_server))

    return serve


def serving_line(server: Server, host: str, port: int, endpoint: str = "/mcp") -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"serving {server.info.name} {server.info.version} on http://{shown}:{port}{endpoint}"


def capacity(options: TaskOptions) -> str:
    """What the task limits mean for a user: how many tasks, for how long, and the rate of
    new tasks the server keeps up with when every one of them lives its whole TTL."""
    most = options.max_tasks
    if options.ttl_ms is None:
        return (
            f"holds up to {most} tasks, each until the server restarts (no TTL): one more is "
            "refused; raise with --max-tasks, or set --ttl"
        )
    seconds = options.ttl_ms / 1000
    rate = most / seconds
    shown = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
    return (
        f"holds up to {most} tasks for {_duration(seconds)} each: about {shown} new tasks/s "
        "sustained; raise with --max-tasks (or shorten --ttl)"
    )


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def say(message: str) -> None:
    """A line for whoever started the server, on stderr: "mcp-tasks: ..." text, or a JSON
    line like the log's (`--log-format json`: every line of stderr is JSON)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, JsonFormatter):
            record = logging.LogRecord(
                "mcp_tasks.serve", logging.INFO, __file__, 0, message, None, None
            )
            click.echo(handler.formatter.format(record), err=True)
            return
    click.echo(f"mcp-tasks: {message}", err=True)


async def run_server(server: Server, serve: Serve, worker: bool = False) -> None:
    """Serve until a signal stops it; a `worker` of `--workers N` leaves the capacity line
    to its supervisor."""
    try:
        await server.store.count()  # reachable before anything is served
    except Exception as error:
        raise click.ClickException(f"cannot use the task store {server.store!r}: {error}") from None
    if not worker:
        say(capacity(server.core.task_options))
    try:
        await _serve_until_stopped(server, serve)
    finally:
        with anyio.CancelScope(shield=True):
            await server.store.aclose()


STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


class _LateStopSignals:
    """Whether a stop signal that comes once the server has stopped is ignored until the
    process exits (`ignore_late_stop_signals`)."""

    ignored = False


def ignore_late_stop_signals() -> None:
    """From now on in this process, a SIGINT or SIGTERM that comes after a served server
    stopped (the second of a double Ctrl-C, come late) is ignored: the command still
    exits 0, where the default action would kill it as it closes the store or exits.
    For the `mcp-tasks` process alone (it exits next): a host that runs `serve` in its
    own process keeps its handlers."""
    _LateStopSignals.ignored = True


async def _serve_until_stopped(server: Server, serve: Serve) -> None:
    try:
        await _serve_until_signalled(server, serve)
    finally:
        if _LateStopSignals.ignored:
            for number in STOP_SIGNALS:
                signal.signal(number, signal.SIG_IGN)


async def _serve_until_signalled(server: Server, serve: Serve) -> None:
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with anyio.create_task_group() as nursery:
            transport = anyio.CancelScope()
            nursery.start_soon(_stop_on_signals, signals, transport, nursery.cancel_scope)
            async with server.running():
                with transport:
                    await serve(server)
                transport.cancel()  # ended by itself (stdin EOF): a signal now stops at once
            nursery.cancel_scope.cancel()


async def _stop_on_signals(
    signals: AsyncIterator[int],
    transport: anyio.CancelScope,
    everything: anyio.CancelScope,
) -> None:
    async for number in signals:
        if not transport.cancel_called:
            say(f"{signal.Signals(number).name}: shutting down (again to stop at once)")
            transport.cancel()
        else:
            everything.cancel()
