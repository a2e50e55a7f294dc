"""The HTTP exchange both drivers share (`transports._exchange`, and the body's
`BodyIntake`), without sockets: the verdict on a head, the shape of each answer, its
framing, and a body's count, budget and pace, on trio's mock clock. The drivers
themselves are tested for real, over loopback (test_http.py, tests/asgi/)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import pytest
import trio
from trio.testing import MockClock

from mcp_tasks.core import Reply
from mcp_tasks.transports import HttpConfig, Unauthorized
from mcp_tasks.transports._budget import BodyIntake, ByteBudget
from mcp_tasks.transports._exchange import (
    CLOSE,
    JSON,
    KEEP_ALIVE,
    TICK_SECONDS,
    Keeping,
    admit,
    answer_of,
    framed,
    handler_failed,
    keeper_tick,
    refusal_answer,
    sse_event,
    sse_head,
)
from mcp_tasks.transports._http_rules import Refusal, RequestRules, read_headers

HEAD = [
    (b"Host", b"127.0.0.1:8000"),
    (b"Content-Type", b"application/json"),
    (b"Accept", b"application/json, text/event-stream"),
    (b"Authorization", b"Bearer alice-token"),
]


def bearer(headers: Mapping[str, str]) -> str:
    if headers.get("authorization") != "Bearer alice-token":
        raise Unauthorized("unknown token")
    return "alice"


async def verdict(
    method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], config: HttpConfig
) -> tuple[int | None, str | None]:
    found, _ = read_headers(headers)
    rules = RequestRules(config, loopback=True)
    refusal, principal = await admit(
        rules, method, target, found, headers, authenticate=config.authenticate
    )
    return (None if refusal is None else refusal.status), principal


async def test_a_head_is_checked_by_the_rules_then_the_authenticator() -> None:
    config = HttpConfig(authenticate=bearer)
    assert await verdict(b"POST", b"/mcp", HEAD, config) == (None, "alice")
    assert await verdict(b"POST", b"/mcp", HEAD, HttpConfig()) == (None, None)
    assert await verdict(b"GET", b"/mcp", HEAD, config) == (405, None)  # rules first
    stranger = [*HEAD[:3], (b"Authorization", b"Bearer mallory")]
    assert await verdict(b"POST", b"/mcp", stranger, config) == (401, None)
    framed_twice = [*HEAD, (b"Content-Length", b"2"), (b"Transfer-Encoding", b"chunked")]
    with pytest.raises(Refusal) as raised:  # it closes the connection: raised
        await verdict(b"POST", b"/mcp", framed_twice, config)
    assert raised.value.status == 400


def test_a_head_that_passed_is_remembered_as_it_reads_and_no_other() -> None:
    rules = RequestRules(HttpConfig(), loopback=True)

    def status(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> int | None:
        refusal = rules.refusal_for(method, target, read_headers(headers)[0])
        return None if refusal is None else refusal.status

    for _ in range(2):  # the second time from what the rules remember
        assert status(b"POST", b"/mcp", HEAD) is None
    assert status(b"POST", b"/mcp", [(b"Host", b"evil.example"), *HEAD[1:]]) == 421
    assert status(b"POST", b"/mcp", [*HEAD, (b"Origin", b"https://evil.example")]) == 403
    assert status(b"POST", b"/elsewhere", HEAD) == 404
    assert status(b"GET", b"/mcp", HEAD) == 405
    assert status(b"POST", b"/mcp", [HEAD[0], (b"Content-Type", b"text/plain"), *HEAD[2:]]) == 415
    assert status(b"POST", b"/mcp", [*HEAD[:2], (b"Accept", b"text/html")]) == 406
    assert status(b"POST", b"/mcp", [*HEAD, (b"Transfer-Encoding", b"chunked")]) is None
    framed_twice = [*HEAD, (b"Transfer-Encoding", b"chunked"), (b"Content-Length", b"2")]
    with pytest.raises(Refusal):  # framed two ways: refused however often the rest passed
        status(b"POST", b"/mcp", framed_twice)
    for index in range(200):  # a client changing a value each time: what is kept is bounded
        origin = (b"Origin", b"http://localhost:%d" % index)
        assert status(b"POST", b"/mcp", [*HEAD, origin]) is None
    assert len(rules._passed) <= 64


def test_a_reply_is_answered_as_json_with_its_status_and_retry_after() -> None:
    assert answer_of(None) == (202, [], b"")
    assert answer_of(Reply(body=b"{}")) == (200, [JSON], b"{}")
    busy = Reply(body=b"{}", http_status=429, retry_after_seconds=2)
    assert answer_of(busy) == (429, [JSON, (b"retry-after", b"2")], b"{}")


def test_framing_gives_the_length_and_closes_while_draining() -> None:
    assert framed([JSON], b"abc", draining=False) == [JSON, (b"content-length", b"3")]
    assert framed([], b"", draining=True) == [(b"content-length", b"0"), CLOSE]


def test_an_sse_stream_frames_each_message_and_its_comments() -> None:
    assert sse_head(draining=False)[0] == (b"content-type", b"text/event-stream")
    assert sse_head(draining=True)[-1] == CLOSE
    assert CLOSE not in sse_head(draining=False)
    assert sse_event(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert KEEP_ALIVE.startswith(b":") and KEEP_ALIVE.endswith(b"\n\n")


# --- the keeper's decisions: the same for both drivers -----------------------------------------


def test_the_keeper_ticks_at_a_quarter_of_the_shortest_time_it_keeps() -> None:
    assert keeper_tick(HttpConfig()) == TICK_SECONDS
    assert keeper_tick(HttpConfig(keep_alive_comment_seconds=0.2)) == 0.05
    assert keeper_tick(HttpConfig(keep_alive_comment_seconds=None)) == TICK_SECONDS
    assert keeper_tick(HttpConfig(header_timeout_seconds=0.1)) == 0.025


def test_a_request_in_flight_for_a_tick_has_its_client_watched_once() -> None:
    keeping = Keeping(15.0, tick=0.125)  # times in eighths: exact in binary
    assert not keeping.watch_due(100.0)  # nothing in flight
    keeping.handling(100.0)
    assert not keeping.watch_due(100.0625)  # most requests are answered before a tick
    assert keeping.watch_due(100.125)
    assert not keeping.watch_due(100.25)  # watched already
    keeping.ended()
    keeping.handling(101.0)  # the connection's next request
    assert not keeping.watch_due(101.0) and keeping.watch_due(101.125)
    keeping.ended()
    assert not keeping.watch_due(200.0)


def test_a_quiet_stream_is_due_a_comment_every_so_often_until_it_ends() -> None:
    keeping = Keeping(1.0, tick=0.125)
    keeping.handling(10.0)
    assert not keeping.comment_due(20.0)  # a JSON answer, however long: no stream
    keeping.sent(20.0)  # the stream's head and first message
    assert not keeping.comment_due(20.875)
    assert keeping.comment_due(21.0)
    assert not keeping.comment_due(21.125)  # due once, until written
    assert keeping.comment(21.125) == KEEP_ALIVE
    keeping.sent(21.125)
    assert not keeping.comment_due(22.0) and keeping.comment_due(22.125)
    keeping.sent(22.25)  # a message went out before the comment: the comment is not
    assert keeping.comment(22.375) is None
    assert not keeping.comment_due(23.125) and keeping.comment_due(23.25)
    keeping.ended()
    assert keeping.comment(23.375) is None  # the answer's last event went out first
    keeping.sent(23.5)  # a message on its way as it ended: nothing more is due
    assert not keeping.comment_due(99.0)


def test_a_stream_gets_no_comment_when_they_are_off() -> None:
    keeping = Keeping(None, tick=0.125)
    keeping.handling(0.0)
    keeping.sent(0.0)
    assert not keeping.comment_due(1e9) and keeping.comment(1e9) is None


class Counted:
    """What `report_refusal` needs of a handler: its telemetry."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.telemetry = self

    def refused(self, reason: str) -> None:
        self.reasons.append(reason)


