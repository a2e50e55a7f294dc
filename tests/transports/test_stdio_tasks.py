"""The stdio session's request tasks (`request_nursery`): a trio nursery on trio, the loop's
own tasks on asyncio (anyio's task group costs a fifth of a tool call). On both loops the
block's end waits for every request, a cancelled session spares a shielded section, and a
request that fails cancels the others and is raised in an exception group."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import pytest
from on_asyncio import on_each_loop

from mcp_tasks.transports._stdio_tasks import request_nursery


async def run(work: Callable[[bytes], Awaitable[None]], line: bytes) -> None:
    await work(line)


def test_leaving_the_block_waits_for_every_request() -> None:
    async def main() -> None:
        released = anyio.Event()
        done: list[bytes] = []

        async def work(line: bytes) -> None:
            if line == b"waits":
                await released.wait()
            else:
                await anyio.lowlevel.checkpoint()
                released.set()
            done.append(line)

        async with request_nursery() as tasks:
            tasks.start_soon(run, work, b"waits")
            tasks.start_soon(run, work, b"releases")
        assert done == [b"releases", b"waits"]

    on_each_loop(main)


def test_a_cancelled_session_cancels_its_requests_but_not_their_shielded_sections() -> None:
    async def main() -> None:
        entered, go_on = anyio.Event(), anyio.Event()
        seen: list[str] = []

        async def work(line: bytes) -> None:
            if line == b"shielded":
                with anyio.CancelScope(shield=True):
                    entered.set()
                    await go_on.wait()
                    seen.append("shielded section done")
                await anyio.lowlevel.checkpoint()
                seen.append("went on after the shield")
            else:
                try:
                    await anyio.sleep_forever()
                finally:
                    seen.append("cancelled")

        with anyio.CancelScope() as session:
            async with request_nursery() as tasks:
                tasks.start_soon(run, work, b"shielded")
                tasks.start_soon(run, work, b"waits forever")
                await entered.wait()
                session.cancel()
                go_on.set()
                await anyio.sleep_forever()
        assert session.cancelled_caught
        assert sorted(seen) == ["cancelled", "shielded section done"]

    on_each_loop(main)


def test_a_failing_request_cancels_the_others_and_is_raised() -> None:
    async def main() -> None:
        cancelled: list[bytes] = []

        async def work(line: bytes) -> None:
            if line == b"fails":
                await anyio.lowlevel.checkpoint()
                raise ValueError("a bug behind the session")
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.append(line)

        with pytest.raises(BaseExceptionGroup) as caught:
            async with request_nursery() as tasks:
                tasks.start_soon(run, work, b"waits forever")
                tasks.start_soon(run, work, b"fails")
        assert caught.group_contains(ValueError, match="a bug behind the session")
        assert cancelled == [b"waits forever"]

    on_each_loop(main)
