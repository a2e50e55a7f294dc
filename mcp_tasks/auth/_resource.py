"""An MCP server as an OAuth 2.1 resource server: what it publishes, and how it answers a
request's bearer token.

Theory of operation
-------------------
`ResourceServer` is given to the HTTP endpoint (`HttpConfig(resource_server=...)`, the
built-in server and the ASGI app alike), which then:

- answers `GET /.well-known/oauth-protected-resource` with the endpoint's path (RFC 9728
  section 3.1), with the resource's own path, and at the root, with `metadata()`: no
  authentication, any Host, any Origin;
- asks `authenticate` about every request to the endpoint (POST, and a 2025 session's GET
  and DELETE), before its body is read:

      no bearer token              401, challenge `resource_metadata` and `scope`
      not a single token           400 `invalid_request`
      the verifier refuses it      401 `invalid_token` and why (never the token)
      the verifier cannot check    503 `Retry-After`: try again, do not log in again
      it lacks `scopes`            403 `insufficient_scope`, naming them
      else                         the principal (`AccessToken.principal`); the token is
                                   what `current_access_token()` gives its handlers

- then, once the body is read, asks `refusal_for_body` whether the operation needs scopes
  of its own (`@server.tool(scopes=[...])`, and prompts and resources): 403
  `insufficient_scope` naming every scope it needs, `scopes` included (one challenge says
  all, so a client steps up once).

A granted scope covers those `scope_implies` says it does (`{"files:admin": ["files:write",
"files:read"]}`), transitively.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol
from urllib.parse import urlsplit, urlunsplit

import msgspec

from ..transports._http_rules import AuthenticationUnavailable, Refusal, Unauthorized
from ._tokens import (
    AccessToken,
    InvalidToken,
    TokenVerifier,
    VerifierUnavailable,
    current_access_token,
    set_current_access_token,
)

__all__ = ["ResourceServer", "ScopedOperations"]

WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"


class ScopedOperations(Protocol):
    """What a server says of the scopes its operations need (`Server` says it)."""

    @property
    def scoped_operations(self) -> bool:
        """Whether any operation needs scopes of its own (False: no body is looked at)."""
        ...

    def scopes_needed(self, method: str, target: str) -> frozenset[str]:
        """The scopes `method` (`tools/call`, `prompts/get`, `resources/read`) on
        `target` (a name, a uri) needs beyond the resource's own; empty: none."""
        ...


class _Params(msgspec.Struct):
    name: str | None = None
    uri: str | None = None


class _Peek(msgspec.Struct):
    method: str | None = None
    params: _Params | None = None
    id: int | str | None = None


