"""`ResourceServer` on both drivers of the endpoint: the built-in server (real sockets) and
the ASGI app (called with ASGI messages). Tokens are checked by a `TokenVerifier` of this
file's own (a table), so every answer a verifier can give is shown; tests/auth/test_*_e2e
show the real verifiers against a real authorization server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import trio
from asgi.test_asgi_health import Exchange
from runtime.helpers import request
from transports.test_http import TASKS_CAPS, Response

from mcp_tasks import Server, ToolContext
from mcp_tasks.asgi import asgi_app
from mcp_tasks.auth import (
    AccessToken,
    IntrospectionVerifier,
    InvalidToken,
    JwtVerifier,
    ResourceServer,
    VerifierUnavailable,
    current_access_token,
)
from mcp_tasks.transports import HttpConfig, serve_http

WAIT = 10
GET = "tasks/get"
RESOURCE = "https://mcp.example.com/public/mcp"
ISSUER = "https://auth.example.com"
METADATA_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp"


def token(subject: str, *scopes: str, client: str | None = "app") -> AccessToken:
    return AccessToken(subject=subject, client_id=client, scopes=frozenset(scopes))


class TableVerifier:
    """A `TokenVerifier` that knows a few tokens by name."""

    def __init__(self) -> None:
        self.tokens = {
            "reader": token("alice", "mcp:read"),
            "writer": token("alice", "mcp:read", "mcp:write"),
            "admin": token("root", "mcp:read", "mcp:admin"),
            "bob": token("bob", "mcp:read"),
            "nothing": token("carol"),
        }
        self.seen: list[str] = []

    async def verify(self, token: str) -> AccessToken:
        self.seen.append(token)
        if token == "down":
            raise VerifierUnavailable("the keys did not answer", retry_after_seconds=7)
        found = self.tokens.get(token)
        if found is None:
            raise InvalidToken("the token has expired")
        return found


def protection(**changes: Any) -> ResourceServer:
    options: dict[str, Any] = {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "verifier": TableVerifier(),
        "scopes": ["mcp:read"],
        "scope_implies": {"mcp:admin": ["mcp:write"]},
        "resource_name": "Example",
    }
    return ResourceServer(**(options | changes))


def build_server() -> Server:
    server = Server("protected", "1.0.0")

    @server.tool()
    async def whoami(ctx: ToolContext) -> str:
        """The caller, as the tool sees it."""
        access = current_access_token()
        assert access is not None
        return f"{access.principal} {' '.join(sorted(access.scopes))}"

    @server.tool(scopes=["mcp:write"])
    async def write(ctx: ToolContext) -> str:
        return "written"

    @server.tool(task_support="required")
    async def job(ctx: ToolContext) -> str:
        return "done"

    @server.prompt(scopes=["mcp:write"])
    async def draft(ctx: ToolContext) -> str:
        return "a draft"

    @server.resource("notes://secret", scopes=["mcp:admin"])
    async def secret(ctx: ToolContext) -> str:
        return "the secret"

    @server.resource_template("notes://{name}", scopes=["mcp:write"])
    async def note(ctx: ToolContext, name: str) -> str:
        return f"note {name}"

    return server


Send = Callable[[str, str, Sequence[tuple[str, str]], bytes], Any]


@asynccontextmanager
async def built_in(config: HttpConfig) -> AsyncIterator[Send]:
    """The built-in server on a loopback port; yields how to send it a request."""
    server = build_server()
    async with trio.open_nursery() as nursery, server.running():
        port = await nursery.start(
            lambda task_status: serve_http(
                server, "127.0.0.1", 0, config=config, task_status=task_status
            )
        )
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:

            async def send(
                method: str, path: str, headers: Sequence[tuple[str, str]], body: bytes
            ) -> Response:
                answer = await http.request(method, path, headers=list(headers), content=body)
                return Response(answer.status_code, dict(answer.headers), answer.content)

            yield send
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def through_asgi(config: HttpConfig) -> AsyncIterator[Send]:
    """The ASGI app, called with ASGI messages; yields how to send it a request."""
    server = build_server()
    app = asgi_app(server, config)
    async with server.running():

        async def send(
            method: str, path: str, headers: Sequence[tuple[str, str]], body: bytes
        ) -> Response:
            return await Exchange(method, path, headers, body).run(app)

        yield send


DRIVERS = {"built-in": built_in, "asgi": through_asgi}


def call(name: str, bearer: str | None, *, method: str = "tools/call", **params: Any) -> tuple:
    """The headers and body of a request (`bearer`: the Authorization header's token)."""
    body = request(method, {"name": name, **params} if name else params, caps=TASKS_CAPS)
    headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ]
    named = name or params.get("uri") or params.get("taskId")
    if named:
        headers.append(("mcp-name", named))
    if bearer is not None:
        headers.append(("authorization", bearer))
    return headers, body


