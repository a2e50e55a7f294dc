"""The `mcp-tasks` command.

`mcp-tasks serve TARGET [--http HOST:PORT | --stdio]` loads a `Server` and serves it: over
Streamable HTTP (the default, on 127.0.0.1:8000) or over stdio. TARGET is a file path
(`examples/jobs.py`) or a module (`package.module`), with `:attribute` to pick the server
(default `server`). `--loop asyncio` (the default; uvloop when installed) or `--loop trio`
is the event loop the tools run on. `--auth-issuer URL --auth-audience URL` protects the
HTTP endpoint with OAuth (`mcp_tasks.auth.ResourceServer`; see `_serve_auth`).

The first SIGINT (Ctrl-C) or SIGTERM stops the transport and leaves `Server.running()`
normally, so running tasks get the server's shutdown grace; a second one cancels them at
once. Either way the command exits 0. `--workers N` serves HTTP from N processes on one
socket and a store they share (Redis, or SQLite opened shared), kept by a supervisor
(`_workers`: restarts, SIGHUP).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
import msgspec

from .. import __version__
from .._support.logs import configure_logging
from ..recording import DEFAULT_MAX_BYTES
from ..runtime import Server
from ..store import STORE_URL_HELP, StoreLocked, TaskStore, open_store
from ._calling import call, list_command, parse_arguments, task, tools
from ._environment import name_variables
from ._login import login, logout
from ._replay import replay_command
from ._serve_auth import auth_options, protection_line, resource_server_for
from ._serving import (
    LOOPS,
    Serve,
    capacity,
    flush_otel,
    http_transport,
    ignore_late_stop_signals,
    run_on_loop,
    run_server,
    say,
    serving_line,
    stdio_transport,
    use_otel,
)
from ._target import load_server
from ._workers import MAX_WORKERS, Seat, refuse_unless_shareable, supervise, take_seat

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "Serve",
    "capacity",
    "load_server",
    "main",
    "parse_arguments",
    "run_command",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
_LOG_LEVELS = ("debug", "info", "warning", "error")
_F = TypeVar("_F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from ..auth import ResourceServer

_http_transport = http_transport  # the name `serve` calls (tests stand in for it)


def _seconds_option(flag: str, name: str, *, help: str) -> Callable[[_F], _F]:
    """An option of `serve` that is a time in seconds, at least a millisecond."""
    return click.option(flag, name, metavar="SECONDS", type=click.FloatRange(min=0.001), help=help)


def _parse_address(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[str, int] | None:
    """`HOST:PORT`; an IPv6 host goes in brackets: `[::1]:8000`."""
    if value is None:
        return None
    host, colon, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{value!r} is not HOST:PORT (for example 127.0.0.1:8000)")
    return host, int(port)


@click.group(name="mcp-tasks")
@click.version_option(__version__, prog_name="mcp-tasks")
def main() -> None:
    """Serve MCP servers that use the Tasks extension (io.modelcontextprotocol/tasks), and
    call their tools."""


def run_command() -> None:
    """The `mcp-tasks` process: `main`, a late stop signal ignored once a server stopped."""
    ignore_late_stop_signals()
    main()


@main.command()
@click.argument("target")
@click.option(
    "--http",
    "address",
    metavar="HOST:PORT",
    callback=_parse_address,
    help=f"Serve Streamable HTTP on HOST:PORT (the default, on {DEFAULT_HOST}:{DEFAULT_PORT}).",
)
@click.option("--stdio", is_flag=True, help="Serve newline-delimited JSON-RPC on stdin/stdout.")
@click.option(
    "--loop",
    type=click.Choice(LOOPS),
    default="asyncio",
    show_default=True,
    help="The event loop the tools run on: asyncio (uvloop's when installed) for tools that "
    "await asyncio libraries, trio for trio ones; anyio tools run on either.",
)
@click.option(
    "--log-level",
    type=click.Choice(_LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="Logs go to stderr.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one JSON object a line, with the task's fields (task_id, tool, status...) as "
    "keys of their own.",
)
@click.option(
    "--access-log",
    is_flag=True,
    help="HTTP: log one line per request (method, Mcp-Method, Mcp-Name, status, duration, "
    "client) on the logger mcp_tasks.access, at INFO.",
)
@click.option(
    "--otel",
    is_flag=True,
    help="Send traces and metrics with OpenTelemetry (needs mcp-tasks[otel]), configured by "
    "the standard OTEL_* variables: OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER and "
    "OTEL_METRICS_EXPORTER (otlp, console or none), OTEL_SERVICE_NAME...",
)
@click.option(
    "--allow-host",
    "allowed_hosts",
    metavar="NAME",
    multiple=True,
    help="A Host header to accept besides the loopback names (NAME or NAME:PORT; repeat it), "
    "e.g. the public name a reverse proxy passes on. Bound to loopback, others are refused.",
)
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    help=f"Where tasks are kept: {STORE_URL_HELP}.",
)
@click.option(
    "--lease-seconds",
    type=click.FloatRange(min=0, min_open=True),
    help="With a shared (Redis) store: how soon the tasks of a process that died are failed, "
    "or run again if resumable, by another (default: the server's, 30).",
)
@click.option(
    "--max-tasks",
    type=click.IntRange(min=1),
    help="How many tasks the server holds at once, running or finished and not yet expired "
    "(default: the server's, 1024); one more is refused until some expire.",
)
@_seconds_option(
    "--ttl",
    "ttl_seconds",
    help="How long a task is kept after its creation (default: the server's, 600).",
)
@_seconds_option(
    "--poll-interval",
    "poll_seconds",
    help="The poll interval advised to clients (default: the server's, 1).",
)
@click.option(
    "--max-tool-threads",
    type=click.IntRange(min=1),
    help="Worker threads plain-function (def) tools may hold at once, counting those of "
    "cancelled calls still running (default: the server's, 32); past it a call is refused, "
    "retryable (503).",
)
@click.option(
    "--accept-missing-task-name",
    is_flag=True,
    help="HTTP: serve tasks/get, tasks/update and tasks/cancel that lack the Mcp-Name header "
    "(fastmcp-tasks 4.1.4's client leaves it out). A mismatched one is refused all the same.",
)
@click.option(
    "--modern-only",
    is_flag=True,
    help="Serve MCP 2026-07-28 clients only: an initialize (a 2025 client) is answered -32022 "
    "naming the versions served, instead of opening a session.",
)
@click.option(
    "--record",
    "record_path",
    metavar="PATH",
    type=click.Path(dir_okay=False, writable=True),
    help="Write a journal of the session to PATH (JSON lines; `mcp-tasks replay PATH` replays "
    "it). No credentials, sealing key or arguments a tool marks sensitive are written.",
)
@click.option(
    "--record-max-bytes",
    type=click.IntRange(min=4096),
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Rotate the journal past this size (PATH.1 the newest of five kept).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=MAX_WORKERS),
    default=1,
    show_default=True,
    help="HTTP: serve from this many processes on one listening socket, to use more than one "
    "core; needs a store they share (--store redis://...). A worker that dies is started "
    "again; SIGHUP replaces them all without closing the port. At most "
    f"{MAX_WORKERS}; about one a core.",
)
@auth_options
@click.pass_context
def serve(  # noqa: PLR0917 - click passes every option
    ctx: click.Context,
    target: str,
    address: tuple[str, int] | None,
    stdio: bool,
    loop: str,
    log_level: str,
    log_format: str,
    access_log: bool,
    otel: bool,
    allowed_hosts: tuple[str, ...],
    store_url: str | None,
    lease_seconds: float | None,
    max_tasks: int | None,
    ttl_seconds: float | None,
    poll_seconds: float | None,
    max_tool_threads: int | None,
    accept_missing_task_name: bool,
    modern_only: bool,
    record_path: str | None,
    record_max_bytes: int,
    workers: int,
    auth_issuer: str | None,
    auth_audience: str | None,
    auth_scopes: tuple[str, ...],
    auth_introspection_client_id: str | None,
) -> None:
    """Serve the mcp_tasks.Server named by TARGET.

    TARGET is a file (examples/jobs.py) or a module (package.module), optionally followed by
    :ATTRIBUTE, the server's name in it (default: server).
    """
    if stdio and address is not None:
        raise click.UsageError("--http and --stdio cannot be used together: choose one.")
    seat = take_seat()  # a worker of --workers N: its supervisor's sockets
    supervising = workers > 1 and seat is None
    if supervising:
        refuse_unless_shareable(stdio=stdio, store_url=store_url, record=record_path is not None)
    protection = resource_server_for(
        ctx,
        stdio=stdio,
        issuer=auth_issuer,
        audience=auth_audience,
        scopes=auth_scopes,
        client_id=auth_introspection_client_id,
    )
    configure_logging(log_level, log_format)
    server = load_server(target)
    if otel and not supervising:
        use_otel(server)
    if store_url is not None and not supervising:
        server.use_store(_open_store(store_url, shared=seat is not None))
    if lease_seconds is not None:
        server.lease_seconds = lease_seconds
    _apply_limits(server, max_tasks, ttl_seconds, poll_seconds, max_tool_threads)
    if accept_missing_task_name:
        if stdio:
            raise click.UsageError(
                "--accept-missing-task-name is for --http: stdio has no headers."
            )
        lenient = msgspec.structs.replace(server.core.options, accept_missing_task_name_header=True)
        server.use_options(lenient)
    if modern_only:
        server.use_options(msgspec.structs.replace(server.core.options, legacy_sessions=False))
    if record_path is not None:
        try:
            server.record(record_path, max_bytes=record_max_bytes)
        except ValueError as refused:  # a symbolic link at PATH
            raise click.ClickException(f"cannot record: {refused}") from None
    host, port = address or (DEFAULT_HOST, DEFAULT_PORT)
    transport = _transport(stdio, (host, port), allowed_hosts, access_log, protection, seat)
    if supervising:
        _supervise(server, workers, (host, port), protection)
        return
    try:
        run_on_loop(loop, run_server, server, transport, seat is not None)
    except KeyboardInterrupt:  # before the signal handlers were in place
        pass
    except Exception as error:
        failure = _os_error(error)
        if failure is None:
            raise
        raise click.ClickException(f"cannot serve: {failure}") from None
    finally:
        if otel:
            flush_otel()


def _transport(  # noqa: PLR0917 - the options of the transport
    stdio: bool,
    address: tuple[str, int],
    allowed_hosts: tuple[str, ...],
    access_log: bool,
    protection: ResourceServer | None,
    seat: Seat | None,
) -> Serve:
    """stdio, HTTP, or HTTP on the sockets of a worker's `seat` (`--workers N`)."""
    if stdio and allowed_hosts:
        raise click.UsageError("--allow-host is for --http: stdio has no Host header.")
    if stdio and access_log:
        raise click.UsageError("--access-log is for --http: stdio has no HTTP requests.")
    if stdio:
        return stdio_transport()
    host, port = address
    if seat is None:
        return _http_transport(host, port, allowed_hosts, access_log, protection)
    return http_transport(host, port, allowed_hosts, access_log, protection, seat=seat)


