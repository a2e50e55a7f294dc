"""`mcp-tasks call`, `mcp-tasks tools` (or `list`) and `mcp-tasks task get | cancel`: a
`Client` to a server, from the shell.

Theory of operation
-------------------
One `trio.run` per command. `call` opens a Client (HTTP or a spawned stdio server), calls
the tool and, when the server makes a task of it, waits for the task while a `Terminal`
draws its status on stderr and asks elicitation questions there. SIGINT is received as a
signal, not a KeyboardInterrupt: it cancels the scope around the call, and the Client answers
that cancellation with `tasks/cancel`. Errors are mapped to exit codes in one place,
`_exit_code_for`. Every command takes the same connection options (`Endpoint`): the server's
URL or `--stdio CMD`, `--header`, `--timeout`, `--token` (or `MCP_TASKS_TOKEN`), and
`--logins` (the tokens `mcp-tasks login` kept, used when no Authorization is given).
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeVar

import click
import msgspec
import trio

from ..client import (
    AuthorizationError,
    Client,
    RetryPolicy,
    RpcError,
    ServerUnreachable,
    TaskCancelled,
    TaskExpired,
    TaskFailed,
    TransportError,
    connect_http,
    connect_stdio,
)
from ..core import LocalProtocolError, RemoteProtocolError
from ..core._errors import METHOD_NOT_FOUND
from ..core._wire import CallToolResult
from ._listing import Catalog, catalog_json, describe_catalog
from ._login import logins_option, stored_logins
from ._serving import say
from ._terminal import EXIT_ERROR, Terminal, print_result, retry_reason

__all__ = ["call", "list_command", "parse_arguments", "task", "tools"]

_Item = TypeVar("_Item")

EXIT_TRANSPORT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

OpenClient = Callable[..., AbstractAsyncContextManager[Client]]


class _Interrupted(Exception):
    """Ctrl-C ended the call; `task_id` is the task it cancelled, if there was one yet."""

    def __init__(self, task_id: str | None) -> None:
        super().__init__(task_id)
        self.task_id = task_id


# --- where the server is: the options every client command takes -------------------------------

_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an RFC 9110 token
_SET_BY_THE_CLIENT: Final = ("content-type", "accept", "mcp-protocol-version", "mcp-method")
_SET_BY_THE_CLIENT_PREFIXES: Final = ("mcp-name", "mcp-param-", "mcp-session-id")
TOKEN_VARIABLE: Final = "MCP_TASKS_TOKEN"
_PROBE_SECONDS: Final = 5.0


class _HeaderType(click.ParamType):  # type: ignore[type-arg]
    """`NAME:VALUE`, one header; from the environment, one a line."""

    name = "NAME:VALUE"
    envvar_list_splitter = "\n"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, str]:
        if isinstance(value, tuple):
            return value
        name, colon, given = str(value).partition(":")
        name = name.strip()
        if not colon or not _HEADER_NAME.fullmatch(name):
            self.fail(
                f"{name or '(empty)'!r} is not NAME:VALUE with NAME a header name", param, ctx
            )
        lowered = name.lower()
        if lowered in _SET_BY_THE_CLIENT or lowered.startswith(_SET_BY_THE_CLIENT_PREFIXES):
            self.fail(f"{name} is set by mcp-tasks itself, per request", param, ctx)
        text = given.strip()
        if any(char in text for char in "\r\n\x00") or not text.isprintable():
            # the value is not shown: it may be a credential
            self.fail(f"the value of {name} holds a control character", param, ctx)
        return name, text


def connection_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options of a command that talks to a server: `--stdio`, `--header`, `--timeout`,
    `--token`."""
    for option in reversed(
        [
            click.option(
                "--stdio",
                "stdio_command",
                metavar="CMD",
                help="Spawn CMD (split like a shell would) and talk to it over stdio, "
                "instead of URL.",
            ),
            click.option(
                "--header",
                "headers",
                type=_HeaderType(),
                multiple=True,
                help="Send this HTTP header with every request (repeat it), e.g. 'X-Api-Key: abc'.",
            ),
            click.option(
                "--timeout",
                type=click.FloatRange(min=0.001),
                metavar="SECONDS",
                help="Give up on a request the server has not answered in SECONDS (exit 2); "
                "waiting on a task is many requests, each bounded so. Default: 30 s of "
                "silence over HTTP, none over stdio.",
            ),
            click.option(
                "--reconnect",
                "reconnect_seconds",
                type=click.FloatRange(min=0),
                default=RetryPolicy().reconnect_seconds,
                metavar="SECONDS",
                help="How long to keep trying a server that cannot be reached (restarting: "
                "connection refused or broken), backing off up to 4 s; 0: not at all.",
            ),
            click.option(
                "--token",
                metavar="TOKEN",
                envvar=TOKEN_VARIABLE,
                show_envvar=True,
                help="A bearer token, sent as 'Authorization: Bearer TOKEN' (HTTP only).",
            ),
            logins_option,
        ]
    ):
        function = option(function)
    return function


