"""`mcp-tasks serve --auth-issuer ... --auth-audience ...` (issue 31): the options and their
usage errors in process (click's CliRunner), then the command as a real process whose
endpoint refuses a request without a token and publishes its Protected Resource Metadata;
the introspection client's secret, from the environment only, is never shown."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from redis_server import free_port

import mcp_tasks.auth
from mcp_tasks import Server
from mcp_tasks import cli as cli_module
from mcp_tasks.auth import IntrospectionVerifier, JwtVerifier, ResourceServer
from mcp_tasks.cli import main
from mcp_tasks.cli._serve_auth import CLIENT_SECRET_VARIABLE

ROOT = Path(__file__).parent.parent
JOBS = str(ROOT / "examples" / "jobs.py")
TIMEOUT = 20.0
SECRET = "intro-s3cret-never-shown"
ISSUER = "https://auth.example.com"
AUDIENCE = "https://mcp.example.com/mcp"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MCP_TASKS_ variable of this machine's reaches the command."""
    for name in list(os.environ):
        if name.startswith("MCP_TASKS"):
            monkeypatch.delenv(name)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[ResourceServer | None]:
    """The protection each `serve` (over HTTP) was given; nothing is served."""
    given: list[ResourceServer | None] = []

    def fake_http(
        host: str,
        port: int,
        allowed_hosts: Sequence[str],
        access_log: bool = False,
        resource_server: ResourceServer | None = None,
    ) -> cli_module.Serve:
        given.append(resource_server)

        async def serve(server: Server) -> None:
            pass

        return serve

    monkeypatch.setattr(cli_module, "_http_transport", fake_http)
    return given


def run_cli(*args: str, env: Mapping[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, ["serve", JOBS, *args], env=env)


# --- usage errors -----------------------------------------------------------------------------

BOTH = ("--auth-issuer", ISSUER, "--auth-audience", AUDIENCE)


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--auth-audience", AUDIENCE], {}, "--auth-audience needs --auth-issuer"),
        (["--auth-scope", "notes:read"], {}, "--auth-scope needs --auth-issuer"),
        (["--auth-issuer", ISSUER], {}, "--auth-issuer needs --auth-audience"),
        (["--stdio", *BOTH], {}, "--auth-issuer is for --http"),
        (["--stdio", "--auth-scope", "a"], {}, "--auth-scope is for --http"),
        (
            ["--stdio"],
            {"MCP_TASKS_AUTH_ISSUER": ISSUER},
            "--auth-issuer (from MCP_TASKS_AUTH_ISSUER) is for --http",
        ),
        (
            ["--auth-issuer", "http://auth.example.com", "--auth-audience", AUDIENCE],
            {},
            "--auth-issuer must be https (http only to this machine)",
        ),
        (
            ["--auth-issuer", ISSUER, "--auth-audience", "http://mcp.example.com/mcp"],
            {},
            "--auth-audience must be https (http only to this machine)",
        ),
        (
            ["--auth-issuer", ISSUER, "--auth-audience", "/mcp"],
            {},
            "--auth-audience must be an absolute URL, not '/mcp'",
        ),
        (
            ["--auth-issuer", ISSUER, "--auth-audience", "mcp.example.com/mcp"],
            {},
            "--auth-audience must be an absolute URL",
        ),
        (
            ["--auth-issuer", "auth.example.com", "--auth-audience", AUDIENCE],
            {},
            "--auth-issuer must be an absolute URL",
        ),
        (
            ["--auth-issuer", ISSUER, "--auth-audience", AUDIENCE + "#top"],
            {},
            "resource must be the endpoint's absolute URL",
        ),
        ([*BOTH, "--auth-scope", "offline_access"], {}, "is not a scope a resource may ask for"),
        (
            [*BOTH, "--auth-introspection-client-id", "mcp-server"],
            {},
            f"needs the client's secret in the environment variable {CLIENT_SECRET_VARIABLE}",
        ),
        (
            list(BOTH),
            {CLIENT_SECRET_VARIABLE: SECRET},
            f"{CLIENT_SECRET_VARIABLE} is set but --auth-introspection-client-id is not",
        ),
        (
            [
                "--auth-issuer",
                "http://auth.example.com",
                "--auth-audience",
                AUDIENCE,
                "--auth-introspection-client-id",
                "mcp-server",
            ],
            {CLIENT_SECRET_VARIABLE: SECRET},
            "--auth-issuer must be https",
        ),
    ],
)
def test_bad_auth_options_are_usage_errors(
    served: list[ResourceServer | None], args: list[str], env: dict[str, str], words: str
) -> None:
    result = run_cli(*args, env=env)
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split())
    assert SECRET not in result.output
    assert served == []


