"""`OAuth`: a client's authorization to one MCP server, as the MCP authorization spec
asks (revisions 2025-11-25 and 2026-07-28).

Theory of operation
-------------------
The HTTP transport asks `authorization()` for the header to send on each request (the
stored access token; refreshed first when it has expired and a refresh token is held) and
hands every 401, and every 403 whose challenge says `insufficient_scope`, to `challenged()`,
which gets a new token and says whether to send the request again. At most
`max_authorizations` tokens are got for one request: a server that keeps refusing gets its
refusal through to the caller.

Getting a token: the server's Protected Resource Metadata (the challenge's
`resource_metadata`, else the well-known URLs), its `resource` checked against the server's
URL before anything goes to an authorization server; the first authorization server's
metadata (its `issuer` must be the one named); what was stored for another issuer dropped
(credentials never cross authorization servers); then a refresh (a 401 to a token that has
a refresh token), the client-credentials grant, or the authorization-code grant with PKCE
S256 through the `UserAgent`, the client registered first by pre-registration, a Client ID
Metadata Document, or dynamic registration, in that order. The `resource` goes in every
authorization and token request as the metadata gave it. Scopes: the challenge's (joined
to those asked before on a step-up), else the metadata's `scopes_supported`, else none;
`offline_access` when the authorization server lists it.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from base64 import urlsafe_b64encode
from typing import Final, Literal
from urllib.parse import urlencode

import anyio
import httpx2

from .._support.documents import secure, shown
from ._agents import UserAgent
from ._metadata import (
    AuthorizationServerMetadata,
    Challenge,
    ProtectedResourceMetadata,
    choose_scopes,
    parse_challenge,
    protected_resource_urls,
    resource_covers,
)
from ._steps import (
    AuthorizationError,
    check_redirect,
    fetch_resource_metadata,
    fetch_server_metadata,
    register_dynamically,
    request_tokens,
)
from ._storage import Login, MemoryTokenStorage, Registration, Tokens, TokenStorage

__all__ = ["OAuth"]

_log = logging.getLogger("mcp_tasks.oauth")

Grant = Literal["authorization_code", "client_credentials"]
_SECRET_METHODS: Final = ("client_secret_basic", "client_secret_post")


class OAuth:
    """Authorization for the MCP server at `server_url`.

    - `user_agent`: takes the user to the authorization server (`LoopbackBrowser`); without
      one, a server that wants a user login is an `AuthorizationError` saying so.
    - `storage`: where logins are kept (default: in memory).
    - `client_id` / `client_secret` (or `private_key`, a PEM for `private_key_jwt`): a
      client registered beforehand; `issuer` names the authorization server it is
      registered at (another one is then an error, not a silent reuse).
    - `client_metadata_url`: the client's Client ID Metadata Document, used where the
      authorization server supports them.
    - `grant="client_credentials"`: no user; the client's own credentials get the token.
    """

    def __init__(
        self,
        server_url: str,
        *,
        user_agent: UserAgent | None = None,
        storage: TokenStorage | None = None,
        client_name: str = "mcp-tasks",
        client_metadata_url: str | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        private_key: str | None = None,
        signing_algorithm: str = "ES256",
        issuer: str | None = None,
        grant: Grant = "authorization_code",
        offline_access: bool = True,
        max_authorizations: int = 3,
        timeout_seconds: float = 30.0,
    ) -> None:
        if grant == "client_credentials" and client_id is None:
            raise ValueError("the client_credentials grant needs a client_id")
        if max_authorizations < 1:
            raise ValueError("max_authorizations must be at least 1")
        self.server_url = server_url
        self.user_agent = user_agent
        self.storage: TokenStorage = storage if storage is not None else MemoryTokenStorage()
        self.client_name = client_name
        self.client_metadata_url = client_metadata_url
        self._client_id = client_id
        self._client_secret = client_secret
        self._private_key = private_key
        self.signing_algorithm = signing_algorithm
        self.issuer = issuer
        self.grant = grant
        self.offline_access = offline_access
        self.max_authorizations = max_authorizations
        self.timeout_seconds = timeout_seconds
        self._login: Login | None = None
        self._loaded = False
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return f"OAuth({self.server_url!r}, grant={self.grant!r})"

    # --- what the transport asks ----------------------------------------------------------

    async def authorization(self) -> str | None:
        """The `Authorization` header value for the next request (None before a login)."""
        async with self._lock:
            login = await self._stored()
            tokens = login.tokens if login is not None else None
            if login is not None and tokens is not None and tokens.refresh_token:  # noqa: SIM102
                if tokens.expired(time.time()):
                    await self._refresh_stored(login)
            return self._header()

    async def challenged(
        self, status: int, www_authenticate: list[str], sent: str | None, attempt: int
    ) -> bool:
        """Whether to send a request again after the server answered it `status` (401 or
        403) with these challenges; `sent` is the Authorization header it carried,
        `attempt` how many times this request was already authorized anew."""
        challenge = parse_challenge(www_authenticate) or Challenge()
        step_up = status == 403
        if step_up and challenge.error != "insufficient_scope":
            return False
        if status not in (401, 403) or attempt >= self.max_authorizations:
            return False
        if not secure(self.server_url):
            raise AuthorizationError(
                f"{self.server_url} asks for a token, which is never sent over plain http "
                "to another machine"
            )
        async with self._lock:
            if not step_up and self._header() not in (None, sent):
                return True  # (another request got a new token meanwhile)
            await self._renew(challenge, step_up=step_up, sent=sent)
        return True

    # --- getting a token -----------------------------------------------------------------

    async def _renew(self, challenge: Challenge, *, step_up: bool, sent: str | None) -> None:
        async with httpx2.AsyncClient(timeout=self.timeout_seconds, follow_redirects=True) as http:
            resource = await fetch_resource_metadata(
                http, protected_resource_urls(self.server_url, challenge.resource_metadata)
            )
            if not resource_covers(resource.resource, self.server_url):
                raise AuthorizationError(
                    f"the server's protected resource metadata names {shown(resource.resource)!r}, "
                    f"which is not {self.server_url}: no authorization server is asked"
                )
            issuer = resource.authorization_servers[0]
            if self.issuer is not None and self._client_id is not None and issuer != self.issuer:
                raise AuthorizationError(
                    f"the server now names the authorization server {shown(issuer)!r}; the client "
                    f"is registered at {self.issuer!r}, and its credentials are not sent "
                    "elsewhere"
                )
            server = await fetch_server_metadata(http, issuer)
            login = await self._stored()
            if login is None or login.issuer != issuer:
                login = Login(issuer=issuer)  # (nothing from another issuer is carried over)
            held = login.tokens
            refreshable = held is not None and held.refresh_token is not None
            if not step_up and sent is not None and refreshable:  # noqa: SIM102
                if await self._refresh(server, resource, login):
                    return
            asked_before = held.scopes if step_up and held is not None else []
            scopes = choose_scopes(
                challenge.scopes,
                resource.scopes_supported,
                server,
                asked_before=asked_before,
                want_offline=self.offline_access and self.grant == "authorization_code",
            )
            if self.grant == "client_credentials":
                registration = self._pre_registered(server)
                tokens = await self._request(
                    server, registration, "client_credentials", resource, scope=" ".join(scopes)
                )
            else:
                registration = await self._registration(http, server, login)
                tokens = await self._authorize(server, resource, registration, scopes)
            await self._keep(Login(issuer=issuer, registration=registration, tokens=tokens))

    async def _authorize(
        self,
        server: AuthorizationServerMetadata,
        resource: ProtectedResourceMetadata,
        registration: Registration,
        scopes: list[str],
    ) -> Tokens:
        """The authorization-code grant: the user agent's visit, then the code exchanged."""
        agent = self._agent()
        if server.authorization_endpoint is None or server.token_endpoint is None:
            raise AuthorizationError(
                f"the authorization server {shown(server.issuer)!r} has no endpoints"
            )
        verifier = secrets.token_urlsafe(64)
        challenge = urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
        state = secrets.token_urlsafe(24)
        query = {
            "response_type": "code",
            "client_id": registration.client_id,
            "redirect_uri": agent.redirect_uri,
            "state": state,
            "code_challenge": challenge.decode(),
            "code_challenge_method": "S256",
            "resource": resource.resource,
        }
        if scopes:
            query["scope"] = " ".join(scopes)
        separator = "&" if "?" in server.authorization_endpoint else "?"
        try:
            url = server.authorization_endpoint + separator + urlencode(query)
            callback = await agent.visit(url)
        except (RuntimeError, TimeoutError, httpx2.HTTPError) as error:
            raise AuthorizationError(f"the authorization step failed: {error}") from None
        code = check_redirect(
            callback,
            state=state,
            issuer=server.issuer,
            issuer_promised=server.authorization_response_iss_parameter_supported,
        )
        return await self._request(
            server,
            registration,
            "authorization_code",
            resource,
            code=code,
            redirect_uri=agent.redirect_uri,
            code_verifier=verifier,
            scope=" ".join(scopes),
        )

    def _agent(self) -> UserAgent:
        if self.user_agent is None:
            raise AuthorizationError(
                f"{self.server_url} asks for a login: log in first (`mcp-tasks login "
                f"{self.server_url}`), or give the client a user agent"
            )
        return self.user_agent

    async def _registration(
        self, http: httpx2.AsyncClient, server: AuthorizationServerMetadata, login: Login
    ) -> Registration:
        """Pre-registered, else the one kept (for this redirect URI), else a Client ID
        Metadata Document, else dynamic registration."""
        if self._client_id is not None:
            return self._pre_registered(server)
        redirect_uri = self._agent().redirect_uri
        kept = login.registration
        if kept is not None and _still_fits(kept, redirect_uri, self.client_metadata_url):
            return kept
        if self.client_metadata_url is not None and server.client_id_metadata_document_supported:
            return Registration(
                client_id=self.client_metadata_url,
                redirect_uris=[redirect_uri],
                how="metadata-document",
            )
        if server.registration_endpoint is not None:
            return await register_dynamically(
                http, server, client_name=self.client_name, redirect_uri=redirect_uri
            )
        raise AuthorizationError(
            f"the authorization server {shown(server.issuer)!r} offers no client registration "
            "(no registration_endpoint, no Client ID Metadata Documents): give a client_id"
        )

    def _pre_registered(self, server: AuthorizationServerMetadata) -> Registration:
        assert self._client_id is not None
        if self._private_key is not None:
            method = "private_key_jwt"
        elif self._client_secret is not None:
            offered = server.token_endpoint_auth_methods_supported or ["client_secret_basic"]
            method = next((name for name in _SECRET_METHODS if name in offered), offered[0])
        else:
            method = "none"
        return Registration(
            client_id=self._client_id,
            client_secret=self._client_secret,
            auth_method=method,
            how="pre-registered",
        )

    async def _request(
        self,
        server: AuthorizationServerMetadata,
        registration: Registration,
        grant_type: str,
        resource: ProtectedResourceMetadata,
        **parameters: str,
    ) -> Tokens:
        if server.token_endpoint is None:
            raise AuthorizationError(
                f"the authorization server {shown(server.issuer)!r} has no token endpoint"
            )
        return await request_tokens(
            server,
            registration,
            grant_type=grant_type,
            timeout_seconds=self.timeout_seconds,
            private_key=self._private_key,
            signing_algorithm=self.signing_algorithm,
            resource=resource.resource,
            **parameters,
        )

    # --- refreshing ----------------------------------------------------------------------

    async def _refresh(
        self,
        server: AuthorizationServerMetadata,
        resource: ProtectedResourceMetadata,
        login: Login,
    ) -> bool:
        """Whether a refresh grant got a new access token (kept)."""
        tokens, registration = login.tokens, login.registration
        if tokens is None or tokens.refresh_token is None or registration is None:
            return False
        try:
            fresh = await self._request(
                server,
                registration,
                "refresh_token",
                resource,
                refresh_token=tokens.refresh_token,
            )
        except AuthorizationError:
            return False
        # (a server that sends no refresh token keeps the one held working)
        refresh_token = fresh.refresh_token or tokens.refresh_token
        fresh = Tokens(fresh.access_token, refresh_token, fresh.expires_at, tokens.scopes)
        await self._keep(Login(login.issuer, registration, fresh))
        return True

    async def _refresh_stored(self, login: Login) -> None:
        """Refreshes an expired access token before it is sent (a failure leaves it to the
        server's 401)."""
        async with httpx2.AsyncClient(timeout=self.timeout_seconds, follow_redirects=True) as http:
            try:
                resource = await fetch_resource_metadata(
                    http, protected_resource_urls(self.server_url, None)
                )
                server = await fetch_server_metadata(http, login.issuer)
            except AuthorizationError:
                return
        same_server = resource.authorization_servers[0] == login.issuer
        if same_server and resource_covers(resource.resource, self.server_url):
            await self._refresh(server, resource, login)

    # --- what is held --------------------------------------------------------------------

    async def _stored(self) -> Login | None:
        """The login held, read from the storage once (a storage that cannot be read is
        logged and gone on without: the server says whether a login is needed)."""
        if not self._loaded:
            self._loaded = True
            try:
                self._login = await self.storage.load(self.server_url)
            except OSError as error:
                _log.warning("the stored logins cannot be read, going on without: %s", error)
        return self._login

    async def _keep(self, login: Login) -> None:
        self._login = login
        try:
            await self.storage.save(self.server_url, login)
        except OSError as error:
            _log.warning("the login cannot be stored, kept for this process only: %s", error)

    def _header(self) -> str | None:
        if self._login is None or self._login.tokens is None:
            return None
        return f"Bearer {self._login.tokens.access_token}"

    async def log_in(self) -> None:
        """Logs in now (what `mcp-tasks login` does): asks the server once without a token
        and answers its challenge."""
        async with httpx2.AsyncClient(timeout=self.timeout_seconds) as http:
            try:
                response = await http.get(self.server_url)
            except httpx2.HTTPError as error:
                raise AuthorizationError(f"cannot reach {self.server_url}: {error}") from None
        challenges = response.headers.get_list("www-authenticate")
        async with self._lock:
            await self._renew(parse_challenge(challenges) or Challenge(), step_up=False, sent=None)


def _still_fits(kept: Registration, redirect_uri: str, metadata_url: str | None) -> bool:
    """Whether a kept registration serves this login: a dynamic one registered this
    redirect URI, a metadata document's is still the one configured."""
    if kept.how == "dynamic":
        return redirect_uri in kept.redirect_uris
    if kept.how == "metadata-document":
        return kept.client_id == metadata_url
    return False