class Endpoint:
    """How to reach the server, from a command's words and connection options."""

    def __init__(
        self,
        url: str | None,
        *,
        stdio_command: str | None,
        headers: Sequence[tuple[str, str]] = (),
        timeout: float | None = None,
        token: str | None = None,
        reconnect_seconds: float = RetryPolicy().reconnect_seconds,
        logins: Path | None = None,
    ) -> None:
        if stdio_command is not None and url is not None:
            raise click.UsageError("give either URL or --stdio CMD, not both.")
        if stdio_command is None and url is None:
            raise click.UsageError("give the server: an http(s) URL, or --stdio CMD.")
        if url is not None and not url.startswith(("http://", "https://")):
            raise click.BadParameter(
                f"{url!r} is not an http(s) URL (for example http://127.0.0.1:8000/mcp)",
                param_hint="URL",
            )
        self.url = url
        self.command = self._command(stdio_command)
        self.timeout = timeout
        self.retry = RetryPolicy(reconnect_seconds=reconnect_seconds)
        self.headers = self._headers(headers, token)
        self.logins = logins

    def _command(self, stdio_command: str | None) -> list[str] | None:
        if stdio_command is None:
            return None
        command = shlex.split(stdio_command)
        if not command:
            raise click.BadParameter("the command is empty", param_hint="--stdio")
        return command

    def _headers(self, given: Sequence[tuple[str, str]], token: str | None) -> dict[str, str]:
        if self.command is not None:
            if given:
                raise click.UsageError("--header is for HTTP: a stdio server gets no headers.")
            if token is not None and _from_the_command_line("token"):
                raise click.UsageError("--token is for HTTP: a stdio server gets no headers.")
            return {}  # (a token from the environment is not for this server)
        headers: dict[str, str] = {}
        for name, value in given:
            if name.lower() in (known.lower() for known in headers):
                raise click.BadParameter(f"{name} is given twice", param_hint="--header")
            headers[name] = value
        if token is not None:
            if any(name.lower() == "authorization" for name in headers):
                raise click.UsageError("give either --token or an Authorization --header.")
            if not token or not token.isprintable() or " " in token:
                raise click.BadParameter(
                    f"the token (from --token or {TOKEN_VARIABLE}) is empty or holds a space "
                    "or a control character",
                    param_hint="--token",
                )
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def opener(self, on_retry: Callable[..., None]) -> OpenClient:
        """How to open a Client to this server (a context manager taking Client options)."""
        options: dict[str, Any] = {"on_retry": on_retry, "retry": self.retry}
        if self.timeout is not None:
            options["request_timeout_seconds"] = self.timeout
        if self.command is not None:
            if self.timeout is not None:  # the era's probe waits no longer than a request
                options["probe_seconds"] = min(self.timeout, _PROBE_SECONDS)
            return partial(connect_stdio, self.command, stderr="capture", **options)
        assert self.url is not None
        if self.timeout is not None:
            options["timeout_seconds"] = self.timeout
        if not any(name.lower() == "authorization" for name in self.headers):
            options["auth"] = stored_logins(self.url, self.logins)  # (`mcp-tasks login`'s)
        return partial(connect_http, self.url, headers=self.headers, **options)


def _from_the_command_line(name: str) -> bool:
    context = click.get_current_context(silent=True)
    if context is None:
        return True
    return context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE


