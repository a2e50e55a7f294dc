"""`mcp-tasks serve`: the TARGET forms and their errors (click's CliRunner, in process), and
serving as a real process: stdio, HTTP, and shutdown on SIGTERM / SIGINT."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import click
import pytest
import trio
from click.testing import CliRunner
from redis_server import free_port
from runtime.helpers import request
from schema_check import check_reply

from mcp_tasks import TASKS_EXTENSION, Server, TaskOptions
from mcp_tasks import cli as cli_module
from mcp_tasks.cli import _target as target_module
from mcp_tasks.cli import load_server, main

ROOT = Path(__file__).parent.parent
JOBS = ROOT / "examples" / "jobs.py"
SCRIPT = Path(sys.executable).parent / "mcp-tasks"

APP = '''
from mcp_tasks import Server, ToolContext

app = Server("tmp-app", "1.2.3")
not_a_server = 42


class Holder:
    server = app


@app.tool()
async def shout(ctx: ToolContext) -> str:
    """Answer, after a print() that must land on stderr, never on stdout."""
    print("a stray print from a tool")
    return "HEY"
'''


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory with `cli_app.py` and `cli_pkg/server_mod.py` in it, as the current
    directory; sys.path and sys.modules are put back afterwards."""
    (tmp_path / "cli_app.py").write_text(APP)
    (tmp_path / "cli_pkg").mkdir()
    (tmp_path / "cli_pkg" / "__init__.py").write_text("")
    (tmp_path / "cli_pkg" / "server_mod.py").write_text(APP + "server = app\n")
    (tmp_path / "broken.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith(("cli_app", "cli_pkg", "broken", "_mcp_tasks_target")):
            del sys.modules[name]


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


# --- TARGET ---------------------------------------------------------------------------------


def test_a_file_path_loads_its_server_attribute() -> None:
    server = load_server(str(JOBS))
    assert isinstance(server, Server) and server.info.name == "jobs"
    assert "slow_compute" in server.core.tools


def test_file_and_module_forms_with_and_without_an_attribute(app_dir: Path) -> None:
    assert load_server("cli_app.py:app").info.name == "tmp-app"
    assert load_server(f"{app_dir / 'cli_app.py'}:Holder.server").info.name == "tmp-app"
    assert load_server("cli_app:app").info.name == "tmp-app"
    assert load_server("cli_pkg.server_mod").info.name == "tmp-app"  # attribute `server`


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nowhere/app.py", "no such file: nowhere/app.py"),
        ("no_such_module_xyz", "no module named 'no_such_module_xyz'"),
        ("cli_pkg.nope:server", "no module named 'cli_pkg.nope'"),
        ("cli_app.py", "cli_app.py has no attribute 'server'; its servers: app"),
        ("cli_app:missing", "cli_app has no attribute 'missing'; its servers: app"),
        ("cli_app:not_a_server", "cli_app:not_a_server is a int, not a mcp_tasks.Server"),
        ("cli_app:Holder", "cli_app:Holder is a class Holder, not a mcp_tasks.Server"),
        ("cli_app.py:shout", "is a function, not a mcp_tasks.Server"),
        ("not a module", "'not a module' is neither a file path nor a module name"),
    ],
)
def test_a_target_that_names_no_server_is_a_usage_error(
    app_dir: Path, target: str, message: str
) -> None:
    result = run_cli("serve", target, "--stdio")
    assert result.exit_code == 2, result.output
    assert "Invalid value for TARGET" in result.output
    assert message in " ".join(result.output.split())


def test_a_module_that_fails_on_import_shows_its_own_error(app_dir: Path) -> None:
    result = run_cli("serve", "broken", "--stdio")
    assert isinstance(result.exception, ModuleNotFoundError)
    assert result.exception.name == "no_such_dependency_xyz"


