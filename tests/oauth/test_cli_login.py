"""`mcp-tasks login`, `call` with the stored login, and `logout`, as a user runs them:
the CLI in its own process against our protected server and the real authorization server
(tests/oauth/realm.py); the system browser is `$BROWSER`, a script that logs in on the
provider's pages and comes back to the CLI's loopback redirect."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
import trio

from mcp_tasks.oauth import FileTokenStorage
from oauth.realm import realm

pytestmark = [pytest.mark.trio, pytest.mark.slow]  # (real processes: CI runs them once)

BROWSER = Path(__file__).resolve().parent / "browser.py"
MCP_TASKS = [sys.executable, "-m", "mcp_tasks.cli"]


def browser_command(folder: Path) -> Path:
    """An executable that runs the browser script ($BROWSER names one program)."""
    command = folder / "browser"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{BROWSER}" "$@"\n')
    command.chmod(0o700)
    return command


async def run(*words: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`mcp-tasks WORDS...`; its exit code, stdout and stderr."""
    with trio.fail_after(120):
        done = await trio.run_process(
            [*MCP_TASKS, *words],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env={**os.environ, **(env or {})},
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_login_then_call_with_the_stored_tokens_then_logout(tmp_path: Path) -> None:
    logins = tmp_path / "config" / "logins.json"
    browser = {"BROWSER": str(browser_command(tmp_path))}
    async with realm() as world:
        code, _, said = await run("call", world.url, "echo", "text=hi", "--logins", str(logins))
        assert code == 1, said
        assert "not authorized" in said and "mcp-tasks login" in said

        code, _, said = await run(
            "login", world.url, "--logins", str(logins), "--timeout", "60", env=browser
        )
        assert code == 0, said
        assert "visit:\n" + world.issuer + "/auth?" in said  # (also printed, for another browser)
        assert f"logged in to {world.url}" in said
        assert "browser: HTTP 200" in said and "close this window" in said
        assert stat.S_IMODE(logins.stat().st_mode) == 0o600
        tokens = (await FileTokenStorage(logins).load(world.url)).tokens  # type: ignore[union-attr]
        assert tokens is not None and tokens.access_token not in said  # no token printed

        code, out, said = await run("call", world.url, "echo", "text=hi", "--logins", str(logins))
        assert code == 0, said
        assert "hi" in out
        assert world.check.accepted[-1]["aud"] == world.url

        code, _, said = await run("logout", world.url, "--logins", str(logins))
        assert (code, said.strip()) == (0, f"mcp-tasks: logged out of {world.url}")
        code, _, said = await run("call", world.url, "echo", "text=hi", "--logins", str(logins))
        assert code == 1 and "mcp-tasks login" in said


async def test_login_with_client_credentials(tmp_path: Path) -> None:
    logins = tmp_path / "logins.json"
    async with realm() as world:
        code, _, said = await run(
            "login",
            world.url,
            "--client-credentials",
            "--client-id",
            "svc",
            "--logins",
            str(logins),
            env={"MCP_TASKS_LOGIN_CLIENT_SECRET": world.client_secret},
        )
        assert code == 0, said
        assert world.client_secret not in said
        code, out, said = await run("tools", world.url, "--logins", str(logins))
        assert code == 0, said
        assert "echo" in out


async def test_a_login_the_authorization_server_refuses_fails_saying_why(tmp_path: Path) -> None:
    logins = tmp_path / "logins.json"
    async with realm() as world:
        code, _, said = await run(
            "login",
            world.url,
            "--client-credentials",
            "--client-id",
            "svc",
            "--client-secret",
            "not-the-secret",
            "--logins",
            str(logins),
        )
    assert code == 1
    assert "login failed" in said and "client_credentials" in said
    assert "not-the-secret" not in said
    assert not logins.exists()


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--client-credentials"], "needs --client-id"),
        (["--client-credentials", "--client-id", "svc"], "--client-secret or --private-key"),
        (
            ["--client-credentials", "--client-id", "svc", "--client-secret", "s", "--private-key"],
            "--client-secret or --private-key",
        ),
        (["--private-key"], "is the key of a --client-id"),
    ],
)
async def test_login_options_that_do_not_go_together_are_refused(
    tmp_path: Path, words: list[str], said: str
) -> None:
    key = tmp_path / "key.pem"
    key.write_text("not read")
    words = [*words, str(key)] if words[-1] == "--private-key" else words
    code, _, err = await run("login", "http://127.0.0.1:9/mcp", *words)
    assert code == 2 and said in err
