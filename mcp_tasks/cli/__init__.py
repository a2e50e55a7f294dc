"""The `mcp-tasks` command.

`mcp-tasks serve TARGET [--http HOST:PORT | --stdio]` loads a `Server` and serves it: over
Streamable HTTP (the default, on 127.0.0.1:8000) or over stdio. TARGET is a file path
(`examples/jobs.py`) or a module (`package.module`), with `:attribute` to pick the server
(default `server`). `--loop asyncio` (the default; uvloop when installed) or `--loop trio`
is the event loop the tools run on.

The first SIGINT (Ctrl-C) or SIGTERM stops the transport and leaves `Server.running()`
normally, so running tasks get the server's shutdown grace; a second one cancels them at
once. Either way the command exits 0.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any, Final, TypeVar

import click
import msgspec
import trio

from .. import __version__
from .._support.logs import configure_logging
from ..client import (
    Client,
    RpcError,
    TaskCancelled,
    TaskExpired,
    TaskFailed,
    TransportError,
    connect_http,
    connect_stdio,
)
from ..core import LocalProtocolError, RemoteProtocolError
from ..core._wire import (
    CallToolResult,
)
from ..recording import DEFAULT_MAX_BYTES
from ..runtime import Server
from ..store import STORE_URL_HELP, StoreLocked, TaskStore, open_store
from ._replay import replay_command
from ._serving import (
    LOOPS,
    Serve,
    capacity,
    flush_otel,
    http_transport,
    run_on_loop,
    run_server,
    say,
    stdio_transport,
    use_otel,
)
from ._target import load_server
from ._terminal import (
    EXIT_ERROR,
    Terminal,
    print_result,
)

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "Serve", "capacity", "load_server", "main"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
_LOG_LEVELS = ("debug", "info", "warning", "error")
_F = TypeVar("_F", bound=Callable[..., Any])

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
    """Serve MCP servers that use the Tasks extension (io.modelcontextprotocol/tasks)."""


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
def serve(  # noqa: PLR0917 - click passes every option
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
) -> None:
    """Serve the mcp_tasks.Server named by TARGET.

    TARGET is a file (examples/jobs.py) or a module (package.module), optionally followed by
    :ATTRIBUTE, the server's name in it (default: server).
    """
    if stdio and address is not None:
        raise click.UsageError("--http and --stdio cannot be used together: choose one.")
    configure_logging(log_level, log_format)
    server = load_server(target)
    if otel:
        use_otel(server)
    if store_url is not None:
        server.use_store(_open_store(store_url))
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
    if stdio and allowed_hosts:
        raise click.UsageError("--allow-host is for --http: stdio has no Host header.")
    if stdio and access_log:
        raise click.UsageError("--access-log is for --http: stdio has no HTTP requests.")
    transport = (
        stdio_transport() if stdio else _http_transport(host, port, allowed_hosts, access_log)
    )
    try:
        run_on_loop(loop, run_server, server, transport)
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


def _open_store(url: str) -> TaskStore:
    try:
        return open_store(url)
    except (ValueError, StoreLocked, ImportError, OSError) as error:
        raise click.BadParameter(str(error), param_hint="--store") from None


def _os_error(error: BaseException) -> OSError | None:
    """The OSError (an address in use, say) that `error` is, alone in its nursery groups."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error if isinstance(error, OSError) else None


# --- calling tools: `mcp-tasks call`, `mcp-tasks task` ----------------------------------------
#
# Theory of operation: one `trio.run` per command. `call` opens a Client (HTTP or a spawned
# stdio server), calls the tool and, when the server makes a task of it, waits for the task
# while a `Terminal` draws its status on stderr and asks elicitation questions there. SIGINT
# is received as a signal, not a KeyboardInterrupt: it cancels the scope around the call, and
# the Client answers that cancellation with `tasks/cancel`. Errors are mapped to exit codes in
# one place, `_exit_code_for`.

EXIT_TRANSPORT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

OpenClient = Callable[..., AbstractAsyncContextManager[Client]]


class _Interrupted(Exception):
    """Ctrl-C ended the call; `task_id` is the task it cancelled, if there was one yet."""

    def __init__(self, task_id: str | None) -> None:
        super().__init__(task_id)
        self.task_id = task_id


def _endpoint_options(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--stdio",
        "stdio_command",
        metavar="CMD",
        help="Spawn CMD (split like a shell would) and talk to it over stdio, instead of URL.",
    )(function)


