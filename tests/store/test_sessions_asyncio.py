"""The sessions contract under asyncio: every test of test_sessions.py that takes
`sessions`, its body unchanged, run again by `asyncio.run` on every store (made inside the
loop, closed after)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from mcp_tasks.store import SessionRecords, sessions_of

from . import test_sessions as contract
from .test_contract_asyncio import DEADLINE_SECONDS, _make

TESTS = [
    test
    for name, test in vars(contract).items()
    if name.startswith("test_")
    and inspect.iscoroutinefunction(test)
    and "sessions" in inspect.signature(test).parameters
]


@pytest.mark.parametrize("kind", contract.KINDS)
@pytest.mark.parametrize("test", TESTS, ids=[test.__name__ for test in TESTS])
def test_the_sessions_contract_holds_under_asyncio(
    test: Callable[[SessionRecords], Awaitable[None]],
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    if kind == "redis":
        request.getfixturevalue("redis_url")  # started outside any event loop

    async def main() -> None:
        assert asyncio.current_task() is not None  # really on asyncio, not trio
        with anyio.fail_after(DEADLINE_SECONDS):
            store = _make(kind, tmp_path, request)
            try:
                await test(sessions_of(store))
            finally:
                await store.aclose()

    asyncio.run(main())


def test_the_whole_contract_is_run_under_asyncio() -> None:
    assert len(TESTS) >= 12