def challenge_of(answer: Response) -> dict[str, str]:
    """The parameters of a `Bearer` challenge (every value quoted, as we send them)."""
    value = answer.headers["www-authenticate"]
    assert value.startswith("Bearer "), value
    pairs = [part.strip().split("=", 1) for part in value[len("Bearer ") :].split('", ')]
    return {name: quoted.strip('"') for name, quoted in pairs}


@pytest.fixture(params=list(DRIVERS))
async def endpoint(request: pytest.FixtureRequest) -> AsyncIterator[Send]:
    async with DRIVERS[request.param](HttpConfig(resource_server=protection())) as send:
        yield send


# --- the metadata ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-protected-resource/public/mcp",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ],
)
async def test_the_metadata_is_served_without_credentials(endpoint: Send, path: str) -> None:
    with trio.fail_after(WAIT):
        answer = await endpoint("GET", path, [("origin", "https://elsewhere.example")], b"")
        head = await endpoint("HEAD", path, [], b"")
        preflight = await endpoint("OPTIONS", path, [], b"")
        post = await endpoint("POST", path, [], b"{}")
    assert answer.status == 200 and answer.json() == {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["mcp:read"],
        "resource_name": "Example",
    }
    assert answer.headers["access-control-allow-origin"] == "*"
    assert head.status == 200 and head.body == b""
    assert preflight.status == 204 and "GET" in preflight.headers["access-control-allow-methods"]
    assert post.status == 405


def test_the_metadata_url_inserts_the_well_known_path_before_the_resources() -> None:
    assert protection().metadata_url == METADATA_URL
    root = protection(resource="https://mcp.example.com/")
    assert root.metadata_url == "https://mcp.example.com/.well-known/oauth-protected-resource"
    assert root.metadata_paths("/mcp") == [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ]


# --- the challenges ----------------------------------------------------------------------


async def test_no_token_is_401_with_where_to_log_in(endpoint: Send) -> None:
    for bearer in (None, "Basic YWxpY2U6cHc="):
        with trio.fail_after(WAIT):
            answer = await endpoint("POST", "/mcp", *call("whoami", bearer))
        assert answer.status == 401
        assert challenge_of(answer) == {"resource_metadata": METADATA_URL, "scope": "mcp:read"}
        assert answer.json()["error"]["code"] == -32600


async def test_two_tokens_in_one_header_are_400(endpoint: Send) -> None:
    with trio.fail_after(WAIT):
        answer = await endpoint("POST", "/mcp", *call("whoami", "Bearer reader writer"))
    assert answer.status == 400 and challenge_of(answer)["error"] == "invalid_request"


async def test_a_token_the_verifier_refuses_is_401_invalid_token(endpoint: Send) -> None:
    with trio.fail_after(WAIT):
        answer = await endpoint("POST", "/mcp", *call("whoami", "Bearer stale-token"))
    assert answer.status == 401
    assert challenge_of(answer) == {
        "error": "invalid_token",
        "error_description": "the token has expired",
        "resource_metadata": METADATA_URL,
        "scope": "mcp:read",
    }
    assert answer.json()["error"]["message"] == "Unauthorized: the token has expired"
    assert "stale-token" not in answer.body.decode() + str(answer.headers)


