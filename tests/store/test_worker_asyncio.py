"""The stores' worker under asyncio: calls queued while a hop is out share the next one, in
order, and a caller cancelled while its call runs still waits for it (as under trio, in
test_worker.py). Its hops are made by a task of its own, not by any caller."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
from on_asyncio import run_asyncio, wait_until

from mcp_tasks.store._worker import BatchingWorker


def test_calls_queued_meanwhile_share_one_hop_in_order() -> None:
    async def main() -> None:
        worker = BatchingWorker()
        started = threading.Event()
        release = threading.Event()
        ran: list[tuple[int, int]] = []  # (call, thread)

        def first() -> int:
            started.set()
            release.wait(10)
            return 0

        async def call(n: int) -> None:
            def work() -> int:
                ran.append((n, threading.get_ident()))
                return n

            assert await worker.run(work) == n

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(worker.run, first)
            await wait_until(started.is_set)  # the first hop is out, blocked
            for n in range(1, 6):
                tasks.start_soon(call, n)
            await wait_until(lambda: len(worker._queue) == 5)
            release.set()
        assert [n for n, _ in ran] == [1, 2, 3, 4, 5]
        assert len({thread for _, thread in ran}) == 1  # one hop ran all five

    run_asyncio(main)


def test_a_cancelled_caller_still_waits_for_its_call() -> None:
    async def main() -> None:
        worker = BatchingWorker()
        started = threading.Event()
        release = threading.Event()
        got: list[str] = []

        def slow() -> str:
            started.set()
            release.wait(10)
            return "written"

        async with anyio.create_task_group() as tasks:
            scope = anyio.CancelScope()

            async def caller() -> None:
                with scope:
                    got.append(await worker.run(slow))

            tasks.start_soon(caller)
            await wait_until(started.is_set)
            scope.cancel()
            for _ in range(10):
                await anyio.lowlevel.checkpoint()
            assert got == []  # still waiting on its call, cancelled or not
            release.set()
        assert got == ["written"]  # it learned what the store did

    run_asyncio(main)
