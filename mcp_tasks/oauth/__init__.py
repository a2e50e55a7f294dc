"""OAuth 2.1 for a client of protected MCP servers (the MCP authorization spec, revisions
2025-11-25 and 2026-07-28), on authlib.

    from mcp_tasks.client import connect_http
    from mcp_tasks.oauth import FileTokenStorage, LoopbackBrowser, OAuth

    auth = OAuth(url, user_agent=LoopbackBrowser(), storage=FileTokenStorage())
    async with connect_http(url, auth=auth) as client:
        ...

Needs the `oauth` extra (`pip install 'mcp-tasks[oauth]'`) for the token requests.
"""

from ._agents import HeadlessAgent, LoopbackBrowser, UserAgent
from ._login import OAuth
from ._metadata import (
    AuthorizationServerMetadata,
    Challenge,
    ProtectedResourceMetadata,
    parse_challenge,
)
from ._steps import AuthorizationError
from ._storage import (
    FileTokenStorage,
    Login,
    MemoryTokenStorage,
    Registration,
    Tokens,
    TokenStorage,
    default_logins_path,
)

__all__ = [
    "AuthorizationError",
    "AuthorizationServerMetadata",
    "Challenge",
    "FileTokenStorage",
    "HeadlessAgent",
    "Login",
    "LoopbackBrowser",
    "MemoryTokenStorage",
    "OAuth",
    "ProtectedResourceMetadata",
    "Registration",
    "TokenStorage",
    "Tokens",
    "UserAgent",
    "default_logins_path",
    "parse_challenge",
]
