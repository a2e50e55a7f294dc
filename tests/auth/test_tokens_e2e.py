"""`JwtVerifier` end to end: our server (real sockets on loopback) protected by a
`ResourceServer`, and oidc-provider 9.13.3 (tests/oauth/provider.mjs) issuing its ES256 JWT
access tokens. A good token is let in; a bad one (another audience, expired, tampered, an
unknown key, another issuer, `alg: none`, an HMAC) is 401 `invalid_token` saying why; the
provider's key rotation is picked up without restarting our server; a key set that cannot
be fetched is 503 with `Retry-After`, not 401.

Skipped, saying how to install them, when Node 22 or the npm peers are not installed (see
tests/oauth/realm.py); a failure instead in CI."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable
from typing import Any

import httpx2
import trio
from interop.processes import CLIENT_SECONDS
from joserfc import jws, jwt
from joserfc.jwk import ECKey

from mcp_tasks import CallToolResult, Server, ToolContext
from mcp_tasks.auth import JwtVerifier, current_access_token
from mcp_tasks.client import connect_http

from .realm import ProtectedRealm, client_token, protected_realm, run_provider

WAIT = 30
"""The most one test waits for its servers and requests."""
OTHER_RESOURCE = "http://127.0.0.1:9/another/mcp"
"""A resource the provider also issues tokens for: another server's."""
REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'


def build_server() -> Server:
    server = Server("protected", "1.0.0")

    @server.tool()
    async def whoami(ctx: ToolContext) -> str:
        """What the request's verified token says."""
        access = current_access_token()
        assert access is not None
        return json.dumps(
            {
                "subject": access.subject,
                "client_id": access.client_id,
                "scopes": sorted(access.scopes),
                "issuer": access.issuer,
                "audience": list(access.audience),
            }
        )

    return server


def verifier_with(**options: Any) -> Callable[[str, str], JwtVerifier]:
    return lambda issuer, resource: JwtVerifier(issuer, resource, **options)


async def whoami(world: ProtectedRealm, token: str) -> dict[str, Any]:
    """What our server's tool saw of `token`, through our client."""
    headers = {"Authorization": f"Bearer {token}"}
    async with connect_http(world.url, headers=headers, timeout_seconds=CLIENT_SECONDS) as client:
        result = await client.call_tool("whoami")
    assert isinstance(result, CallToolResult) and not result.is_error, result
    seen: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return seen