def _open_client(url: str | None, stdio_command: str | None) -> OpenClient:
    """How to connect: to an HTTP URL, or to a server CMD spawned over stdio."""
    if stdio_command is not None:
        if url is not None:
            raise click.UsageError("give either URL or --stdio CMD, not both.")
        command = shlex.split(stdio_command)
        if not command:
            raise click.BadParameter("the command is empty", param_hint="--stdio")
        return partial(connect_stdio, command, stderr="capture", on_retry=_say_retry)
    if url is None:
        raise click.UsageError("give the server: an http(s) URL, or --stdio CMD.")
    if not url.startswith(("http://", "https://")):
        raise click.BadParameter(
            f"{url!r} is not an http(s) URL (for example http://127.0.0.1:8000/mcp)",
            param_hint="URL",
        )
    return partial(connect_http, url, on_retry=_say_retry)


def _say_retry(method: str, seconds: float, error: RpcError) -> None:
    """A request the server refused as busy waits, and the user sees why."""
    say(f"{method}: {error.message}; trying again in {seconds:.1f} s")


def parse_arguments(words: Sequence[str], json_object: str | None) -> dict[str, Any]:
    """The tool's arguments: `--json`'s object, then each KEY=VALUE over it. A VALUE is JSON
    when it parses as JSON (`3`, `true`, `{"a": 1}`), else the string as written."""
    arguments: dict[str, Any] = {}
    if json_object is not None:
        try:
            arguments = json.loads(json_object)
        except ValueError as error:
            raise click.BadParameter(f"not JSON: {error}", param_hint="--json") from None
        if not isinstance(arguments, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--json")
    for word in words:
        key, equals, raw = word.partition("=")
        if not equals or not key:
            raise click.BadParameter(f"{word!r} is not KEY=VALUE", param_hint="ARGUMENTS")
        try:
            arguments[key] = json.loads(raw)
        except ValueError:
            arguments[key] = raw
    return arguments


@main.command(context_settings={"show_default": True})
@click.argument("words", nargs=-1, required=True, metavar="[URL] TOOL [KEY=VALUE]...")
@_endpoint_options
@click.option(
    "--json", "json_object", metavar="OBJECT", help="All the arguments, as a JSON object."
)
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    help="text: the content, readable; json: the raw CallToolResult.",
)
def call(
    words: tuple[str, ...], stdio_command: str | None, json_object: str | None, output: str
) -> None:
    """Call TOOL on the server at URL (or spawned with --stdio CMD) and print its result.

    Each KEY=VALUE is an argument; VALUE is read as JSON when it is JSON (42, true,
    '{"a": 1}'), else as a string. A task is waited for, with its status on stderr; Ctrl-C
    cancels it (exit 130). Questions the server asks are asked here: answer each field,
    or type :decline or :cancel.
    """
    url, tool, rest = _split_call_words(words, stdio_command)
    open_client = _open_client(url, stdio_command)
    arguments = parse_arguments(rest, json_object)
    terminal = Terminal(sys.stderr)
    try:
        result = trio.run(_call_tool, open_client, tool, arguments, terminal)
    except BaseException as error:
        terminal.finish()
        sys.exit(_exit_code_for(error))
    terminal.finish()
    sys.exit(print_result(result, output))


def _split_call_words(
    words: Sequence[str], stdio_command: str | None
) -> tuple[str | None, str, Sequence[str]]:
    """(URL, TOOL, KEY=VALUE words): without --stdio the first word is the URL."""
    if stdio_command is None and words[0].startswith(("http://", "https://")):
        if len(words) < 2:
            raise click.UsageError("missing TOOL after the URL.")
        return words[0], words[1], words[2:]
    if stdio_command is None:
        return words[0], "", ()  # _open_client says what is wrong with this URL
    if words[0].startswith(("http://", "https://")):
        raise click.UsageError("give either URL or --stdio CMD, not both.")
    return None, words[0], words[1:]


async def _call_tool(
    open_client: OpenClient, tool: str, arguments: dict[str, Any], terminal: Terminal
) -> CallToolResult:
    task_id: str | None = None
    result: CallToolResult | None = None
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            call_scope = trio.CancelScope()
            nursery.start_soon(_cancel_on_signal, signals, call_scope)
            try:
                async with open_client(on_elicit=terminal.elicit) as client:
                    # Ctrl-C cancels the call, not the client: its transport still reads
                    # the answer to the tasks/cancel that cancelling the wait sends.
                    with call_scope:
                        outcome = await client.call_tool_or_task(tool, arguments)
                        if not isinstance(outcome, CallToolResult):
                            task_id = outcome.task_id
                            nursery.start_soon(terminal.tick_every_second)
                            outcome = await client.await_task(outcome, on_status=terminal.status)
                        result = outcome
            except Exception:
                if not call_scope.cancel_called:
                    raise
                # Cancelling reached a server that was going away (a stdio child gets
                # the terminal's SIGINT too): the call was still interrupted.
            nursery.cancel_scope.cancel()
    if result is None:
        raise _Interrupted(task_id)
    return result


