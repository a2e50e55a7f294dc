"""The client commands' shared options (issue 30, point 6): `mcp-tasks tools` (and `list`),
`--header`, `--token` and `MCP_TASKS_TOKEN`, `--timeout`, every option from an
`MCP_TASKS_...` variable, and docs/cli.md naming every option and its variable. The
commands run as real processes against real servers on loopback."""

from __future__ import annotations

import json
import os
import runpy
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager

import pytest
import trio
from test_cli_call import ROOT, TIMEOUT, _serving

from mcp_tasks.cli import main
from mcp_tasks.cli._environment import variables
from mcp_tasks.cli._listing import Catalog, describe_catalog
from mcp_tasks.core._wire import Tool

CLI = [sys.executable, "-m", "mcp_tasks.cli"]
SECRET = "s3cret-token-never-shown"


async def run(*args: str, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """The command's exit code, stdout and stderr (its environment without any MCP_TASKS_
    variable of this machine's, plus `env`)."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith("MCP_TASKS")}
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            [*CLI, *args],
            cwd=ROOT,
            check=False,
            capture_stdout=True,
            capture_stderr=True,
            env={**clean, **(env or {})},
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """`mcp-tasks serve examples/jobs.py` on a free loopback port."""
    yield from _serving()


# --- tools / list ----------------------------------------------------------------------------


async def test_tools_shows_each_tool_with_its_arguments(url: str) -> None:
    code, out, err = await run("tools", url)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "tools:"
    assert '  greet(name?: string = "world") - Say hello at once.' in lines
    assert (
        "  confirm_delete(filename: string) - Ask before deleting; runs again with the answer."
        in (lines)
    )
    assert "prompts:" not in lines  # the example serves tools only: -32601 is left out
    assert await run("list", url) == (0, out, "")


async def test_tools_as_json_gives_the_lists_as_the_server_sent_them(url: str) -> None:
    code, out, _ = await run("tools", url, "--output", "json")
    shown = json.loads(out)
    greet = next(tool for tool in shown["tools"] if tool["name"] == "greet")
    assert code == 0 and greet["inputSchema"]["properties"]["name"]["default"] == "world"


def test_the_listing_escapes_what_could_drive_the_terminal() -> None:
    sneaky = Tool(
        name="x\x1b[2J",
        input_schema={"type": "object", "properties": {"a\x07": {"type": "array"}}},
        description="fine\x1b]0;owned\x07 then more\nsecond line",
    )
    catalog = Catalog(
        tools=[sneaky], rejected={}, prompts=None, resources=None, resource_templates=None
    )
    [heading, line] = describe_catalog(catalog)
    assert heading == "tools:" and "\x1b" not in line and "\x07" not in line
    assert line == r"  x\x1b[2J(a\x07?: array of any) - fine\x1b]0;owned\x07 then more"


# --- the token and headers reach the server; the token is never shown ------------------------


@asynccontextmanager
async def private_server() -> AsyncIterator[str]:
    """examples/bearer_auth.py's server: only its demo tokens get in."""
    example = runpy.run_path(str(ROOT / "examples" / "bearer_auth.py"))
    async with trio.open_nursery() as nursery:
        port = await nursery.start(example["serve"], 0)
        yield f"http://127.0.0.1:{port}/mcp"
        nursery.cancel_scope.cancel()


async def test_a_token_from_the_environment_or_a_header_gets_in() -> None:
    async with private_server() as private:
        by_variable = await run(
            "call", private, "shout", "text=hi", env={"MCP_TASKS_TOKEN": "demo-token-alice"}
        )
        assert by_variable[:2] == (0, "HI\n"), by_variable
        header = "Authorization: Bearer demo-token-bob"
        assert (await run("call", private, "shout", "text=yo", "--header", header))[:2] == (
            0,
            "YO\n",
        )
        headers = "X-Trace: 1\nAuthorization: Bearer demo-token-bob"  # one a line
        listed = await run("tools", private, env={"MCP_TASKS_TOOLS_HEADER": headers})
        assert listed[0] == 0 and "shout(text: string)" in listed[1]
        refused = await run("call", private, "shout", "text=hi", env={"MCP_TASKS_TOKEN": SECRET})
    code, out, err = refused
    assert code == 1 and "Unauthorized: unknown token" in err and SECRET not in out + err


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--header", "no colon"], {}, "is not NAME:VALUE"),
        (["--header", "Bad Name: x"], {}, "is not NAME:VALUE"),
        (["--header", "Mcp-Param-Region: x"], {}, "set by mcp-tasks itself"),
        (["--header", "content-type: text/plain"], {}, "set by mcp-tasks itself"),
        (["--header", "A: 1", "--header", "a: 2"], {}, "given twice"),
        (["--header", f"X-Key: {SECRET}\x01"], {}, "control character"),
        (["--token", SECRET, "--header", "authorization: Bearer x"], {}, "either --token"),
        (["--token", f"{SECRET} two"], {}, "holds a space"),
        ([], {"MCP_TASKS_TOKEN": f"{SECRET}\x7f"}, "control character"),
        (["--timeout", "0"], {}, "0.001"),
        (["--reconnect", "-1"], {}, "x>=0"),
    ],
)
async def test_bad_connection_options_are_usage_errors_that_show_no_secret(
    args: list[str], env: dict[str, str], words: str
) -> None:
    code, out, err = await run("call", "http://127.0.0.1:9/mcp", "greet", *args, env=env)
    assert code == 2 and words in err, err
    assert SECRET not in out + err


