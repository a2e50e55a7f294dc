"""A stand-in for the system browser, for `mcp-tasks login` under test: `$BROWSER` runs it
with the authorization URL. It logs in on oidc-provider's devInteractions pages as a user
would (tests/oauth/realm.py `DevInteractionsUser`), then goes to the loopback redirect the
CLI listens on, as the browser would, and prints what the CLI's page said."""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oauth.realm import DevInteractionsUser


async def main(authorization_url: str) -> None:
    query = parse_qs(urlsplit(authorization_url).query)
    user = DevInteractionsUser(query["redirect_uri"][0])
    callback = await user.visit(authorization_url)
    async with httpx2.AsyncClient(timeout=30) as http:
        page = await http.get(callback)
    print(f"browser: HTTP {page.status_code}: {page.text}", file=sys.stderr)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
