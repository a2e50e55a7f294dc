"""Tests of a server: its tools called in process (`connect_in_process`), and journals
replayed as regression tests (`replay_journals`).

```python
# tests/test_journals.py
from mcp_tasks.testing import replay_journals

test_journals = replay_journals("tests/journals")  # one test per journal in the folder
```

Each journal (`*.jsonl`, and rotated `*.jsonl.N`) becomes one test, named after its file,
that fails with the report of `ReplayFailed`: the line, the message, the diff of the
recorded and replayed answers and the task's life up to there.

`connect_in_process(server)` gives a `Client` whose requests go straight to the server's
`handle` in this process: no socket, no subprocess, on asyncio or trio, the `Mcp-Param-*`
headers checked as over HTTP, and tasks polled every few milliseconds (`TEST_POLL`).
`client_fixture(server)` makes a pytest fixture of it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .core import HttpHeaders
from .core._client import PollPolicy
from .replay import ReplayFailed, ReplayResult, replay

if TYPE_CHECKING:
    from .client import Client
    from .runtime import Server

__all__ = [
    "TEST_POLL",
    "InProcessTransport",
    "ReplayFailed",
    "ReplayResult",
    "client_fixture",
    "connect_in_process",
    "journals_in",
    "replay",
    "replay_journals",
]

TEST_POLL: Final = PollPolicy(default_interval_ms=5, min_interval_ms=1, max_interval_ms=10)
"""How often an in-process client polls a task: every 10 ms at most, whatever the server
advises, so a test of a task takes milliseconds."""
_PARAM: Final = "mcp-param-"

JOURNAL_PATTERNS = ("*.jsonl", "*.jsonl.*")


def journals_in(folder: str | os.PathLike[str]) -> list[Path]:
    """The journals in `folder` (and below), sorted."""
    root = Path(folder)
    found = {path for pattern in JOURNAL_PATTERNS for path in root.rglob(pattern)}
    return sorted(path for path in found if path.is_file())


def replay_journals(folder: str | os.PathLike[str]) -> Callable[..., None]:
    """A pytest test that replays each journal in `folder` as a test of its own. Assign it
    to a `test_*` name in a test module. A folder with no journal is a failure, not a
    silent pass (a misplaced folder would otherwise test nothing)."""
    import pytest  # noqa: PLC0415 - only where tests run, never a dependency

    root = Path(folder)
    journals = journals_in(root)
    names = [str(path.relative_to(root)) for path in journals]

    @pytest.mark.parametrize("journal", journals or [None], ids=names or ["no-journals"])
    def test_journal(journal: Path | None) -> None:
        if journal is None:
            pytest.fail(f"no journal (*.jsonl) in {root}")
        try:
            replay(journal)
        except ReplayFailed as failed:
            pytest.fail(failed.report, pytrace=False)

    return test_journal


class InProcessTransport:
    """A client transport that hands each request to `server.handle` in this process, with
    the HTTP headers the client built (so the server checks `Mcp-Param-*` as on HTTP).
    Cancelling the caller cancels the request: it runs in the caller's task."""

    sends_headers = True

    def __init__(self, server: Server, *, principal: str | None = None) -> None:
        from .server import Connection  # noqa: PLC0415 - the runtime, once a test uses it

        self.server = server
        self.principal = principal
        """Who the server sees calling (the principal an authenticator would name)."""
        self._connection = Connection()

    async def request(
        self,
        message: bytes,
        *,
        request_id: str | int,
        headers: Mapping[str, str],
        on_notification: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        async def notify(body: bytes) -> None:
            if on_notification is not None:
                await on_notification(msgspec.json.decode(body))

        reply = await self.server.handle(
            message,
            headers=_http_headers(headers),
            notify=notify,
            connection=self._connection,
            principal=self.principal,
        )
        if reply is None:
            raise RuntimeError(f"the server sent no reply to request {request_id!r}")
        answer: dict[str, Any] = msgspec.json.decode(reply.body)
        return answer

    async def notify(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        await self.server.handle(
            message,
            headers=_http_headers(headers),
            connection=self._connection,
            principal=self.principal,
        )

    async def aclose(self) -> None:
        self.server.end_subscriptions(self._connection)


def _http_headers(headers: Mapping[str, str]) -> HttpHeaders:
    lowered = {name.lower(): value for name, value in headers.items()}
    params = {
        name[len(_PARAM) :]: value for name, value in lowered.items() if name.startswith(_PARAM)
    }
    return HttpHeaders(
        protocol_version=lowered.get("mcp-protocol-version"),
        method=lowered.get("mcp-method"),
        name=lowered.get("mcp-name"),
        params=params or None,
    )


@asynccontextmanager
async def connect_in_process(
    server: Server, *, poll: PollPolicy = TEST_POLL, principal: str | None = None, **options: Any
) -> AsyncIterator[Client]:
    """A `Client` of `server` in this process (`options` as `Client` takes them), the
    server run for the block (`server.running()`) unless it runs already."""
    from .client import Client  # noqa: PLC0415 - the client, once a test uses it

    transport = InProcessTransport(server, principal=principal)
    try:
        if server.is_running:
            yield Client(transport, poll=poll, **options)
        else:
            async with server.running():
                yield Client(transport, poll=poll, **options)
    finally:
        await transport.aclose()


def client_fixture(server: Server | Callable[[], Server], **options: Any) -> Any:
    """A pytest fixture of a `Client` connected in process to `server` (or to the server
    a function makes, a fresh one for each test), `options` as `connect_in_process` takes
    them. Assign it to the fixture's name in a `conftest.py`: `client =
    client_fixture(server)`. The fixture is async: run the tests with anyio's pytest plugin
    (`pytest.mark.anyio`) or pytest-trio."""
    import pytest  # noqa: PLC0415 - only where tests run, never a dependency

    from .runtime import Server  # noqa: PLC0415

    @pytest.fixture
    async def in_process_client() -> AsyncIterator[Client]:
        served = server if isinstance(server, Server) else server()
        async with connect_in_process(served, **options) as client:
            yield client

    return in_process_client
