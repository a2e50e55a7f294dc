"""JWT access tokens (RFC 9068) checked against their issuer's published keys, by joserfc.

Theory of operation
-------------------
`JwtVerifier.verify` reads the token's header without trusting it, then checks, in order,
and the first that fails is the answer (`InvalidToken`: 401 `invalid_token`):

    alg         on the allow-list (asymmetric only: never `none`, never an HMAC)
    typ         `at+jwt` or `application/at+jwt` (`require_at_jwt=False` lets any pass)
    kid         a key of the issuer's key set (`KeySet`), fetched and kept
    signature   joserfc's, with that key
    claims      `iss` exactly the issuer, `aud` naming this server (RFC 8707), `exp` not
                past and `nbf` not ahead (both with `leeway_seconds`), `sub` present

The key set comes from the issuer's metadata (`jwks_uri`, RFC 8414 or OpenID discovery),
or from `jwks_url`. It is kept for `keys_max_age_seconds`, and fetched again sooner when a
token names a key it lacks (the issuer rotated its keys) or a signature fails with the key
its `kid` names (the issuer replaced the key under the same `kid`), at most once every
`cooldown_seconds`: a stream of made-up `kid`s or forged signatures costs the issuer one
fetch a cooldown. A fetch that fails keeps the keys it had. A token whose key is not in a
set just fetched is `InvalidToken`; one whose key could not be looked for (the fetch
failed, or the cooldown has not passed) is `VerifierUnavailable` (503 and `Retry-After`):
a client that saw 401 would throw its token away and send its user to log in again.

A token verified is remembered by its SHA-256 (never the token itself) for
`remember_seconds`, or until it expires if that is sooner: a client's next requests cost
a hash, not a signature check.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Collection, Sequence
from typing import Any, Final

import anyio
import httpx2
import msgspec

try:
    from joserfc import jws, jwt
    from joserfc.errors import ClaimError, ExpiredTokenError, JoseError
    from joserfc.jwk import KeySet
except ImportError as missing:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        "JwtVerifier and IntrospectionVerifier need joserfc: pip install 'mcp-tasks[auth]'"
    ) from missing

from .._support.documents import authorization_server_urls, fetch_json, secure, shown
from ._tokens import AccessToken, InvalidToken, VerifierUnavailable

__all__ = ["ASYMMETRIC_ALGORITHMS", "JwtVerifier", "ServerMetadata", "access_token_of"]

logger = logging.getLogger("mcp_tasks.auth")

ASYMMETRIC_ALGORITHMS: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
"""The signature algorithms a `JwtVerifier` accepts unless told otherwise."""
_AT_JWT: Final = frozenset({"at+jwt", "application/at+jwt"})
_MAX_TOKEN_CHARACTERS: Final = 8192


class ServerMetadata(msgspec.Struct, frozen=True):
    """What a resource server reads of its authorization server's metadata."""

    issuer: str
    jwks_uri: str | None = None
    introspection_endpoint: str | None = None


async def fetch_metadata(issuer: str, timeout_seconds: float) -> ServerMetadata:
    """The metadata of `issuer`, from the first well-known URL with a document naming exactly
    that issuer; `VerifierUnavailable` when none answers."""
    tried: list[str] = []
    async with httpx2.AsyncClient(timeout=timeout_seconds, follow_redirects=False) as http:
        for url in authorization_server_urls(issuer):
            found = await fetch_json(http, url, ServerMetadata)
            if isinstance(found, str):
                tried.append(f"{url}: {found}")
            elif found.issuer != issuer:
                tried.append(f"{url}: names issuer {shown(found.issuer)!r}")
            else:
                return found
    raise VerifierUnavailable(
        f"no metadata for the authorization server {shown(issuer)!r} (" + "; ".join(tried) + ")"
    )


