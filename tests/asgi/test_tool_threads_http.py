"""Plain-function tools whose clients hang up, over real sockets to real server processes:
the built-in server (`mcp-tasks serve`, trio) and the ASGI app under uvicorn (asyncio).

Many calls of a blocking tool, each hung up while its function runs, may leave at most
`max_tool_threads` threads in the server (its OS threads, from /proc), and a fresh call is
still answered: refused, retryable (503 with `Retry-After`), rather than left waiting for a
thread. A function that checks `ctx.cancelled` ends with its call. Each wait is bounded and
nothing is asserted on time.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h11
import pytest
import trio

from mcp_tasks.client import RpcError, connect_http

HERE = Path(__file__).resolve().parent
SERVED = HERE / "served_threads.py"
START_SECONDS = 30.0
ANSWER_SECONDS = 20.0
"""A generous bound on an answer that should come at once (a refusal waits 0.25 s)."""
HANG_UP_SECONDS = 1.0
"""How long a cut-off call waits before hanging up: its function has started by then."""
DEFAULT_BOUND = 32
_LISTENING = re.compile(
    r"(?:Uvicorn running on|serving threads-tests 1.0 on) http://127\.0\.0\.1:(\d+)"
)


def commands(extra: tuple[str, ...] = ()) -> dict[str, list[str]]:
    script = Path(sys.executable).parent / "mcp-tasks"
    return {
        "builtin": [str(script), "serve", str(SERVED), "--http", "127.0.0.1:0", *extra],
        "uvicorn": [
            sys.executable, "-m", "uvicorn", "--app-dir", str(HERE), "served_threads:app",
            "--host", "127.0.0.1", "--port", "0",
        ],
    }  # fmt: skip


@dataclass
class Served:
    process: subprocess.Popen[str]
    port: int
    lines: list[str] = field(default_factory=list)

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def threads(self) -> int:
        """The server's OS threads (`Threads:` of /proc/PID/status)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
        raise AssertionError("no Threads: line")


