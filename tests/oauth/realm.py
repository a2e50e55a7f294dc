"""A protected MCP server and its real authorization server, all on loopback, for the
end-to-end tests of mcp_tasks.oauth:

- the authorization server: oidc-provider (tests/oauth/provider.mjs, a node process), which
  logs every request it gets, so a test can count them;
- the MCP server: ours (`Server` + `serve_http`), in this process, whose authenticator
  verifies the provider's JWT access tokens with joserfc (signature by the provider's JWKS,
  `iss`, `aud` = the server's URL, `exp`, `typ` at+jwt) and answers anything else 401 with
  `Bearer resource_metadata="<PRM URL>"`;
- the Protected Resource Metadata, served by a tiny HTTP server of its own (ours serves only
  its endpoint), whose documents a test may change.

Nothing sleeps: the provider is used once it printed its ready line, the servers in this
process once they are listening (`nursery.start`), and every wait has a deadline.
"""

from __future__ import annotations

import html
import json
import re
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import anyio
import anyio.abc
import h11
import httpx2
import trio
from interop.processes import START_SECONDS, Output, npm_node, started
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from mcp_tasks import Server, ToolContext
from mcp_tasks.transports import HttpConfig, Unauthorized, serve_http

PROVIDER = Path(__file__).resolve().parent / "provider.mjs"
PRM_PATH = "/.well-known/oauth-protected-resource/mcp"
STATIC_CLIENT = "svc"
"""provider.mjs's client for the client_credentials grant."""
RESOURCE_SCOPES = ["mcp:read", "mcp:write"]
"""What provider.mjs grants on the resource, and the PRM's `scopes_supported`."""


# --- the Protected Resource Metadata -------------------------------------------------------


class Documents:
    """An HTTP/1.1 server that answers any request for `path` with `documents[path]` as JSON
    (else 404), and keeps every request it got: "METHOD /target" in `requests`, the bodies
    in `bodies`."""

    def __init__(self) -> None:
        self.documents: dict[str, dict[str, Any]] = {}
        self.requests: list[str] = []
        self.bodies: list[bytes] = []

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        body = b""
        async with stream:
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    connection.receive_data(await stream.receive_some(65536))
                elif isinstance(event, h11.Request):
                    request, body = event, b""
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage) and request is not None:
                    await stream.send_all(self._answer(connection, request, body))
                    if connection.our_state is not h11.DONE:
                        return
                    connection.start_next_cycle()
                else:
                    return  # (the client closed, or the connection must close)

    def _answer(self, connection: h11.Connection, request: h11.Request, body: bytes) -> bytes:
        target = request.target.decode("ascii")
        self.requests.append(f"{request.method.decode('ascii')} {target}")
        self.bodies.append(body)
        document = self.documents.get(target.split("?")[0])
        status, answer = (200, json.dumps(document).encode()) if document else (404, b"{}")
        headers = [("content-type", "application/json"), ("content-length", str(len(answer)))]
        head = connection.send(h11.Response(status_code=status, headers=headers))
        rest = connection.send(h11.Data(data=answer)) + connection.send(h11.EndOfMessage())
        assert head is not None and rest is not None
        return head + rest


@asynccontextmanager
async def documents_served() -> AsyncIterator[tuple[Documents, str]]:
    """A `Documents` server on a free loopback port; yields it and its origin."""
    async with trio.open_nursery() as nursery:
        documents = Documents()
        port = await nursery.start(documents.serve)
        yield documents, f"http://127.0.0.1:{port}"
        nursery.cancel_scope.cancel()


# --- the MCP server ------------------------------------------------------------------------


class JwtCheck:
    """The MCP server's authenticator: the provider's JWT access tokens for `resource`."""

    def __init__(self, resource: str, metadata_url: str) -> None:
        self.resource = resource
        self.challenge = f'Bearer resource_metadata="{metadata_url}"'
        self.issuer = ""
        self.keys: KeySet | None = None
        self.accepted: list[dict[str, Any]] = []
        """The claims of every token let in, in order."""
        self.refused: list[str] = []
        """Why each request was answered 401, in order."""

    def trust(self, issuer: str, keys: KeySet) -> None:
        self.issuer, self.keys = issuer, keys

    def claims(self, token: str) -> dict[str, Any]:
        """The verified claims of an access token (JoseError when it is not good here)."""
        assert self.keys is not None, "trust() the provider first"
        decoded = jwt.decode(token, self.keys, algorithms=["ES256"])
        if decoded.header.get("typ") != "at+jwt":
            raise JoseError(f"typ {decoded.header.get('typ')!r} is not at+jwt")
        registry = jwt.JWTClaimsRegistry(
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self.resource},
            exp={"essential": True},
            sub={"essential": True},
        )
        registry.validate(decoded.claims)
        return decoded.claims

    def __call__(self, headers: Mapping[str, str]) -> str:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            self.refused.append("no token")
            raise Unauthorized("a bearer token is required", challenge=self.challenge)
        try:
            claims = self.claims(token.strip())
        except (JoseError, ValueError) as error:
            self.refused.append(f"{type(error).__name__}: {error}")
            raise Unauthorized(
                "the token is not good here",
                challenge=self.challenge + ', error="invalid_token"',
            ) from None
        self.accepted.append(claims)
        return str(claims["sub"])


def build_server() -> Server:
    server = Server("protected", "1.0.0")

    @server.tool()
    async def echo(ctx: ToolContext, text: str) -> str:
        """Say the text back."""
        return f"echo: {text}"

    return server


