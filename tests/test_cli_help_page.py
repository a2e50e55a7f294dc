"""docs/cli.md documents every flag `--help` shows (issue 32, point 7): each command of the
`mcp-tasks` parser is asked for its `--help`, as a user would, and every flag in the
options it lists (long and short forms, and the values of a choice such as
`--loop [asyncio|trio]`) must be named in that command's section of the page. A flag added
to the command without a word on the page fails here. (Each option's environment variable
is checked by `test_every_option_and_its_variable_is_in_the_cli_page`.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from mcp_tasks.cli import main

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "cli.md"

CommandPath = tuple[str, ...]
"""A command as typed after `mcp-tasks`: `()`, `("serve",)`, `("task", "get")`."""

Shown = dict[str, tuple[str, ...]]
"""The flags one `--help` lists, each with the values of its choice (none for most)."""


def command_paths(group: click.Group, path: CommandPath = ()) -> Iterator[CommandPath]:
    """Every command and group under `group`, from the parser itself, `group` first."""
    yield path
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from command_paths(command, (*path, name))
        else:
            yield (*path, name)


def help_of(path: CommandPath) -> str:
    """What `mcp-tasks ... --help` prints (no MCP_TASKS_ variable of this machine's)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MCP_TASKS")}
    done = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", *path, "--help"],
        cwd=ROOT,
        env={**env, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, ""), (path, done.stderr)
    return done.stdout


def flags_shown(help_text: str) -> Shown:
    """The flags in the `Options:` part of a click `--help`: each option's line starts with
    its flags and metavar (`--loop [asyncio|trio]`, `-v, --verbose`), then two spaces or
    more, then its help (or, for a long first column, the help on the next line)."""
    shown: Shown = {}
    options = help_text.partition("\nOptions:\n")[2]
    for line in options.splitlines():
        if not re.match(r"\s{1,4}-", line):
            continue  # a help text's continuation line, or the next part
        first_column = re.split(r"\s{2,}", line.strip())[0]
        choice = re.search(r"\[([^\]]+)\]", first_column)
        values = tuple(choice.group(1).split("|")) if choice else ()
        for flag in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", first_column):
            shown[flag] = values
    return shown


def commands_listed(help_text: str) -> list[str]:
    """The names in the `Commands:` part of a group's `--help`."""
    listed = help_text.partition("\nCommands:\n")[2]
    return re.findall(r"^\s{2}(\S+)", listed, flags=re.MULTILINE)


def sections(page: str) -> dict[str, str]:
    """The text under each `## \\`mcp-tasks COMMAND ...\\`` heading, by command; "" is the
    page's top, before its first `##`, where the flags of `mcp-tasks` itself belong. The
    shared connection options count in every client command's section."""
    parts = re.split(r"^## ", page, flags=re.MULTILINE)
    found: dict[str, str] = {"": parts[0]}
    shared = next((part for part in parts if part.startswith("Connection options")), "")
    for part in parts:
        if heading := re.match(r"`mcp-tasks (\w+)", part):
            found[heading.group(1)] = part
    for command in ("call", "tools", "task"):
        if command in found:
            found[command] += shared
    return found


def section_of(path: CommandPath) -> str:
    """The section that documents a command: `list` is `tools` under another name, `task
    get` and `task cancel` share `task`'s."""
    if not path:
        return ""
    return "tools" if path[0] == "list" else path[0]


def missing_from_page(page: str, shown: Mapping[CommandPath, Shown]) -> list[str]:
    """Each flag (or choice value) some `--help` shows that the page does not name in that
    command's section, as `mcp-tasks serve --flag: ...`. `--help` itself is on every
    command; it is documented once, at the top of the page."""
    found = sections(page)
    missing = []
    for path, flags in shown.items():
        command = " ".join(["mcp-tasks", *path])
        name = section_of(path)
        section = found.get(name)
        if section is None:
            missing.append(f"{command}: no section `## \\`mcp-tasks {name} ...\\``")
            continue
        for flag, values in flags.items():
            where = found[""] if flag == "--help" else section
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", where):
                missing.append(f"{command} {flag}: not in the section of {name or 'mcp-tasks'}")
            for value in values:
                if not re.search(rf"\b{re.escape(value)}\b", section):
                    missing.append(f"{command} {flag} {value}: the value is not named")
    return missing


def all_help() -> dict[CommandPath, str]:
    paths = list(command_paths(main))
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(paths, pool.map(help_of, paths), strict=True))


def test_every_flag_help_shows_is_on_the_cli_page() -> None:
    helps = all_help()
    shown = {path: flags_shown(text) for path, text in helps.items()}
    # what the parser says are the commands is what `--help` lists
    assert commands_listed(helps[()]) == sorted(main.commands)
    assert commands_listed(helps[("task",)]) == ["cancel", "get"]
    # the parsing found the options: every command's --help, --version at the top
    assert all("--help" in flags for flags in shown.values())
    assert "--version" in shown[()]
    assert shown[("serve",)]["--loop"] == ("asyncio", "trio")
    assert {"--stdio", "--header", "--token", "--timeout"} <= set(shown[("task", "get")])
    assert missing_from_page(PAGE.read_text(), shown) == []


def test_a_flag_the_page_leaves_out_is_found() -> None:
    """The comparison fails for a page without a flag, a flag in the wrong section, a
    choice value left out, and a command without a section."""
    page = PAGE.read_text()
    serve_help = help_of(("serve",))
    shown: dict[CommandPath, Shown] = {
        ("serve",): flags_shown(serve_help),
        ("replay",): {"--task": ()},
    }
    assert missing_from_page(page, shown) == []
    without = page.replace("--record-max-bytes", "--record-size")
    assert missing_from_page(without, shown) == [
        "mcp-tasks serve --record-max-bytes: not in the section of serve"
    ]
    new_flag: dict[CommandPath, Shown] = {("replay",): {"--task": (), "--follow": ()}}
    assert missing_from_page(page, new_flag) == [
        "mcp-tasks replay --follow: not in the section of replay"
    ]
    new_value: dict[CommandPath, Shown] = {("serve",): {"--loop": ("asyncio", "trio", "curio")}}
    assert missing_from_page(page, new_value) == [
        "mcp-tasks serve --loop curio: the value is not named"
    ]
    # `--stdio` is in the page, but not in replay's section
    assert missing_from_page(page, {("replay",): {"--stdio": ()}}) == [
        "mcp-tasks replay --stdio: not in the section of replay"
    ]
    assert missing_from_page(page, {("export",): {"--help": ()}}) == [
        "mcp-tasks export: no section `## \\`mcp-tasks export ...\\``"
    ]


def test_the_help_is_read_as_click_writes_it() -> None:
    """Short forms, `--x/--no-x` pairs and a help on the next line are all found."""
    text = """Usage: x [OPTIONS]

Options:
  -v, --verbose                   Say more.
  --color / --no-color            Colour the output.
  --max-tool-threads INTEGER RANGE
                                  Threads, at least 1 (see --other in the help).
  --output [text|json]            text or json.
  --help                          Show this message and exit.
"""
    assert flags_shown(text) == {
        "-v": (),
        "--verbose": (),
        "--color": (),
        "--no-color": (),
        "--max-tool-threads": (),
        "--output": ("text", "json"),
        "--help": (),
    }
