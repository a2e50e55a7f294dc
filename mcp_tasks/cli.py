"""The `mcp-tasks` command.

`mcp-tasks serve TARGET [--http HOST:PORT | --stdio]` loads a `Server` and serves it: over
Streamable HTTP (the default, on 127.0.0.1:8000) or over stdio. TARGET is a file path
(`examples/jobs.py`) or a module (`package.module`), with `:attribute` to pick the server
(default `server`).

The first SIGINT (Ctrl-C) or SIGTERM stops the transport and leaves `Server.running()`
normally, so running tasks get the server's shutdown grace; a second one cancels them at
once. Either way the command exits 0.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import trio

from . import __version__
from .server import Server
from .transports._stdio import serve_stdio

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
_LOG_LEVELS = ("debug", "info", "warning", "error")

Serve = Callable[[Server], Awaitable[None]]


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
    "--log-level",
    type=click.Choice(_LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="Logs go to stderr.",
)
def serve(target: str, address: tuple[str, int] | None, stdio: bool, log_level: str) -> None:
    """Serve the mcp_tasks.Server named by TARGET.

    TARGET is a file (examples/jobs.py) or a module (package.module), optionally followed by
    :ATTRIBUTE, the server's name in it (default: server).
    """
    if stdio and address is not None:
        raise click.UsageError("--http and --stdio cannot be used together: choose one.")
    logging.basicConfig(
        stream=sys.stderr,
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    server = load_server(target)
    host, port = address or (DEFAULT_HOST, DEFAULT_PORT)
    transport = _stdio_transport() if stdio else _http_transport(host, port)
    try:
        trio.run(_run, server, transport)
    except KeyboardInterrupt:  # before the signal handlers were in place
        pass
    except Exception as error:
        failure = _os_error(error)
        if failure is None:
            raise
        raise click.ClickException(f"cannot serve: {failure}") from None


def _os_error(error: BaseException) -> OSError | None:
    """The OSError (an address in use, say) that `error` is, alone in its nursery groups."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error if isinstance(error, OSError) else None


# --- loading the server ---------------------------------------------------------------------


def load_server(target: str) -> Server:
    """The `Server` TARGET names; `click.BadParameter` saying what is wrong if there is none."""
    reference, attribute = _split_target(target)
    if reference.endswith(".py") or "/" in reference or os.sep in reference:
        module = _load_file(Path(reference))
    else:
        module = _import_module(reference)
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise _bad_target(f"{reference} has no attribute {attribute!r}{_hint(module)}")
        value = getattr(value, part)
    if not isinstance(value, Server):
        kind = f"class {value.__name__}" if isinstance(value, type) else type(value).__name__
        raise _bad_target(f"{reference}:{attribute} is a {kind}, not a mcp_tasks.Server")
    return value


def _split_target(target: str) -> tuple[str, str]:
    reference, colon, attribute = target.rpartition(":")
    if colon and reference and all(part.isidentifier() for part in attribute.split(".")):
        return reference, attribute
    return target, "server"  # no attribute (or a Windows drive letter: C:\...)


def _load_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise _bad_target(f"no such file: {path}")
    name = path.stem
    if not name.isidentifier() or name in sys.modules:
        name = "_mcp_tasks_target"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise _bad_target(f"cannot load {path} as Python")
    module = importlib.util.module_from_spec(spec)
    _put_on_path(str(path.resolve().parent))  # as `python path` does: siblings import
    sys.modules[name] = module  # msgspec resolves the module's annotations through it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _import_module(name: str) -> ModuleType:
    if not all(part.isidentifier() for part in name.split(".")):
        raise _bad_target(f"{name!r} is neither a file path nor a module name")
    _put_on_path(os.getcwd())  # as `python -m` does
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is None or not (name == error.name or name.startswith(error.name + ".")):
            raise  # the module exists but imports something missing: show the traceback
        raise _bad_target(f"no module named {name!r} (nor a file: add .py for a path)") from None


def _put_on_path(directory: str) -> None:
    if directory not in sys.path:
        sys.path.insert(0, directory)


def _hint(module: ModuleType) -> str:
    servers = sorted(name for name, value in vars(module).items() if isinstance(value, Server))
    return f"; its servers: {', '.join(servers)}" if servers else "; it defines no Server"


def _bad_target(message: str) -> click.BadParameter:
    return click.BadParameter(message, param_hint="TARGET")


# --- serving ----------------------------------------------------------------------------------


def _stdio_transport() -> Serve:
    async def serve(server: Server) -> None:
        _say(f"serving {server.info.name} {server.info.version} on stdio")
        await serve_stdio(server)

    return serve


def _http_transport(host: str, port: int) -> Serve:
    try:  # imported here so that stdio never depends on it
        from .transports._http_server import HttpConfig, serve_http  # noqa: PLC0415
    except ImportError as error:
        raise click.ClickException(f"the HTTP transport is not available: {error}") from None
    endpoint = HttpConfig().endpoint

    async def serve(server: Server) -> None:
        async with trio.open_nursery() as nursery:
            bound = await nursery.start(serve_http, server, host, port)
            shown = f"[{host}]" if ":" in host else host
            name = f"{server.info.name} {server.info.version}"
            _say(f"serving {name} on http://{shown}:{bound}{endpoint}")

    return serve


def _say(message: str) -> None:
    click.echo(f"mcp-tasks: {message}", err=True)


async def _run(server: Server, serve: Serve) -> None:
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
            _say(f"{signal.Signals(number).name}: shutting down (again to stop at once)")
            transport.cancel()
        else:
            everything.cancel()


if __name__ == "__main__":
    main()