@contextmanager
def serving(command: list[str]) -> Iterator[Served]:
    """`command` in a process of its own, until it says where it listens; SIGKILLed (with
    its sleeping threads) on the way out."""
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=HERE,
        env=environment, start_new_session=True,
    ) as process:  # fmt: skip
        fresh: queue.Queue[str] = queue.Queue()
        lines: list[str] = []

        def drain() -> None:
            for line in process.stderr or ():
                lines.append(line)
                fresh.put(line)

        drainer = threading.Thread(target=drain, daemon=True)
        drainer.start()
        try:
            deadline = time.monotonic() + START_SECONDS
            while not (found := _LISTENING.search("".join(lines))):
                try:
                    fresh.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise AssertionError(f"the server did not start: {''.join(lines)}") from None
            yield Served(process, int(found.group(1)), lines)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            drainer.join(10)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def call(
    port: int, tool: str, arguments: dict[str, Any], *, hang_up_after: float
) -> Answer | None:
    """POST a `tools/call` of `tool`; its answer, or None if none came within
    `hang_up_after` seconds (then the connection is closed: the client hung up)."""
    params = {
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    connection = h11.Connection(h11.CLIENT)
    headers = [
        ("host", f"127.0.0.1:{port}"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("content-length", str(len(body))),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ]
    out = connection.send(h11.Request(method="POST", target="/mcp", headers=headers)) or b""
    out += connection.send(h11.Data(data=body.encode())) or b""
    out += connection.send(h11.EndOfMessage()) or b""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(out)
        with trio.move_on_after(hang_up_after):
            status, got, data = 0, {}, b""
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    connection.receive_data(await stream.receive_some(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    got = {k.decode().lower(): v.decode() for k, v in event.headers}
                elif isinstance(event, h11.Data):
                    data += bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    return Answer(status, got, data)
    return None


async def cut_off(served: Served, tool: str, count: int) -> tuple[list[Answer], int]:
    """`count` calls of `tool` at once, each hung up after `HANG_UP_SECONDS` unless answered
    first: the answers (refusals), and the most threads the server had meanwhile."""
    answers: list[Answer] = []
    peak = served.threads()
    async with trio.open_nursery() as nursery:

        async def one() -> None:
            answer = await call(served.port, tool, {"seconds": 30}, hang_up_after=HANG_UP_SECONDS)
            if answer is not None:
                answers.append(answer)

        for _ in range(count):
            nursery.start_soon(one)
        while len(nursery.child_tasks) > 0:
            peak = max(peak, served.threads())
            await trio.sleep(0.05)
    return answers, max(peak, served.threads())


def assert_refused_retryable(answer: Answer) -> None:
    assert answer.status == 503, answer
    assert answer.headers["retry-after"] == "1"
    error = answer.json()["error"]
    assert error["code"] == -32603
    assert error["data"] == {"retryAfterMs": 1000}
    assert "No worker thread is free for tool 'block'" in error["message"]


@pytest.mark.parametrize("kind", ["builtin", "uvicorn"])
async def test_hung_up_calls_leave_at_most_the_bound_in_threads(kind: str) -> None:
    """48 calls of a blocking tool cut off by their clients (more than the 32 threads of the
    default bound, and than the 40 of anyio's default limiter): the server holds at most 32
    threads for them, and a fresh call of a quick plain function is answered, refused as
    retryable (was: unbounded threads under asyncio; under trio, no answer until a blocked
    function returned)."""
    with serving(commands()[kind]) as served:
        before = served.threads()
        answers, peak = await cut_off(served, "block", 48)
        assert peak - before <= DEFAULT_BOUND, (before, peak)
        for answer in answers:
            assert_refused_retryable(answer)
        fresh = await call(served.port, "block", {"seconds": 0.01}, hang_up_after=ANSWER_SECONDS)
        assert fresh is not None, "a fresh call waited for a thread"
        assert_refused_retryable(fresh)
        assert served.threads() - before <= DEFAULT_BOUND
        with trio.fail_after(ANSWER_SECONDS):
            while "refused (503, retryable)" not in served.log:
                await trio.sleep(0.05)
        assert "its call was cancelled while the function ran" in served.log


@pytest.mark.parametrize("kind", ["builtin", "uvicorn"])
async def test_a_function_that_checks_ctx_cancelled_ends_with_its_call(kind: str) -> None:
    with serving(commands()[kind]) as served:
        for _ in range(3):
            answer = await call(
                served.port, "patient", {"seconds": 30}, hang_up_after=HANG_UP_SECONDS
            )
            assert answer is None, answer  # it ran until its client hung up
        with trio.fail_after(ANSWER_SECONDS):
            while True:
                count = await call(served.port, "stopped", {}, hang_up_after=ANSWER_SECONDS)
                assert count is not None
                if count.json()["result"]["content"][0]["text"] == "3":
                    break
                await trio.sleep(0.05)


async def test_serve_takes_max_tool_threads() -> None:
    """`mcp-tasks serve --max-tool-threads 4`: twelve cut-off calls hold four threads."""
    with serving(commands(("--max-tool-threads", "4"))["builtin"]) as served:
        before = served.threads()
        answers, peak = await cut_off(served, "block", 12)
        assert peak - before <= 4, (before, peak)
        for answer in answers:
            assert_refused_retryable(answer)


async def test_the_client_retries_a_call_refused_for_want_of_a_thread() -> None:
    """`Client` honours the refusal: it waits `data.retryAfterMs` and calls again, and the
    call is served once the cut-off call's function has returned."""
    with serving(commands(("--max-tool-threads", "1"))["builtin"]) as served:
        cut = await call(served.port, "block", {"seconds": 3}, hang_up_after=HANG_UP_SECONDS)
        assert cut is None  # it holds the one thread for two seconds more
        waits: list[tuple[str, int | None]] = []

        def retrying(method: str, seconds: float, error: RpcError) -> None:
            waits.append((method, error.retry_after_ms))

        url = f"http://127.0.0.1:{served.port}/mcp"
        with trio.fail_after(ANSWER_SECONDS):
            async with connect_http(url, on_retry=retrying) as client:
                result = await client.call_tool("block", {"seconds": 0.01})
        assert result.content[0].text == "slept 0.01 s"
        assert waits and waits[0] == ("tools/call", 1000)