async def post(world: ProtectedRealm, token: str | None) -> httpx2.Response:
    """A `tools/list` request with `token` (or none) as its bearer token."""
    headers = {"content-type": "application/json", "accept": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(timeout=CLIENT_SECONDS) as http:
        return await http.post(world.url, content=REQUEST, headers=headers)


def challenge_of(response: httpx2.Response) -> dict[str, str]:
    """The parameters of the response's `WWW-Authenticate: Bearer ...` challenge."""
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer "), value
    return dict(re.findall(r'(\w+)="([^"]*)"', value))


async def refused(world: ProtectedRealm, token: str, why: str) -> None:
    """`token` is answered 401 `invalid_token`, pointing at the metadata, saying `why` in
    the challenge and in the JSON-RPC error (and quoting no part of the token)."""
    response = await post(world, token)
    assert response.status_code == 401, response.text
    challenge = challenge_of(response)
    assert challenge["error"] == "invalid_token"
    assert why in challenge["error_description"]
    assert challenge["resource_metadata"] == world.protection.metadata_url
    assert challenge["scope"] == "mcp:read"
    error = response.json()["error"]
    assert error["code"] == -32600
    assert error["message"] == f"Unauthorized: {challenge['error_description']}"
    for part in token.split("."):
        if len(part) >= 8:  # (not a header that happens to be short)
            assert part not in response.text and part not in response.headers["www-authenticate"]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def claims_of(token: str) -> dict[str, Any]:
    """A JWT's claims, not verified (what the provider put there)."""
    claims: dict[str, Any] = json.loads(unb64(token.split(".")[1]))
    return claims


def kid_of(token: str) -> str:
    return str(jws.extract_compact(token.encode()).headers()["kid"])


def good_claims(world: ProtectedRealm, **changes: Any) -> dict[str, Any]:
    """Claims our server would accept from its issuer (signature aside)."""
    now = int(time.time())
    claims = {
        "iss": world.issuer,
        "aud": world.url,
        "sub": "mallory",
        "client_id": "mallory",
        "scope": "mcp:read",
        "iat": now,
        "exp": now + 300,
        "jti": "forged",
    }
    return claims | changes


def signed(claims: dict[str, Any], *, kid: str, key: ECKey | None = None) -> str:
    """`claims` as an ES256 access token signed by `key` (a fresh one by default)."""
    key = key or ECKey.generate_key("P-256")
    header = {"alg": "ES256", "typ": "at+jwt", "kid": kid}
    return jwt.encode(header, claims, key, algorithms=["ES256"])


def signing_key_option(key: ECKey, kid: str) -> dict[str, Any]:
    """provider.mjs's options to sign with `key`, named `kid`."""
    return {"signingKey": key.as_dict(private=True), "kid": kid}


# --- a good token, no token, the metadata --------------------------------------------------


async def test_a_providers_token_is_let_in_and_its_tool_sees_it() -> None:
    """The provider's client-credentials token for our URL is accepted: the tool reads its
    subject, client, scopes, issuer and audience through `current_access_token()`."""
    with trio.fail_after(WAIT):
        async with protected_realm(build_server()) as world:
            token = await world.token("mcp:read mcp:write")
            seen = await whoami(world, token)
    assert seen == {
        "subject": "svc",
        "client_id": "svc",
        "scopes": ["mcp:read", "mcp:write"],
        "issuer": world.issuer,
        "audience": [world.url],
    }


async def test_no_token_is_401_naming_the_metadata_and_scope_which_is_served() -> None:
    """Without a token: 401, a challenge with no error, `resource_metadata` and `scope`;
    the metadata it names is served without a token (with the endpoint's path and at the
    root), naming our URL and the provider."""
    with trio.fail_after(WAIT):
        async with protected_realm(build_server(), scopes=("mcp:read",)) as world:
            response = await post(world, None)
            origin = world.url.removesuffix("/mcp")
            async with httpx2.AsyncClient(timeout=CLIENT_SECONDS) as http:
                named = await http.get(challenge_of(response)["resource_metadata"])
                at_root = await http.get(origin + "/.well-known/oauth-protected-resource")
    assert response.status_code == 401
    assert challenge_of(response) == {
        "resource_metadata": origin + "/.well-known/oauth-protected-resource/mcp",
        "scope": "mcp:read",
    }
    assert response.json()["error"]["message"] == "Unauthorized: a bearer token is required"
    for document in (named, at_root):
        assert document.status_code == 200
        assert document.headers["content-type"] == "application/json"
        assert document.json() == {
            "resource": world.url,
            "authorization_servers": [world.issuer],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["mcp:read"],
        }


# --- bad tokens ----------------------------------------------------------------------------


async def test_a_token_for_another_resource_is_refused() -> None:
    """A genuine token of the same provider, signed by the key we trust, but issued for
    another resource (RFC 8707): 401, "not for this server"."""
    with trio.fail_after(WAIT):
        options = {"resources": [OTHER_RESOURCE]}
        async with protected_realm(build_server(), provider_options=options) as world:
            ours = await world.token()
            theirs = await world.token(resource=OTHER_RESOURCE)
            assert claims_of(theirs)["aud"] == OTHER_RESOURCE
            assert kid_of(theirs) == kid_of(ours)
            await whoami(world, ours)  # (the same provider's token for us is good)
            await refused(world, theirs, "not for this server")


async def test_an_expired_token_is_refused() -> None:
    """A token the provider made to last 2 s is let in, then refused once its `exp` is past
    (leeway 0): 401, "expired". The wait is until the token's own `exp`."""
    with trio.fail_after(WAIT):
        async with protected_realm(
            build_server(), verifier=verifier_with(leeway_seconds=0), provider_options={"ttl": 2}
        ) as world:
            token = await world.token()
            expires = claims_of(token)["exp"]
            assert expires - claims_of(token)["iat"] == 2
            await whoami(world, token)  # (good for at least a second yet)
            await trio.sleep_until(trio.current_time() + expires - time.time())
            assert time.time() >= expires
            await refused(world, token, "the token has expired")


async def test_a_tampered_token_is_refused() -> None:
    """A good token whose payload was changed (another subject, more scopes), its header
    and signature kept: 401, the signature does not verify."""
    with trio.fail_after(WAIT):
        async with protected_realm(build_server()) as world:
            token = await world.token()
            header, payload, signature = token.split(".")
            claims = json.loads(unb64(payload))
            changed = claims | {"sub": "admin", "scope": "mcp:read mcp:write mcp:admin"}
            tampered = ".".join([header, b64(json.dumps(changed).encode()), signature])
            await whoami(world, token)
            await refused(world, tampered, "signature does not verify")
            # a byte of the signature changed, the payload kept
            flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
            await refused(world, f"{header}.{payload}.{flipped}", "signature does not verify")


async def test_a_token_signed_by_an_unknown_key_is_refused_without_refetching_each_time() -> None:
    """Tokens signed by keys the provider does not have (claims otherwise good). Within the
    cooldown after a fetch, the key set is not looked at again: 503 with `Retry-After` (the
    token cannot be told good or bad yet), however many made-up `kid`s come. Once the
    cooldown has passed, one fetch, and the key is not there: 401."""
    options = verifier_with(cooldown_seconds=1)
    with trio.fail_after(WAIT):
        async with protected_realm(build_server(), verifier=options) as world:
            await whoami(world, await world.token())
            verifier = world.protection.verifier
            assert isinstance(verifier, JwtVerifier)
            fetched = verifier.fetches
            for number in range(5):
                forged = signed(good_claims(world), kid=f"made-up-{number}")
                response = await post(world, forged)
                assert response.status_code == 503, response.text
                assert response.headers["retry-after"] == "1"
                assert "www-authenticate" not in response.headers
            assert verifier.fetches == fetched
            await trio.sleep(float(response.headers["retry-after"]))  # (what it asks)
            await refused(world, forged, "the token names no key of its issuer")
            assert verifier.fetches == fetched + 1


async def test_a_token_of_another_issuer_is_refused_even_with_the_same_key() -> None:
    """A second provider, signing with the very key ours does (same `kid`), issues a token
    for our URL: its signature verifies, its `iss` is not our issuer: 401."""
    key, kid = ECKey.generate_key("P-256"), "shared-key"
    with trio.fail_after(WAIT):
        async with protected_realm(
            build_server(), provider_options=signing_key_option(key, kid)
        ) as world:
            assert world._stack is not None
            _, _, other = await run_provider(
                world._stack, "0", world.url, world.client_secret, signing_key_option(key, kid)
            )
            assert other != world.issuer
            theirs = await client_token(other, world.client_secret, world.url, "mcp:read")
            assert claims_of(theirs)["iss"] == other and kid_of(theirs) == kid
            await whoami(world, await world.token())
            await refused(world, theirs, "issued by another authorization server")


async def test_unsigned_and_hmac_tokens_are_refused() -> None:
    """`alg: none` (no signature) and HS256 signed with the provider's public key as the
    secret (the algorithm confusion attack), with claims otherwise good and the provider's
    `kid`: 401, the algorithm is not allowed."""
    with trio.fail_after(WAIT):
        async with protected_realm(build_server()) as world:
            kid = kid_of(await world.token())
            payload = b64(json.dumps(good_claims(world)).encode())
            header = b64(json.dumps({"alg": "none", "typ": "at+jwt", "kid": kid}).encode())
            await refused(world, f"{header}.{payload}.", "algorithm 'none' is not allowed")

            async with httpx2.AsyncClient(timeout=CLIENT_SECONDS) as http:
                jwks = (await http.get(world.issuer + "/jwks")).json()
            secret = json.dumps(jwks["keys"][0]).encode()
            header = b64(json.dumps({"alg": "HS256", "typ": "at+jwt", "kid": kid}).encode())
            mac = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
            await refused(world, f"{header}.{payload}.{b64(mac)}", "'HS256' is not allowed")


async def test_a_token_that_is_not_an_access_token_is_refused() -> None:
    """A JWT signed by a key the issuer publishes but typed `JWT` (as an ID token is), not
    `at+jwt` (RFC 9068): 401."""
    key, kid = ECKey.generate_key("P-256"), "shared-key"
    with trio.fail_after(WAIT):
        async with protected_realm(
            build_server(), provider_options=signing_key_option(key, kid)
        ) as world:
            header = {"alg": "ES256", "typ": "JWT", "kid": kid}
            id_token_like = jwt.encode(header, good_claims(world), key, algorithms=["ES256"])
            await refused(world, id_token_like, "its typ is not at+jwt")
            # the same claims typed at+jwt and signed by that key are good: only typ differs
            assert (await whoami(world, signed(good_claims(world), kid=kid, key=key)))[
                "subject"
            ] == "mallory"


async def test_the_claims_are_checked_on_a_token_the_issuers_key_signed() -> None:
    """Tokens signed by the provider's own key (shared with the test), its `kid` or none
    (the key set has one key): an `aud` list naming us among others is let in; no `sub`,
    an `nbf` ahead, no `exp`, or an `aud` list without us are 401, each saying why."""
    key, kid = ECKey.generate_key("P-256"), "shared-key"
    with trio.fail_after(WAIT):
        async with protected_realm(
            build_server(), provider_options=signing_key_option(key, kid)
        ) as world:
            among = good_claims(world, aud=[OTHER_RESOURCE, world.url])
            assert (await whoami(world, signed(among, kid=kid, key=key)))["audience"] == [
                OTHER_RESOURCE,
                world.url,
            ]
            no_kid = jwt.encode(
                {"alg": "ES256", "typ": "at+jwt"}, good_claims(world), key, algorithms=["ES256"]
            )
            assert (await whoami(world, no_kid))["subject"] == "mallory"

            no_subject = good_claims(world)
            del no_subject["sub"]
            await refused(world, signed(no_subject, kid=kid, key=key), "'sub' claim")
            ahead = good_claims(world, nbf=int(time.time()) + 3600)
            await refused(world, signed(ahead, kid=kid, key=key), "not valid yet")
            no_expiry = good_claims(world)
            del no_expiry["exp"]
            await refused(world, signed(no_expiry, kid=kid, key=key), "'exp' claim")
            elsewhere = good_claims(world, aud=[OTHER_RESOURCE])
            await refused(world, signed(elsewhere, kid=kid, key=key), "not for this server")


async def test_a_token_without_the_resources_scope_is_403_naming_it() -> None:
    """A good token of the provider whose scopes lack the one every request needs: 403
    `insufficient_scope`, the challenge naming the scope to ask for."""
    with trio.fail_after(WAIT):
        async with protected_realm(build_server(), scopes=("mcp:read",)) as world:
            response = await post(world, await world.token("mcp:write"))
    assert response.status_code == 403, response.text
    challenge = challenge_of(response)
    assert challenge["error"] == "insufficient_scope"
    assert challenge["scope"] == "mcp:read"
    assert challenge["resource_metadata"] == world.protection.metadata_url
    assert "lacks the scope 'mcp:read'" in response.json()["error"]["message"]


# --- the issuer's keys ---------------------------------------------------------------------


async def test_a_rotated_key_is_picked_up_without_restarting_our_server() -> None:
    """The provider restarts on its port with a new key (a new `kid`): its new token is let
    in, the verifier having fetched the key set again on meeting the unknown `kid`; a token
    of the old key, which the provider no longer publishes, is then refused."""
    # cooldown_seconds=0: the rotation comes within a second of the first fetch, and the
    # default cooldown (30 s) would make the new kid wait that long for a refetch.
    with trio.fail_after(WAIT):
        async with protected_realm(
            build_server(),
            verifier=verifier_with(cooldown_seconds=0),
            provider_options={"kid": "key-1"},
        ) as world:
            verifier = world.protection.verifier
            assert isinstance(verifier, JwtVerifier)
            await whoami(world, await world.token())
            old = await world.token()  # (of the old key, never shown before the rotation)
            assert verifier.fetches == 1

            await world.stop_provider()
            await world.start_provider({"kid": "key-2"})
            new = await world.token()
            assert kid_of(new) == "key-2"
            assert (await whoami(world, new))["issuer"] == world.issuer
            assert verifier.fetches == 2
            await whoami(world, await world.token())
            assert verifier.fetches == 2  # (the new key is kept)

            await refused(world, old, "the token names no key of its issuer")


async def test_a_key_replaced_under_the_same_kid_is_picked_up() -> None:
    """The provider restarts with a new key under the old `kid` (some issuers name their
    key by its use, not by its material): its new token is let in, the verifier fetching
    the key set again when a known `kid`'s signature does not verify."""
    with trio.fail_after(WAIT):
        async with protected_realm(
            build_server(),
            verifier=verifier_with(cooldown_seconds=0),
            provider_options={"kid": "signing"},
        ) as world:
            await whoami(world, await world.token())
            await world.stop_provider()
            await world.start_provider({"kid": "signing"})
            new = await world.token()
            assert kid_of(new) == "signing"
            response = await post(world, new)
            assert response.status_code != 401, response.json()["error"]["message"]
            assert (await whoami(world, new))["subject"] == "svc"


async def test_keys_that_cannot_be_fetched_are_503_with_retry_after_not_401() -> None:
    """With the provider down, a token naming a key the verifier lacks is 503 with
    `Retry-After` (the client should try again, not throw its token away); a token whose key
    is kept is still let in. Once the provider is back (with a new key), its token is let in,
    our server never restarted."""
    # cooldown_seconds=0: the key set is fetched again as soon as a token names an unknown
    # key (by default not within 30 s of the last fetch: the outage would be 401 until then).
    with trio.fail_after(WAIT):
        async with protected_realm(
            build_server(), verifier=verifier_with(cooldown_seconds=0)
        ) as world:
            await whoami(world, await world.token())
            kept = await world.token()  # (its key is kept; the token itself never shown)
            await world.stop_provider()

            unknown = signed(good_claims(world), kid="rotated-away")
            response = await post(world, unknown)
            assert response.status_code == 503, response.text
            assert int(response.headers["retry-after"]) >= 1
            assert "www-authenticate" not in response.headers
            error = response.json()["error"]
            assert "could not be fetched" in error["message"]
            assert error["data"]["retryAfterMs"] == 1000 * int(response.headers["retry-after"])

            assert (await whoami(world, kept))["subject"] == "svc"

            await world.start_provider({"kid": "after-the-outage"})
            assert (await whoami(world, await world.token()))["subject"] == "svc"
