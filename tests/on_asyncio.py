"""Running a test body under `asyncio.run` (pytest runs async tests under trio): bounded by
a deadline, so a test fails instead of hanging."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import anyio

DEADLINE_SECONDS = 30.0


def run_asyncio(main: Callable[[], Awaitable[None]]) -> None:
    """`main()` under `asyncio.run`, failing (not hanging) past `DEADLINE_SECONDS`."""

    async def bounded() -> None:
        assert asyncio.current_task() is not None  # really on asyncio, not trio
        with anyio.fail_after(DEADLINE_SECONDS):
            await main()

    asyncio.run(bounded())


async def wait_until(check: Callable[[], bool]) -> None:
    """Until `check()` holds (what another task does); bounded by `run_asyncio`'s deadline."""
    while not check():
        await anyio.sleep(0.01)
