"""The tasks a server runs handlers in (`backend.spawning`), on asyncio and on trio: a
failing task is logged and leaves the others running; leaving cancels and waits for the
ones still running, then raises what failed."""

from __future__ import annotations

import logging

import anyio
import pytest

from mcp_tasks._support.backend import event, spawning
from tests.on_asyncio import on_each_loop


def test_leaving_cancels_the_tasks_still_running_and_waits_for_them() -> None:
    async def main() -> None:
        started, ended = event(), []

        async def waits_forever(label: str) -> None:
            try:
                started.set()
                await anyio.sleep_forever()
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(0.01)  # still waited for, though cancelled
                ended.append(label)

        async def returns(label: str) -> None:
            ended.append(label)

        async with spawning() as spawner:
            spawner.spawn(returns, "quick", name="quick")
            spawner.spawn(waits_forever, "slow", name="slow")
            await started.wait()
        assert ended == ["quick", "slow"]

    on_each_loop(main)


def test_a_failing_task_is_logged_and_raised_on_leaving(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        caplog.clear()
        failed, later = event(), event()

        async def fails() -> None:
            failed.set()
            raise ValueError("the handler's bug")

        async def runs_after() -> None:
            later.set()

        with pytest.raises(ExceptionGroup) as raised:
            async with spawning() as spawner:
                spawner.spawn(fails, name="task tsk_1")
                await failed.wait()
                await anyio.sleep(0)  # its end is seen
                spawner.spawn(runs_after, name="task tsk_2")  # the spawner still starts tasks
                await later.wait()
                logged = [r for r in caplog.records if r.name == "mcp_tasks.server"]
                assert [r.getMessage() for r in logged] == ["task tsk_1 failed"]
                assert logged[0].levelno == logging.ERROR
        assert [str(e) for e in raised.value.exceptions] == ["the handler's bug"]

    with caplog.at_level(logging.ERROR, logger="mcp_tasks.server"):
        on_each_loop(main)


def test_a_cancelled_caller_still_waits_for_the_tasks() -> None:
    async def main() -> None:
        ended = []

        async def ends_slowly() -> None:
            try:
                await anyio.sleep_forever()
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(0.01)
                ended.append("ended")

        with anyio.CancelScope() as scope:
            async with spawning() as spawner:
                spawner.spawn(ends_slowly, name="slow")
                await anyio.sleep(0)
                scope.cancel()
                await anyio.sleep_forever()
        assert ended == ["ended"]

    on_each_loop(main)
