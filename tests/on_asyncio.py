"""Running a test body under `asyncio.run` (pytest runs async tests under trio): bounded by
a deadline, so a test fails instead of hanging; and serving an ASGI app with uvicorn there."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import trio

DEADLINE_SECONDS = 30.0


def run_asyncio(main: Callable[[], Awaitable[None]]) -> None:
    """`main()` under `asyncio.run`, failing (not hanging) past `DEADLINE_SECONDS`."""

    async def bounded() -> None:
        assert asyncio.current_task() is not None  # really on asyncio, not trio
        with anyio.fail_after(DEADLINE_SECONDS):
            await main()

    asyncio.run(bounded())


def on_each_loop(main: Callable[[], Awaitable[None]]) -> None:
    """`main()` on asyncio (`run_asyncio`), then on trio, each bounded by the deadline."""
    run_asyncio(main)

    async def bounded() -> None:
        with trio.fail_after(DEADLINE_SECONDS):
            await main()

    trio.run(bounded)


async def wait_until(check: Callable[[], bool]) -> None:
    """Until `check()` holds (what another task does); bounded by `run_asyncio`'s deadline."""
    while not check():
        await anyio.sleep(0.01)


@asynccontextmanager
async def serving_asgi(app: Any) -> AsyncIterator[int]:
    """`app` under uvicorn (lifespan on) on a free 127.0.0.1 port, in this asyncio loop:
    the port. Shut down (the app's lifespan ends) on the way out."""
    import uvicorn  # noqa: PLC0415  (the tests that serve ASGI apps need it, no others)

    # IPPROTO_TCP named, or asyncio leaves Nagle on (a ~40 ms stall per kept-alive answer).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [listener])
        await wait_until(lambda: server.started or server.should_exit)
        assert server.started, "uvicorn did not start"
        try:
            yield listener.getsockname()[1]
        finally:
            server.should_exit = True