class JwtVerifier:
    """Checks JWT access tokens issued by `issuer` for `audience` (theory of operation).

    `audience` is this server's resource identifier, as its Protected Resource Metadata
    names it (e.g. `https://mcp.example.com/mcp`), or several: a token must name one."""

    def __init__(
        self,
        issuer: str,
        audience: str | Sequence[str],
        *,
        algorithms: Collection[str] = ASYMMETRIC_ALGORITHMS,
        jwks_url: str | None = None,
        leeway_seconds: int = 30,
        require_at_jwt: bool = True,
        keys_max_age_seconds: float = 3600.0,
        cooldown_seconds: float = 10.0,
        timeout_seconds: float = 5.0,
        remember_seconds: float = 60.0,
        max_remembered: int = 10_000,
    ) -> None:
        audiences = (audience,) if isinstance(audience, str) else tuple(audience)
        if not issuer or not audiences or not all(audiences):
            raise ValueError("JwtVerifier needs an issuer and an audience")
        refused = sorted(set(algorithms) - set(ASYMMETRIC_ALGORITHMS))
        if refused or not algorithms:
            raise ValueError(
                f"algorithms must be among {', '.join(ASYMMETRIC_ALGORITHMS)} (keys from a "
                f"key set are public: a shared secret or `none` proves nothing), not {refused}"
            )
        for url in (issuer, jwks_url):
            if url is not None and not secure(url):
                raise ValueError(f"{url!r} is not https (http only to this machine)")
        if not 0 <= leeway_seconds <= 300:
            raise ValueError("leeway_seconds must be between 0 and 300")
        self.issuer = issuer
        self.audiences = audiences
        self.algorithms = tuple(algorithms)
        self.jwks_url = jwks_url
        self.leeway_seconds = leeway_seconds
        self.require_at_jwt = require_at_jwt
        self.keys_max_age_seconds = keys_max_age_seconds
        self.cooldown_seconds = cooldown_seconds
        self.timeout_seconds = timeout_seconds
        self._keys: KeySet | None = None
        self._kids: frozenset[str | None] = frozenset()
        self._fetched_at = -float("inf")
        self._tried_at = -float("inf")
        self._failure: str | None = None
        """Why the last fetch failed (None: it worked)."""
        self._fetching = anyio.Lock()
        self.remember_seconds = remember_seconds
        self.max_remembered = max_remembered
        self._verified: dict[bytes, tuple[float, AccessToken]] = {}
        """Tokens verified lately, by their SHA-256: until when, and what they said."""
        self.fetches = 0
        """How many times the key set was fetched (or tried)."""

    async def verify(self, token: str) -> AccessToken:
        """The verified token (theory of operation); one verified in the last
        `remember_seconds` is not checked again, only its expiry."""
        if len(token) > _MAX_TOKEN_CHARACTERS:
            raise InvalidToken(f"the token is longer than {_MAX_TOKEN_CHARACTERS} characters")
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        now = time.time()
        remembered = self._verified.get(digest)
        if remembered is not None and now < remembered[0]:
            return remembered[1]
        access = await self._verify(token)
        until = now + self.remember_seconds
        if access.expires_at is not None:
            until = min(until, access.expires_at + self.leeway_seconds)
        if len(self._verified) >= self.max_remembered:
            self._verified.clear()  # (rare: a few seconds of verifying anew)
        self._verified[digest] = (until, access)
        return access

    async def _verify(self, token: str) -> AccessToken:
        try:
            header = jws.extract_compact(token.encode("ascii")).headers()
        except (JoseError, ValueError, UnicodeError):
            raise InvalidToken("the token is not a signed JWT") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if algorithm not in self.algorithms:
            raise InvalidToken(
                f"the token's algorithm {shown(str(algorithm), 20)!r} is not allowed"
            )
        if self.require_at_jwt and str(header.get("typ", "")).lower() not in _AT_JWT:
            raise InvalidToken("the token is not a JWT access token (its typ is not at+jwt)")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the token's kid is not a string")
        keys = await self._keys_with(kid)
        try:
            decoded = jwt.decode(token, keys, algorithms=self.algorithms)
        except JoseError:
            # The issuer may have replaced the key under this kid: look again, once a
            # cooldown (a forged signature costs the issuer no more than a made-up kid).
            renewed = await self._renewed(keys)
            try:
                if renewed is None:
                    raise
                decoded = jwt.decode(token, renewed, algorithms=self.algorithms)
            except JoseError:
                raise InvalidToken("the token's signature does not verify") from None
        registry = jwt.JWTClaimsRegistry(
            leeway=self.leeway_seconds,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "values": list(self.audiences)},
            exp={"essential": True},
            sub={"essential": True},
        )
        try:
            registry.validate(decoded.claims)
        except ExpiredTokenError:
            raise InvalidToken("the token has expired") from None
        except ClaimError as error:
            raise InvalidToken(_claim_refusal(error.claim)) from None
        except JoseError:
            raise InvalidToken("the token's claims are not valid") from None
        return access_token_of(decoded.claims)

    async def _keys_with(self, kid: str | None) -> KeySet:
        """The key set, fetched first when there is none yet, when it is older than
        `keys_max_age_seconds`, or when it lacks `kid`: at most once a cooldown. A `kid`
        still lacking after a fetch is `InvalidToken`; one lacking while no fetch may be
        made (the cooldown, or a failed fetch) is `VerifierUnavailable`: the token cannot
        be told good or bad now."""
        now = time.monotonic()
        keys, fetches = self._keys, self.fetches
        stale = keys is None or now - self._fetched_at >= self.keys_max_age_seconds
        if (stale or not self._has(kid)) and now - self._tried_at >= self.cooldown_seconds:
            async with self._fetching:
                if self._keys is keys:  # (not fetched while this waited)
                    await self._fetch()
        if self._keys is not None and self._has(kid):
            return self._keys
        wait = max(1, math.ceil(self._tried_at + self.cooldown_seconds - time.monotonic()))
        if self._failure is not None:
            raise VerifierUnavailable(  # (why is in the log: the client needs no more)
                "the keys of the token's issuer could not be fetched", retry_after_seconds=wait
            )
        if self.fetches == fetches:
            raise VerifierUnavailable(
                "the token names a key its issuer did not have moments ago; the keys are "
                "looked at again shortly",
                retry_after_seconds=wait,
            )
        raise InvalidToken("the token names no key of its issuer")

    async def _renewed(self, keys: KeySet) -> KeySet | None:
        """The key set fetched anew when `keys` failed a signature and the cooldown has
        passed (None: not fetched, or the fetch failed)."""
        if time.monotonic() - self._tried_at < self.cooldown_seconds:
            return None
        async with self._fetching:
            if self._keys is keys:
                await self._fetch()
        return None if self._keys is keys or self._failure is not None else self._keys

    def _has(self, kid: str | None) -> bool:
        return kid in self._kids or (kid is None and len(self._kids) == 1)

    async def _fetch(self) -> None:
        self.fetches += 1
        self._tried_at = time.monotonic()
        try:
            url = self.jwks_url
            if url is None:
                metadata = await fetch_metadata(self.issuer, self.timeout_seconds)
                url = metadata.jwks_uri
                if url is None or not secure(url):
                    raise VerifierUnavailable(f"the issuer's jwks_uri is {url!r}: not usable")
            async with httpx2.AsyncClient(timeout=self.timeout_seconds) as http:
                found = await fetch_json(http, url, dict[str, Any])
            if isinstance(found, str):
                raise VerifierUnavailable(f"its key set at {shown(url)}: {found}")
            try:
                keys = KeySet.import_key_set(found)  # type: ignore[arg-type]
            except (JoseError, KeyError, TypeError, ValueError) as error:
                kind = type(error).__name__
                raise VerifierUnavailable(f"its key set is not one ({kind})") from None
        except VerifierUnavailable as error:
            self._failure = str(error)
            logger.warning("the keys of %s could not be fetched: %s", self.issuer, error)
            return
        self._keys, self._failure = keys, None
        self._kids = frozenset(key.kid for key in keys.keys)
        self._fetched_at = self._tried_at


def access_token_of(claims: dict[str, Any]) -> AccessToken:
    """The `AccessToken` verified `claims` (a JWT's, or an introspection answer) describe."""
    scope = claims.get("scope", claims.get("scp", ""))
    scopes = scope.split() if isinstance(scope, str) else [str(item) for item in scope or ()]
    audience = claims.get("aud", ())
    client = claims.get("client_id", claims.get("azp", claims.get("cid")))
    expires = claims.get("exp")
    return AccessToken(
        subject=str(claims["sub"]),
        client_id=None if client is None else str(client),
        scopes=frozenset(scopes),
        issuer=None if claims.get("iss") is None else str(claims["iss"]),
        audience=(audience,) if isinstance(audience, str) else tuple(map(str, audience)),
        expires_at=float(expires) if isinstance(expires, int | float) else None,
        claims=claims,
    )


def _claim_refusal(claim: str) -> str:
    if claim == "aud":
        return "the token is not for this server (its aud names another resource)"
    if claim == "iss":
        return "the token was issued by another authorization server"
    if claim == "nbf":
        return "the token is not valid yet"
    return f"the token's {claim!r} claim is missing or not valid"
