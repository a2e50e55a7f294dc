"""`ListenStreams`, in process: a task write (or a resource update) costs as much as the streams
watching that task (or uri), not as much as all the streams open; the streams open are
counted per principal, and the count goes down as they end.

The core's `task_changed` and `resource_updated` are wrapped to see which streams each
change is worded for: only those the index names may be asked.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

import trio

from mcp_tasks import START_TASK, RequestContext, Server, ServerOptions, ToolContext, ToolOutcome
from mcp_tasks.core import TaskRecord
from mcp_tasks.core.inputs import ListChanged, ResourceUpdated, TaskChanged
from mcp_tasks.server import Connection

from .helpers import Client, check_notification, request

LISTEN = "subscriptions/listen"
OTHER_STREAMS = 200


def gated_server(release: trio.Event) -> Server:
    server = Server(
        "indexed",
        "1",
        options=ServerOptions(max_listen_streams=1000, max_listen_streams_per_principal=None),
    )

    @server.tool(task_support="required")
    async def gated(ctx: ToolContext) -> ToolOutcome | str:
        if not ctx.in_task:
            return START_TASK
        await release.wait()
        return "done"

    @server.resource("notes://today")
    async def today(ctx: RequestContext) -> str:
        return "notes"

    return server


class Streams:
    """Listen streams opened through `Server.handle`, each with the messages it was sent."""

    def __init__(self, server: Server, nursery: trio.Nursery) -> None:
        self.server = server
        self.nursery = nursery
        self.sent: dict[str, list[dict[str, Any]]] = {}
        self.connections: dict[str, Connection] = {}

    async def open(
        self, request_id: str, notifications: dict[str, Any], principal: str | None = None
    ) -> None:
        acknowledged = trio.Event()
        messages: list[dict[str, Any]] = []
        self.sent[request_id] = messages
        connection = self.connections[request_id] = Connection()

        async def notify(body: bytes) -> None:
            message = json.loads(body)
            check_notification(message)
            messages.append(message)
            acknowledged.set()

        async def carry() -> None:
            data = request(LISTEN, {"notifications": notifications}, request_id=request_id)
            await self.server.handle(
                data, notify=notify, connection=connection, principal=principal
            )

        self.nursery.start_soon(carry)
        with trio.fail_after(5):
            await acknowledged.wait()

    def close(self, request_id: str) -> None:
        """The client goes away (as `notifications/cancelled` of the listen would say)."""
        self.connections[request_id].cancel(request_id)


def worded_for(server: Server, method: str) -> list[Any]:
    """Spy on the core's answers to `method`'s input (`task_changed`: `TaskChanged`, ...):
    the request id of each stream it is asked to word for."""
    kind = {
        "task_changed": TaskChanged,
        "list_changed": ListChanged,
        "resource_updated": ResourceUpdated,
    }[method]
    asked: list[Any] = []
    original = server.core.handle

    def spy(input: Any, now: float) -> Any:
        if isinstance(input, kind):
            asked.append(input.subscription.request_id)
        return original(input, now)

    server.core.handle = spy  # type: ignore[method-assign]
    return asked


def random_ids(count: int) -> list[str]:
    return ["tsk_" + secrets.token_urlsafe(24) for _ in range(count)]


async def until(predicate: Callable[[], bool]) -> None:
    with trio.fail_after(5):
        while not predicate():
            await trio.lowlevel.checkpoint()


async def test_a_task_write_is_worded_only_for_the_streams_watching_that_task() -> None:
    release = trio.Event()
    server = gated_server(release)
    async with server.running(), trio.open_nursery() as nursery:
        client = Client(server)
        task_id = await client.start("gated")
        streams = Streams(server, nursery)
        for n in range(OTHER_STREAMS):
            await streams.open(f"other-{n}", {"taskIds": random_ids(8), "toolsListChanged": True})
        await streams.open("watcher-1", {"taskIds": [*random_ids(3), task_id]})
        await streams.open("watcher-2", {"taskIds": [task_id]})
        assert server.subscription_count == OTHER_STREAMS + 2
        assert server.listeners.wants_task(task_id)
        assert not server.listeners.wants_task(random_ids(1)[0])
        asked = worded_for(server, "task_changed")

        release.set()
        await client.wait_status(task_id, "completed")
        assert sorted(asked) == ["watcher-1", "watcher-2"]  # one write: completed
        watchers = [streams.sent["watcher-1"], streams.sent["watcher-2"]]
        await until(lambda: all(len(sent) == 2 for sent in watchers))  # the ack, then this
        for sent in watchers:
            note = sent[-1]
            assert note["method"] == "notifications/tasks"
            assert note["params"]["taskId"] == task_id
            assert note["params"]["status"] == "completed"
        assert all(len(streams.sent[f"other-{n}"]) == 1 for n in range(OTHER_STREAMS))

        record = await server.store.get(task_id)
        assert isinstance(record, TaskRecord)
        streams.close("watcher-1")
        await until(lambda: server.subscription_count == OTHER_STREAMS + 1)
        asked.clear()
        server.listeners.task_changed(record)  # as if it changed again
        assert asked == ["watcher-2"]
        streams.close("watcher-2")
        await until(lambda: not server.listeners.wants_task(task_id))
        asked.clear()
        server.listeners.task_changed(record)
        assert asked == []  # nobody watches it now: no stream is even looked at

        server.notify_list_changed("tools")  # a list change still reaches every stream
        others = [streams.sent[f"other-{n}"] for n in range(OTHER_STREAMS)]
        await until(lambda: all(len(sent) == 2 for sent in others))
        nursery.cancel_scope.cancel()


async def test_a_resource_update_is_worded_only_for_the_streams_subscribed_to_it() -> None:
    server = gated_server(trio.Event())
    async with server.running(), trio.open_nursery() as nursery:
        streams = Streams(server, nursery)
        for n in range(50):
            await streams.open(f"other-{n}", {"toolsListChanged": True})
        await streams.open("reader", {"resourceSubscriptions": ["notes://today"]})
        asked = worded_for(server, "resource_updated")
        server.notify_resource_updated("notes://today")
        server.notify_resource_updated("notes://unknown")
        assert asked == ["reader"]
        await until(lambda: len(streams.sent["reader"]) == 2)
        assert streams.sent["reader"][-1]["params"]["uri"] == "notes://today"
        nursery.cancel_scope.cancel()


async def test_streams_are_counted_per_principal_until_they_end() -> None:
    server = gated_server(trio.Event())
    async with server.running(), trio.open_nursery() as nursery:
        streams = Streams(server, nursery)
        await streams.open("ann-1", {"toolsListChanged": True}, principal="ann")
        await streams.open("ann-2", {"toolsListChanged": True}, principal="ann")
        await streams.open("nobody", {"toolsListChanged": True})
        listeners = server.listeners
        assert (listeners.open_for("ann"), listeners.open_for(None), len(listeners)) == (2, 1, 3)
        streams.close("ann-1")
        await until(lambda: listeners.open_for("ann") == 1)
        streams.close("ann-2")
        streams.close("nobody")
        await until(lambda: len(listeners) == 0)
        assert (listeners.open_for("ann"), listeners.open_for(None)) == (0, 0)
        nursery.cancel_scope.cancel()
