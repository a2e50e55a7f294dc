"""The official SDK's own OAuth (`MCPServer(auth=..., token_verifier=...)`) checking tokens
with our `JwtVerifier` through `SdkTokenVerifier`, a `TasksExtension` task tool behind it.

All real, on loopback: oidc-provider (tests/oauth/provider.mjs) issues client-credentials
JWTs for the server's URL; the SDK's Streamable HTTP app runs under uvicorn in the test's
asyncio loop, on a socket bound first (the provider must know the URL before the server
can name its issuer). Our client calls it with a fixed `Authorization` header. Nothing
sleeps: the provider is used once it printed its ready line, uvicorn once it started.
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import pytest
from interop.processes import START_SECONDS, npm_node, started
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from oauth.realm import PROVIDER, STATIC_CLIENT
from on_asyncio import run_asyncio, wait_until

from mcp_tasks import TaskOptions, TextContent
from mcp_tasks.auth import JwtVerifier
from mcp_tasks.client import connect_http
from mcp_tasks.core import WorkingTask
from mcp_tasks.integrations.mcp_sdk import SdkTokenVerifier, TasksExtension
from mcp_tasks.transports import AuthorizationError

from .sdk_app import PROTOCOL_VERSION, WITH_TASKS, post

PRM_URL_PATH = "/.well-known/oauth-protected-resource/mcp"


@dataclass
class Realm:
    url: str
    """The SDK server's endpoint, the resource its tokens are for."""
    issuer: str
    secret: str
    """The provider's static client's (`STATIC_CLIENT`) secret."""
    provider: subprocess.Popen[str]

    async def stop_provider(self) -> None:
        """Stop the provider and wait for it to exit: its port refuses connections after."""
        self.provider.terminate()
        await anyio.to_thread.run_sync(lambda: self.provider.wait(timeout=START_SECONDS))

    async def token(self, scope: str = "mcp:read", *, client: tuple[str, str] | None = None) -> str:
        """A client-credentials token for `url`, of the static client or `client`."""
        client_id, secret = client or (STATIC_CLIENT, self.secret)
        form = {"grant_type": "client_credentials", "resource": self.url, "scope": scope}
        async with httpx2.AsyncClient(timeout=START_SECONDS) as http:
            answer = await http.post(self.issuer + "/token", data=form, auth=(client_id, secret))
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])

    async def register(self) -> tuple[str, str]:
        """Another client_credentials client, registered dynamically (RFC 7591)."""
        metadata = {
            "grant_types": ["client_credentials"],
            "response_types": [],
            "redirect_uris": [],
            "token_endpoint_auth_method": "client_secret_basic",
        }
        async with httpx2.AsyncClient(timeout=START_SECONDS) as http:
            answer = await http.post(self.issuer + "/reg", json=metadata)
        assert answer.status_code == 201, answer.text
        body = answer.json()
        return str(body["client_id"]), str(body["client_secret"])


def build(issuer: str, url: str, *, validate_resource: bool) -> MCPServer:
    """An SDK server protected by the SDK's auth, our verifier behind it: `job`, a task
    (required) that reports who called it; `whoami`, a plain tool."""
    extension = TasksExtension(
        task_support={"job": "required"}, tasks=TaskOptions(poll_interval_ms=20)
    )
    mcp = MCPServer(
        "sdk-auth",
        version="1.0.0",
        extensions=[extension],
        lifespan=extension.lifespan,
        auth=AuthSettings.model_validate(  # (the URLs as strings: pydantic parses them)
            {
                "issuer_url": issuer,
                "resource_server_url": url,
                "required_scopes": ["mcp:read"],
                "validate_token_resource": validate_resource,
            }
        ),
        token_verifier=SdkTokenVerifier(JwtVerifier(issuer, url)),
    )

    def caller() -> str:
        token = get_access_token()
        return "nobody" if token is None else f"{token.client_id} {token.resource}"

    @mcp.tool()
    async def job(n: int) -> str:
        """A task: doubles `n`."""
        return f"{2 * n} for {caller()}"

    @mcp.tool()
    async def whoami() -> str:
        """Not a task: the SDK's view of the token."""
        return caller()

    return mcp


@asynccontextmanager
async def realm(*, validate_resource: bool = False) -> AsyncIterator[Realm]:
    """The provider and the protected SDK server, running."""
    node = npm_node()  # (skips the test, or fails it in CI, without the npm peers)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    secret = secrets.token_urlsafe(24)
    with ExitStack() as stack:
        stack.callback(listener.close)
        process, output = stack.enter_context(started([node, str(PROVIDER), "0", url, secret]))
        ready = await anyio.to_thread.run_sync(
            output.wait_for, "stdout", r'^\{"ready":"(http://127\.0\.0\.1:\d+)"\}$'
        )
        issuer = ready.group(1)
        app = build(issuer, url, validate_resource=validate_resource).streamable_http_app()
        async with serving_on(app, listener):
            yield Realm(url=url, issuer=issuer, secret=secret, provider=process)


@asynccontextmanager
async def serving_on(app: Any, listener: socket.socket) -> AsyncIterator[None]:
    """`app` under uvicorn on the bound `listener`, in this asyncio loop, until the exit."""
    import uvicorn  # noqa: PLC0415  (as on_asyncio.serving_asgi)

    server = uvicorn.Server(
        uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
    )
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [listener])
        await wait_until(lambda: server.started or server.should_exit)
        assert server.started, "uvicorn did not start"
        try:
            yield
        finally:
            server.should_exit = True


