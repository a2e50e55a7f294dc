"""The served apps the ASGI tests compare: the built-in server, and each ASGI server
(one process of each per test module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .processes import ASGI_KINDS, Served, serving


@pytest.fixture(scope="module")
def built_in() -> Iterator[Served]:
    with serving("builtin") as served:
        yield served


@pytest.fixture(scope="module", params=ASGI_KINDS)
def asgi(request: pytest.FixtureRequest) -> Iterator[Served]:
    with serving(request.param) as served:
        yield served
