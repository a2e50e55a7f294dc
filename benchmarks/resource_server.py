"""What protecting a server with OAuth costs it on each request.

The same server (`serve_http`, one tool) is called by one client, tool calls one at a time
with a bearer token, in three configurations: no authentication; a hand-written
authenticator that knows the token (the `HttpConfig.authenticate` hook: a dictionary
lookup); and `HttpConfig(resource_server=...)` with a `JwtVerifier`, the token an ES256
JWT access token whose keys are served on loopback (fetched once, then kept). Best of 5
rounds of 1,000 calls each, alternating, on loopback. Run from the repository root (`-P`:
this folder's http.py is not the standard library's):

    python -P benchmarks/resource_server.py
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import trio
from joserfc import jwt
from joserfc.jwk import ECKey

from mcp_tasks import Server, ToolContext
from mcp_tasks.auth import JwtVerifier, ResourceServer
from mcp_tasks.client import Client, connect_http
from mcp_tasks.transports import HttpConfig, Unauthorized, serve_http

ROUNDS = 5
CALLS = 1_000


def build() -> Server:
    server = Server("resource-server-benchmark", "1")

    @server.tool()
    async def echo(ctx: ToolContext, text: str) -> str:
        return text

    return server


def serve_keys(documents: dict[str, Any]) -> ThreadingHTTPServer:
    """The issuer's metadata and key set, served on loopback from a thread."""

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            document = documents.get(self.path)
            body = json.dumps(document).encode()
            self.send_response(200 if document else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    keys = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=keys.serve_forever, daemon=True).start()
    return keys


async def calls_per_second(client: Client) -> float:
    started = time.perf_counter()
    for _ in range(CALLS):
        await client.call_tool("echo", {"text": "x"})
    return CALLS / (time.perf_counter() - started)


async def main() -> None:
    key = ECKey.generate_key("P-256", {"kid": "benchmark-key"})
    documents: dict[str, Any] = {}
    keys = serve_keys(documents)
    issuer = f"http://127.0.0.1:{keys.server_address[1]}"
    documents["/.well-known/oauth-authorization-server"] = {
        "issuer": issuer,
        "jwks_uri": issuer + "/jwks",
    }
    documents["/jwks"] = {"keys": [key.as_dict(private=False)]}
    server = build()
    async with server.running(), trio.open_nursery() as nursery:
        urls: dict[str, str] = {}
        plain = await nursery.start(partial(serve_http, server, "127.0.0.1", 0))
        urls["none"] = f"http://127.0.0.1:{plain}/mcp"
        now = int(time.time())
        claims = {"iss": issuer, "sub": "alice", "client_id": "app", "scope": "mcp:use"}
        claims |= {"iat": now, "exp": now + 3600, "jti": "benchmark"}

        def only(token: str, headers: Mapping[str, str]) -> str:
            if headers.get("authorization") != f"Bearer {token}":
                raise Unauthorized("unknown token")
            return "alice"

        checked = await nursery.start(
            partial(
                serve_http,
                server,
                "127.0.0.1",
                0,
                config=HttpConfig(authenticate=partial(only, "fixed-token")),
            )
        )
        urls["authenticator"] = f"http://127.0.0.1:{checked}/mcp"
        with trio.socket.socket() as probe:  # the resource's URL names its port: chosen first
            await probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        url = f"http://127.0.0.1:{port}/mcp"
        protection = ResourceServer(
            resource=url,
            authorization_servers=[issuer],
            verifier=JwtVerifier(issuer, url),
            scopes=["mcp:use"],
        )
        config = HttpConfig(resource_server=protection)
        await nursery.start(partial(serve_http, server, "127.0.0.1", port, config=config))
        urls["jwt"] = url
        header = {"alg": "ES256", "typ": "at+jwt", "kid": "benchmark-key"}
        token = jwt.encode(header, claims | {"aud": url}, key)
        bearers = {"none": "unused", "authenticator": "fixed-token", "jwt": token}
        best = dict.fromkeys(urls, 0.0)
        clients = {}
        async with (
            connect_http(urls["none"]) as clients["none"],
            connect_http(
                urls["authenticator"], headers=_bearer(bearers, "authenticator")
            ) as clients["authenticator"],
            connect_http(urls["jwt"], headers=_bearer(bearers, "jwt")) as clients["jwt"],
        ):
            for client in clients.values():
                await client.list_tools()
            for _ in range(ROUNDS):
                for name, client in clients.items():
                    best[name] = max(best[name], await calls_per_second(client))
        nursery.cancel_scope.cancel()
    keys.shutdown()
    for name, rate in best.items():
        print(f"{name:13} {rate:8.0f} tool calls/s")
    print(f"jwt / none: {best['jwt'] / best['none']:.2f}")
    print(f"jwt / authenticator: {best['jwt'] / best['authenticator']:.2f}")


def _bearer(bearers: dict[str, str], name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {bearers[name]}"}


if __name__ == "__main__":
    trio.run(main)