async def raw(url: str, token: str | None) -> httpx2.Response:
    """A `tools/list` POST with `token` (or none) as its bearer."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "tools/list",
        **({} if token is None else {"Authorization": f"Bearer {token}"}),
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    async with httpx2.AsyncClient(timeout=START_SECONDS) as http:
        return await http.post(url, content=json.dumps(body), headers=headers)


def tampered(token: str) -> str:
    """`token` with its payload's `client_id` changed, its signature kept."""
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["client_id"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return str(block.text)


# --- the tests -----------------------------------------------------------------------------


def test_no_token_is_401_with_the_sdk_challenge_naming_its_resource_metadata() -> None:
    async def main() -> None:
        async with realm() as world:
            refused = await raw(world.url, None)
            assert refused.status_code == 401, refused.text
            challenge = refused.headers["WWW-Authenticate"]
            prm_url = world.url.removesuffix("/mcp") + PRM_URL_PATH
            assert challenge.startswith("Bearer "), challenge
            assert f'resource_metadata="{prm_url}"' in challenge, challenge
            async with httpx2.AsyncClient(timeout=START_SECONDS) as http:
                metadata = (await http.get(prm_url)).json()
            assert metadata["resource"] == world.url
            assert metadata["authorization_servers"] == [world.issuer]
            async with connect_http(world.url) as client:  # (ours: no way to log in)
                with pytest.raises(AuthorizationError):
                    await client.list_tools()

    run_asyncio(main)


@pytest.mark.parametrize("validate_resource", [False, True], ids=["audience", "resource"])
def test_a_provider_token_calls_a_tool_and_runs_a_task_to_completion(
    validate_resource: bool,
) -> None:
    """Both ways: our verifier checks the audience; the SDK also checks the resource the
    adapter reports."""

    async def main() -> None:
        async with realm(validate_resource=validate_resource) as world:
            token = await world.token()
            headers = {"Authorization": f"Bearer {token}"}
            async with connect_http(world.url, headers=headers) as client:
                me = await client.call_tool("whoami")
                assert text_of(me) == f"{STATIC_CLIENT} {world.url}"
                task = await client.call_tool_or_task("job", {"n": 21})
                assert isinstance(task, WorkingTask), task
                done = await client.await_task(task)
                assert text_of(done) == f"42 for {STATIC_CLIENT} {world.url}"

    run_asyncio(main)


def test_a_tampered_token_and_a_token_without_the_scope_are_refused() -> None:
    async def main() -> None:
        async with realm(validate_resource=True) as world:
            token = await world.token()
            accepted = await raw(world.url, token)
            assert accepted.status_code == 200, accepted.text
            forged = await raw(world.url, tampered(token))
            assert forged.status_code == 401, forged.text
            assert 'error="invalid_token"' in forged.headers["WWW-Authenticate"]
            assert (await raw(world.url, token + "x")).status_code == 401
            narrow = await raw(world.url, await world.token("mcp:write"))
            assert narrow.status_code == 403, narrow.text
            assert 'error="insufficient_scope"' in narrow.headers["WWW-Authenticate"]

    run_asyncio(main)


def test_a_task_is_not_visible_to_another_principal() -> None:
    """The second principal: a client registered dynamically, with its own token."""

    async def main() -> None:
        async with realm(validate_resource=True) as world:
            mine = {"Authorization": f"Bearer {await world.token()}"}
            other_client = await world.register()
            theirs = {"Authorization": f"Bearer {await world.token(client=other_client)}"}
            who = await post(world.url, "tools/call", {"name": "whoami"}, headers=theirs)
            assert who.result["content"][0]["text"] == f"{other_client[0]} {world.url}"
            call = {"name": "job", "arguments": {"n": 1}}
            created = await post(
                world.url, "tools/call", call, capabilities=WITH_TASKS, headers=mine
            )
            task_id = created.result["taskId"]
            params = {"taskId": task_id}
            own = await post(world.url, "tasks/get", params, capabilities=WITH_TASKS, headers=mine)
            assert own.result["taskId"] == task_id
            other = await post(
                world.url, "tasks/get", params, capabilities=WITH_TASKS, headers=theirs
            )
            assert "result" not in other.body, other.body
            assert other.error["code"] == -32602, other.error
            cancel = await post(
                world.url, "tasks/cancel", params, capabilities=WITH_TASKS, headers=theirs
            )
            assert "result" not in cancel.body, cancel.body
            again = {"Authorization": f"Bearer {await world.token()}"}  # (the owner's, anew)
            async with connect_http(world.url, headers=again) as client:
                done = await client.await_task(task_id)  # (not cancelled by the other)
            assert text_of(done) == f"2 for {STATIC_CLIENT} {world.url}"

    run_asyncio(main)


def test_an_unreachable_issuer_is_not_answered_as_a_bad_token() -> None:
    """`VerifierUnavailable` (no key set to check with) reaches the SDK as an error of its
    own: not a 401, which would send the client to throw its token away."""

    async def main() -> None:
        async with realm() as world:
            token = await world.token()
            await world.stop_provider()  # (before the verifier ever fetched the keys)
            answer = await raw(world.url, token)
            assert answer.status_code == 500, answer.text
            assert "WWW-Authenticate" not in answer.headers

    run_asyncio(main)
