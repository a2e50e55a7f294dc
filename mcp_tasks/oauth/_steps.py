"""The HTTP steps of a login, each a function: fetching metadata, registering the client,
asking the token endpoint. The token requests and the client authentication they carry
(`client_secret_basic`, `client_secret_post`, `none`, `private_key_jwt`) are authlib's.
Each step's failure is an `AuthorizationError` that says which step and why, with no
secret in it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

import httpx2
import msgspec

from .._support.documents import LOOPBACK, MAX_DOCUMENT_BYTES, fetch_json, secure, shown
from ..transports._client_base import AuthorizationError
from ._metadata import (
    AuthorizationServerMetadata,
    ProtectedResourceMetadata,
    authorization_server_urls,
)
from ._storage import Registration, Tokens

__all__ = [
    "AuthorizationError",
    "check_redirect",
    "fetch_resource_metadata",
    "fetch_server_metadata",
    "register_dynamically",
    "request_tokens",
    "secure",
]


async def fetch_resource_metadata(
    http: httpx2.AsyncClient, urls: Sequence[str]
) -> ProtectedResourceMetadata:
    """The first Protected Resource Metadata found at `urls`, tried in order."""
    tried: list[str] = []
    for url in urls:
        if not secure(url):
            tried.append(f"{shown(url)}: not https")
            continue
        found = await fetch_json(http, url, ProtectedResourceMetadata)
        if isinstance(found, ProtectedResourceMetadata):
            if found.authorization_servers:
                return found
            found = "names no authorization server"
        tried.append(f"{shown(url)}: {shown(found)}")
    raise AuthorizationError(
        "the server asks for authorization but its protected resource metadata was not "
        "found (" + "; ".join(tried) + ")"
    )


async def fetch_server_metadata(
    http: httpx2.AsyncClient, issuer: str
) -> AuthorizationServerMetadata:
    """The metadata of the authorization server `issuer`, from the first well-known URL
    that has a document for exactly that issuer; the server must take PKCE with S256."""
    if not secure(issuer):
        raise AuthorizationError(f"the authorization server {shown(issuer)!r} is not https")
    tried: list[str] = []
    for url in authorization_server_urls(issuer):
        found = await fetch_json(http, url, AuthorizationServerMetadata)
        if isinstance(found, str):
            tried.append(f"{shown(url)}: {shown(found)}")
            continue
        if found.issuer != issuer:
            tried.append(
                f"{shown(url)}: names issuer {shown(found.issuer)!r}, not {shown(issuer)!r} "
                "(not used)"
            )
            continue
        if "S256" not in (found.code_challenge_methods_supported or []):
            raise AuthorizationError(
                f"the authorization server {shown(issuer)!r} does not list PKCE S256 in "
                "code_challenge_methods_supported"
            )
        for name in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
            endpoint = getattr(found, name)
            if endpoint is not None and not secure(endpoint):
                raise AuthorizationError(f"the authorization server's {name} is not https")
        return found
    raise AuthorizationError(
        f"no metadata found for the authorization server {shown(issuer)!r} ("
        + "; ".join(tried)
        + ")"
    )


async def register_dynamically(
    http: httpx2.AsyncClient,
    server: AuthorizationServerMetadata,
    *,
    client_name: str,
    redirect_uri: str,
) -> Registration:
    """Registers a public client (RFC 7591) for `redirect_uri`."""
    assert server.registration_endpoint is not None
    host = urlsplit(redirect_uri).hostname or ""
    body = {
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native" if host in LOOPBACK else "web",
    }
    try:
        response = await http.post(server.registration_endpoint, json=body)
    except httpx2.HTTPError as error:
        raise AuthorizationError(f"client registration failed: {type(error).__name__}") from None
    if response.status_code not in (200, 201) or len(response.content) > MAX_DOCUMENT_BYTES:
        raise AuthorizationError(
            f"client registration at {shown(server.registration_endpoint)} answered HTTP "
            f"{response.status_code}{_oauth_error(response)}"
        )
    try:
        answer = msgspec.json.decode(response.content, type=dict[str, Any])
    except msgspec.DecodeError:
        raise AuthorizationError("client registration answered something not JSON") from None
    client_id, secret = answer.get("client_id"), answer.get("client_secret")
    if not isinstance(client_id, str) or not client_id:
        raise AuthorizationError("client registration answered no client_id")
    secret = secret if isinstance(secret, str) and secret else None
    method = answer.get("token_endpoint_auth_method")
    if not isinstance(method, str):
        method = "client_secret_basic" if secret else "none"
    return Registration(
        client_id=client_id,
        client_secret=secret,
        auth_method=method,
        redirect_uris=[redirect_uri],
        how="dynamic",
    )


def _oauth_error(response: httpx2.Response) -> str:
    """`: error (description)` from an OAuth error body, or nothing."""
    try:
        body = msgspec.json.decode(response.content[:MAX_DOCUMENT_BYTES])
    except msgspec.DecodeError:
        return ""
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return ""
    description = body.get("error_description")
    shown = f" ({description[:200]})" if isinstance(description, str) else ""
    return f": {body['error'][:100]}{shown}"


def check_redirect(
    callback: str,
    *,
    state: str,
    issuer: str,
    issuer_promised: bool,
) -> str:
    """The authorization code in the URL the server redirected to, after checking `state`
    and `iss` (RFC 9207: compared as strings, required when the server promised it; an
    error from a response that fails the check is not believed either)."""
    query = dict(parse_qsl(urlsplit(callback).query, keep_blank_values=True))
    given_issuer = query.get("iss")
    if given_issuer is None and issuer_promised:
        raise AuthorizationError(
            "the authorization response has no iss, which the authorization server "
            "promised (authorization_response_iss_parameter_supported): not used"
        )
    if given_issuer is not None and given_issuer != issuer:
        raise AuthorizationError(
            f"the authorization response came from issuer {given_issuer[:200]!r}, not "
            f"{shown(issuer)!r} (a mix-up attack, or a misconfigured server): not used"
        )
    if query.get("state") != state:
        raise AuthorizationError("the authorization response's state does not match: not used")
    if "error" in query:
        description = query.get("error_description", "")[:200]
        raise AuthorizationError(
            f"the authorization server refused: {query['error'][:100]}"
            + (f" ({description})" if description else "")
        )
    code = query.get("code")
    if not code:
        raise AuthorizationError("the authorization response carries no code")
    return code


async def request_tokens(
    server: AuthorizationServerMetadata,
    registration: Registration,
    *,
    grant_type: str,
    timeout_seconds: float,
    private_key: str | None = None,
    signing_algorithm: str = "ES256",
    **parameters: str,
) -> Tokens:
    """Asks the token endpoint for tokens with `grant_type` and `parameters` (empty ones
    left out), authenticating the client the way its registration says."""
    # (authlib is the `oauth` extra: imported when a token is first asked for)
    try:
        from authlib.integrations.httpx_client import (  # noqa: PLC0415
            AsyncOAuth2Client,
            OAuthError,
        )
        from authlib.oauth2.rfc7523 import PrivateKeyJWT  # noqa: PLC0415
    except ImportError:
        raise AuthorizationError(
            "asking for tokens needs authlib: pip install 'mcp-tasks[oauth]'"
        ) from None

    assert server.token_endpoint is not None
    signing_key = None
    if registration.auth_method == "private_key_jwt":
        signing_key = _signing_key(private_key, signing_algorithm)
    oauth = AsyncOAuth2Client(
        client_id=registration.client_id,
        client_secret=signing_key or registration.client_secret,
        token_endpoint_auth_method=registration.auth_method,
        timeout=timeout_seconds,
    )
    if signing_key is not None:
        # the assertion's audience is the issuer (the authorization server's identifier)
        oauth.register_client_auth_method(
            PrivateKeyJWT(token_endpoint=server.issuer, alg=signing_algorithm)
        )
    given = {name: value for name, value in parameters.items() if value}
    asked_at = time.time()
    try:
        async with oauth:
            token = await oauth.fetch_token(server.token_endpoint, grant_type=grant_type, **given)
    except OAuthError as error:
        raise AuthorizationError(
            f"the token endpoint refused the {grant_type} grant: {shown(str(error.error), 100)}"
            + (f" ({str(error.description)[:200]})" if error.description else "")
        ) from None
    except httpx2.HTTPError as error:
        raise AuthorizationError(
            f"the token request failed: {type(error).__name__}: {shown(server.token_endpoint)}"
        ) from None
    except ValueError as error:  # a key authlib cannot read, a body that is not JSON
        raise AuthorizationError(f"the token request failed: {shown(str(error))}") from None
    return _tokens(dict(token), asked_at, parameters.get("scope", ""))


_KEY_TYPES: Final = {"ES": "EC", "RS": "RSA", "PS": "RSA", "Ed": "OKP"}


def _signing_key(private_key: str | None, algorithm: str) -> Any:
    """The joserfc key a `private_key_jwt` assertion is signed with, read from a PEM as the
    algorithm's key type (ES256: an EC key)."""
    from joserfc import jwk  # noqa: PLC0415  (the `oauth` extra, as authlib)

    if private_key is None:
        raise AuthorizationError("private_key_jwt needs a private key")
    key_type = _KEY_TYPES.get(algorithm[:2])
    if key_type is None:
        raise AuthorizationError(f"cannot sign a client assertion with {algorithm!r}")
    try:
        return jwk.import_key(private_key, key_type)  # type: ignore[call-overload]
    except ValueError as error:
        raise AuthorizationError(
            f"the private key is not a {key_type} key for {algorithm}: {error}"
        ) from None


def _tokens(token: dict[str, Any], asked_at: float, scope: str) -> Tokens:
    access = token.get("access_token")
    if not isinstance(access, str) or not access:
        raise AuthorizationError("the token endpoint answered no access_token")
    if str(token.get("token_type", "bearer")).lower() != "bearer":
        raise AuthorizationError(
            f"the token endpoint answered a {str(token.get('token_type'))[:40]!r} token, "
            "not a Bearer one"
        )
    lifetime = token.get("expires_in")
    expires_at = (
        asked_at + float(lifetime)
        if isinstance(lifetime, int | float) and not isinstance(lifetime, bool)
        else None
    )
    refresh = token.get("refresh_token")
    return Tokens(
        access_token=access,
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        expires_at=expires_at,
        scopes=scope.split(),
    )
