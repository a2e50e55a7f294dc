"""The store contract under asyncio: every test of test_contract.py, its body unchanged, run
again by `asyncio.run` on every store (made inside the loop, closed after), so memory,
SQLite and Redis (their worker thread, their signals) keep the contract on either loop.
"""

from __future__ import annotations

import asyncio
import inspect
import secrets
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.store import MemoryTaskStore, RedisTaskStore, SQLiteTaskStore, TaskStore

from . import test_contract as contract

DEADLINE_SECONDS = 30.0
FIXTURES = {"redis_url", "tmp_path", "request"}
"""Fixtures a contract test may take besides `store`: handed on as pytest made them."""


def _cases() -> Iterator[Any]:
    for name, test in vars(contract).items():
        if not name.startswith("test_") or not inspect.iscoroutinefunction(test):
            continue
        wanted = list(inspect.signature(test).parameters)
        variants: list[dict[str, Any]] = [{}]
        for mark in getattr(test, "pytestmark", []):
            if mark.name == "parametrize":
                argument, values = mark.args
                variants = [{**v, argument: value} for v in variants for value in values]
        named = {argument for variant in variants for argument in variant}
        assert set(wanted) <= {"store", *FIXTURES, *named}, f"{name} takes {wanted}"
        kinds = contract.KINDS if "store" in wanted else [None]
        for kind in kinds:
            for variant in variants:
                label = "-".join([name, *([kind] if kind else []), *map(str, variant.values())])
                yield pytest.param(test, kind, variant, id=label)


CASES = list(_cases())


def _make(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> TaskStore:
    if kind == "memory":
        return MemoryTaskStore()
    if kind == "sqlite":
        return SQLiteTaskStore(tmp_path / "tasks.db")
    if kind == "sqlite-shared":
        return SQLiteTaskStore(tmp_path / "tasks.db", shared=True)
    url = request.getfixturevalue("redis_url")
    return RedisTaskStore(url, prefix="aio" + secrets.token_hex(6))


@pytest.mark.parametrize(("test", "kind", "variant"), CASES)
def test_the_contract_holds_under_asyncio(
    test: Callable[..., Awaitable[None]],
    kind: str | None,
    variant: dict[str, Any],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    wanted = inspect.signature(test).parameters
    arguments: dict[str, Any] = {"request": request} if "request" in wanted else {}
    for name in FIXTURES - {"request"}:
        if name in wanted:
            arguments[name] = request.getfixturevalue(name)
    arguments.update(variant)
    if "redis" in (kind, variant.get("kind")):
        request.getfixturevalue("redis_url")  # started outside any event loop

    async def main() -> None:
        assert asyncio.current_task() is not None  # really on asyncio, not trio
        with anyio.fail_after(DEADLINE_SECONDS):
            if kind is None:
                await test(**arguments)
                return
            store = _make(kind, tmp_path, request)
            try:
                await test(store, **arguments)
            finally:
                await store.aclose()

    asyncio.run(main())


def test_every_contract_test_is_run_under_asyncio() -> None:
    tests = [name for name in vars(contract) if name.startswith("test_")]
    covered = {case.values[0].__name__ for case in CASES}
    coroutines = {n for n in tests if inspect.iscoroutinefunction(getattr(contract, n))}
    assert covered == coroutines and len(covered) > 20
