"""What a verified access token says, how a verifier says no, and where a handler finds the
token of the request it runs for."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AccessToken",
    "InvalidToken",
    "TokenVerifier",
    "VerifierUnavailable",
    "current_access_token",
]


@dataclass(frozen=True, kw_only=True)
class AccessToken:
    """A verified access token: whom and what it is for. The token itself is not kept."""

    subject: str
    """The `sub` claim: the user (or, for a client-credentials token, the client)."""
    client_id: str | None = None
    """The OAuth client the token was issued to (`client_id`, or `azp`)."""
    scopes: frozenset[str] = frozenset()
    """The scopes granted (`scope`, space-separated, or a `scp` list)."""
    issuer: str | None = None
    audience: tuple[str, ...] = ()
    expires_at: float | None = None
    """When the token expires (seconds since the epoch), if it says."""
    claims: Mapping[str, Any] = field(default_factory=dict)
    """Everything the verified token (or the introspection answer) carries."""

    @property
    def principal(self) -> str:
        """Whom tasks, sessions and input rounds are bound to: the subject, and the client
        when it is another party (a user through an app). So one user's tasks started
        through one client are not opened through another."""
        if self.client_id is None or self.client_id == self.subject:
            return self.subject
        return f"{self.subject} via {self.client_id}"


class InvalidToken(Exception):
    """The token is not good here (expired, another audience, a bad signature...): 401
    `invalid_token`. The message says why, never quoting the token."""


class VerifierUnavailable(Exception):
    """The token could not be checked now (the key set or the introspection endpoint did
    not answer): 503 with `Retry-After`, so clients try again instead of logging in anew."""

    def __init__(self, message: str, *, retry_after_seconds: int = 5) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


@runtime_checkable
class TokenVerifier(Protocol):
    """Checks a bearer token: `JwtVerifier`, `IntrospectionVerifier`, or one of your own."""

    async def verify(self, token: str) -> AccessToken:
        """The verified token; raise `InvalidToken` or `VerifierUnavailable`."""
        ...


_CURRENT: contextvars.ContextVar[AccessToken | None] = contextvars.ContextVar(
    "mcp_tasks_access_token", default=None
)


def current_access_token() -> AccessToken | None:
    """The verified token of the request a tool, prompt or resource handler runs for, when
    a `ResourceServer` protects the endpoint (None otherwise, and in a task resumed after
    a restart: the principal it is bound to is `AccessToken.principal`)."""
    return _CURRENT.get()


def set_current_access_token(token: AccessToken | None) -> None:
    """Make `token` what `current_access_token` returns in this request's task."""
    _CURRENT.set(token)
