"""`mcp-tasks login URL` and `mcp-tasks logout URL`: OAuth for the client commands.

`login` runs the authorization-code flow of the MCP authorization spec with the system
browser and a loopback redirect (`LoopbackBrowser`; the authorization URL is also printed,
for a browser elsewhere on this machine), or the client-credentials grant with
`--client-credentials`, and keeps the tokens in the logins file (0600; `--logins`, default
`~/.config/mcp-tasks/logins.json`). `call`, `task` and `tools` use that file: a stored
token goes with every request, is refreshed when it expires, and a server that still asks
for a login says to run `mcp-tasks login`. `logout` forgets the server's login. No token is
printed or logged.
"""

from __future__ import annotations

import sys
import webbrowser
from pathlib import Path
from typing import Any, Final

import click
import trio

from ..client import AuthorizationError
from ..oauth import FileTokenStorage, LoopbackBrowser, OAuth, default_logins_path
from ._serving import say

__all__ = ["login", "logins_option", "logout", "stored_logins"]

EXIT_NOT_AUTHORIZED: Final = 1


def logins_option(function: Any) -> Any:
    return click.option(
        "--logins",
        "logins",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="PATH",
        help="The file `mcp-tasks login` keeps tokens in (0600). "
        "Default: ~/.config/mcp-tasks/logins.json ($XDG_CONFIG_HOME/mcp-tasks/...).",
    )(function)


def stored_logins(url: str, logins: Path | None) -> OAuth:
    """What `call`, `task` and `tools` authorize with: the stored login for `url`, no
    user agent (a server that wants a new login is an error saying to run `login`)."""
    return OAuth(url, storage=FileTokenStorage(logins or default_logins_path()))


def _announce(url: str) -> None:
    say(f"opening the authorization page in your browser; if it does not open, visit:\n{url}")
    webbrowser.open(url)


@click.command()
@click.argument("url")
@logins_option
@click.option(
    "--client-id",
    metavar="ID",
    help="A client registered beforehand at the authorization server (else: a Client ID "
    "Metadata Document, or dynamic registration).",
)
@click.option("--client-secret", metavar="SECRET", help="The secret of --client-id, if it has one.")
@click.option(
    "--private-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="FILE",
    help="A PEM private key: --client-id authenticates with private_key_jwt (ES256; "
    "--signing-algorithm for another) instead of a secret.",
)
@click.option(
    "--signing-algorithm",
    default="ES256",
    metavar="ALG",
    help="The JWS algorithm of the --private-key assertions (ES256, RS256, PS256, EdDSA...).",
)
@click.option(
    "--client-metadata-url",
    metavar="URL",
    help="This client's Client ID Metadata Document (https), used where the authorization "
    "server takes them.",
)
@click.option(
    "--client-credentials",
    is_flag=True,
    help="No user: get the token with --client-id and its --client-secret or --private-key.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="The loopback port the browser is sent back to (0: any free one).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=300.0,
    metavar="SECONDS",
    help="How long to wait for the login in the browser.",
)
def login(  # noqa: PLR0917 - click passes every option
    url: str,
    logins: Path | None,
    client_id: str | None,
    client_secret: str | None,
    private_key: Path | None,
    signing_algorithm: str,
    client_metadata_url: str | None,
    client_credentials: bool,
    port: int,
    timeout: float,
) -> None:
    """Log in to the protected MCP server at URL (OAuth 2.1, as the MCP authorization spec
    says) and keep the tokens for `call`, `task` and `tools`."""
    if not url.startswith(("http://", "https://")):
        raise click.BadParameter(f"{url!r} is not an http(s) URL", param_hint="URL")
    if client_credentials and (
        client_id is None or (client_secret is None) == (private_key is None)
    ):
        raise click.UsageError(
            "--client-credentials needs --client-id, and --client-secret or --private-key."
        )
    if private_key is not None and client_id is None:
        raise click.UsageError("--private-key is the key of a --client-id.")
    key = private_key.read_text() if private_key is not None else None
    storage = FileTokenStorage(logins or default_logins_path())
    browser = (
        None
        if client_credentials
        else LoopbackBrowser(port=port, open_url=_announce, timeout_seconds=timeout)
    )
    oauth = OAuth(
        url,
        user_agent=browser,
        storage=storage,
        client_id=client_id,
        client_secret=client_secret,
        private_key=key,
        signing_algorithm=signing_algorithm,
        client_metadata_url=client_metadata_url,
        grant="client_credentials" if client_credentials else "authorization_code",
    )
    try:
        trio.run(oauth.log_in)
    except (AuthorizationError, OSError) as error:
        say(f"login failed: {error}")
        sys.exit(EXIT_NOT_AUTHORIZED)
    finally:
        if browser is not None:
            browser.close()
    say(f"logged in to {url}; the tokens are in {storage.path}")


@click.command()
@click.argument("url")
@logins_option
def logout(url: str, logins: Path | None) -> None:
    """Forget the login kept for the server at URL."""
    storage = FileTokenStorage(logins or default_logins_path())
    try:
        known = url in storage.servers()
        trio.run(storage.forget, url)
    except OSError as error:
        say(f"logout failed: {error}")
        sys.exit(EXIT_NOT_AUTHORIZED)
    say(f"logged out of {url}" if known else f"there was no login for {url}")
