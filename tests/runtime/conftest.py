"""Fixtures the runtime tests share."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_tasks.store import MemoryTaskStore, RedisTaskStore, SQLiteTaskStore, TaskStore


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    """Each store in turn: memory, a SQLite file, a prefix of its own on the real Redis."""
    made: TaskStore
    if request.param == "memory":
        made = MemoryTaskStore()
    elif request.param == "sqlite":
        made = SQLiteTaskStore(tmp_path / "tasks.db")
    else:
        url = request.getfixturevalue("redis_url")
        made = RedisTaskStore(url, prefix="rt" + secrets.token_hex(6))
    try:
        yield made
    finally:
        await made.aclose()
