"""`mcp-tasks serve --workers N`: what it refuses (in process), and a supervisor with its
worker processes on one loopback port and a real redis-server (or one SQLite file): tasks
shared between the workers, a killed worker started again, SIGHUP without a failed request, SIGTERM.

Which worker answers is made certain, not hoped for: `hold_the_loop` blocks the event loop
of the worker that runs it (a `time.sleep`, no await) until the test releases it, so every
request meanwhile is accepted by another worker; `whoami` answers its worker's pid.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from itertools import count
from pathlib import Path

import pytest
import trio
from redis_server import free_port, running_redis
from test_cli import JOBS, Child, cli, run_cli, spawn
from test_serve_loops import TASKS, Session, text_of

TOOLS = f"""
import os
import time
from pathlib import Path

import msgspec

from mcp_tasks import CallToolResult, ToolContext, ToolOutcome
from mcp_tasks.cli import load_server

server = load_server({str(JOBS)!r})


class Hold(msgspec.Struct):
    started: str
    release: str


@server.tool()
async def whoami(ctx: ToolContext) -> ToolOutcome:
    return CallToolResult.text(str(os.getpid()))


@server.tool()
async def hold_the_loop(ctx: ToolContext, args: Hold) -> ToolOutcome:
    \"\"\"Block this worker's loop until the file `release` exists: it accepts nothing.\"\"\"
    Path(args.started).write_text(str(os.getpid()))
    deadline = time.monotonic() + 30
    while not Path(args.release).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return CallToolResult.text(str(os.getpid()))
"""
SERVING = r"worker \d+ \(pid (\d+)\) serving"
_holds = count()


@pytest.fixture
def redis_url() -> Iterator[str]:
    with running_redis() as url:
        yield url


@asynccontextmanager
async def supervised(
    tmp_path: Path, store_url: str, *flags: str, loop: str = "asyncio"
) -> AsyncIterator[tuple[Session, list[int]]]:
    """`serve --workers 2` of the tools above; the session, and its workers' pids once both
    serve."""
    (tmp_path / "worker_tools.py").write_text(TOOLS)
    command = cli("serve", str(tmp_path / "worker_tools.py"), "--http", "127.0.0.1:0",
                  "--store", store_url, "--loop", loop, "--workers", "2", *flags)  # fmt: skip
    async with spawn(*command) as child:
        found = await child.stderr_line(r"serving jobs 0\.1\.0 on (http://127\.0\.0\.1:\d+/mcp)")
        pids = await serving(child, 2)
        yield Session(child, found.group(1)), pids


async def serving(child: Child, at_least: int) -> list[int]:
    """The pids of the workers that said they serve, once at least `at_least` did."""
    with trio.fail_after(30):
        while len(found := re.findall(SERVING, child.err.decode())) < at_least:
            data = await child.stderr.receive_some()
            assert data, child.err.decode()
            child.err += data
    return [int(pid) for pid in found]


async def whoami(session: Session) -> int:
    return int(text_of(await session.call("tools/call", {"name": "whoami", "arguments": {}})))


@asynccontextmanager
async def holding(session: Session, tmp_path: Path) -> AsyncIterator[int]:
    """One worker's loop held (its pid yielded): meanwhile another worker answers."""
    number = next(_holds)
    started, release = tmp_path / f"started-{number}", tmp_path / f"release-{number}"
    arguments = {"started": str(started), "release": str(release)}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            session.call, "tools/call", {"name": "hold_the_loop", "arguments": arguments}
        )
        try:
            with trio.fail_after(20):
                while not (started.exists() and started.read_text()):
                    await trio.sleep(0.01)
            yield int(started.read_text())
        finally:
            release.write_text("")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def finish(session: Session) -> str:
    session.child.process.send_signal(signal.SIGTERM)
    code, rest, errors = await session.child.finish()
    assert code == 0 and rest == "", errors
    assert "Traceback" not in errors
    return errors


# --- refused --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        ([], "with the memory store each worker would hold its own tasks"),
        (["--store", "memory://"], "a tasks/get answered by another worker would not find"),
        (["--stdio"], "--workers is for --http: stdio has one stdin"),
        (["--store", "file:///tasks.db"], "a store the workers share: redis://HOST:6379/0 or"),
        (["--store", "redis://127.0.0.1:1/0", "--record", "j.jsonl"], "--record writes one"),
        (["--store", "redis://127.0.0.1:1/0"], "run it as `mcp-tasks serve ...`"),
    ],
)
def test_what_cannot_be_shared_by_workers_is_refused_saying_why(
    flags: list[str], words: str
) -> None:
    result = run_cli("serve", str(JOBS), "--workers", "2", *flags)
    assert result.exit_code == 2
    assert words in " ".join(result.output.split()), result.output


