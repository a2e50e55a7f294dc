"""Small JSON documents fetched over HTTP for OAuth, by a client and by a resource server:
where an authorization server's metadata is (`authorization_server_urls`), and fetching one
document with a size cap (`fetch_json`). No authlib and no joserfc here: both
`mcp_tasks.oauth` (the client) and `mcp_tasks.auth` (the resource server) use it."""

from __future__ import annotations

from typing import Final, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx2
import msgspec

__all__ = [
    "LOOPBACK",
    "MAX_DOCUMENT_BYTES",
    "authorization_server_urls",
    "fetch_json",
    "secure",
    "shown",
    "url_at",
]

MAX_DOCUMENT_BYTES: Final = 256 * 1024
"""The most a metadata document or a key set may weigh."""
LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_T = TypeVar("_T")


def shown(text: str, limit: int = 200) -> str:
    """`text` a peer gave (a URL, an issuer, an error), cut to `limit` characters for a
    message."""
    return text if len(text) <= limit else text[:limit] + "..."


def secure(url: str) -> bool:
    """Whether credentials may go to `url`: https, or http to this machine."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK


def authorization_server_urls(issuer: str) -> list[str]:
    """Where to look for an authorization server's metadata, in the order MCP gives: RFC
    8414's well-known URL with the issuer's path inserted, OpenID's inserted, OpenID's
    appended (the last two are one URL for an issuer without a path)."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    scheme, host = parts.scheme, parts.netloc
    if not path:
        return [
            url_at(scheme, host, "/.well-known/oauth-authorization-server"),
            url_at(scheme, host, "/.well-known/openid-configuration"),
        ]
    return [
        url_at(scheme, host, "/.well-known/oauth-authorization-server" + path),
        url_at(scheme, host, "/.well-known/openid-configuration" + path),
        url_at(scheme, host, path + "/.well-known/openid-configuration"),
    ]


def url_at(scheme: str, host: str, path: str) -> str:
    return urlunsplit((scheme, host, path, "", ""))


async def fetch_json(http: httpx2.AsyncClient, url: str, kind: type[_T]) -> _T | str:
    """The document at `url` decoded as `kind`, or why not (a short reason): not 200,
    larger than `MAX_DOCUMENT_BYTES`, unreachable, or not the expected document."""
    try:
        async with http.stream("GET", url, headers={"accept": "application/json"}) as response:
            if response.status_code != 200:
                return f"HTTP {response.status_code}"
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    return f"larger than {MAX_DOCUMENT_BYTES} bytes"
    except httpx2.HTTPError as error:
        return f"{type(error).__name__}: {shown(str(error))}"
    try:
        return msgspec.json.decode(bytes(body), type=kind)
    except msgspec.DecodeError as error:
        return f"not the expected document ({error})"
