"""Bodies declared and never sent (issue 27, point 1), over real loopback sockets: a
`Content-Length` holds nothing of the in-flight budget until its bytes come, so 64
connections that each declare 4 MiB and send 10 bytes lock nobody out; a body slower than
`min_body_bytes_per_second` (after `body_grace_seconds`) is cut with 408; bodies partly
received that fill the budget between them do not wait it out."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing
from test_http import JOBS, HttpClient, rpc, serving

from mcp_tasks.transports import HttpConfig
from mcp_tasks.transports._budget import ByteBudget

WAIT = 10
IDLE = 64
DECLARED = 4 * 1024 * 1024


def idle_head(content_length: int = DECLARED) -> bytes:
    """A POST that declares `content_length` bytes, and the first 10 of them."""
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json\r\nContent-Length: {content_length}\r\n\r\n"
    )
    return head.encode() + b'{"jsonrpc"'


async def test_idle_body_declarations_lock_nobody_out() -> None:
    config: dict[str, Any] = {"body_wait_seconds": 0.5}  # a refusal would come at once
    async with serving(JOBS.server, **config) as port:
        idle = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(IDLE)]
        for stream in idle:
            await stream.send_all(idle_head())
        await trio.testing.wait_all_tasks_blocked()  # the server has read every head
        client = await HttpClient.connect(port)
        with trio.fail_after(WAIT):
            statuses = [(await rpc(client, "tools/list")).status for _ in range(4)]
        assert statuses == [200] * 4  # before: 503 (17 declarations filled 64 MiB)
        await client.aclose()
        for stream in idle:
            await stream.aclose()


async def test_a_body_below_the_minimum_rate_is_cut_with_408(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_tasks.transports.http")
    config: dict[str, Any] = {
        "min_body_bytes_per_second": 1000,
        "body_grace_seconds": 0.2,
        "body_timeout_seconds": 60,
    }
    async with serving(JOBS.server, **config) as port:
        client = await HttpClient.connect(port)
        await client.send_raw(idle_head(1000))  # 10 bytes, then nothing
        with trio.fail_after(WAIT):  # well inside the 60 s body timeout
            response = await client.response()
            rest = await client.rest_until_closed()
        assert response.status == 408
        assert response.headers["connection"] == "close"
        assert "too slowly" in response.json()["error"]["message"]
        assert rest == b""  # and closed
    (line,) = [r for r in caplog.records if getattr(r, "reason", None) == "slow_body"]
    assert line.getMessage() == (
        "HTTP 408: refused a request with a body that came slower than min_body_bytes_per_second"
    )


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ({"min_body_bytes_per_second": 0}, "min_body_bytes_per_second must be positive"),
        ({"body_grace_seconds": -1}, "body_grace_seconds must be positive"),
    ],
)
def test_body_pace_settings_are_checked(setting: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        HttpConfig(**setting)


async def test_bodies_that_fill_the_budget_between_them_do_not_wait_it_out() -> None:
    """Two bodies partly received hold all the room and each needs more: nothing can
    free room but one of them, so the one holding less gives way at once (not after
    its wait), and the other goes on as soon as that one's bytes are back."""
    budget = ByteBudget(100)
    assert await budget.take(40, WAIT) == 0  # the smaller body so far
    assert await budget.take(60, WAIT) == 0  # the larger one
    answers: dict[str, float | None] = {}

    async def take(name: str, size: int, holding: int) -> None:
        answers[name] = await budget.take(size, WAIT, holding)

    with trio.fail_after(WAIT / 2):  # well before either wait could run out
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take, "larger", 30, 60)
            await trio.testing.wait_all_tasks_blocked()
            assert answers == {}  # it waits: the smaller one may yet be answered
            nursery.start_soon(take, "smaller", 30, 40)
            await trio.testing.wait_all_tasks_blocked()
            assert answers == {"smaller": None}  # refused at once: it gives way
            budget.give_back(40)  # its 503 sent, its bytes are back
    assert answers["larger"] is not None
    assert budget.held == 90
