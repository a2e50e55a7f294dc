"""The ASGI app's keeper, through the port: it runs in the server's task group
(`Server.start_soon`), ends when the server stops, and the next run of the server starts
another, so a client that leaves is noticed in every run. The app is called directly with
ASGI messages (test_asgi_health's `Exchange`); waits are on events under `fail_after`.
"""

from __future__ import annotations

import trio

from mcp_tasks import CallToolResult, Server, ToolContext, ToolOutcome
from mcp_tasks.asgi import asgi_app

from .test_asgi_health import WAIT, tool_call

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
