"""This library's token verifiers for the official SDK's own authentication.

An `MCPServer(auth=AuthSettings(...), token_verifier=...)` checks every request itself
(its bearer middleware, its Protected Resource Metadata); `SdkTokenVerifier` lets it
check them with a `JwtVerifier`, an `IntrospectionVerifier` or any `TokenVerifier` of
`mcp_tasks.auth`. Tasks the `TasksExtension` starts are then bound to the SDK's principal
of the request (its client, issuer and subject), as the SDK binds its own state.
"""

from __future__ import annotations

from mcp.server.auth.provider import AccessToken as SdkAccessToken

from ..auth import InvalidToken, TokenVerifier

__all__ = ["SdkTokenVerifier"]


class SdkTokenVerifier:
    """The SDK's `TokenVerifier` protocol (`verify_token`), answered by `verifier`.
    `resource`: the SDK's `AuthSettings.resource_server_url`, reported as the token's
    resource when its audience names it (else the audience's first entry)."""

    def __init__(self, verifier: TokenVerifier, *, resource: str | None = None) -> None:
        self.verifier = verifier
        self.resource = resource

    async def verify_token(self, token: str) -> SdkAccessToken | None:
        """The SDK's view of the token, or None (the SDK answers 401) when `verifier`
        refuses it. `VerifierUnavailable` is raised on: the SDK answers it 500, not as a
        bad token."""
        try:
            access = await self.verifier.verify(token)
        except InvalidToken:
            return None
        if self.resource is not None and self.resource in access.audience:
            audience: str | None = self.resource
        else:
            audience = access.audience[0] if access.audience else None
        return SdkAccessToken(
            token=token,
            client_id=access.client_id or access.subject,
            scopes=sorted(access.scopes),
            expires_at=None if access.expires_at is None else int(access.expires_at),
            resource=audience,
            subject=access.subject,
            # (the SDK's principal reads the issuer from the claims: an introspection
            # answer may not carry it)
            claims={"iss": access.issuer, **access.claims}
            if access.issuer
            else dict(access.claims),
        )
