"""`IntrospectionVerifier` end to end: oidc-provider 9.13.3 (tests/oauth/provider.mjs with
`opaque`) issues opaque access tokens for our server and answers its introspection requests
(RFC 7662) as a confidential client of its own; our server (real sockets on loopback) lets
in an active token, keeps the answer, refuses a revoked, unknown or misdirected token with
401, and answers 503 with `Retry-After` when the endpoint cannot be asked.

Skipped, saying how to install them, when Node 22 or the npm peers are not installed (see
tests/oauth/realm.py); a failure instead in CI."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import trio
from interop.processes import CLIENT_SECONDS
from oauth.realm import STATIC_CLIENT

from mcp_tasks.auth import IntrospectionVerifier

from .realm import ProtectedRealm, protected_realm
from .test_tokens_e2e import OTHER_RESOURCE, build_server, challenge_of, post, whoami

WAIT = 30
"""The most one test waits for its servers and requests."""
INTROSPECTOR = "mcp-server"
"""The client id our server introspects as."""


@asynccontextmanager
async def opaque_realm(
    *, cache_seconds: float = 60.0, wrong_secret: bool = False, **options: Any
) -> AsyncIterator[tuple[ProtectedRealm, IntrospectionVerifier]]:
    """The provider issuing opaque tokens, and our server checking them by introspection
    (with a secret the provider does not know, if `wrong_secret`)."""
    secret = secrets.token_urlsafe(24)
    made: list[IntrospectionVerifier] = []

    def verifier(issuer: str, resource: str) -> IntrospectionVerifier:
        made.append(
            IntrospectionVerifier(
                issuer,
                resource,
                client_id=INTROSPECTOR,
                client_secret=secret + "-not" if wrong_secret else secret,
                cache_seconds=cache_seconds,
                cooldown_seconds=1,  # (the test waits it out after the outage)
            )
        )
        return made[0]

    provider_options = {"opaque": True, "introspector": [INTROSPECTOR, secret], **options}
    async with protected_realm(
        build_server(), verifier=verifier, provider_options=provider_options
    ) as world:
        world.extra["provider_options"] = provider_options  # (for a restart)
        yield world, made[0]


async def revoke(world: ProtectedRealm, token: str) -> None:
    """Revoke `token` at the provider (RFC 7009), as the client it was issued to."""
    async with httpx2.AsyncClient(timeout=CLIENT_SECONDS) as http:
        answer = await http.post(
            world.issuer + "/token/revocation",
            data={"token": token, "token_type_hint": "access_token"},
            auth=(STATIC_CLIENT, world.client_secret),
        )
    assert answer.status_code == 200, answer.text


async def refused(world: ProtectedRealm, token: str, why: str) -> None:
    """`token` is answered 401 `invalid_token`, saying `why`, quoting no part of it."""
    response = await post(world, token)
    assert response.status_code == 401, response.text
    challenge = challenge_of(response)
    assert challenge["error"] == "invalid_token"
    assert why in challenge["error_description"]
    assert challenge["resource_metadata"] == world.protection.metadata_url
    assert why in response.json()["error"]["message"]
    assert token not in response.text


async def test_an_active_token_is_let_in_and_the_answer_kept() -> None:
    """An opaque token (no JWT) the provider says is active for our URL is let in: the tool
    sees its client, scopes, issuer and audience. The introspection answer is kept: more
    requests with the token ask the provider nothing."""
    with trio.fail_after(WAIT):
        async with opaque_realm() as (world, verifier):
            token = await world.token("mcp:read mcp:write")
            assert token.count(".") != 2  # (opaque, not a JWT)
            seen = await whoami(world, token)
            assert seen == {
                "subject": "svc",  # (a client-credentials token: its client)
                "client_id": "svc",
                "scopes": ["mcp:read", "mcp:write"],
                "issuer": world.issuer,
                "audience": [world.url],
            }
            assert verifier.introspections == 1
            await whoami(world, token)
            await whoami(world, token)
            assert verifier.introspections == 1


async def test_revoked_unknown_and_misdirected_tokens_are_refused() -> None:
    """A revoked token, a made-up one, and one the provider issued for another resource are
    401 `invalid_token`, each saying why."""
    with trio.fail_after(WAIT):
        async with opaque_realm(resources=[OTHER_RESOURCE]) as (world, verifier):
            revoked = await world.token()
            await revoke(world, revoked)
            await refused(world, revoked, "the token is not active")
            await refused(world, secrets.token_urlsafe(32), "the token is not active")
            theirs = await world.token(resource=OTHER_RESOURCE)
            await refused(world, theirs, "not for this server")
            assert verifier.introspections == 3
            await whoami(world, await world.token())  # (a good one still is)


async def test_a_revocation_takes_effect_once_the_kept_answer_is_older_than_cache_seconds() -> None:
    """An answer is kept `cache_seconds` (here 2): a token revoked after it was let in is
    still let in meanwhile, and refused once the answer is asked for again. The wait is
    until the kept answer's end."""
    with trio.fail_after(WAIT):
        async with opaque_realm(cache_seconds=2.0) as (world, verifier):
            token = await world.token()
            await whoami(world, token)
            asked = trio.current_time()  # (the answer was kept until 2 s after, at most)
            await revoke(world, token)
            await whoami(world, token)
            assert verifier.introspections == 1
            await trio.sleep_until(asked + 2.0)
            await refused(world, token, "the token is not active")
            assert verifier.introspections == 2


async def test_an_introspection_endpoint_that_is_down_is_503_with_retry_after() -> None:
    """With the provider down, a token whose answer is not kept is 503 with `Retry-After`
    (not 401: the client should try again, not throw its token away); a token whose
    answer is kept is still let in. Once the provider is back, the token is let in."""
    with trio.fail_after(WAIT):
        async with opaque_realm() as (world, verifier):
            shown = await world.token()
            await whoami(world, shown)
            unseen = await world.token()
            await world.stop_provider()

            response = await post(world, unseen)
            assert response.status_code == 503, response.text
            assert int(response.headers["retry-after"]) >= 1
            assert "www-authenticate" not in response.headers
            assert "could not be introspected now" in response.json()["error"]["message"]
            assert unseen not in response.text
            assert verifier.introspections == 2
            again = await post(world, unseen)  # within the cooldown: not asked again
            assert again.status_code == 503 and verifier.introspections == 2

            assert (await whoami(world, shown))["subject"] == "svc"

            # (the provider keeps its tokens in memory: one issued after its restart)
            await world.start_provider(world.extra["provider_options"])
            await trio.sleep(float(response.headers["retry-after"]))  # (as the 503 asks)
            assert (await whoami(world, await world.token()))["subject"] == "svc"


async def test_credentials_the_provider_refuses_are_503_not_the_tokens_fault() -> None:
    """Our server introspecting with a secret the provider does not know: the provider
    answers 401 to our server, and the client is answered 503 with `Retry-After` (its
    token is not known to be bad), never 401. Why is in the server's log, not the answer."""
    with trio.fail_after(WAIT):
        async with opaque_realm(wrong_secret=True) as (world, _):
            response = await post(world, await world.token())
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 1
    assert "could not be introspected now" in response.json()["error"]["message"]
