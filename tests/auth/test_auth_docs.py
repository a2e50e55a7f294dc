"""docs/auth.md's snippets, run: the guide's server against the real authorization server
(oidc-provider, tests/oauth/provider.mjs), with the provider's scopes (`mcp:read`,
`mcp:write`) in place of the page's `notes:` ones; the others made and used."""

from __future__ import annotations

import secrets
from contextlib import ExitStack

import httpx2
import pytest
import trio
from test_doc_snippets_all import running_main, snippet, text_of

from auth.realm import client_token, free_port, run_provider
from mcp_tasks.auth import AccessToken, InvalidToken, ResourceServer
from mcp_tasks.client import RpcError, connect_http

WAIT = 30
SCOPES = {"notes:read": "mcp:read", "notes:write": "mcp:write"}


async def test_the_guides_server_takes_the_providers_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    secret = secrets.token_urlsafe(16)
    with ExitStack() as stack, trio.fail_after(WAIT):
        _, _, issuer = await run_provider(stack, "0", url, secret, None)
        monkeypatch.setenv("ISSUER", issuer)
        monkeypatch.setenv("RESOURCE", url)
        names = snippet("auth.md", "JwtVerifier(ISSUER, RESOURCE)", port=port, replace=SCOPES)
        snippet("auth.md", "a report for nobody", names=names)
        async with running_main(names["main"], port):
            async with httpx2.AsyncClient() as http:
                refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert refused.status_code == 401
            assert "resource_metadata=" in refused.headers["www-authenticate"]
            reader = await client_token(issuer, secret, url, "mcp:read")
            writer = await client_token(issuer, secret, url, "mcp:read mcp:write")
            async with connect_http(url, headers={"Authorization": f"Bearer {reader}"}) as client:
                assert text_of(await client.call_tool("whoami", {})) == "svc"
                report = text_of(await client.call_tool("report", {}))
                assert report == "a report for svc (client svc)"
                with pytest.raises(RpcError, match="needs the scope 'mcp:write'"):
                    await client.call_tool("add_note", {"text": "hi"})
            async with connect_http(url, headers={"Authorization": f"Bearer {writer}"}) as client:
                assert text_of(await client.call_tool("add_note", {"text": "hi"})) == "added: hi"


async def test_the_other_verifiers_of_the_guide_are_made_as_shown() -> None:
    introspected = snippet("auth.md", "introspected = ResourceServer(")["introspected"]
    assert isinstance(introspected, ResourceServer)
    assert introspected.verifier.audiences == ("https://mcp.example.com/mcp",)
    names = snippet("auth.md", "class SharedDirectory")
    directory = names["SharedDirectory"]({"t": AccessToken(subject="ada")})
    assert (await directory.verify("t")).principal == "ada"
    with pytest.raises(InvalidToken, match="does not know"):
        await directory.verify("u")
    assert isinstance(names["in_house"], ResourceServer)


def test_the_sdk_server_of_the_guide_checks_tokens_with_ours() -> None:
    sdk_server = snippet("auth.md", "SdkTokenVerifier(")["sdk_server"]
    assert sdk_server.settings.auth.required_scopes == ["notes:read"]
