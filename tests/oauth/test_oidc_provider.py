"""mcp_tasks.oauth end to end against a real authorization server, oidc-provider 9.13.3 (npm,
pinned in tests/interop/npm), and our own server protected by its JWT access tokens (see
realm.py): the authorization-code grant with dynamic registration and a user who logs in;
the client-credentials grant of a static client; a protected resource metadata document that
names another resource (refused before the authorization server is asked anything); a login
kept in a file and used again without the user; a server that refuses every token.

Skipped, saying how to install them, when Node 22 or the npm peers (oidc-provider among them)
are not installed; a failure instead in CI (`CI` set)."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import trio
from interop import processes
from interop.processes import CLIENT_SECONDS
from redis_server import free_port

from mcp_tasks import CallToolResult
from mcp_tasks.client import RpcError, TransportError, connect_http
from mcp_tasks.oauth import (
    AuthorizationError,
    FileTokenStorage,
    Login,
    MemoryTokenStorage,
    OAuth,
    TokenStorage,
)

from .realm import RESOURCE_SCOPES, STATIC_CLIENT, DevInteractionsUser, NoUser, Realm, realm


@pytest.mark.parametrize(
    ("ci", "outcome"), [(None, pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
async def test_without_the_npm_peers_these_tests_skip_and_fail_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str | None, outcome: type
) -> None:
    shutil.copy(processes.NPM_PEERS / "package-lock.json", tmp_path / "package-lock.json")
    monkeypatch.setattr(processes, "NPM_PEERS", tmp_path)  # (with nothing installed)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="install them with tests/interop/npm/install"):
        async with realm():
            pass


def callback_uri() -> str:
    return f"http://127.0.0.1:{free_port()}/callback"


def text_of(result: CallToolResult) -> str:
    assert not result.is_error, result
    return result.content[0].text  # type: ignore[union-attr]


async def echo(world: Realm, auth: OAuth, text: str) -> str:
    with trio.fail_after(CLIENT_SECONDS):
        async with connect_http(world.url, auth=auth) as client:
            return text_of(await client.call_tool("echo", {"text": text}))


async def stored(storage: TokenStorage, world: Realm) -> Login:
    login = await storage.load(world.url)
    assert login is not None, "no login was stored for the server"
    return login


def without_the_pages(requests: list[str]) -> list[str]:
    """The requests to the provider that are not the user's browsing of its pages."""
    return [
        request
        for request in requests
        if not request.startswith(("GET /interaction/", "POST /interaction/", "GET /auth/"))
    ]


async def log_in_with_the_user(world: Realm, storage: TokenStorage) -> DevInteractionsUser:
    user = DevInteractionsUser(callback_uri())
    auth = OAuth(world.url, user_agent=user, storage=storage)
    assert await echo(world, auth, "hello") == "echo: hello"
    return user


async def test_authorization_code_with_dynamic_registration_and_a_user_login() -> None:
    async with realm() as world:
        storage = MemoryTokenStorage()
        user = await log_in_with_the_user(world, storage)

        login = await stored(storage, world)
        assert login.issuer == world.issuer
        registration, tokens = login.registration, login.tokens
        assert registration is not None and tokens is not None
        assert registration.how == "dynamic"
        assert registration.client_id
        assert registration.redirect_uris == [user.redirect_uri]
        assert registration.auth_method == "none"

        # the user went once, with PKCE S256 and the resource the metadata named
        assert user.pages == ["login", "consent"]
        [visited] = user.visited
        assert visited.startswith(world.issuer + "/auth?")
        query = {name: values[0] for name, values in parse_qs(urlsplit(visited).query).items()}
        assert query["resource"] == world.url
        assert query["client_id"] == registration.client_id
        assert query["redirect_uri"] == user.redirect_uri
        assert (query["response_type"], query["code_challenge_method"]) == ("code", "S256")
        assert query["scope"].split() == [*RESOURCE_SCOPES, "offline_access"]

        # the token: a JWT for this resource from this issuer, for this client and user
        claims = world.check.claims(tokens.access_token)
        assert claims["aud"] == world.url
        assert claims["iss"] == world.issuer
        assert claims["client_id"] == registration.client_id
        assert claims["sub"] == "alice"
        assert set(claims["scope"].split()) == set(RESOURCE_SCOPES)
        assert tokens.scopes == [*RESOURCE_SCOPES, "offline_access"]
        assert tokens.expires_at is not None

        # the server refused the first request, then let in only that token
        assert world.check.refused == ["no token"]
        assert world.check.accepted
        assert {accepted["jti"] for accepted in world.check.accepted} == {claims["jti"]}

        # metadata by the challenge's URL; at the provider: discovery, registration, the
        # authorization request, one token request
        assert world.documents.requests == ["GET /.well-known/oauth-protected-resource/mcp"]
        assert without_the_pages(await world.provider_requests()) == [
            "GET /.well-known/oauth-authorization-server",
            "POST /reg",
            "GET /auth",
            "POST /token",
        ]


