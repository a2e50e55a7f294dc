"""How `subscriptions/listen` streams are bounded, over real SSE streams on 127.0.0.1: the
keep-alive comments of a quiet stream, the streams open at once (per principal and in
all), and the task ids one stream may name.

Waits are on what the stream carries, each under `fail_after`; never a sleep that hopes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import h11
import pytest
import trio
from runtime.helpers import check_message, check_notification, request
from schema_check import check_reply
from test_http import TASKS_CAPS, HttpClient, Response, mcp_headers, serving

from mcp_tasks import Server, ServerOptions, ToolContext
from mcp_tasks.transports import HttpConfig

LISTEN = "subscriptions/listen"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
KEEP_ALIVE = b": keep-alive"


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """A refused stream, or a client that goes away, is no error."""
    yield
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [record.getMessage() for record in errors]


def bounded_server(**options: Any) -> Server:
    server = Server("bounded", "1.0", options=ServerOptions(**options), shutdown_grace_seconds=0.5)

    @server.tool()
    async def noop(ctx: ToolContext) -> str:
        return "ok"

    return server


def principal_from_bearer(headers: Mapping[str, str]) -> str:
    """Whoever the bearer token names (a test's authenticator: anyone may be anybody)."""
    return headers.get("authorization", "Bearer nobody").removeprefix("Bearer ")


class Events:
    """The blocks of one SSE answer as they arrive: `data:` messages and `:` comments."""

    def __init__(self, client: HttpClient) -> None:
        self.client = client
        self.buffer = b""

    async def next_block(self) -> bytes:
        with trio.fail_after(5):
            while b"\n\n" not in self.buffer:
                event = await self.client.next_event()
                assert isinstance(event, h11.Data), event  # the stream does not end here
                self.buffer += event.data
        block, _, self.buffer = self.buffer.partition(b"\n\n")
        return block

    async def next_message(self) -> dict[str, Any]:
        """The next `data:` message, past any comments."""
        while (block := await self.next_block()).startswith(b":"):
            pass
        assert block.startswith(b"data: "), block
        message: dict[str, Any] = json.loads(block.removeprefix(b"data: "))
        if "method" in message:
            check_notification(message)
        else:
            check_message(LISTEN, block.removeprefix(b"data: "))
        return message


async def send_listen(
    client: HttpClient,
    request_id: str,
    notifications: dict[str, Any],
    principal: str | None = None,
) -> h11.Response:
    body = request(LISTEN, {"notifications": notifications}, caps=TASKS_CAPS, request_id=request_id)
    headers = [("content-type", "application/json"), *mcp_headers(LISTEN)]
    if principal is not None:
        headers.append(("authorization", f"Bearer {principal}"))
    with trio.fail_after(5):
        await client.send("POST", headers, body)
        return await client.head()


async def open_stream(
    port: int, request_id: str, principal: str | None = None
) -> tuple[HttpClient, Events]:
    """A listen stream for tool list changes, acknowledged."""
    client = await HttpClient.connect(port)
    head = await send_listen(client, request_id, {"toolsListChanged": True}, principal)
    assert head.status_code == 200, head
    events = Events(client)
    ack = await events.next_message()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"][SUBSCRIPTION_ID] == request_id
    return client, events


async def refused(
    port: int, request_id: str, notifications: dict[str, Any], principal: str | None = None
) -> Response:
    client = await HttpClient.connect(port)
    head = await send_listen(client, request_id, notifications, principal)
    with trio.fail_after(5):
        body = await client.response_rest()
    await client.aclose()
    headers = {name.decode(): value.decode() for name, value in head.headers}
    check_reply(LISTEN, body)
    assert headers["content-type"] == "application/json"
    return Response(head.status_code, headers, body)


async def until(predicate: Any) -> None:
    """Wait, checkpoint by checkpoint, until `predicate()` holds (5 s at most)."""
    with trio.fail_after(5):
        while not predicate():
            await trio.lowlevel.checkpoint()


# --- keep-alive comments -----------------------------------------------------------------------


async def test_a_quiet_stream_gets_keep_alive_comments_between_its_messages() -> None:
    server = bounded_server()
    async with serving(server, keep_alive_comment_seconds=0.05) as port:
        _, events = await open_stream(port, "quiet")
        assert await events.next_block() == KEEP_ALIVE  # nothing else happened
        assert await events.next_block() == KEEP_ALIVE  # and again, while it stays quiet
        server.notify_list_changed("tools")
        note = await events.next_message()
        assert note["method"] == "notifications/tools/list_changed"
        assert note["params"]["_meta"][SUBSCRIPTION_ID] == "quiet"
        assert await events.next_block() == KEEP_ALIVE  # quiet again after the message
        server.end_subscriptions()
        closing = await events.next_message()
        assert closing["id"] == "quiet" and closing["result"]["resultType"] == "complete"


def test_keep_alive_comments_are_on_by_default_and_may_be_turned_off() -> None:
    assert HttpConfig().keep_alive_comment_seconds == 15.0
    assert HttpConfig(keep_alive_comment_seconds=None).keep_alive_comment_seconds is None
    with pytest.raises(ValueError, match="keep_alive_comment_seconds"):
        HttpConfig(keep_alive_comment_seconds=0)


# --- how many streams ---------------------------------------------------------------------------


async def test_one_principal_past_its_stream_limit_is_refused_with_429() -> None:
    server = bounded_server(max_listen_streams_per_principal=2)
    async with serving(server, authenticate=principal_from_bearer) as port:
        first, _ = await open_stream(port, "ann-1", "ann")
        held = [await open_stream(port, "ann-2", "ann")]  # (a client dropped would close)
        answer = await refused(port, "ann-3", {"toolsListChanged": True}, "ann")
        assert answer.status == 429 and answer.headers["retry-after"] == "5"
        error = answer.json()["error"]
        assert error["code"] == -32603
        assert "Too many listen streams for this caller: at most 2 open at once" in error["message"]
        assert error["data"] == {"retryAfterMs": 5000}
        held.append(await open_stream(port, "bo-1", "bo"))  # bo has room of its own
        assert server.subscription_count == 3
        await first.aclose()  # one of ann's streams ends: room for another
        await until(lambda: server.subscription_count == 2)
        held.append(await open_stream(port, "ann-4", "ann"))
        assert server.subscription_count == 3


async def test_past_the_server_stream_limit_everyone_is_refused_with_503() -> None:
    server = bounded_server(max_listen_streams=2, max_listen_streams_per_principal=None)
    async with serving(server, authenticate=principal_from_bearer) as port:
        first, _ = await open_stream(port, "ann-1", "ann")
        held = await open_stream(port, "bo-1", "bo")
        answer = await refused(port, "cy-1", {"toolsListChanged": True}, "cy")
        assert answer.status == 503 and answer.headers["retry-after"] == "5"
        error = answer.json()["error"]
        assert error["code"] == -32603
        assert error["message"] == (
            "Too many listen streams: the server carries its limit of 2; try again later"
        )
        assert server.subscription_count == 2
        await first.aclose()
        await until(lambda: server.subscription_count == 1)
        await open_stream(port, "cy-2", "cy")
        assert server.subscription_count == 2
        await held[0].aclose()


async def test_without_an_authenticator_every_stream_is_the_same_nobodys() -> None:
    server = bounded_server(max_listen_streams_per_principal=1)
    async with serving(server) as port:
        held = await open_stream(port, "one")
        answer = await refused(port, "two", {"toolsListChanged": True})
        assert answer.status == 429
        assert server.subscription_count == 1
        await held[0].aclose()


# --- how many task ids --------------------------------------------------------------------------


async def test_more_task_ids_than_the_limit_are_refused_naming_it() -> None:
    server = bounded_server(max_listen_items=3)
    async with serving(server) as port:
        task_ids = [f"tsk_{n}" for n in range(4)]
        answer = await refused(port, "many", {"taskIds": task_ids})
        assert answer.status == 400
        error = answer.json()["error"]
        assert error["code"] == -32602
        assert "params.notifications.taskIds names 4 items, at most 3" in error["message"]
        assert server.subscription_count == 0
        client = await HttpClient.connect(port)
        head = await send_listen(client, "enough", {"taskIds": task_ids[:3]})
        assert head.status_code == 200
        ack = await Events(client).next_message()
        assert ack["params"]["notifications"] == {"taskIds": task_ids[:3]}
