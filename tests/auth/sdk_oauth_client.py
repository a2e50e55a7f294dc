"""The official SDK's OAuth client (`mcp` 2.3.0) against our protected server; runs with the
peers' python (benchmarks/.peers-venv):

    python sdk_oauth_client.py URL LOGIN REDIRECT_URI

`OAuthClientProvider` discovers the server's Protected Resource Metadata, registers the
client dynamically and sends the user to log in: here `redirect_handler` goes through
oidc-provider's devInteractions pages with httpx2 (no browser) as LOGIN, and
`callback_handler` hands back the code it was redirected with. Then it lists the tools,
calls `whoami`, and `publish` (which needs mcp:write: a step-up). Prints one JSON line:
the tool names, both results' texts, and the authorization URLs visited.
"""

from __future__ import annotations

import html
import json
import re
import sys
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import anyio
import httpx2
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

RUN_SECONDS = 60  # a loopback login and three calls take a small part of this


class Memory:
    """The SDK's `TokenStorage`, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class RegisteredWithoutScope(OAuthClientMetadata):
    """The client's metadata, registered without `scope`: the SDK registers the scope it
    was challenged with (mcp:read), which oidc-provider refuses (invalid_client_metadata)
    as not among its own `scopes`; resource scopes are still asked for when logging in."""

    def model_dump(self, **options: Any) -> dict[str, Any]:
        dumped = super().model_dump(**options)
        dumped.pop("scope", None)
        return dumped


class HeadlessUser:
    """Logs in on the provider's devInteractions pages: follows each redirect, fills in the
    login form (as `login`) and the consent form, and stops at `redirect_uri`."""

    def __init__(self, login: str, redirect_uri: str) -> None:
        self.login = login
        self.redirect_uri = redirect_uri
        self.visited: list[str] = []
        self.callback: str | None = None

    async def redirect(self, authorization_url: str) -> None:
        self.visited.append(authorization_url)
        self.callback = None
        async with httpx2.AsyncClient(follow_redirects=False, timeout=20) as http:
            response = await http.get(authorization_url)
            for _ in range(20):
                if response.is_redirect:
                    target = urljoin(str(response.url), response.headers["location"])
                    if target.startswith(self.redirect_uri):
                        self.callback = target
                        return
                    response = await http.get(target)
                else:
                    response = await self._submit(http, response)
        raise RuntimeError("the provider never redirected to the client")

    async def _submit(self, http: httpx2.AsyncClient, page: httpx2.Response) -> httpx2.Response:
        if page.status_code != 200:
            raise RuntimeError(f"HTTP {page.status_code}: {page.text[:300]}")
        action = re.search(r'<form[^>]*\baction="([^"]+)"', page.text)
        prompt = re.search(r'name="prompt" value="([a-z]+)"', page.text)
        if action is None or prompt is None:
            raise RuntimeError(f"no form on the page: {page.text[:300]}")
        form = {"prompt": prompt.group(1)}
        if prompt.group(1) == "login":
            form.update(login=self.login, password="whatever")
        return await http.post(urljoin(str(page.url), html.unescape(action.group(1))), data=form)

    async def code(self) -> AuthorizationCodeResult:
        if self.callback is None:
            raise RuntimeError("no redirect to the client was reached")
        query = {
            name: values[0] for name, values in parse_qs(urlsplit(self.callback).query).items()
        }
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )


def text_of(result: Any) -> str:
    if result.is_error:
        raise RuntimeError(f"the tool failed: {result.content}")
    return str(result.content[0].text)


async def main(url: str, login: str, redirect_uri: str) -> None:
    user = HeadlessUser(login, redirect_uri)
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=RegisteredWithoutScope(
            client_name="sdk-e2e",
            redirect_uris=[AnyUrl(redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=Memory(),
        redirect_handler=user.redirect,
        callback_handler=user.code,
    )
    with anyio.fail_after(RUN_SECONDS):
        async with (
            httpx2.AsyncClient(auth=provider, timeout=20) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            tools = sorted(tool.name for tool in (await client.list_tools()).tools)
            whoami = text_of(await client.call_tool("whoami", {}))
            published = text_of(await client.call_tool("publish", {"text": "sdk"}))
            version = client.protocol_version
    report = {
        "protocol_version": version,
        "tools": tools,
        "whoami": whoami,
        "publish": published,
        "visited": user.visited,
    }
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    url, login, redirect_uri = sys.argv[1:4]
    anyio.run(main, url, login, redirect_uri)
