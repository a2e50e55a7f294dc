"""The stores' worker: calls that queue while a thread hop is out go together in the next
one, in order, each with its own result or exception; a cancelled caller still waits; piped
calls (a real redis-server) share one pipeline."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis
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


async def test_piped_calls_share_a_round_trip_and_keep_their_own_replies(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    key = "worker-test:" + secrets.token_hex(4)
    client.hset(key, "field", "value")
    pipelines: list[object] = []

    def pipeline() -> object:
        made = client.pipeline(transaction=False)
        pipelines.append(made)
        return made

    worker = BatchingWorker(pipeline)
    release = threading.Event()
    replies: dict[str, object] = {}

    async def piped(name: str, stage: Callable[[Any], None]) -> None:
        try:
            replies[name] = await worker.run_piped(stage, lambda reply: reply)
        except redis.ResponseError as error:
            replies[name] = f"error: {error}"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker.run, lambda: release.wait(10))  # holds the first hop
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(piped, "get", lambda p: p.hget(key, "field"))
        nursery.start_soon(piped, "wrong", lambda p: p.incr(key))  # a hash: WRONGTYPE
        nursery.start_soon(piped, "missing", lambda p: p.hget(key, "nothing"))
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert len(pipelines) == 1  # the three went in one pipeline
    assert replies["get"] == b"value" and replies["missing"] is None
    assert str(replies["wrong"]).startswith("error: WRONGTYPE")
    client.delete(key)
    client.close()
