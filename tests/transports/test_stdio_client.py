"""`open_stdio_transport` against real processes: `mcp-tasks serve examples/jobs.py --stdio`
(as `python -m mcp_tasks.cli`), and two small Python scripts that misbehave.

Waits are on events and replies under `fail_after`; nothing sleeps and hopes."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcp_tasks import TASKS_EXTENSION
from mcp_tasks.transports._client_base import TransportError
from mcp_tasks.transports._stdio_client import StdioClientTransport, open_stdio_transport

ROOT = Path(__file__).parent.parent.parent
SERVE = [sys.executable, "-m", "mcp_tasks.cli", "serve", "examples/jobs.py", "--stdio"]
VERSION = "2026-07-28"
TASKS_CAPS = {"extensions": {TASKS_EXTENSION: {}}}
NO_CAPS: dict[str, Any] = {}
NO_HEADERS: dict[str, str] = {}


def call(
    tool: str, arguments: dict[str, Any], request_id: str | int, *, caps: Any = None, **meta: Any
) -> bytes:
    full_meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": TASKS_CAPS if caps is None else caps,
        **meta,
    }
    params = {"name": tool, "arguments": arguments, "_meta": full_meta}
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    ).encode()


async def greet(transport: StdioClientTransport, name: str, request_id: str | int) -> str:
    message = call("greet", {"name": name}, request_id)
    response = await transport.request(message, request_id=request_id, headers=NO_HEADERS)
    assert response["id"] == request_id
    text: str = response["result"]["content"][0]["text"]
    return text


async def test_a_request_gets_its_response_and_closing_lets_the_server_exit_0() -> None:
    async with open_stdio_transport(SERVE, cwd=ROOT, stderr="capture") as transport:
        with trio.fail_after(20):
            assert await greet(transport, "Ada", 1) == "Hello, Ada!"
    assert transport.returncode == 0
    assert "serving jobs 0.1.0 on stdio" in transport.stderr_tail
    with pytest.raises(TransportError, match="exited with code 0"):
        await greet(transport, "late", 2)


async def test_progress_reaches_the_callback_before_the_response() -> None:
    seen: list[dict[str, Any]] = []

    async def on_notification(note: dict[str, Any]) -> None:
        seen.append(note)

    message = call("slow_compute", {"seconds": 0.2}, "p", caps=NO_CAPS, progressToken="tok")
    async with open_stdio_transport(SERVE, cwd=ROOT) as transport:
        with trio.fail_after(20):
            response = await transport.request(
                message, request_id="p", headers=NO_HEADERS, on_notification=on_notification
            )
            seen.append(response)
    *notes, last = seen
    assert last["result"]["content"][0]["text"] == "job done after 0.2s"
    assert [n["params"]["progress"] for n in notes] == [0, 1]
    assert {n["params"]["progressToken"] for n in notes} == {"tok"}


async def test_concurrent_requests_are_matched_by_id_and_notifications_by_token() -> None:
    results: dict[str | int, dict[str, Any]] = {}
    notes: dict[str | int, list[Any]] = {"slow": [], 1: []}
    done_order: list[str | int] = []

    async def run(message: bytes, request_id: str | int) -> None:
        async def on_notification(note: dict[str, Any]) -> None:
            notes[request_id].append(note["params"]["progressToken"])

        handler = on_notification if request_id in notes else None
        response = await transport.request(
            message, request_id=request_id, headers=NO_HEADERS, on_notification=handler
        )
        results[request_id] = response
        done_order.append(request_id)

    slow = call("slow_compute", {"seconds": 0.3}, "slow", caps=NO_CAPS, progressToken="s")
    quick = call("slow_compute", {"seconds": 0.1}, 1, caps=NO_CAPS, progressToken=1)
    async with open_stdio_transport(SERVE, cwd=ROOT) as transport:
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, slow, "slow")
                nursery.start_soon(run, quick, 1)
                for name in ("a", "b", "c"):  # "1" is not 1
                    nursery.start_soon(run, call("greet", {"name": name}, "1" + name), "1" + name)
    assert done_order[-1] == "slow"
    assert results["slow"]["result"]["content"][0]["text"] == "job done after 0.3s"
    assert results[1]["result"]["content"][0]["text"] == "job done after 0.1s"
    for name in ("a", "b", "c"):
        assert results["1" + name]["result"]["content"][0]["text"] == f"Hello, {name}!"
    assert set(notes["slow"]) == {"s"} and len(notes["slow"]) == 3
    assert notes[1] == [1]


async def test_cancelling_a_request_stops_the_call_on_the_server() -> None:
    running = trio.Event()

    async def on_notification(note: dict[str, Any]) -> None:
        running.set()

    # the tasks extension is not declared: the call runs in place, on this request
    message = call("slow_compute", {"seconds": 60}, "c", caps=NO_CAPS, progressToken="c")
    async with open_stdio_transport(SERVE, cwd=ROOT, close_timeout_seconds=10) as transport:
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                send = transport.request
                nursery.start_soon(
                    lambda: send(
                        message, request_id="c", headers=NO_HEADERS, on_notification=on_notification
                    )
                )
                await running.wait()
                nursery.cancel_scope.cancel()
            assert await greet(transport, "after", 2) == "Hello, after!"
        closing_at = trio.current_time()
    # the server exits at EOF once its requests are done: at once, so the 60 s call stopped
    assert transport.returncode == 0
    assert trio.current_time() - closing_at < 5


async def test_a_server_killed_mid_request_fails_it_at_once_with_its_exit_code() -> None:
    running = trio.Event()

    async def on_notification(note: dict[str, Any]) -> None:
        running.set()

    message = call("slow_compute", {"seconds": 60}, 1, caps=NO_CAPS, progressToken=1)
    async with open_stdio_transport(SERVE, cwd=ROOT, stderr="capture") as transport:
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                failure: list[TransportError] = []

                async def waiting() -> None:
                    try:
                        await transport.request(
                            message,
                            request_id=1,
                            headers=NO_HEADERS,
                            on_notification=on_notification,
                        )
                    except TransportError as error:
                        failure.append(error)

                nursery.start_soon(waiting)
                await running.wait()
                os.kill(transport.pid, signal.SIGKILL)
        text = str(failure[0])
        assert f"server process exited with code {-signal.SIGKILL}" in text
        assert "serving jobs 0.1.0 on stdio" in text  # the last lines of its stderr
        with pytest.raises(TransportError, match="exited with code"):
            await transport.notify(b'{"jsonrpc": "2.0", "method": "x"}', headers=NO_HEADERS)
    assert transport.returncode == -signal.SIGKILL


SCRIPT_PRINTS = "import sys; print('hello from a banner', flush=True); sys.stdin.read()"
SCRIPT_REQUESTS = (
    "import sys; sys.stdin.readline(); "
    'print(\'{"jsonrpc": "2.0", "id": 1, "method": "roots/list"}\', flush=True); '
    "sys.stdin.read()"
)


@pytest.mark.parametrize(
    ("script", "words"),
    [
        (SCRIPT_PRINTS, "not JSON on stdout: 'hello from a banner'"),
        (SCRIPT_REQUESTS, "sent a request ('roots/list')"),
        ("import sys; sys.exit(3)", "server process exited with code 3"),
    ],
    ids=["prints", "sends a request", "exits"],
)
async def test_a_misbehaving_server_fails_the_session(script: str, words: str) -> None:
    async with open_stdio_transport([sys.executable, "-c", script]) as transport:
        with trio.fail_after(20), pytest.raises(TransportError) as caught:
            await greet(transport, "x", 1)
        assert words in str(caught.value)
        with pytest.raises(TransportError):  # and every later call
            await greet(transport, "x", 2)
    assert transport.returncode is not None


async def test_a_line_over_the_cap_fails_the_session() -> None:
    async with open_stdio_transport(SERVE, cwd=ROOT, max_line_bytes=50) as transport:
        with trio.fail_after(20), pytest.raises(TransportError, match="longer than 50 bytes"):
            await greet(transport, "a name long enough to pass the cap", 1)
    assert transport.returncode == 0


async def test_a_command_that_cannot_start_is_a_transport_error() -> None:
    with pytest.raises(TransportError, match="cannot start the server"):
        async with open_stdio_transport([str(ROOT / "no-such-server")]):
            pass


async def test_an_error_in_the_block_leaves_it_as_itself_and_the_server_is_closed() -> None:
    with pytest.raises(KeyError, match="mine"):
        async with open_stdio_transport(SERVE, cwd=ROOT) as transport:
            with trio.fail_after(20):
                assert await greet(transport, "x", 1) == "Hello, x!"
            raise KeyError("mine")
    assert transport.returncode == 0


async def test_an_error_without_id_goes_to_the_one_request_in_flight() -> None:
    async with open_stdio_transport(SERVE, cwd=ROOT) as transport:
        with trio.fail_after(20):
            response = await transport.request(b"{not json", request_id=1, headers=NO_HEADERS)
            assert response["error"]["code"] == -32700 and "id" not in response
            assert await greet(transport, "still there", 2) == "Hello, still there!"
