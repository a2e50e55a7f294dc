"""What an `OAuth` login costs a client on each request, once it holds a token.

The same server (`serve_http` with an authenticator that knows one bearer token) is called
by two clients in turn: one sending the token as a fixed header, one whose
`mcp_tasks.oauth.OAuth` holds it (stored in memory, as after a login): each of its requests
asks `OAuth.authorization()` for the header, under its lock. Measured: tool calls one at a
time, best of 5 rounds of 1,000 each way, alternating, on loopback. Run from the
repository root (`-P`: this folder's http.py is not the standard library's):

    python -P benchmarks/client_auth.py
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import partial

import trio

from mcp_tasks import Server, ToolContext
from mcp_tasks.client import Client, connect_http
from mcp_tasks.oauth import Login, MemoryTokenStorage, OAuth, Tokens
from mcp_tasks.transports import HttpConfig, Unauthorized, serve_http

TOKEN = "benchmark-token"
ROUNDS = 5
CALLS = 1_000


def authenticate(headers: Mapping[str, str]) -> str:
    if headers.get("authorization") != f"Bearer {TOKEN}":
        raise Unauthorized("unknown token")
    return "benchmark"


def build() -> Server:
    server = Server("client-auth-benchmark", "1")

    @server.tool()
    async def echo(ctx: ToolContext, text: str) -> str:
        return text

    return server


async def calls_per_second(client: Client) -> float:
    started = time.perf_counter()
    for _ in range(CALLS):
        await client.call_tool("echo", {"text": "x"})
    return CALLS / (time.perf_counter() - started)


async def main() -> None:
    server = build()
    config = HttpConfig(authenticate=authenticate)
    async with server.running(), trio.open_nursery() as nursery:
        port = await nursery.start(partial(serve_http, server, "127.0.0.1", 0, config=config))
        url = f"http://127.0.0.1:{port}/mcp"
        storage = MemoryTokenStorage()
        await storage.save(url, Login(issuer="https://as.invalid", tokens=Tokens(TOKEN)))
        header = {"Authorization": f"Bearer {TOKEN}"}
        best = {"header": 0.0, "oauth": 0.0}
        async with (
            connect_http(url, headers=header) as fixed,
            connect_http(url, auth=OAuth(url, storage=storage)) as logged_in,
        ):
            await fixed.list_tools()
            await logged_in.list_tools()
            for _ in range(ROUNDS):
                best["header"] = max(best["header"], await calls_per_second(fixed))
                best["oauth"] = max(best["oauth"], await calls_per_second(logged_in))
        nursery.cancel_scope.cancel()
    for name, rate in best.items():
        print(f"{name:7} {rate:8.0f} tool calls/s")
    print(f"oauth / header: {best['oauth'] / best['header']:.2f}")


if __name__ == "__main__":
    trio.run(main)