def say_retry(method: str, seconds: float, why: RpcError | ServerUnreachable) -> None:
    """A request waits before it is sent again, and the user sees why."""
    say(f"{method}: {retry_reason(why)}; trying again in {seconds:.1f} s")


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


@click.command(context_settings={"show_default": True})
@click.argument("words", nargs=-1, required=True, metavar="[URL] TOOL [KEY=VALUE]...")
@connection_options
@click.option(
    "--json", "json_object", metavar="OBJECT", help="All the arguments, as a JSON object."
)
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    help="text: the content, readable; json: the raw CallToolResult.",
)
def call(words: tuple[str, ...], json_object: str | None, output: str, **connection: Any) -> None:
    """Call TOOL on the server at URL (or spawned with --stdio CMD) and print its result.

    Each KEY=VALUE is an argument; VALUE is read as JSON when it is JSON (42, true,
    '{"a": 1}'), else as a string. A task is waited for, with its status on stderr; Ctrl-C
    cancels it (exit 130). Questions the server asks are asked here: answer each field,
    or type :decline or :cancel. A server that restarts is waited for (about 30 s).
    """
    url, tool, rest = _split_call_words(words, connection["stdio_command"])
    endpoint = Endpoint(url, **connection)
    arguments = parse_arguments(rest, json_object)
    terminal = Terminal(sys.stderr)
    open_client = endpoint.opener(on_retry=terminal.retrying)
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
        return words[0], "", ()  # Endpoint says what is wrong with this URL
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
    if isinstance(error, AuthorizationError):
        say(f"not authorized: {error}")
        return EXIT_ERROR
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


@click.group()
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
        @connection_options
        def command(words: tuple[str, ...], **connection: Any) -> None:
            expected = 1 if connection["stdio_command"] is not None else 2
            if len(words) != expected:
                raise click.UsageError("expected URL TASK_ID, or --stdio CMD TASK_ID.")
            url = None if expected == 1 else words[0]
            endpoint = Endpoint(url, **connection)
            _run(endpoint, lambda client: act(client, words[-1]))

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


def _run(endpoint: Endpoint, action: Callable[[Client], Awaitable[None]]) -> None:
    """Open a client to `endpoint`, act on it, and exit as `_exit_code_for` says on error."""
    open_client = endpoint.opener(on_retry=say_retry)

    async def run() -> None:
        async with open_client() as client:
            await action(client)

    try:
        trio.run(run)
    except BaseException as error:
        sys.exit(_exit_code_for(error))


# --- the catalog: `mcp-tasks tools` (or `list`) --------------------------------------------------


def _catalog_command(name: str, summary: str) -> click.Command:
    """`mcp-tasks NAME [URL]`: the server's catalog (`tools`, and `list`, its other name)."""

    @click.command(name, help=summary, context_settings={"show_default": True})
    @click.argument("url", required=False, metavar="[URL]")
    @connection_options
    @click.option(
        "--output",
        type=click.Choice(["text", "json"]),
        default="text",
        help="text: a line an entry, with its arguments; json: the lists as the server sent them.",
    )
    def command(url: str | None, output: str, **connection: Any) -> None:
        endpoint = Endpoint(url, **connection)

        async def show(client: Client) -> None:
            catalog = await _catalog(client)
            if output == "json":
                click.echo(catalog_json(catalog))
            else:
                for line in describe_catalog(catalog):
                    click.echo(line)

        _run(endpoint, show)

    return command


tools = _catalog_command(
    "tools",
    "Show the tools of the server at URL (or spawned with --stdio CMD), with their "
    "arguments (NAME?: an optional one), then its prompts and resources.",
)
list_command = _catalog_command("list", "The same as tools.")


async def _catalog(client: Client) -> Catalog:
    listed = await client.list_tools()
    return Catalog(
        tools=listed,
        rejected=dict(client.core.tool_headers.rejected),
        prompts=await _if_served(client.list_prompts),
        resources=await _if_served(client.list_resources),
        resource_templates=await _if_served(client.list_resource_templates),
    )


async def _if_served(listing: Callable[[], Awaitable[list[_Item]]]) -> list[_Item] | None:
    """The list, or None when the server does not serve the method (-32601)."""
    try:
        return await listing()
    except RpcError as error:
        if error.code == METHOD_NOT_FOUND:
            return None
        raise
