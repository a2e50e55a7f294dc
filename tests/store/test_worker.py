"""The stores' worker: calls that queue while a thread hop is out go together in the next
one, in order, each with its own result or exception; a cancelled caller still waits."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from mcp_tasks.store._worker import BatchingWorker


async def test_calls_queued_meanwhile_share_one_hop_in_order() -> None:
    worker = BatchingWorker()
    release = threading.Event()
    ran: list[tuple[int, int]] = []  # (call, thread)
    results: dict[int, int] = {}

    def first() -> int:
        release.wait(10)
        ran.append((0, threading.get_ident()))
        return 0

    entered: list[int] = []

    async def call(n: int) -> None:
        def work() -> int:
            ran.append((n, threading.get_ident()))
            return n * 10

        entered.append(n)  # no checkpoint from here until the call is queued
        results[n] = await worker.run(work)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker.run, first)
        await trio.testing.wait_all_tasks_blocked()  # the first hop is out, blocked
        for n in range(1, 6):
            nursery.start_soon(call, n)
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert [n for n, _ in ran] == [0, *entered]  # in the order they were queued
    assert len({thread for n, thread in ran if n > 0}) == 1  # one hop ran all five
    assert results == {n: n * 10 for n in range(1, 6)}


async def test_each_caller_gets_its_own_exception() -> None:
    worker = BatchingWorker()

    def fails() -> int:
        raise KeyError("mine")

    async with trio.open_nursery() as nursery:
        outcomes: list[object] = []

        async def good() -> None:
            outcomes.append(await worker.run(lambda: "ok"))

        nursery.start_soon(good)
        with pytest.raises(KeyError, match="mine"):
            await worker.run(fails)
    assert outcomes == ["ok"]


async def test_a_cancelled_caller_still_waits_for_its_call() -> None:
    worker = BatchingWorker()
    release = threading.Event()
    got: list[str] = []

    def slow() -> str:
        release.wait(10)
        return "written"

    scope = trio.CancelScope()

    async def caller() -> None:
        with scope:
            got.append(await worker.run(slow))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller)
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert got == []  # still waiting on its call, cancelled or not
        release.set()
    assert got == ["written"]  # it learned what the store did
