"""Opaque access tokens, checked by asking their issuer (RFC 7662 introspection).

The resource server posts the token to the introspection endpoint as a confidential client
of its own (HTTP Basic, the id and secret form-encoded first, RFC 6749 section 2.3.1). A
token is accepted when the answer says `active`, names this server in `aud`, names the
issuer in `iss` (when it names one) and has not expired. Answers are kept by the token's
SHA-256 (never the token), a good one until it expires or `cache_seconds` pass, whichever
is first, so a busy client costs one introspection a minute, not one a request. An
endpoint that fails is not asked again for `cooldown_seconds`: meanwhile tokens not in the
cache are answered 503 with `Retry-After`.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import quote_plus

import httpx2
import msgspec

from .._support.documents import MAX_DOCUMENT_BYTES, secure
from ._jwt import access_token_of, fetch_metadata
from ._tokens import AccessToken, InvalidToken, VerifierUnavailable

__all__ = ["IntrospectionVerifier"]

logger = logging.getLogger("mcp_tasks.auth")

_MAX_TOKEN_CHARACTERS: Final = 8192
_DOWN: Final = "the token could not be introspected now"


class IntrospectionVerifier:
    """Checks opaque tokens at `issuer`'s introspection endpoint (from its metadata, or
    `endpoint`), as the client `client_id` with `client_secret`."""

    def __init__(
        self,
        issuer: str,
        audience: str | Sequence[str],
        *,
        client_id: str,
        client_secret: str,
        endpoint: str | None = None,
        cache_seconds: float = 60.0,
        max_cached: int = 10_000,
        timeout_seconds: float = 5.0,
        cooldown_seconds: float = 5.0,
    ) -> None:
        audiences = (audience,) if isinstance(audience, str) else tuple(audience)
        if not issuer or not audiences or not all(audiences):
            raise ValueError("IntrospectionVerifier needs an issuer and an audience")
        if not client_id or not client_secret:
            raise ValueError("IntrospectionVerifier needs the server's client_id and client_secret")
        for url in (issuer, endpoint):
            if url is not None and not secure(url):
                raise ValueError(f"{url!r} is not https (http only to this machine)")
        if cache_seconds < 0 or max_cached < 1:
            raise ValueError("cache_seconds must not be negative, and max_cached at least 1")
        self.issuer = issuer
        self.audiences = audiences
        self.endpoint = endpoint
        self.cache_seconds = cache_seconds
        self.max_cached = max_cached
        self.timeout_seconds = timeout_seconds
        self._credentials = httpx2.BasicAuth(quote_plus(client_id), quote_plus(client_secret))
        self._cache: dict[bytes, tuple[float, AccessToken | str]] = {}
        self.cooldown_seconds = cooldown_seconds
        self._down_until = -math.inf
        """Until when (monotonic) the endpoint is not asked: it failed last time."""
        self.introspections = 0
        """How many times the endpoint was asked."""

    def __repr__(self) -> str:  # (not the secret)
        return f"IntrospectionVerifier({self.issuer!r}, {self.audiences!r})"

    async def verify(self, token: str) -> AccessToken:
        if len(token) > _MAX_TOKEN_CHARACTERS:
            raise InvalidToken(f"the token is longer than {_MAX_TOKEN_CHARACTERS} characters")
        key = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        now = time.time()
        cached = self._cache.get(key)
        if cached is None or cached[0] <= now:
            verdict = self._judge(await self._introspect_or_wait(token), now)
            until = now + self.cache_seconds
            if isinstance(verdict, AccessToken) and verdict.expires_at is not None:
                until = min(until, verdict.expires_at)
            self._keep(key, until, verdict, now)
        else:
            verdict = cached[1]
        if isinstance(verdict, str):
            raise InvalidToken(verdict)
        if verdict.expires_at is not None and verdict.expires_at <= now:
            raise InvalidToken("the token has expired")
        return verdict

    def _keep(self, key: bytes, until: float, verdict: AccessToken | str, now: float) -> None:
        cache = self._cache
        if len(cache) >= self.max_cached:
            for old in [old for old, (end, _) in cache.items() if end <= now]:
                del cache[old]
            while len(cache) >= self.max_cached:  # the oldest first
                del cache[next(iter(cache))]
        cache[key] = (until, verdict)

    async def _introspect_or_wait(self, token: str) -> dict[str, Any]:
        """The endpoint's answer; while it is down (it failed less than `cooldown_seconds`
        ago), `VerifierUnavailable` at once: an outage costs it one request a cooldown, and
        the log one line."""
        wait = self._down_until - time.monotonic()
        if wait > 0:
            raise VerifierUnavailable(_DOWN, retry_after_seconds=math.ceil(wait))
        try:
            return await self._introspect(token)
        except VerifierUnavailable as failed:  # why goes to the log, not to the client
            self._down_until = time.monotonic() + self.cooldown_seconds
            logger.warning("tokens cannot be introspected now: %s", failed)
            wait = max(1, math.ceil(self.cooldown_seconds))
            raise VerifierUnavailable(_DOWN, retry_after_seconds=wait) from None

    async def _introspect(self, token: str) -> dict[str, Any]:
        endpoint = self.endpoint
        if endpoint is None:
            metadata = await fetch_metadata(self.issuer, self.timeout_seconds)
            endpoint = metadata.introspection_endpoint
            if endpoint is None or not secure(endpoint):
                raise VerifierUnavailable(
                    f"the issuer's introspection_endpoint is {endpoint!r}: not usable"
                )
            self.endpoint = endpoint
        self.introspections += 1
        form = {"token": token, "token_type_hint": "access_token"}
        try:
            async with httpx2.AsyncClient(timeout=self.timeout_seconds) as http:
                response = await http.post(endpoint, data=form, auth=self._credentials)
        except httpx2.HTTPError as error:
            kind = type(error).__name__
            raise VerifierUnavailable(
                f"the introspection endpoint did not answer ({kind})"
            ) from None
        if response.status_code != 200 or len(response.content) > MAX_DOCUMENT_BYTES:
            raise VerifierUnavailable(
                f"the introspection endpoint answered HTTP {response.status_code}"
            )
        try:
            answer = msgspec.json.decode(response.content, type=dict[str, Any])
        except msgspec.DecodeError:
            raise VerifierUnavailable("the introspection endpoint's answer is not JSON") from None
        return answer

    def _judge(self, answer: dict[str, Any], now: float) -> AccessToken | str:
        """The token an introspection answer describes, or why it is refused."""
        if answer.get("active") is not True:
            return "the token is not active (revoked, expired or unknown)"
        audience = answer.get("aud")
        named = [audience] if isinstance(audience, str) else list(audience or ())
        if not any(name in self.audiences for name in named):
            return "the token is not for this server (its aud names another resource)"
        if answer.get("iss") is not None and answer["iss"] != self.issuer:
            return "the token was issued by another authorization server"
        expires = answer.get("exp")
        if isinstance(expires, int | float) and expires <= now:
            return "the token has expired"
        subject = answer.get("sub", answer.get("client_id"))
        if not isinstance(subject, str) or not subject:
            return "the introspection answer names no subject"
        return access_token_of({**answer, "sub": subject})