def test_a_refusal_is_reported_and_answered_without_an_id() -> None:
    handler = Counted()
    refusal = Refusal(405, "Method 'GET' is not allowed", reason="method", allow=b"POST")
    status, headers, body = refusal_answer(refusal, handler, close=True)  # type: ignore[arg-type]
    assert (status, headers) == (405, [JSON, (b"allow", b"POST"), CLOSE])
    assert json.loads(body) == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": refusal.message},
    }
    assert handler.reasons == ["method"]


def test_a_failed_handle_is_the_cores_internal_error_with_the_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    try:
        raise RuntimeError("a bug")
    except RuntimeError:
        reply = handler_failed(
            b'{"jsonrpc":"2.0","id":"x","method":"tools/list"}', logging.getLogger("t")
        )
    assert (reply.http_status, json.loads(reply.body)["id"]) == (500, "x")
    assert "failed on a request" in caplog.text and "a bug" in caplog.text


async def test_a_body_is_counted_held_and_given_back(autojump_clock: MockClock) -> None:
    budget = ByteBudget(100)
    config = HttpConfig(max_body_bytes=60, max_body_bytes_in_flight=100)
    first = BodyIntake(budget, config, trio.current_time())
    await first.take(b"x" * 50)
    await first.take(b"y" * 10)
    assert (first.body(), budget.held) == (b"x" * 50 + b"y" * 10, 60)
    with pytest.raises(Refusal) as too_large:
        await first.take(b"z")
    assert (too_large.value.status, budget.held) == (413, 0)  # given back at once
    second = BodyIntake(budget, config, trio.current_time())
    await second.take(b"a" * 60)
    second.give_back()
    assert budget.held == 0


async def test_a_body_waits_for_room_and_gets_503_past_its_wait(autojump_clock: MockClock) -> None:
    budget = ByteBudget(100)
    config = HttpConfig(max_body_bytes=80, max_body_bytes_in_flight=100, body_wait_seconds=2)
    holder = BodyIntake(budget, config, trio.current_time())
    await holder.take(b"h" * 80)
    waiting = BodyIntake(budget, config, trio.current_time())
    end = waiting.end
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting.take, b"w" * 40)
        await trio.sleep(1)
        holder.give_back()  # room: it takes it, and the wait is not the sender's time
    assert (budget.held, waiting.end) == (40, end + 1)
    late = BodyIntake(budget, config, trio.current_time())
    with pytest.raises(Refusal) as busy:
        await late.take(b"l" * 80)
    assert (busy.value.status, budget.held) == (503, 40)


def test_a_body_is_due_at_its_pace() -> None:
    config = HttpConfig(
        min_body_bytes_per_second=100, body_grace_seconds=5, body_timeout_seconds=30
    )
    intake = BodyIntake(ByteBudget(10_000), config, 1000.0)
    assert intake.deadline() == 1005.0  # the grace first
    intake.size = 500
    assert intake.deadline() == 1010.0  # one second per 100 bytes
    assert intake.late(intake.deadline()).reason == "slow_body"
    intake.size = 10_000
    assert intake.deadline() == intake.end == 1030.0  # never past the body timeout
    assert intake.late(intake.deadline()).status == 408
    assert intake.late(intake.deadline()).reason == "timeout"