async def test_headers_and_a_command_line_token_are_for_http_only() -> None:
    stdio = f"{sys.executable} -m mcp_tasks.cli serve examples/jobs.py --stdio"
    code, _, err = await run("tools", "--stdio", stdio, "--header", "X-A: 1")
    assert code == 2 and "--header is for HTTP" in err
    code, _, err = await run("tools", "--stdio", stdio, "--token", SECRET)
    assert code == 2 and "--token is for HTTP" in err and SECRET not in err
    # a token in the environment is for HTTP servers: a stdio one is reached without it
    code, out, _ = await run("tools", "--stdio", stdio, env={"MCP_TASKS_TOKEN": SECRET})
    assert code == 0 and "greet(" in out


# --- --timeout, and options from the environment ---------------------------------------------


async def test_a_request_not_answered_in_timeout_exits_2() -> None:
    silent = f"{sys.executable} -c 'import time; time.sleep(60)'"
    code, _, err = await run("call", "--stdio", silent, "greet", "--timeout", "0.5")
    # the era's probe waits no longer than --timeout; then the 2025 session's initialize
    assert code == 2 and "no answer to initialize within 0.5 s" in err, err


async def test_every_option_can_come_from_the_environment(url: str) -> None:
    env = {"MCP_TASKS_CALL_OUTPUT": "json", "MCP_TASKS_CALL_JSON": '{"name": "Env"}'}
    code, out, _ = await run("call", url, "greet", env=env)
    assert code == 0 and json.loads(out)["content"][0]["text"] == "Hello, Env!"
    # the command line wins
    code, out, _ = await run("call", url, "greet", "--output", "text", env=env)
    assert (code, out) == (0, "Hello, Env!\n")


def test_every_option_and_its_variable_is_in_the_cli_page() -> None:
    """Each option's variables are on the page, in the table of variables. (That each flag
    is in its command's section is tests/test_cli_help_page.py's, from `--help` itself.)"""
    page = (ROOT / "docs" / "cli.md").read_text()
    missing = []
    for path, flag, names in variables(main):
        row = f"| `{names[0]}` | `{path} {flag}`"
        if row not in page:
            missing.append(f"{path} {flag}: no row for {names[0]}")
        for name in names[1:]:
            if f"`{name}`" not in page:
                missing.append(f"{path} {flag}: {name} not named")
    assert missing == []


async def test_every_option_shows_its_variable_in_help() -> None:
    for path, flag, names in variables(main):
        assert names[0] == "MCP_TASKS_" + "_".join(
            [*path.upper().split(), flag.removeprefix("--").replace("-", "_").upper()]
        )
    _, out, _ = await run("task", "get", "--help")
    assert "MCP_TASKS_TASK_GET_TIMEOUT" in out and "MCP_TASKS_TOKEN" in out