def test_a_windows_path_is_not_split_at_its_drive_letter() -> None:
    assert target_module._split_target("C:\\apps\\jobs.py") == ("C:\\apps\\jobs.py", "server")
    assert target_module._split_target("C:\\apps\\jobs.py:app") == ("C:\\apps\\jobs.py", "app")


# --- options --------------------------------------------------------------------------------


def test_http_and_stdio_together_are_refused() -> None:
    result = run_cli("serve", str(JOBS), "--http", "127.0.0.1:8000", "--stdio")
    assert result.exit_code == 2
    assert "--http and --stdio cannot be used together" in result.output


@pytest.mark.parametrize("address", ["8000", "localhost", "localhost:http", ":80", "h:70000"])
def test_a_bad_http_address_is_refused(address: str) -> None:
    result = run_cli("serve", str(JOBS), "--http", address)
    assert result.exit_code == 2
    assert "is not HOST:PORT" in result.output


def test_the_default_transport_is_http_on_localhost_8000(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen: list[tuple[str, int, tuple[str, ...]]] = []

    def fake_http(
        host: str,
        port: int,
        allowed_hosts: Sequence[str],
        access_log: bool = False,
        resource_server: object = None,
    ) -> cli_module.Serve:
        chosen.append((host, port, tuple(allowed_hosts)))

        async def serve(server: Server) -> None:
            pass

        return serve

    monkeypatch.setattr(cli_module, "_http_transport", fake_http)
    assert run_cli("serve", str(JOBS)).exit_code == 0
    assert run_cli("serve", str(JOBS), "--http", "[::1]:9000").exit_code == 0
    proxied = run_cli("serve", str(JOBS), "--allow-host", "mcp.example.com", "--allow-host", "b:1")
    assert proxied.exit_code == 0
    assert chosen == [
        ("127.0.0.1", 8000, ()),
        ("::1", 9000, ()),
        ("127.0.0.1", 8000, ("mcp.example.com", "b:1")),
    ]


def test_allow_host_is_for_http_only() -> None:
    result = run_cli("serve", str(JOBS), "--stdio", "--allow-host", "x")
    assert result.exit_code == 2 and "--allow-host is for --http" in result.output


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("bogus://x", "no store for 'bogus://x'"),
        ("sqlite://relative.db", "sqlite:///relative/path.db"),
        ("sqlite:///x.db?journal=off", "unknown SQLite store option"),
        ("sqlite:///x.db?synchronous=sometimes", "synchronous must be"),
    ],
)
def test_a_bad_store_url_is_refused_naming_what_works(url: str, words: str) -> None:
    result = run_cli("serve", str(JOBS), "--stdio", "--store", url)
    assert result.exit_code == 2 and "--store" in result.output and words in result.output


def test_an_unreachable_store_is_refused_before_serving() -> None:
    nobody = f"redis://127.0.0.1:{free_port()}/0"  # a port nothing listens on
    result = run_cli("serve", str(JOBS), "--stdio", "--store", nobody)
    assert result.exit_code == 1
    assert "cannot use the task store RedisTaskStore" in result.output


def test_an_unreachable_store_is_named_without_its_password() -> None:
    nobody = f"redis://admin:hunter2-secret@127.0.0.1:{free_port()}/0"
    result = run_cli("serve", str(JOBS), "--stdio", "--store", nobody)
    assert result.exit_code == 1
    assert "redis://***@127.0.0.1" in result.output and "hunter2" not in result.output


def test_an_address_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", str(JOBS), "--http", f"127.0.0.1:{port}")
    assert result.exit_code == 1
    assert "cannot serve:" in result.output and "in use" in result.output


def test_version_and_help() -> None:
    assert "mcp-tasks, version" in run_cli("--version").output
    help_text = run_cli("serve", "--help").output
    assert "--stdio" in help_text and "--http HOST:PORT" in help_text
    assert "127.0.0.1:8000" in help_text and "--log-level" in help_text


def test_bad_parameter_is_what_load_server_raises() -> None:
    with pytest.raises(click.BadParameter, match="no such file"):
        load_server("missing.py")