def test_without_joserfc_the_command_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, served: list[ResourceServer | None]
) -> None:
    monkeypatch.setitem(sys.modules, "joserfc", None)  # `import joserfc` fails
    for module in ("mcp_tasks.auth._jwt", "mcp_tasks.auth._introspection"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    for name in ("JwtVerifier", "IntrospectionVerifier"):
        monkeypatch.delattr(mcp_tasks.auth, name, raising=False)  # (loaded lazily, then kept)
    result = run_cli(*BOTH)
    assert result.exit_code == 1, result.output
    assert "pip install 'mcp-tasks[auth]'" in result.output
    assert served == []


# --- what the options build -------------------------------------------------------------------


def test_the_options_build_a_resource_server_checking_jwts(
    served: list[ResourceServer | None],
) -> None:
    result = run_cli(*BOTH, "--auth-scope", "notes:read", "--auth-scope", "notes:write")
    assert result.exit_code == 0, result.output
    [protection] = served
    assert protection is not None and isinstance(protection.verifier, JwtVerifier)
    assert protection.resource == AUDIENCE
    assert list(protection.authorization_servers) == [ISSUER]
    assert list(protection.scopes) == ["notes:read", "notes:write"]
    assert (protection.verifier.issuer, protection.verifier.audiences) == (ISSUER, (AUDIENCE,))


def test_without_auth_options_the_endpoint_is_open(served: list[ResourceServer | None]) -> None:
    assert run_cli().exit_code == 0
    assert served == [None]


def test_the_options_come_from_the_environment_with_the_secret(
    served: list[ResourceServer | None],
) -> None:
    env = {
        "MCP_TASKS_AUTH_ISSUER": ISSUER,
        "MCP_TASKS_SERVE_AUTH_AUDIENCE": AUDIENCE,
        "MCP_TASKS_AUTH_SCOPE": "notes:read notes:write",  # one a word
        "MCP_TASKS_AUTH_INTROSPECTION_CLIENT_ID": "mcp-server",
        CLIENT_SECRET_VARIABLE: SECRET,
    }
    result = run_cli(env=env)
    assert result.exit_code == 0, result.output
    [protection] = served
    assert protection is not None and isinstance(protection.verifier, IntrospectionVerifier)
    assert list(protection.scopes) == ["notes:read", "notes:write"]
    assert protection.verifier.issuer == ISSUER
    assert SECRET not in result.output + repr(protection)


def test_the_command_line_wins_over_the_environment(served: list[ResourceServer | None]) -> None:
    env = {"MCP_TASKS_AUTH_ISSUER": "https://other.example.com"}
    assert run_cli(*BOTH, env=env).exit_code == 0
    [protection] = served
    assert protection is not None and list(protection.authorization_servers) == [ISSUER]


# --- a real process ---------------------------------------------------------------------------


class Serving:
    """`mcp-tasks serve` as a process; its stdout and stderr, read to their end."""

    def __init__(self, args: Sequence[str], env: Mapping[str, str]) -> None:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TASKS")}
        command = [sys.executable, "-m", "mcp_tasks.cli", "serve", *args]
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**clean, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        self.stdout: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(self.process.stderr, self.stderr)),
            threading.Thread(target=self._read, args=(self.process.stdout, self.stdout)),
        ]
        for reader in self.readers:
            reader.start()

    def _read(self, stream: Any, kept: list[str]) -> None:
        for line in stream:
            kept.append(line)
            self.lines.put(line)

    def wait_for(self, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + TIMEOUT
        while True:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            if found := re.search(pattern, line):
                return found

    def stop(self) -> str:
        """Everything the process wrote, once it has exited."""
        self.process.send_signal(signal.SIGINT)
        self.process.send_signal(signal.SIGINT)
        self.process.wait(TIMEOUT)
        for reader in self.readers:
            reader.join(TIMEOUT)
        return "".join(self.stdout) + "".join(self.stderr)


def http(url: str, body: bytes | None = None, token: str | None = None) -> tuple[int, Any, bytes]:
    """The status, headers and body of a GET (or, with `body`, a POST) to `url`."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers, refused.read()


@pytest.fixture(params=["jwt", "introspection"])
def protected(request: pytest.FixtureRequest) -> Iterator[tuple[Serving, str, str, str]]:
    """A protected `serve` on a free loopback port, its issuer a loopback port nothing
    listens on: (the process, its endpoint, the issuer, how tokens are checked)."""
    port, nobody = free_port(), free_port()
    endpoint = f"http://127.0.0.1:{port}/mcp"
    issuer = f"http://127.0.0.1:{nobody}"
    args = [JOBS, "--http", f"127.0.0.1:{port}", "--log-level", "debug", "--access-log"]
    args += ["--auth-issuer", issuer, "--auth-audience", endpoint]
    args += ["--auth-scope", "tasks:use", "--auth-scope", "tasks:admin"]
    env = {}
    if request.param == "introspection":
        args += ["--auth-introspection-client-id", "mcp-server"]
        env[CLIENT_SECRET_VARIABLE] = SECRET
    serving = Serving(args, env)
    try:
        serving.wait_for(r"serving jobs \S+ on http://")
        yield serving, endpoint, issuer, request.param
    finally:
        if serving.process.poll() is None:
            serving.stop()


def test_a_protected_endpoint_refuses_a_request_without_a_token_and_publishes_its_metadata(
    protected: tuple[Serving, str, str, str],
) -> None:
    serving, endpoint, issuer, kind = protected
    said = serving.wait_for(r"protected by OAuth: .*").group(0)
    how = "introspected" if kind == "introspection" else "JWTs checked"
    assert f"bearer tokens from {issuer} ({how}" in said and endpoint in said
    metadata_url = endpoint.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()

    status, headers, _ = http(endpoint, ping)
    assert status == 401
    challenge = headers["WWW-Authenticate"]
    assert challenge.startswith(f'Bearer resource_metadata="{metadata_url}"'), challenge
    assert 'scope="tasks:use tasks:admin"' in challenge

    status, _, body = http(metadata_url)
    assert status == 200
    assert json.loads(body) == {
        "resource": endpoint,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["tasks:use", "tasks:admin"],
    }

    # a token that cannot be checked (the issuer is down): 503, not 401
    if kind == "introspection":
        status, headers, _ = http(endpoint, ping, token="opaque-token")
        assert status == 503 and headers["Retry-After"]

    written = serving.stop()
    assert serving.process.returncode == 0, written
    assert SECRET not in written
    if kind == "introspection":
        assert "tokens cannot be introspected now" in written  # the failure was logged
