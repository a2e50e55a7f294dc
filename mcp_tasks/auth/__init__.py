"""Protecting an MCP server with OAuth 2.1: the server as a resource server.

    from mcp_tasks.auth import JwtVerifier, ResourceServer
    from mcp_tasks.transports import HttpConfig

    protection = ResourceServer(
        resource="https://mcp.example.com/mcp",
        authorization_servers=["https://auth.example.com"],
        verifier=JwtVerifier("https://auth.example.com", "https://mcp.example.com/mcp"),
        scopes=["mcp:use"],
    )
    config = HttpConfig(resource_server=protection)

`JwtVerifier` and `IntrospectionVerifier` need the `auth` extra (joserfc):
`pip install 'mcp-tasks[auth]'`. The guide is docs/auth.md.
"""

from typing import TYPE_CHECKING

from .._support.lazy import lazy_names
from ._resource import ResourceServer, ScopedOperations
from ._tokens import (
    AccessToken,
    InvalidToken,
    TokenVerifier,
    VerifierUnavailable,
    current_access_token,
)

if TYPE_CHECKING:
    from ._introspection import IntrospectionVerifier
    from ._jwt import JwtVerifier
else:  # loaded on first use: they need joserfc (the `auth` extra), the rest does not
    _VERIFIERS = {"JwtVerifier": "._jwt", "IntrospectionVerifier": "._introspection"}
    __getattr__, _listing = lazy_names(__name__, globals(), _VERIFIERS, _VERIFIERS)

__all__ = [
    "AccessToken",
    "IntrospectionVerifier",
    "InvalidToken",
    "JwtVerifier",
    "ResourceServer",
    "ScopedOperations",
    "TokenVerifier",
    "VerifierUnavailable",
    "current_access_token",
]
