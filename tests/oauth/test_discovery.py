"""Discovery over loopback HTTP (mcp_tasks/oauth/_steps.py), against documents a test serves:
the metadata URLs tried in the MCP order, traps on the wrong ones never fetched, a document
for another issuer not used, PKCE S256 required; and the refresh of an expired token before
it is sent, which must hold to the same rules as a login."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import httpx2
import pytest
import trio

from mcp_tasks.oauth import (
    AuthorizationError,
    Login,
    MemoryTokenStorage,
    OAuth,
    Registration,
    Tokens,
)
from mcp_tasks.oauth._metadata import protected_resource_urls
from mcp_tasks.oauth._steps import fetch_resource_metadata, fetch_server_metadata

from .realm import Documents, documents_served

TRAP = {"resource": "https://trap.example/", "authorization_servers": ["https://trap.example"]}


@pytest.fixture
async def served() -> AsyncIterator[tuple[Documents, str]]:
    async with documents_served() as (documents, origin):
        yield documents, origin


def server_metadata(issuer: str, **changes: Any) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "authorization_endpoint": issuer + "/authorize",
        "token_endpoint": issuer + "/token",
        "code_challenge_methods_supported": ["S256"],
    } | changes


async def test_the_challenges_metadata_url_is_tried_first_then_the_path_form(
    served: tuple[Documents, str],
) -> None:
    documents, origin = served
    found = {"resource": origin + "/mcp", "authorization_servers": ["https://a.example"]}
    documents.documents["/.well-known/oauth-protected-resource/mcp"] = found
    documents.documents["/.well-known/oauth-protected-resource"] = TRAP
    urls = protected_resource_urls(origin + "/mcp", origin + "/gone")
    async with httpx2.AsyncClient() as http:
        metadata = await fetch_resource_metadata(http, urls)
    assert (metadata.resource, metadata.authorization_servers) == (
        origin + "/mcp",
        ["https://a.example"],
    )
    assert documents.requests == ["GET /gone", "GET /.well-known/oauth-protected-resource/mcp"]


async def test_metadata_without_an_authorization_server_is_passed_over(
    served: tuple[Documents, str],
) -> None:
    documents, origin = served
    documents.documents["/.well-known/oauth-protected-resource/mcp"] = {
        "resource": origin + "/mcp",
        "authorization_servers": [],
    }
    async with httpx2.AsyncClient() as http:
        with pytest.raises(AuthorizationError, match="names no authorization server"):
            await fetch_resource_metadata(http, protected_resource_urls(origin + "/mcp", None))
    assert documents.requests == [
        "GET /.well-known/oauth-protected-resource/mcp",
        "GET /.well-known/oauth-protected-resource",
    ]


async def test_no_resource_metadata_anywhere_says_where_it_looked(
    served: tuple[Documents, str],
) -> None:
    _, origin = served
    async with httpx2.AsyncClient() as http:
        with pytest.raises(AuthorizationError, match="HTTP 404") as raised:
            await fetch_resource_metadata(http, protected_resource_urls(origin + "/mcp", None))
    assert origin + "/.well-known/oauth-protected-resource/mcp: HTTP 404" in str(raised.value)


async def test_resource_metadata_is_never_fetched_over_plain_http_from_another_machine() -> None:
    async with httpx2.AsyncClient() as http:
        with pytest.raises(AuthorizationError, match="not https"):
            await fetch_resource_metadata(http, ["http://example.invalid/prm"])


async def test_a_document_for_another_issuer_is_not_used_and_the_next_url_is_tried(
    served: tuple[Documents, str],
) -> None:
    documents, origin = served
    issuer = origin + "/tenant"
    documents.documents["/.well-known/oauth-authorization-server/tenant"] = server_metadata(
        issuer + "/"
    )
    documents.documents["/tenant/.well-known/openid-configuration"] = server_metadata(issuer)
    documents.documents["/.well-known/oauth-authorization-server"] = server_metadata(origin)
    async with httpx2.AsyncClient() as http:
        metadata = await fetch_server_metadata(http, issuer)
    assert metadata.issuer == issuer
    assert metadata.token_endpoint == issuer + "/token"
    assert documents.requests == [
        "GET /.well-known/oauth-authorization-server/tenant",
        "GET /.well-known/openid-configuration/tenant",
        "GET /tenant/.well-known/openid-configuration",
    ]


async def test_no_document_for_the_issuer_is_an_error_saying_why(
    served: tuple[Documents, str],
) -> None:
    documents, origin = served
    documents.documents["/.well-known/oauth-authorization-server"] = server_metadata(origin + "/")
    async with httpx2.AsyncClient() as http:
        with pytest.raises(AuthorizationError, match="no metadata found") as raised:
            await fetch_server_metadata(http, origin)
    assert f"names issuer {origin + '/'!r}, not {origin!r} (not used)" in str(raised.value)
    assert "HTTP 404" in str(raised.value)


async def test_what_a_document_names_is_cut_short_in_the_error(
    served: tuple[Documents, str],
) -> None:
    documents, origin = served
    huge = origin + "/" + "x" * 20_000
    documents.documents["/.well-known/oauth-authorization-server"] = server_metadata(huge)
    async with httpx2.AsyncClient() as http:
        with pytest.raises(AuthorizationError, match="names issuer") as raised:
            await fetch_server_metadata(http, origin)
    assert len(str(raised.value)) < 2_000  # (the document's issuer is shown cut, with "...")
    assert "x" * 150 + "...'" in str(raised.value)


@pytest.mark.parametrize("methods", [None, [], ["plain"]])
async def test_an_authorization_server_without_pkce_s256_is_refused(
    served: tuple[Documents, str], methods: list[str] | None
) -> None:
    documents, origin = served
    documents.documents["/.well-known/oauth-authorization-server"] = server_metadata(
        origin, code_challenge_methods_supported=methods
    )
    async with httpx2.AsyncClient() as http:
        with pytest.raises(AuthorizationError, match="does not list PKCE S256"):
            await fetch_server_metadata(http, origin)


async def test_an_endpoint_over_plain_http_to_another_machine_is_refused(
    served: tuple[Documents, str],
) -> None:
    documents, origin = served
    documents.documents["/.well-known/oauth-authorization-server"] = server_metadata(
        origin, token_endpoint="http://example.invalid/token"
    )
    async with httpx2.AsyncClient() as http:
        with pytest.raises(AuthorizationError, match="token_endpoint is not https"):
            await fetch_server_metadata(http, origin)


async def test_an_issuer_over_plain_http_to_another_machine_is_never_asked() -> None:
    async with httpx2.AsyncClient() as http:
        with pytest.raises(AuthorizationError, match="is not https"):
            await fetch_server_metadata(http, "http://example.invalid")


# --- refreshing an expired token before it is sent -----------------------------------------


def expired_login(issuer: str) -> Login:
    return Login(
        issuer=issuer,
        registration=Registration(client_id="c-1", redirect_uris=["http://127.0.0.1:1/cb"]),
        tokens=Tokens(access_token="old", refresh_token="rt-1", expires_at=0.0, scopes=["s"]),
    )


async def refreshing(documents: Documents, origin: str, resource: str) -> tuple[OAuth, str | None]:
    """An OAuth for `origin`/mcp holding an expired token, asked for its header; the
    resource metadata names `resource`, the authorization server is `origin`."""
    documents.documents["/.well-known/oauth-protected-resource/mcp"] = {
        "resource": resource,
        "authorization_servers": [origin],
    }
    documents.documents["/.well-known/oauth-authorization-server"] = server_metadata(origin)
    documents.documents["/token"] = {"access_token": "new", "token_type": "Bearer"}
    storage = MemoryTokenStorage()
    await storage.save(origin + "/mcp", expired_login(origin))
    auth = OAuth(origin + "/mcp", storage=storage)
    with trio.fail_after(20):
        return auth, await auth.authorization()


async def test_an_expired_token_is_refreshed_before_it_is_sent(
    served: tuple[Documents, str],
) -> None:
    documents, origin = served
    auth, header = await refreshing(documents, origin, origin + "/mcp")
    assert header == "Bearer new"
    assert documents.requests[-1] == "POST /token"
    form = {name: values for name, values in parse_qs(documents.bodies[-1].decode()).items()}
    assert form["grant_type"] == ["refresh_token"]
    assert form["refresh_token"] == ["rt-1"]
    assert form["resource"] == [origin + "/mcp"]
    kept = await auth.storage.load(origin + "/mcp")
    assert kept is not None and kept.tokens is not None
    assert (kept.tokens.access_token, kept.tokens.refresh_token) == ("new", "rt-1")
    assert kept.tokens.scopes == ["s"]


async def test_no_refresh_for_metadata_naming_another_resource(
    served: tuple[Documents, str],
) -> None:
    documents, origin = served
    _, header = await refreshing(documents, origin, "https://victim.example/mcp")
    assert "POST /token" not in documents.requests
    assert header == "Bearer old"
