"""Our server protected by `mcp_tasks.auth`, and a real authorization server, on loopback.

The authorization server is oidc-provider (tests/oauth/provider.mjs, from npm): it issues
ES256 JWT access tokens whose `aud` is the MCP server's URL. The MCP server is ours
(`serve_http` in this process) with `HttpConfig(resource_server=...)` and a `JwtVerifier`
of that provider. The server's port is chosen first (bound, then let go), because the
provider must know the resource before the server can name its issuer.

`provider_options` are provider.mjs's OPTIONS (more resources, the tokens' lifetime, the
signing key and its `kid`, opaque tokens with introspection). A test may stop the provider
(`stop_provider`: an outage) and start it again on the same port (`start_provider`, e.g.
with a new key), our server running all along; `run_provider` starts another (another
issuer).

Nothing sleeps: the provider is used once it printed its ready line, our server once it
listens (`nursery.start`), and every wait has a deadline.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import trio
from interop.processes import START_SECONDS, Output, npm_node, started
from oauth.realm import PROVIDER, STATIC_CLIENT

from mcp_tasks import Server
from mcp_tasks.auth import JwtVerifier, ResourceServer
from mcp_tasks.transports import HttpConfig, serve_http

MCP_PATH = "/mcp"


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ProtectedRealm:
    url: str
    """Our MCP server's endpoint: the resource its tokens are for."""
    issuer: str
    client_secret: str
    """The provider's static client's (`STATIC_CLIENT`, client_credentials)."""
    protection: ResourceServer
    provider: Output
    extra: dict[str, Any] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    """The provider's process (None once `stop_provider` stopped it)."""
    _stack: ExitStack | None = None

    async def stop_provider(self) -> None:
        """Stop the provider and wait for it to exit: its port refuses connections after."""
        process, self.process = self.process, None
        assert process is not None, "the provider is not running"
        process.terminate()
        await trio.to_thread.run_sync(lambda: process.wait(timeout=START_SECONDS))
        await trio.to_thread.run_sync(self.provider.join)

    async def start_provider(self, options: dict[str, Any] | None = None) -> None:
        """Start the provider again, on its port (the issuer stays the same), with
        `options` (provider.mjs's OPTIONS): e.g. a new signing key."""
        assert self.process is None and self._stack is not None, "stop_provider() first"
        port = self.issuer.rsplit(":", 1)[1]
        self.process, self.provider, issuer = await run_provider(
            self._stack, port, self.url, self.client_secret, options
        )
        assert issuer == self.issuer, issuer

    async def token(self, scope: str = "mcp:read", *, resource: str | None = None) -> str:
        """A client-credentials access token from the provider for `resource` (our URL)."""
        return await client_token(self.issuer, self.client_secret, resource or self.url, scope)


async def client_token(issuer: str, client_secret: str, resource: str, scope: str) -> str:
    """A client-credentials access token from the provider at `issuer` (its static client,
    with `client_secret`) for `resource`."""
    form = {"grant_type": "client_credentials", "resource": resource}
    if scope:
        form["scope"] = scope
    async with httpx2.AsyncClient(timeout=START_SECONDS) as http:
        answer = await http.post(issuer + "/token", data=form, auth=(STATIC_CLIENT, client_secret))
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


async def run_provider(
    stack: ExitStack, port: str, url: str, client_secret: str, options: dict[str, Any] | None
) -> tuple[subprocess.Popen[str], Output, str]:
    """provider.mjs started on `port` (kept running until `stack` closes), once ready; its
    process, its output and its issuer."""
    argv = [npm_node(), str(PROVIDER), port, url, client_secret]
    if options:
        argv.append(json.dumps(options))
    process, output = stack.enter_context(started(argv))
    found = await trio.to_thread.run_sync(
        output.wait_for, "stdout", r'^\{"ready":"(http://127\.0\.0\.1:\d+)"\}$'
    )
    return process, output, found.group(1)


@asynccontextmanager
async def protected_realm(
    server: Server,
    *,
    scopes: tuple[str, ...] = ("mcp:read",),
    verifier: Callable[[str, str], Any] | None = None,
    config: dict[str, Any] | None = None,
    provider_options: dict[str, Any] | None = None,
) -> AsyncIterator[ProtectedRealm]:
    """The provider and `server` protected by it, running. `verifier(issuer, resource)`
    makes the verifier (a `JwtVerifier` by default); `config` goes into `HttpConfig`;
    `provider_options` are provider.mjs's OPTIONS (its tokens' lifetime, its key...)."""
    npm_node()  # (skips the test, or fails it in CI, when the npm peers are missing)
    client_secret = secrets.token_urlsafe(24)
    port = free_port()
    url = f"http://127.0.0.1:{port}{MCP_PATH}"
    with ExitStack() as stack:
        process, output, issuer = await run_provider(
            stack, "0", url, client_secret, provider_options
        )
        make = verifier or JwtVerifier
        protection = ResourceServer(
            resource=url,
            authorization_servers=[issuer],
            verifier=make(issuer, url),
            scopes=list(scopes),
        )
        http_config = HttpConfig(resource_server=protection, **(config or {}))
        async with trio.open_nursery() as nursery, server.running():
            await nursery.start(
                lambda task_status: serve_http(
                    server, "127.0.0.1", port, config=http_config, task_status=task_status
                )
            )
            yield ProtectedRealm(
                url=url,
                issuer=issuer,
                client_secret=client_secret,
                protection=protection,
                provider=output,
                process=process,
                _stack=stack,
            )
            nursery.cancel_scope.cancel()