@pytest.mark.parametrize("workers", ["0", "-1", "65"])
def test_the_number_of_workers_is_bounded(workers: str) -> None:
    result = run_cli("serve", str(JOBS), "--workers", workers)
    assert result.exit_code == 2 and "--workers" in result.output


# --- served ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("loop", "store"), [("asyncio", "redis"), ("trio", "redis"), ("asyncio", "sqlite")]
)
async def test_two_workers_answer_on_one_port_and_share_their_tasks(
    tmp_path: Path, request: pytest.FixtureRequest, loop: str, store: str
) -> None:
    """A task one worker made is read by the other: in Redis, or in one SQLite file both
    workers opened shared (the URL says nothing of sharing: `--workers` does)."""
    if store == "redis":
        store_url = request.getfixturevalue("redis_url")
    else:
        store_url = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with supervised(tmp_path, store_url, loop=loop) as (session, pids):
        async with holding(session, tmp_path) as held:
            maker = await whoami(session)
            assert maker != held and {maker, held} == set(pids)
            params = {"name": "slow_compute", "arguments": {"seconds": 0.01}}
            created = await session.call("tools/call", params, caps=TASKS)  # made by `maker`
        task_id = created["result"]["taskId"]
        with trio.fail_after(20):
            while True:
                got = await session.call("tasks/get", {"taskId": task_id}, caps=TASKS)
                if got["result"]["status"] == "completed":
                    break
                await trio.sleep(0.02)
        for _ in range(40):  # until the maker is the one held: 1 chance in 2 each time
            async with holding(session, tmp_path) as held:
                if held != maker:
                    continue
                assert await whoami(session) != maker
                got = await session.call("tasks/get", {"taskId": task_id}, caps=TASKS)
                assert got["result"]["status"] == "completed", got
                break
        else:
            pytest.fail(f"the worker {maker} was never the one held")
        await finish(session)


@pytest.mark.slow
async def test_a_killed_worker_is_started_again_and_the_port_keeps_answering(
    tmp_path: Path, redis_url: str
) -> None:
    async with supervised(tmp_path, redis_url) as (session, pids):
        os.kill(pids[0], signal.SIGKILL)
        answered = set()
        with trio.fail_after(30):
            while len(re.findall(SERVING, session.child.err.decode())) < 3:
                answered.add(await whoami(session))  # every one answered meanwhile
                with trio.move_on_after(0.05):
                    await serving(session.child, 3)
        await session.child.stderr_line(
            rf"worker \d \(pid {pids[0]}\) exited \(killed by SIGKILL\): starting another"
        )
        new = (await serving(session.child, 3))[2]
        assert answered <= {pids[1], new}
        async with holding(session, tmp_path) as held:
            assert {held, await whoami(session)} == {pids[1], new}
        await finish(session)


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["asyncio", "trio"])
async def test_sighup_replaces_every_worker_without_a_failed_request(
    tmp_path: Path, redis_url: str, loop: str
) -> None:
    async with supervised(tmp_path, redis_url, loop=loop) as (session, old):
        answered: list[int] = []

        async def load(cancel_scope: trio.CancelScope) -> None:
            with cancel_scope:
                while True:
                    answered.append(await whoami(session))  # fails the test if refused

        async with trio.open_nursery() as nursery:
            requests = trio.CancelScope()
            nursery.start_soon(load, requests)
            session.child.process.send_signal(signal.SIGHUP)
            for pid in old:
                await session.child.stderr_line(rf"worker \d \(pid {pid}\) stopped")
            before = len(answered)
            with trio.fail_after(20):
                while len(answered) < before + 20:  # and after
                    await trio.sleep(0.01)
            requests.cancel()
        new = (await serving(session.child, 4))[2:]
        assert set(answered) <= {*old, *new} and set(answered[before:]) <= set(new)
        assert not any(alive(pid) for pid in old)
        await finish(session)


async def test_sigterm_stops_every_worker_and_the_supervisor_exits_0(
    tmp_path: Path, redis_url: str
) -> None:
    async with supervised(tmp_path, redis_url) as (session, pids):
        errors = await finish(session)
    assert "SIGTERM: stopping the workers gracefully" in errors
    for pid in pids:
        assert re.search(rf"worker \d \(pid {pid}\) stopped\n", errors), errors
        assert not alive(pid)


@pytest.mark.slow
async def test_a_crash_loop_ends_with_an_error_and_exit_1(tmp_path: Path) -> None:
    nobody = f"redis://127.0.0.1:{free_port()}/0"  # every worker fails to reach its store
    command = cli("serve", str(JOBS), "--http", "127.0.0.1:0", "--store", nobody, "--workers", "2")
    async with spawn(*command) as child:
        with trio.fail_after(60):
            code, _, errors = await child.finish()
    assert code == 1
    assert "cannot use the task store" in errors
    assert "workers exited unasked 11 times within 60 s: a crash loop" in errors
