"""A stop signal that comes once `serve` has stopped its server (the second of a double
Ctrl-C, come late) is ignored by the `mcp-tasks` process, which then exits 0; a host that
serves in its own process keeps its own handlers."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from mcp_tasks import Server
from mcp_tasks.cli import _serving
from mcp_tasks.cli._serving import LOOPS, STOP_SIGNALS, run_on_loop


@pytest.fixture
def handlers_kept() -> Iterator[None]:
    """The test process's handlers and the module's setting, as they were, afterwards."""
    before = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    ignored = _serving._LateStopSignals.ignored
    yield
    _serving._LateStopSignals.ignored = ignored
    for number, handler in before.items():
        signal.signal(number, handler)


async def _served_until_it_ends(server: Server) -> None:
    async def serve(server: Server) -> None:
        pass  # a transport that ended by itself (stdin reached its end)

    await _serving._serve_until_stopped(server, serve)


@pytest.mark.usefixtures("handlers_kept")
@pytest.mark.parametrize("loop", LOOPS)
def test_the_command_ignores_a_stop_signal_once_its_server_stopped(loop: str) -> None:
    _serving.ignore_late_stop_signals()
    run_on_loop(loop, _served_until_it_ends, Server("late", "1.0"))
    assert [signal.getsignal(number) for number in STOP_SIGNALS] == [signal.SIG_IGN] * 2
    signal.raise_signal(signal.SIGINT)  # ignored: no KeyboardInterrupt, no exit


@pytest.mark.usefixtures("handlers_kept")
@pytest.mark.parametrize("loop", LOOPS)
def test_a_host_that_serves_in_its_own_process_keeps_its_handlers(loop: str) -> None:
    _serving._LateStopSignals.ignored = False
    run_on_loop(loop, _served_until_it_ends, Server("host", "1.0"))
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN
