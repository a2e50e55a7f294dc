"""Bearer tokens: each caller's tasks are their own.

    python examples/bearer_auth.py            # serves on http://127.0.0.1:8000/mcp
    python examples/bearer_auth.py --demo     # serves on a free port, and shows the rules

The server checks `Authorization: Bearer <token>` on every HTTP request (a missing or
unknown token is answered 401 before the body is read). The token names a principal; every
task belongs to the principal that created it, and any other principal asking for it gets
the same -32602 "Unknown task" as for an id that never existed.

Tokens come from the environment (`MCP_TOKENS="token1=alice,token2=bob"`); the two below are
for the demo only. Compare tokens in constant time, as `authenticate` does.
"""

from __future__ import annotations

import hmac
import os
import sys
from collections.abc import Mapping

import msgspec
import trio

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome
from mcp_tasks.client import RpcError, connect_http
from mcp_tasks.transports import HttpConfig, Unauthorized, serve_http

DEMO_TOKENS = "demo-token-alice=alice,demo-token-bob=bob"


def load_tokens(spec: str) -> dict[str, str]:
    """`token=principal,...` -> {token: principal}."""
    pairs = (item.split("=", 1) for item in spec.split(",") if item.strip())
    return {token.strip(): principal.strip() for token, principal in pairs}


TOKENS = load_tokens(os.environ.get("MCP_TOKENS", DEMO_TOKENS))


def authenticate(headers: Mapping[str, str]) -> str:
    """The principal whose bearer token the request carries; 401 otherwise."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("send Authorization: Bearer <token>")
    found = None
    for known, principal in TOKENS.items():  # every token compared, in constant time
        if hmac.compare_digest(known.encode(), token.strip().encode()):
            found = principal
    if found is None:
        raise Unauthorized("unknown token", challenge='Bearer realm="mcp", error="invalid_token"')
    return found


server = Server("private-jobs", "1.0.0", tasks=TaskOptions(ttl_ms=600_000))


class Job(msgspec.Struct):
    text: str


@server.tool(task_support="required")
async def shout(ctx: ToolContext, args: Job) -> ToolOutcome:
    """Shout the text back, as a task."""
    if not ctx.in_task:
        return START_TASK
    return CallToolResult.text(args.text.upper())


async def serve(port: int, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    config = HttpConfig(authenticate=authenticate)
    async with server.running():
        await serve_http(server, "127.0.0.1", port, config=config, task_status=task_status)


async def demo() -> list[str]:
    """Alice makes a task; Bob cannot see it; nobody gets in without a token."""
    shown: list[str] = []
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve, 0)
        url = f"http://127.0.0.1:{port}/mcp"
        alice = {"Authorization": "Bearer demo-token-alice"}
        bob = {"Authorization": "Bearer demo-token-bob"}
        async with connect_http(url, headers=alice) as as_alice:
            task = await as_alice.call_tool_or_task("shout", {"text": "mine"})
            assert not isinstance(task, CallToolResult)
            result = await as_alice.await_task(task)
            shown.append(f"alice: her task {result.content[0].text}")  # type: ignore[union-attr]
        async with connect_http(url, headers=bob) as as_bob:
            try:
                await as_bob.get_task(task.task_id)
            except RpcError as error:
                shown.append(f"bob: {error.code} {error.message}")
        async with connect_http(url) as nobody:
            try:
                await nobody.discover()
            except Exception as error:  # the transport reports the 401
                shown.append(f"nobody: {error}")
        nursery.cancel_scope.cancel()
    return shown


if __name__ == "__main__":
    if "--demo" in sys.argv:
        for line in trio.run(demo):
            print(line)
    else:
        print("serving private-jobs on http://127.0.0.1:8000/mcp", file=sys.stderr)
        trio.run(serve, 8000)