# --- serving, as a real process -------------------------------------------------------------


class Child:
    def __init__(self, process: trio.Process) -> None:
        assert process.stdin and process.stdout and process.stderr
        self.process = process
        self.stdin, self.stdout, self.stderr = process.stdin, process.stdout, process.stderr
        self.out = bytearray()
        self.err = bytearray()

    async def exchange(self, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        await self.stdin.send_all(request(method, params, **kw) + b"\n")
        with trio.fail_after(20):
            while b"\n" not in self.out:
                data = await self.stdout.receive_some()
                assert data, "stdout ended"
                self.out += data
        line, _, rest = bytes(self.out).partition(b"\n")
        self.out[:] = rest
        check_reply(method, line)
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def stderr_line(self, pattern: str) -> re.Match[str]:
        """Wait for a line on stderr that matches."""
        with trio.fail_after(20):
            while True:
                for text in self.err.decode().splitlines():
                    if found := re.search(pattern, text):
                        return found
                data = await self.stderr.receive_some()
                assert data, f"stderr ended without {pattern!r}: {self.err.decode()}"
                self.err += data

    async def finish(self) -> tuple[int, str, str]:
        """Exit code, the rest of stdout, all of stderr, once the process has ended."""
        with trio.fail_after(20):
            while data := await self.stdout.receive_some():
                self.out += data
            while data := await self.stderr.receive_some():
                self.err += data
            code = await self.process.wait()
        return code, self.out.decode(), self.err.decode()


@asynccontextmanager
async def spawn(*command: str, cwd: Path = ROOT) -> AsyncIterator[Child]:
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    run = partial(trio.run_process, list(command), check=False, cwd=cwd, **pipes)
    async with trio.open_nursery() as nursery:
        process = await nursery.start(run)
        try:
            yield Child(process)
        finally:
            if process.returncode is None:
                process.kill()


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcp_tasks.cli", *args]


async def test_the_console_script_serves_a_module_from_the_current_directory(
    app_dir: Path,
) -> None:
    async with spawn(str(SCRIPT), "serve", "cli_pkg.server_mod", "--stdio", cwd=app_dir) as child:
        await child.stderr_line("serving tmp-app 1.2.3 on stdio")
        reply = await child.exchange("tools/call", {"name": "shout", "arguments": {}}, caps={})
        assert reply["result"]["content"][0]["text"] == "HEY"
        await child.stdin.aclose()
        code, rest, errors = await child.finish()
    assert code == 0 and rest == ""
    assert "a stray print from a tool" in errors  # on stderr: stdout carries only JSON-RPC


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_shuts_down_gracefully_and_exits_0(signal_number: int) -> None:
    caps = {"extensions": {TASKS_EXTENSION: {}}}
    async with spawn(*cli("serve", "examples/jobs.py", "--stdio")) as child:
        await child.stderr_line("on stdio")
        params = {"name": "slow_compute", "arguments": {"seconds": 0.2}}
        created = await child.exchange("tools/call", params, caps=caps)
        assert created["result"]["resultType"] == "task"
        child.process.send_signal(signal_number)
        code, rest, errors = await child.finish()
    assert code == 0 and rest == ""
    assert f"{signal.Signals(signal_number).name}: shutting down" in errors
    assert "Traceback" not in errors


async def test_http_serves_where_it_says_it_listens() -> None:
    async with spawn(*cli("serve", "examples/jobs.py", "--http", "127.0.0.1:0")) as child:
        found = await child.stderr_line(r"serving jobs 0\.1\.0 on (http://127\.0\.0\.1:\d+/mcp)")
        body = request("tools/call", {"name": "greet", "arguments": {"name": "http"}}, caps={})
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": "greet",
        }
        post = urllib.request.Request(found.group(1), data=body, headers=headers)
        with trio.fail_after(20):
            reply = await trio.to_thread.run_sync(lambda: urllib.request.urlopen(post).read())
        check_reply("tools/call", reply)
        assert json.loads(reply)["result"]["content"][0]["text"] == "Hello, http!"
        child.process.send_signal(signal.SIGTERM)
        code, rest, errors = await child.finish()
    assert code == 0 and rest == "" and "Traceback" not in errors


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """POST over loopback; the status and the JSON body, whatever the status."""
    sent = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(sent) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.parametrize("lenient", [False, True])
