"""Every option of every `mcp-tasks` command may also come from the environment:
`MCP_TASKS_<COMMAND>_<OPTION>`, the command's path and the option's long name in capitals
with `_` for `-` (`serve --log-level` is `MCP_TASKS_SERVE_LOG_LEVEL`, `task get --timeout`
is `MCP_TASKS_TASK_GET_TIMEOUT`). An option that names its own variable keeps it, after the
command's (`--token`: `MCP_TASKS_CALL_TOKEN`, then `MCP_TASKS_TOKEN`). A flag is on for
`1`, `true`, `yes` or `on`; a repeated option takes one value a line (`--header`) or one a
word. What the command line says wins."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import click

PREFIX: Final = "MCP_TASKS"


def name_variables(group: click.Group, prefix: str = PREFIX) -> None:
    """Give every option under `group` its variable, shown in `--help`."""
    for path, command in _commands(group, ()):
        for option in _options(command):
            own = _own_variables(option)
            name = variable_for(path, option, prefix)
            if name not in own:
                option.envvar = [name, *own]
            option.show_envvar = True


def variables(group: click.Group) -> Iterator[tuple[str, str, list[str]]]:
    """(command path, option's long name, its variables), for every option under `group`."""
    for path, command in _commands(group, ()):
        for option in _options(command):
            yield " ".join(path), _long_name(option), _own_variables(option)


def variable_for(path: tuple[str, ...], option: click.Option, prefix: str = PREFIX) -> str:
    words = [*path, _long_name(option).removeprefix("--")]
    return "_".join([prefix, *(word.replace("-", "_").upper() for word in words)])


def _commands(
    group: click.Group, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


def _options(command: click.Command) -> Iterator[click.Option]:
    for parameter in command.params:
        if isinstance(parameter, click.Option) and parameter.expose_value:
            yield parameter  # (not --help nor --version: they act, and take no value)


def _long_name(option: click.Option) -> str:
    return next(name for name in option.opts if name.startswith("--"))


def _own_variables(option: click.Option) -> list[str]:
    if option.envvar is None:
        return []
    return [option.envvar] if isinstance(option.envvar, str) else list(option.envvar)