_peek = msgspec.json.Decoder(_Peek | list[_Peek])
_TARGETS: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@dataclass(frozen=True, kw_only=True)
class ResourceServer:
    """The endpoint as an OAuth protected resource (theory of operation)."""

    resource: str
    """The endpoint's canonical URL, as clients reach it (`https://mcp.example.com/mcp`):
    the audience tokens must be issued for, and the `resource` of the metadata."""
    authorization_servers: Sequence[str]
    """The issuers that issue tokens for it, as each spells its `issuer`."""
    verifier: TokenVerifier
    """Checks each token: `JwtVerifier`, `IntrospectionVerifier`, or your own."""
    scopes: Sequence[str] = ()
    """Scopes every request needs (also the 401 challenge's `scope`)."""
    scopes_supported: Sequence[str] | None = None
    """The metadata's `scopes_supported` (None: `scopes`)."""
    scope_implies: Mapping[str, Collection[str]] = field(default_factory=dict)
    """A scope that covers others: `{"files:admin": ["files:write"]}`."""
    resource_name: str | None = None
    resource_documentation: str | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.resource)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            raise ValueError(f"resource must be the endpoint's absolute URL, not {self.resource!r}")
        if not self.authorization_servers or isinstance(self.authorization_servers, str):
            raise ValueError("authorization_servers must list at least one issuer")
        if not isinstance(self.verifier, TokenVerifier):
            raise TypeError("verifier must have `async def verify(token) -> AccessToken`")
        for scope in [*self.scopes, *(self.scopes_supported or ())]:
            if not scope or any(c in scope for c in ' "\\') or scope == "offline_access":
                raise ValueError(f"{scope!r} is not a scope a resource may ask for")

    # --- what it publishes -----------------------------------------------------------------

    @property
    def metadata_url(self) -> str:
        """Where clients read `metadata()`: the well-known URL with the resource's path."""
        parts = urlsplit(self.resource)
        path = WELL_KNOWN + parts.path.rstrip("/")
        return urlunsplit((parts.scheme, parts.netloc, path, "", ""))

    def metadata_paths(self, endpoint: str) -> list[str]:
        """The paths `metadata()` is served at on a server whose endpoint is `endpoint`:
        with the resource's path, with the endpoint's (when a proxy maps one onto the
        other), and the root one."""
        resource_path = urlsplit(self.resource).path.rstrip("/")
        paths = [WELL_KNOWN + resource_path, WELL_KNOWN + endpoint.rstrip("/"), WELL_KNOWN]
        return list(dict.fromkeys(paths))

    def metadata(self) -> bytes:
        """The Protected Resource Metadata (RFC 9728), as JSON."""
        document: dict[str, object] = {
            "resource": self.resource,
            "authorization_servers": list(self.authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        supported = self.scopes if self.scopes_supported is None else self.scopes_supported
        if supported:
            document["scopes_supported"] = list(supported)
        if self.resource_name is not None:
            document["resource_name"] = self.resource_name
        if self.resource_documentation is not None:
            document["resource_documentation"] = self.resource_documentation
        return json.dumps(document, separators=(",", ":")).encode()

    def challenge(
        self,
        error: str | None = None,
        description: str | None = None,
        scopes: Sequence[str] | None = None,
    ) -> str:
        """A `WWW-Authenticate` value: `Bearer` first, every value quoted."""
        parts = []
        if error is not None:
            parts.append(f'error="{error}"')
        if description is not None:
            parts.append(f'error_description="{_quotable(description)}"')
        parts.append(f'resource_metadata="{self.metadata_url}"')
        wanted = self.scopes if scopes is None else scopes
        if not wanted and self.scopes_supported:
            wanted = self.scopes_supported
        if wanted:
            parts.append(f'scope="{" ".join(wanted)}"')
        return "Bearer " + ", ".join(parts)

    # --- a request -------------------------------------------------------------------------

    async def authenticate(self, headers: Mapping[str, str]) -> str:
        """The principal of a request with `headers` (an `Authenticator`; theory of
        operation)."""
        value = headers.get("authorization", "").strip()
        scheme, _, token = value.partition(" ")
        if not value or scheme.lower() != "bearer":
            message = "a bearer token is required" if not value else "the scheme is not Bearer"
            raise Unauthorized(message, challenge=self.challenge())
        token = token.strip()
        if not token or any(c in token for c in " ,\t"):
            message = "the Authorization header holds no single bearer token"
            raise Unauthorized(message, status=400, challenge=self.challenge("invalid_request"))
        try:
            access = await self.verifier.verify(token)
        except InvalidToken as refused:
            reason = str(refused) or "the token is not valid"
            raise Unauthorized(reason, challenge=self.challenge("invalid_token", reason)) from None
        except VerifierUnavailable as unavailable:
            raise AuthenticationUnavailable(
                str(unavailable), retry_after_seconds=unavailable.retry_after_seconds
            ) from None
        missing = self.missing(access, self.scopes)
        if missing:
            message = f"the token lacks the scope {' '.join(missing)!r}"
            challenge = self.challenge("insufficient_scope", message)
            raise Unauthorized(message, status=403, challenge=challenge)
        set_current_access_token(access)
        return access.principal

    def granted(self, access: AccessToken) -> frozenset[str]:
        """The scopes `access` holds, with those they imply (`scope_implies`)."""
        if not self.scope_implies:
            return access.scopes
        held, todo = set(access.scopes), list(access.scopes)
        while todo:
            for implied in self.scope_implies.get(todo.pop(), ()):
                if implied not in held:
                    held.add(implied)
                    todo.append(implied)
        return frozenset(held)

    def missing(self, access: AccessToken, needed: Collection[str]) -> list[str]:
        """The scopes of `needed` that `access` does not hold, in order."""
        if not needed:
            return []
        held = self.granted(access)
        return [scope for scope in needed if scope not in held]

    def refusal_for_body(
        self, body: bytes, scopes_needed: Callable[[str, str], frozenset[str]]
    ) -> Refusal | None:
        """403 `insufficient_scope` when the message in `body` is an operation whose own
        scopes (`scopes_needed(method, name or uri)`) the request's token lacks; None
        otherwise (a body that is no such message is the server's to refuse)."""
        access = current_access_token()
        if access is None:
            return None
        try:
            found = _peek.decode(body)
        except msgspec.DecodeError:
            return None
        for message in found if isinstance(found, list) else [found]:
            key = _TARGETS.get(message.method or "")
            target = None if key is None or message.params is None else getattr(message.params, key)
            if target is None:
                continue
            needed = [*self.scopes, *sorted(scopes_needed(message.method or "", target))]
            missing = self.missing(access, needed)
            if missing:
                what = f"{message.method} of {target!r}"[:200]
                text = f"{what} needs the scope {' '.join(missing)!r}"
                challenge = self.challenge("insufficient_scope", text, list(dict.fromkeys(needed)))
                return Refusal(
                    403,
                    f"Forbidden: {text}",
                    reason="forbidden",
                    challenge=challenge,
                    request_id=message.id,
                )
        return None


def _quotable(text: str) -> str:
    """`text` as a quoted-string's content: printable ASCII, no quote or backslash."""
    kept = "".join(c if " " <= c <= "~" and c not in '"\\' else "'" for c in text)
    return kept[:300]