async def test_accept_missing_task_name_serves_tasks_requests_without_mcp_name(
    lenient: bool,
) -> None:
    """What fastmcp-tasks 4.1.4's client sends: tasks/get without Mcp-Name (issue 16,
    point 3). Strict by default, with a message that says what the server could allow."""
    flags = ["--accept-missing-task-name"] if lenient else []
    async with spawn(*cli("serve", "examples/jobs.py", "--http", "127.0.0.1:0", *flags)) as child:
        found = await child.stderr_line(r"serving jobs 0\.1\.0 on (http://127\.0\.0\.1:\d+/mcp)")
        url = found.group(1)
        caps = {"extensions": {TASKS_EXTENSION: {}}}
        base = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
        }
        params = {"name": "slow_compute", "arguments": {"seconds": 30}}
        call = request("tools/call", params, caps=caps)
        call_headers = {**base, "mcp-method": "tools/call", "mcp-name": "slow_compute"}
        with trio.fail_after(20):
            status, created = await trio.to_thread.run_sync(_post, url, call, call_headers)
            assert status == 200
            get = request("tasks/get", {"taskId": created["result"]["taskId"]}, caps=caps)
            no_name = {**base, "mcp-method": "tasks/get"}
            status, answer = await trio.to_thread.run_sync(_post, url, get, no_name)
        if lenient:
            assert status == 200 and answer["result"]["status"] == "working"
        else:
            assert status == 400 and answer["error"]["code"] == -32020
            assert answer["error"]["message"] == (
                "Mcp-Name header is missing (it must carry params.taskId); a client that "
                "leaves it out of tasks/* is served only by a server configured to accept "
                "that (mcp-tasks serve --accept-missing-task-name)"
            )
        child.process.send_signal(signal.SIGTERM)
        code, _, errors = await child.finish()
    assert code == 0 and "Traceback" not in errors


def test_accept_missing_task_name_is_for_http_only() -> None:
    result = run_cli("serve", "examples/jobs.py", "--stdio", "--accept-missing-task-name")
    assert result.exit_code == 2
    assert "--accept-missing-task-name is for --http: stdio has no headers." in result.output


def test_python_dash_m_runs_the_command() -> None:
    result = subprocess.run(
        cli("--help"), capture_output=True, text=True, check=False, cwd=ROOT, env=os.environ
    )
    assert result.returncode == 0 and "serve" in result.stdout


# --- task limits on the command line ----------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (
            TaskOptions(),
            "holds up to 1024 tasks for 10 min each: about 1.7 new tasks/s sustained; "
            "raise with --max-tasks (or shorten --ttl)",
        ),
        (
            TaskOptions(max_tasks=2, ttl_ms=60_000),
            "holds up to 2 tasks for 1 min each: about 0.033",
        ),
        (TaskOptions(max_tasks=50_000, ttl_ms=7_200_000), "for 2 h each: about 6.9 new tasks/s"),
        (TaskOptions(max_tasks=100_000, ttl_ms=90_500), "for 90.5 s each: about 1,105 new tasks/s"),
        (TaskOptions(ttl_ms=None), "each until the server restarts (no TTL)"),
    ],
)
def test_the_start_line_says_the_capacity_in_words_a_user_can_act_on(
    options: TaskOptions, line: str
) -> None:
    assert line in cli_module.capacity(options)


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--max-tasks", "0"), ("--ttl", "0"), ("--poll-interval", "-1"), ("--max-tasks", "x")],
)
def test_task_limit_flags_refuse_what_cannot_work(flag: str, value: str) -> None:
    result = run_cli("serve", str(JOBS), "--stdio", flag, value)
    assert result.exit_code == 2 and flag in result.output