def _supervise(
    server: Server, workers: int, address: tuple[str, int], protection: ResourceServer | None
) -> None:
    """The supervisor of `--workers N`: the lines a single process says, then the workers."""

    def announce(bound: int) -> None:
        say(serving_line(server, host, bound))
        if protection is not None:
            say(protection_line(protection))

    host, port = address
    say(capacity(server.core.task_options))
    supervise(workers, host, port, announce)


def _apply_limits(
    server: Server,
    max_tasks: int | None,
    ttl_seconds: float | None,
    poll_seconds: float | None,
    max_tool_threads: int | None,
) -> None:
    """The task options and thread bound `serve`'s flags set (those given only)."""
    changes: dict[str, int] = {}
    if max_tasks is not None:
        changes["max_tasks"] = max_tasks
    if ttl_seconds is not None:
        changes["ttl_ms"] = max(1, round(ttl_seconds * 1000))
    if poll_seconds is not None:
        changes["poll_interval_ms"] = max(1, round(poll_seconds * 1000))
    if changes:
        server.use_task_options(msgspec.structs.replace(server.core.task_options, **changes))
    if max_tool_threads is not None:
        threads = msgspec.structs.replace(server.core.options, max_tool_threads=max_tool_threads)
        server.use_options(threads)


def _open_store(url: str, *, shared: bool) -> TaskStore:
    try:
        return open_store(url, shared=shared)
    except (ValueError, StoreLocked, ImportError, OSError) as error:
        raise click.BadParameter(str(error), param_hint="--store") from None


def _os_error(error: BaseException) -> OSError | None:
    """The OSError (an address in use, say) that `error` is, alone in its nursery groups."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error if isinstance(error, OSError) else None


main.add_command(call)
main.add_command(task)
main.add_command(tools)
main.add_command(list_command)
main.add_command(replay_command)
main.add_command(login)
main.add_command(logout)
name_variables(main)

if __name__ == "__main__":
    main()
