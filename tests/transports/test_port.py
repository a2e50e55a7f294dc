"""The port (`mcp_tasks.transports._port`): what transports and the ASGI app need of a
server, and `Server` providing it. mypy proves the types (`runtime/_server.py`); these check
the members at run time and what `start_soon` promises, on trio and on asyncio.
"""

from __future__ import annotations

from typing import Generic, Protocol

import anyio
import pytest
from on_asyncio import run_asyncio

import mcp_tasks.runtime
import mcp_tasks.server
from mcp_tasks import Server
from mcp_tasks.transports import Connection, HostedHandler, MessageHandler, Notify

WAIT = 5


def members(protocol: type) -> set[str]:
    """The public names a protocol declares, its bases' included."""
    own = (cls for cls in protocol.__mro__ if cls not in (Protocol, Generic, object))
    return {name for cls in own for name in vars(cls) if not name.startswith("_")}


def test_the_port_declares_what_transports_use() -> None:
    assert members(MessageHandler) == {"handle", "end_subscriptions", "readiness", "telemetry"}
    assert members(HostedHandler) - members(MessageHandler) == {
        "running",
        "is_running",
        "start_soon",
    }


def test_a_server_has_every_member_of_the_port() -> None:
    server = Server("port", "1.0")
    missing = sorted(name for name in members(HostedHandler) if not hasattr(server, name))
    assert missing == []


def test_the_old_import_paths_still_work() -> None:
    assert mcp_tasks.runtime.MessageHandler is MessageHandler
    assert mcp_tasks.server.MessageHandler is MessageHandler
    assert mcp_tasks.runtime.Connection is mcp_tasks.server.Connection is Connection
    assert mcp_tasks.runtime.Notify is mcp_tasks.server.Notify is Notify
    assert mcp_tasks.Connection is Connection


async def start_soon_runs_with_the_server() -> None:
    """Work started with `start_soon` runs inside `running()` and is cancelled on leaving it."""
    server = Server("port", "1.0", shutdown_grace_seconds=0.1)
    started, ended = anyio.Event(), anyio.Event()

    async def work() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            ended.set()

    with pytest.raises(RuntimeError, match="running"):
        server.start_soon(work)
    with anyio.fail_after(WAIT):
        async with server.running():
            server.start_soon(work)
            await started.wait()
            assert not ended.is_set()
        assert ended.is_set()
    with pytest.raises(RuntimeError, match="running"):
        server.start_soon(work)


async def test_start_soon_runs_with_the_server_on_trio() -> None:
    await start_soon_runs_with_the_server()


def test_start_soon_runs_with_the_server_on_asyncio() -> None:
    run_asyncio(start_soon_runs_with_the_server)
