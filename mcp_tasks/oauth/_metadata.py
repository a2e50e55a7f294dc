"""What a client reads on the way to a token, and the rules it reads it by (no I/O).

A protected MCP server answers 401 with a `WWW-Authenticate: Bearer` challenge. From it and
the server's URL come the places to look for its Protected Resource Metadata (RFC 9728); from
that document the authorization server's issuer, and from the issuer the places to look for
its metadata (RFC 8414, then OpenID Connect Discovery). Every identifier is kept as the
string it came as: an issuer is compared with `==`, a resource is sent back as received.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import SplitResult, urlsplit

import msgspec

from .._support.documents import authorization_server_urls, url_at

__all__ = [
    "AuthorizationServerMetadata",
    "Challenge",
    "ProtectedResourceMetadata",
    "authorization_server_urls",
    "choose_scopes",
    "parse_challenge",
    "protected_resource_urls",
    "resource_covers",
]

_TOKEN: Final = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_PARAMETER: Final = re.compile(rf'({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}))')
_SCHEME: Final = re.compile(rf"(?P<scheme>{_TOKEN})(?:\s+(?P<rest>.*))?", re.DOTALL)
_MAX_CHALLENGE: Final = 8192
_WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"


class Challenge(msgspec.Struct, frozen=True):
    """The parameters of a `Bearer` challenge (RFC 6750 section 3, RFC 9728 section 5.1)."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None

    @property
    def scopes(self) -> list[str]:
        return self.scope.split() if self.scope else []


def parse_challenge(headers: list[str]) -> Challenge | None:
    """The `Bearer` challenge among `WWW-Authenticate` header values (None when there is
    none), read as RFC 9110 section 11.6.1 writes them: a scheme, then a token68 or
    `name=value` parameters (values a token or a quoted string with backslash escapes),
    challenges and parameters separated by commas. Unknown parameters are ignored; so is
    a header over 8 KiB."""
    for header in headers:
        if len(header) > _MAX_CHALLENGE:
            continue
        found = _bearer_parameters(header)
        if found is not None:
            return Challenge(
                resource_metadata=found.get("resource_metadata"),
                scope=found.get("scope"),
                error=found.get("error"),
                error_description=found.get("error_description"),
            )
    return None


def _bearer_parameters(header: str) -> dict[str, str] | None:
    scheme: str | None = None
    bearer: dict[str, str] | None = None
    for element in _elements(header):
        parameter = _PARAMETER.fullmatch(element)
        if parameter is None:
            opening = _SCHEME.fullmatch(element)
            if opening is None:
                continue  # (not a challenge: skipped)
            scheme = opening["scheme"].lower()
            if scheme == "bearer" and bearer is None:
                bearer = {}
            rest = opening["rest"]
            parameter = _PARAMETER.fullmatch(rest) if rest else None
            if parameter is None:
                continue  # (no parameter, or a token68)
        if scheme == "bearer" and bearer is not None:
            name, quoted, plain = parameter.groups()
            value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else plain
            bearer.setdefault(name.lower(), value)
    return bearer


def _elements(header: str) -> list[str]:
    """`header` cut at the commas outside quoted strings, each part stripped."""
    parts: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for char in header:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return [part for part in parts if part]


class ProtectedResourceMetadata(msgspec.Struct, frozen=True):
    """RFC 9728 section 2, the fields a client uses (MCP asks for at least one server)."""

    resource: str
    authorization_servers: list[str]
    scopes_supported: list[str] | None = None


class AuthorizationServerMetadata(msgspec.Struct, frozen=True):
    """RFC 8414 section 2 (and OpenID Connect Discovery), the fields a client uses."""

    issuer: str
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    registration_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    response_types_supported: list[str] | None = None
    grant_types_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    authorization_response_iss_parameter_supported: bool = False
    client_id_metadata_document_supported: bool = False


def protected_resource_urls(server_url: str, from_challenge: str | None) -> list[str]:
    """Where to look for the server's Protected Resource Metadata, in order: the URL the
    challenge names, then the well-known URL with the server's path (RFC 9728 section
    3.1), then the one at the root."""
    parts = urlsplit(server_url)
    path = parts.path.rstrip("/")
    urls = [from_challenge] if from_challenge else []
    if path:
        urls.append(
            url_at(parts.scheme, parts.netloc, "/.well-known/oauth-protected-resource" + path)
        )
    urls.append(url_at(parts.scheme, parts.netloc, "/.well-known/oauth-protected-resource"))
    return list(dict.fromkeys(urls))


def resource_covers(resource: str, server_url: str) -> bool:
    """Whether the metadata's `resource` names the server at `server_url`: the same
    scheme, host and port, and a path that is the server's or a parent of it."""
    given, server = urlsplit(resource), urlsplit(server_url)
    if (given.scheme.lower(), _host_port(given)) != (server.scheme.lower(), _host_port(server)):
        return False
    prefix = given.path.rstrip("/")
    path = server.path.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def _host_port(parts: SplitResult) -> tuple[str, int | None]:
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    try:
        port = parts.port if parts.port is not None else default
    except ValueError:
        port = -1
    return ((parts.hostname or "").lower(), port)


def choose_scopes(
    challenged: list[str],
    resource_scopes: list[str] | None,
    server: AuthorizationServerMetadata,
    *,
    asked_before: list[str],
    want_offline: bool,
) -> list[str]:
    """The scopes to ask for: those the challenge names (joined to those asked before, for a
    step-up), else those the resource lists, else none. `offline_access` is added for a
    refresh token only when the authorization server lists it."""
    if challenged:
        scopes = [*asked_before, *challenged]
    elif asked_before:
        scopes = list(asked_before)
    else:
        scopes = list(resource_scopes or [])
    if want_offline and scopes and "offline_access" in (server.scopes_supported or []):
        scopes.append("offline_access")
    return list(dict.fromkeys(scopes))