async def test_client_credentials_of_a_static_client_with_a_secret() -> None:
    async with realm() as world:
        storage = MemoryTokenStorage()
        auth = OAuth(
            world.url,
            grant="client_credentials",
            client_id=STATIC_CLIENT,
            client_secret=world.client_secret,
            storage=storage,
        )
        assert await echo(world, auth, "as a service") == "echo: as a service"

        login = await stored(storage, world)
        assert login.issuer == world.issuer
        assert login.registration is not None and login.tokens is not None
        assert login.registration.how == "pre-registered"
        assert login.registration.client_id == STATIC_CLIENT
        assert login.registration.auth_method == "client_secret_basic"
        assert login.tokens.refresh_token is None
        claims = world.check.claims(login.tokens.access_token)
        assert (claims["aud"], claims["client_id"], claims["sub"]) == (
            world.url,
            STATIC_CLIENT,
            STATIC_CLIENT,
        )
        assert set(claims["scope"].split()) == set(RESOURCE_SCOPES)
        assert without_the_pages(await world.provider_requests()) == [
            "GET /.well-known/oauth-authorization-server",
            "POST /token",
        ]


async def test_client_credentials_with_a_wrong_secret_fail_without_showing_it() -> None:
    async with realm() as world:
        wrong = "wrong-" + world.client_secret
        auth = OAuth(
            world.url, grant="client_credentials", client_id=STATIC_CLIENT, client_secret=wrong
        )
        with pytest.raises(
            AuthorizationError, match="refused the client_credentials grant: "
        ) as raised:
            await echo(world, auth, "no")
        assert "invalid_client" in str(raised.value)
        assert wrong not in str(raised.value)
        assert world.check.accepted == []


@pytest.mark.parametrize("wrong", ["path", "longer path", "port", "host", "scheme"])
async def test_metadata_naming_another_resource_is_refused_before_the_authorization_server(
    wrong: str,
) -> None:
    async with realm() as world:
        port = urlsplit(world.url).port
        resource = {
            "path": world.url.removesuffix("/mcp") + "/other",
            "longer path": world.url + "x",
            "port": f"http://127.0.0.1:{free_port()}/mcp",
            "host": f"http://localhost:{port}/mcp",
            "scheme": f"https://127.0.0.1:{port}/mcp",
        }[wrong]
        world.resource_metadata(resource=resource)
        user = DevInteractionsUser(callback_uri())
        auth = OAuth(world.url, user_agent=user, storage=MemoryTokenStorage())
        with pytest.raises(AuthorizationError, match="protected resource metadata names") as raised:
            await echo(world, auth, "no")
        assert repr(resource) in str(raised.value)
        assert "no authorization server is asked" in str(raised.value)
        assert user.visited == []
        assert world.documents.requests == ["GET /.well-known/oauth-protected-resource/mcp"]
        assert await world.provider_requests() == []
        assert world.check.accepted == []


async def test_a_login_kept_in_a_file_is_used_again_without_the_user(tmp_path: Path) -> None:
    path = tmp_path / "config" / "logins.json"
    async with realm() as world:
        await log_in_with_the_user(world, FileTokenStorage(path))
        kept = await stored(FileTokenStorage(path), world)
        assert kept.tokens is not None
        await world.provider_requests()
        refused_before = list(world.check.refused)

        nobody = NoUser(callback_uri())
        again = OAuth(world.url, user_agent=nobody, storage=FileTokenStorage(path))
        assert await echo(world, again, "again") == "echo: again"

        assert nobody.visited == []
        assert await world.provider_requests() == []
        assert world.check.refused == refused_before  # (the kept token went first time)
        last = world.check.accepted[-1]
        assert last["jti"] == world.check.claims(kept.tokens.access_token)["jti"]
        assert await stored(FileTokenStorage(path), world) == kept


async def test_a_server_that_refuses_every_token_gets_three_logins_then_its_refusal() -> None:
    async with realm() as world:
        world.check.resource = "http://127.0.0.1:1/elsewhere"  # (no token is for it)
        user = DevInteractionsUser(callback_uri())
        auth = OAuth(world.url, user_agent=user, storage=MemoryTokenStorage())
        with pytest.raises((RpcError, TransportError)):
            await echo(world, auth, "no")
        assert len(user.visited) == 3
        assert without_the_pages(await world.provider_requests()).count("POST /token") == 3