async def test_a_token_that_cannot_be_checked_now_is_503_not_401(endpoint: Send) -> None:
    with trio.fail_after(WAIT):
        answer = await endpoint("POST", "/mcp", *call("whoami", "Bearer down"))
    assert answer.status == 503 and answer.headers["retry-after"] == "7"
    assert "www-authenticate" not in answer.headers
    assert answer.json()["error"]["data"] == {"retryAfterMs": 7000}


async def test_a_token_without_the_resources_scope_is_403(endpoint: Send) -> None:
    with trio.fail_after(WAIT):
        answer = await endpoint("POST", "/mcp", *call("whoami", "Bearer nothing"))
    assert answer.status == 403
    found = challenge_of(answer)
    assert (found["error"], found["scope"]) == ("insufficient_scope", "mcp:read")


# --- scopes per operation ----------------------------------------------------------------


async def test_a_tool_sees_the_callers_token(endpoint: Send) -> None:
    with trio.fail_after(WAIT):
        answer = await endpoint("POST", "/mcp", *call("whoami", "Bearer reader", arguments={}))
    assert answer.status == 200, answer.body
    assert answer.json()["result"]["content"][0]["text"] == "alice via app mcp:read"


async def test_a_tool_needing_a_scope_is_403_naming_all_it_needs(endpoint: Send) -> None:
    headers, body = call("write", "Bearer reader", arguments={})
    with trio.fail_after(WAIT):
        refused = await endpoint("POST", "/mcp", headers, body)
        allowed = await endpoint("POST", "/mcp", *call("write", "Bearer writer", arguments={}))
        implied = await endpoint("POST", "/mcp", *call("write", "Bearer admin", arguments={}))
    assert refused.status == 403
    found = challenge_of(refused)
    assert found["error"] == "insufficient_scope"
    assert found["scope"] == "mcp:read mcp:write"  # one challenge: all the call needs
    assert found["resource_metadata"] == METADATA_URL
    error = refused.json()
    assert (
        error["id"] == json.loads(body)["id"]
        and "needs the scope 'mcp:write'" in error["error"]["message"]
    )
    assert allowed.status == 200 and implied.status == 200  # mcp:admin implies mcp:write


@pytest.mark.parametrize(
    ("method", "params", "needs"),
    [
        ("prompts/get", {"name": "draft"}, "mcp:write"),
        ("resources/read", {"uri": "notes://secret"}, "mcp:admin"),
        ("resources/read", {"uri": "notes://todo"}, "mcp:write"),
    ],
)
async def test_prompts_and_resources_need_their_scopes(
    endpoint: Send, method: str, params: dict[str, str], needs: str
) -> None:
    name = params.get("name", "")
    extra = {} if name else params
    with trio.fail_after(WAIT):
        refused = await endpoint(
            "POST", "/mcp", *call(name, "Bearer reader", method=method, **extra)
        )
        allowed = await endpoint(
            "POST", "/mcp", *call(name, "Bearer admin", method=method, **extra)
        )
    assert refused.status == 403 and challenge_of(refused)["scope"] == f"mcp:read {needs}"
    assert allowed.status == 200, allowed.body


async def test_tasks_stay_bound_to_the_principal_of_the_token() -> None:
    async with built_in(HttpConfig(resource_server=protection())) as send:
        with trio.fail_after(WAIT):
            created = await send("POST", "/mcp", *call("job", "Bearer reader", arguments={}))
            task_id = created.json()["result"]["taskId"]
            own = await send(
                "POST", "/mcp", *call("", "Bearer reader", method="tasks/get", taskId=task_id)
            )
            other = await send(
                "POST", "/mcp", *call("", "Bearer bob", method="tasks/get", taskId=task_id)
            )
    assert own.status == 200 and own.json()["result"]["taskId"] == task_id
    assert "result" not in other.json(), other.json()  # bob's token does not open alice's task