async def _cancel_on_signal(signals: AsyncIterator[int], scope: trio.CancelScope) -> None:
    async for _ in signals:
        scope.cancel()


def _exit_code_for(error: BaseException) -> int:
    """Say what went wrong on stderr, and return the exit code for it."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if isinstance(error, _Interrupted | KeyboardInterrupt):
        task_id = getattr(error, "task_id", None)
        say(f"cancelled task {task_id}" if task_id else "interrupted")
        return EXIT_INTERRUPTED
    if isinstance(error, TransportError):
        say(f"cannot reach the server: {error}")
        return EXIT_TRANSPORT
    if isinstance(error, TaskFailed):
        say(f"task {error.task_id} failed: {error.message} (code {error.code})")
        return EXIT_ERROR
    if isinstance(error, RpcError):
        data = "" if error.data is None else f"; data: {_shown_data(error.data)}"
        say(f"error: {error.message} (code {error.code}){data}")
        return EXIT_ERROR
    if isinstance(error, TaskCancelled | TaskExpired | LocalProtocolError | RemoteProtocolError):
        say(f"error: {error}")
        return EXIT_ERROR
    raise error


def _shown_data(data: Any) -> str:
    """An error's `data` as compact JSON, cut at `_MAX_DATA_SHOWN` characters."""
    text = msgspec.json.encode(data).decode()
    return text if len(text) <= _MAX_DATA_SHOWN else text[:_MAX_DATA_SHOWN] + "..."


_MAX_DATA_SHOWN: Final = 500


# --- tasks: `mcp-tasks task get | cancel` -------------------------------------------------------


_TASK_ID_MAY_START_WITH_A_DASH: Final = {"ignore_unknown_options": True}
"""Task ids are the server's: some start with `-` (fastmcp-tasks' do), and are no option."""


@main.group()
def task() -> None:
    """Look at or cancel a task on a server."""


def _task_command(
    name: str,
) -> Callable[[Callable[[Client, str], Awaitable[None]]], click.Command]:
    """`mcp-tasks task NAME [URL] TASK_ID`: what the decorated `act(client, task_id)` does,
    on a client opened to the server the words name."""

    def make(act: Callable[[Client, str], Awaitable[None]]) -> click.Command:
        @task.command(name=name, help=act.__doc__, context_settings=_TASK_ID_MAY_START_WITH_A_DASH)
        @click.argument(
            "words", nargs=-1, required=True, metavar="[URL] TASK_ID", type=click.UNPROCESSED
        )
        @_endpoint_options
        def command(words: tuple[str, ...], stdio_command: str | None) -> None:
            open_client, task_id = _task_target(words, stdio_command)
            _run_on_task(open_client, lambda client: act(client, task_id))

        return command

    return make


@_task_command("get")
async def get_task(client: Client, task_id: str) -> None:
    """Print the task (tasks/get) as JSON."""
    click.echo(json.dumps(msgspec.to_builtins(await client.get_task(task_id)), indent=2))


@_task_command("cancel")
async def cancel_task(client: Client, task_id: str) -> None:
    """Ask the server to cancel the task (tasks/cancel)."""
    await client.cancel_task(task_id)
    click.echo("cancel acknowledged")


def _task_target(words: Sequence[str], stdio_command: str | None) -> tuple[OpenClient, str]:
    expected = 1 if stdio_command is not None else 2
    if len(words) != expected:
        raise click.UsageError("expected URL TASK_ID, or --stdio CMD TASK_ID.")
    url = None if stdio_command is not None else words[0]
    return _open_client(url, stdio_command), words[-1]


def _run_on_task(open_client: OpenClient, action: Callable[[Client], Awaitable[None]]) -> None:
    async def run() -> None:
        async with open_client() as client:
            await action(client)

    try:
        trio.run(run)
    except BaseException as error:
        sys.exit(_exit_code_for(error))


main.add_command(replay_command)

if __name__ == "__main__":
    main()
