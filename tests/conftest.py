from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import skip_guard
from core.harness import Harness
from redis_server import running_redis
from schema_check import check_reply


def pytest_configure(config: pytest.Config) -> None:
    # In CI (`CI` set) a skip whose reason skip_guard.ALLOWED_SKIPS does not list fails the run.
    skip_guard.register(config)


@pytest.fixture
def make_harness() -> Iterator[type[Harness]]:
    """Build harnesses; every reply they produced is schema-checked when the test ends."""
    made: list[Harness] = []

    class Checked(Harness):
        def __post_init__(self) -> None:
            super().__post_init__()
            made.append(self)

    yield Checked
    for harness in made:
        for exchange in harness.exchanges:
            if exchange.reply is not None:
                check_reply(exchange.method, exchange.reply)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A redis-server of the test session's own (see tests/redis_server.py)."""
    with running_redis() as url:
        yield url


@pytest.fixture(autouse=True)
def forget_remembered_eras() -> Iterator[None]:
    """Each test's clients find their servers' eras themselves: a port a test reuses may
    serve another kind of server than the last test's (the process remembers per URL)."""
    from mcp_tasks.client import _era  # noqa: PLC0415

    _era._ERAS.clear()
    yield
    _era._ERAS.clear()