# --- what is refused at registration -----------------------------------------------------


def test_scopes_are_checked_when_registered() -> None:
    server = Server("s", "1")
    with pytest.raises(TypeError, match="not one string"):
        server.tool(scopes="mcp:write")
    with pytest.raises(ValueError, match="is not a scope"):
        server.prompt(scopes=["mcp write"])

    @server.tool(scopes=["mcp:write"])
    async def gone(ctx: ToolContext) -> str:
        return ""

    assert server.scopes_needed("tools/call", "gone") == {"mcp:write"}
    server.remove_tool("gone")
    assert server.scopes_needed("tools/call", "gone") == frozenset()
    assert not server.scoped_operations


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"resource": "/mcp"}, "absolute URL"),
        ({"authorization_servers": []}, "at least one issuer"),
        ({"scopes": ["offline_access"]}, "not a scope"),
        ({"verifier": object()}, "verify"),
    ],
)
def test_a_resource_server_is_checked_when_made(changes: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        protection(**changes)


def test_authenticate_and_a_resource_server_do_not_go_together() -> None:
    with pytest.raises(ValueError, match="not both"):
        HttpConfig(resource_server=protection(), authenticate=lambda headers: "someone")


@pytest.mark.parametrize(
    ("arguments", "options", "message"),
    [
        (("http://auth.example.com", RESOURCE), {}, "not https"),
        ((ISSUER, RESOURCE), {"algorithms": ["HS256"]}, "shared secret"),
        ((ISSUER, RESOURCE), {"algorithms": ["none"]}, "shared secret"),
        ((ISSUER, ""), {}, "an issuer and an audience"),
        ((ISSUER, RESOURCE), {"leeway_seconds": 3600}, "leeway_seconds"),
    ],
)
def test_a_jwt_verifier_refuses_what_would_make_it_unsafe(
    arguments: tuple[str, str], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        JwtVerifier(*arguments, **options)


def test_an_introspection_verifier_needs_its_credentials_and_does_not_show_them() -> None:
    with pytest.raises(ValueError, match="client_secret"):
        IntrospectionVerifier(ISSUER, RESOURCE, client_id="mcp", client_secret="")
    verifier = IntrospectionVerifier(ISSUER, RESOURCE, client_id="mcp", client_secret="hush-42")
    assert "hush-42" not in repr(verifier) and "hush-42" not in repr(vars(verifier))


def test_implied_scopes_are_followed_to_the_end() -> None:
    chain = protection(scope_implies={"a": ["b"], "b": ["c"], "c": ["a"]})
    assert chain.granted(token("x", "a")) == {"a", "b", "c"}
    assert chain.missing(token("x", "b"), ["c", "d"]) == ["d"]


async def test_a_2025_session_needs_the_token_on_every_request_and_keeps_to_its_principal() -> None:
    initialize = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "old", "version": "1"},
            },
        }
    ).encode()
    headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ]
    async with built_in(HttpConfig(resource_server=protection())) as send:
        with trio.fail_after(WAIT):
            refused = await send("POST", "/mcp", headers, initialize)
            opened = await send(
                "POST", "/mcp", [*headers, ("authorization", "Bearer reader")], initialize
            )
            session = [
                ("mcp-session-id", opened.headers["mcp-session-id"]),
                ("mcp-protocol-version", "2025-11-25"),
                ("accept", "text/event-stream"),
            ]
            no_token = await send("DELETE", "/mcp", session, b"")
            other = await send("DELETE", "/mcp", [*session, ("authorization", "Bearer bob")], b"")
            own = await send("DELETE", "/mcp", [*session, ("authorization", "Bearer reader")], b"")
    assert refused.status == 401 and "resource_metadata" in refused.headers["www-authenticate"]
    assert opened.status == 200, opened.body
    assert no_token.status == 401
    assert other.status == 404  # bob's token does not reach alice's session
    assert own.status in (200, 202, 204), own.body