async def serve_mcp(
    check: JwtCheck, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED
) -> None:
    server = build_server()
    async with server.running():
        config = HttpConfig(authenticate=check)
        await serve_http(server, "127.0.0.1", 0, config=config, task_status=task_status)


# --- all of it -------------------------------------------------------------------------------


@dataclass
class Realm:
    url: str
    """The MCP server's endpoint: the resource its tokens are for."""
    issuer: str
    client_secret: str
    """The static client's (`STATIC_CLIENT`)."""
    metadata_url: str
    documents: Documents
    check: JwtCheck
    provider: Output
    """The provider's output, read as it comes."""
    _marks: int = 0

    def resource_metadata(self, **changes: Any) -> None:
        """Serve the PRM document, with `changes` to the right one."""
        document = {
            "resource": self.url,
            "authorization_servers": [self.issuer],
            "scopes_supported": RESOURCE_SCOPES,
            "bearer_methods_supported": ["header"],
        }
        self.documents.documents[PRM_PATH] = document | changes

    async def provider_requests(self) -> list[str]:
        """The requests the provider got since this was last asked ("METHOD /path").

        A marker request is sent and waited for in the provider's log: everything the
        client sent before was answered before, so it is logged before the marker."""
        self._marks += 1
        marker = f"/mark-{self._marks}"
        async with httpx2.AsyncClient(timeout=START_SECONDS) as http:
            await http.get(self.issuer + marker)
        lines = self.provider.lines["stdout"]
        before = len(lines)
        pattern = '"request":"GET ' + re.escape(marker) + '"'
        await trio.to_thread.run_sync(self.provider.wait_for, "stdout", pattern)
        logged = lines[before:-1]  # (with its notices, which are not JSON)
        return [json.loads(line)["request"] for line in logged if line.startswith('{"request"')]


@asynccontextmanager
async def realm() -> AsyncIterator[Realm]:
    """The three servers, running; a PRM document served for the MCP server."""
    node = npm_node()  # (skips the test, or fails it in CI, when the npm peers are missing)
    client_secret = secrets.token_urlsafe(24)
    async with trio.open_nursery() as nursery:
        documents = Documents()
        documents_port = await nursery.start(documents.serve)
        metadata_url = f"http://127.0.0.1:{documents_port}{PRM_PATH}"
        check = JwtCheck("", metadata_url)
        url = f"http://127.0.0.1:{await nursery.start(serve_mcp, check)}/mcp"
        check.resource = url
        with started([node, str(PROVIDER), "0", url, client_secret]) as (_, output):
            found = await trio.to_thread.run_sync(
                output.wait_for, "stdout", r'^\{"ready":"(http://127\.0\.0\.1:\d+)"\}$'
            )
            issuer = found.group(1)
            async with httpx2.AsyncClient(timeout=START_SECONDS) as http:
                jwks = (await http.get(issuer + "/jwks")).raise_for_status().json()
            check.trust(issuer, KeySet.import_key_set(jwks))
            world = Realm(
                url=url,
                issuer=issuer,
                client_secret=client_secret,
                metadata_url=metadata_url,
                documents=documents,
                check=check,
                provider=output,
            )
            world.resource_metadata()
            await world.provider_requests()  # (the JWKS fetch: not the client's)
            yield world
        nursery.cancel_scope.cancel()


# --- the user ------------------------------------------------------------------------------


class DevInteractionsUser:
    """A user agent that logs in on oidc-provider's devInteractions pages with no browser:
    it follows each 303 by hand (one cookie jar), posts the login form (any login and
    password) and the consent form, and stops at the redirect to `redirect_uri` (where
    nothing listens). Keeps each URL it was sent to and each page it filled in."""

    def __init__(self, redirect_uri: str, *, login: str = "alice") -> None:
        self.redirect_uri = redirect_uri
        self.login = login
        self.visited: list[str] = []
        self.pages: list[str] = []

    async def visit(self, authorization_url: str) -> str:
        self.visited.append(authorization_url)
        async with httpx2.AsyncClient(follow_redirects=False, timeout=START_SECONDS) as http:
            response = await http.get(authorization_url)
            for _ in range(20):
                if response.is_redirect:
                    target = urljoin(str(response.url), response.headers["location"])
                    if target.startswith(self.redirect_uri):
                        return target
                    response = await http.get(target)
                    continue
                response = await self._fill_in(http, response)
        raise AssertionError(f"no redirect to {self.redirect_uri} after 20 steps")

    async def _fill_in(self, http: httpx2.AsyncClient, page: httpx2.Response) -> httpx2.Response:
        assert page.status_code == 200, f"HTTP {page.status_code}: {page.text[:500]}"
        action = re.search(r'<form[^>]*\baction="([^"]+)"', page.text)
        prompt = re.search(r'name="prompt" value="([a-z]+)"', page.text)
        assert action is not None and prompt is not None, page.text[:2000]
        self.pages.append(prompt.group(1))
        form = {"prompt": prompt.group(1)}
        if prompt.group(1) == "login":
            form |= {"login": self.login, "password": "any password"}
        return await http.post(urljoin(str(page.url), html.unescape(action.group(1))), data=form)


class NoUser:
    """A user agent that must not be needed: a visit fails the test."""

    def __init__(self, redirect_uri: str) -> None:
        self.redirect_uri = redirect_uri
        self.visited: list[str] = []

    async def visit(self, authorization_url: str) -> str:
        self.visited.append(authorization_url)
        raise AssertionError(f"the user was sent to log in: {authorization_url}")