async def test_task_limit_flags_reach_the_tasks_the_server_creates() -> None:
    caps = {"extensions": {TASKS_EXTENSION: {}}}
    flags = ("--max-tasks", "2", "--ttl", "60", "--poll-interval", "0.5")
    async with spawn(*cli("serve", "examples/jobs.py", "--stdio", *flags)) as child:
        await child.stderr_line("holds up to 2 tasks for 1 min each: about 0.033 new tasks/s")
        params = {"name": "slow_compute", "arguments": {"seconds": 30}}
        first = (await child.exchange("tools/call", params, caps=caps))["result"]
        assert first["ttlMs"] == 60_000 and first["pollIntervalMs"] == 500
        await child.exchange("tools/call", params, caps=caps)
        refused = await child.exchange("tools/call", params, caps=caps)
        assert "limit of 2" in refused["error"]["message"]
        child.process.send_signal(signal.SIGTERM)
        code, _, errors = await child.finish()
    assert code == 0 and "Traceback" not in errors


# --- out of file descriptors (issue 15, point 15) ----------------------------------------------


def _few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))


async def test_out_of_descriptors_the_server_backs_off_says_so_once_and_recovers() -> None:
    command = cli("serve", "examples/jobs.py", "--http", "127.0.0.1:0")
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    run = partial(
        trio.run_process, command, check=False, cwd=ROOT, preexec_fn=_few_descriptors, **pipes
    )
    async with trio.open_nursery() as nursery:
        process = await nursery.start(run)
        child = Child(process)
        try:
            found = await child.stderr_line(r"on http://127\.0\.0\.1:(\d+)/mcp")
            port = int(found.group(1))
            clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(80)]
            await child.stderr_line("cannot accept connections")  # it ran out
            await trio.sleep(1.5)  # a server that retried every 0.1 s would log ~15 times
            for client in clients:
                client.close()
            body = request("tools/call", {"name": "greet", "arguments": {"name": "x"}}, caps={})
            headers = {
                "content-type": "application/json",
                "accept": "application/json",
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/call",
                "mcp-name": "greet",
            }
            post = urllib.request.Request(
                f"http://127.0.0.1:{port}/mcp", data=body, headers=headers
            )
            with trio.fail_after(20):  # served again once descriptors are free
                reply = await trio.to_thread.run_sync(lambda: urllib.request.urlopen(post).read())
            assert json.loads(reply)["result"]["content"][0]["text"] == "Hello, x!"
            process.send_signal(signal.SIGTERM)
            code, _, errors = await child.finish()
        finally:
            if process.returncode is None:
                process.kill()
    assert code == 0
    assert errors.count("cannot accept connections") == 1, errors
    assert "Traceback" not in errors


@pytest.mark.parametrize("modern_only", [False, True])
async def test_modern_only_refuses_the_initialize_of_a_2025_client(modern_only: bool) -> None:
    flags = ["--modern-only"] if modern_only else []
    async with spawn(*cli("serve", "examples/jobs.py", "--stdio", *flags)) as child:
        await child.stderr_line("on stdio")
        opening = {"protocolVersion": "2025-11-25", "capabilities": {}}
        message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": opening}
        await child.stdin.send_all(json.dumps(message).encode() + b"\n")
        with trio.fail_after(20):
            while b"\n" not in child.out:
                child.out += await child.stdout.receive_some()
        reply = json.loads(bytes(child.out).partition(b"\n")[0])
        await child.stdin.aclose()
        await child.finish()
    if modern_only:
        assert reply["error"]["code"] == -32022
        assert reply["error"]["data"]["supported"] == ["2026-07-28"]
    else:
        assert reply["result"]["protocolVersion"] == "2025-11-25"
