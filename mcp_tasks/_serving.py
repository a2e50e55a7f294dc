"""`mcp-tasks serve`: the transports it serves on, OpenTelemetry when asked for, the
capacity line, and running a server until a signal stops it."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial

import click
import trio

from .core import TaskOptions
from .server import Server
from .transports._stdio import serve_stdio

Serve = Callable[[Server], Awaitable[None]]


def stdio_transport() -> Serve:
    async def serve(server: Server) -> None:
        say(f"serving {server.info.name} {server.info.version} on stdio")
        await serve_stdio(server)

    return serve


def use_otel(server: Server) -> None:
    try:  # the otel extra: imported only when asked for
        from .otel import OpenTelemetry, configure_from_environment  # noqa: PLC0415
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
    from .otel import shutdown_providers  # noqa: PLC0415

    shutdown_providers()


def http_transport(
    host: str, port: int, allowed_hosts: Sequence[str] = (), access_log: bool = False
) -> Serve:
    try:  # imported here so that stdio never depends on it
        from .transports._http_server import HttpConfig, serve_http  # noqa: PLC0415
    except ImportError as error:
        raise click.ClickException(f"the HTTP transport is not available: {error}") from None
    config = HttpConfig(allowed_hosts=frozenset(allowed_hosts), access_log=access_log)
    endpoint = config.endpoint

    async def serve(server: Server) -> None:
        async with trio.open_nursery() as nursery:
            bound = await nursery.start(partial(serve_http, config=config), server, host, port)
            shown = f"[{host}]" if ":" in host else host
            name = f"{server.info.name} {server.info.version}"
            say(f"serving {name} on http://{shown}:{bound}{endpoint}")

    return serve


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
    click.echo(f"mcp-tasks: {message}", err=True)


async def run_server(server: Server, serve: Serve) -> None:
    try:
        await server.store.count()  # reachable before anything is served
    except Exception as error:
        raise click.ClickException(f"cannot use the task store {server.store!r}: {error}") from None
    say(capacity(server.core.task_options))
    try:
        await _serve_until_stopped(server, serve)
    finally:
        with trio.CancelScope(shield=True):
            await server.store.aclose()


async def _serve_until_stopped(server: Server, serve: Serve) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            transport = trio.CancelScope()
            nursery.start_soon(_stop_on_signals, signals, transport, nursery.cancel_scope)
            async with server.running():
                with transport:
                    await serve(server)
                transport.cancel()  # ended by itself (stdin EOF): a signal now stops at once
            nursery.cancel_scope.cancel()


async def _stop_on_signals(
    signals: AsyncIterator[int],
    transport: trio.CancelScope,
    everything: trio.CancelScope,
) -> None:
    async for number in signals:
        if not transport.cancel_called:
            say(f"{signal.Signals(number).name}: shutting down (again to stop at once)")
            transport.cancel()
        else:
            everything.cancel()
