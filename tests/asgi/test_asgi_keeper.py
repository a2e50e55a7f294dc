"""The ASGI app's keeper, through the port: it runs in the server's task group
(`Server.start_soon`), ends when the server stops, and the next run of the server starts
another, so a client that leaves is noticed in every run. It writes the keep-alive comments
of quiet SSE streams too, as the built-in server's keeper does: a stream pays for no task
of its own but its watcher. The app is called directly with ASGI messages (test_asgi_health's
`Exchange`); waits are on events under `fail_after`, the comments' on trio's mock clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio
import trio.testing
from runtime.helpers import request
from transports.test_http import TASKS_CAPS
from trio.testing import MockClock

from mcp_tasks import CallToolResult, Server, ToolContext, ToolOutcome
from mcp_tasks.asgi import asgi_app
from mcp_tasks.transports import HttpConfig
from mcp_tasks.transports._exchange import KEEP_ALIVE, TICK_SECONDS

from .test_asgi_health import WAIT, Exchange, tool_call

RUNS = 3


async def test_a_client_that_leaves_cancels_its_request_in_every_run_of_the_server() -> None:
    server = Server("held", "1.0", shutdown_grace_seconds=0.5)
    started, cancelled = trio.Event(), trio.Event()

    @server.tool()
    async def hold(ctx: ToolContext) -> ToolOutcome:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        return CallToolResult.text("never")

    app = asgi_app(server)
    for _ in range(RUNS):
        started, cancelled = trio.Event(), trio.Event()
        async with app.lifespan():
            leaver = tool_call("hold")
            with trio.fail_after(WAIT):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(app, leaver.scope, leaver.receive, leaver.send)
                    await started.wait()
                    leaver.disconnect()  # noticed by the watcher the keeper gives it
                    await cancelled.wait()
        assert not server.is_running
    assert leaver.sent == []  # cancelled before any answer


class Stream(Exchange):
    """A request whose answer is an SSE stream: the comments it carries, as they come."""

    def __init__(self) -> None:
        call = tool_call("quiet")  # its head, and a progress token in its body
        headers = [(name.decode(), value.decode()) for name, value in call.scope["headers"][1:]]
        arguments = {"name": "quiet", "arguments": {}}
        body = request("tools/call", arguments, caps=TASKS_CAPS, progressToken="q")
        super().__init__("POST", "/mcp", headers, body)
        self.comments = 0
        self.commented = trio.Event()

    async def send(self, message: Mapping[str, Any]) -> None:
        await super().send(message)
        if message.get("body") == KEEP_ALIVE:
            self.comments += 1
            self.commented.set()
            self.commented = trio.Event()


def tasks_of_the_app() -> list[str]:
    """The tasks running the app's own code now (a request, the keeper, a watcher...)."""
    names: list[str] = []
    tasks = [trio.lowlevel.current_root_task()]
    while tasks:
        task = tasks.pop()
        ours = [name for name in _calls(task.coro) if name.startswith(("AsgiApp.", "_Answer."))]
        names.extend(ours[:1])  # the app's function the task runs
        tasks.extend(child for nursery in task.child_nurseries for child in nursery.child_tasks)
    return sorted(names)


def _calls(coroutine: Any) -> list[str]:
    """The functions a task is in, outermost first (anyio runs a function in one of its own)."""
    names = []
    while hasattr(coroutine, "cr_code"):
        names.append(coroutine.cr_code.co_qualname)
        coroutine = coroutine.cr_await
    return names


async def test_quiet_streams_get_their_comments_from_the_keeper(autojump_clock: MockClock) -> None:
    server = Server("quiet", "1.0", shutdown_grace_seconds=0.5)

    @server.tool()
    async def quiet(ctx: ToolContext) -> ToolOutcome:
        await ctx.report_progress(0, 1, "begun")  # the answer turns into an SSE stream
        await trio.sleep_forever()
        return CallToolResult.text("never")

    app = asgi_app(server, HttpConfig(keep_alive_comment_seconds=15.0))
    streams = [Stream(), Stream()]
    async with app.lifespan(), trio.open_nursery() as nursery:
        for stream in streams:
            nursery.start_soon(app, stream.scope, stream.receive, stream.send)
        with trio.fail_after(WAIT):
            for stream in streams:
                await stream.started.wait()
            while any(answer.watcher is None for answer in app.in_flight):
                await trio.sleep(TICK_SECONDS)  # the keeper gives each a watcher after a tick
            assert len(app.in_flight) == len(streams)
            await trio.testing.wait_all_tasks_blocked()  # the watchers spawned have begun
        # a request, its watcher, and one keeper for all: no timer of a stream's own
        expected = ["AsgiApp.__call__", "_Answer.watch_client"] * len(streams)
        assert tasks_of_the_app() == sorted([*expected, "AsgiApp._watch_requests"])
        with trio.fail_after(60):  # on the mock clock: 15 s apart, twice
            for stream in streams:
                while stream.comments < 2:
                    await stream.commented.wait()
        for stream in streams:
            stream.disconnect()
