"""`mcp-tasks serve --auth-issuer URL --auth-audience URL`: the HTTP endpoint as an OAuth 2.1
resource server (`mcp_tasks.auth.ResourceServer`), its tokens checked as JWTs against the
issuer's keys or, with `--auth-introspection-client-id`, by RFC 7662 introspection. The
introspection client's secret comes from `MCP_TASKS_AUTH_CLIENT_SECRET` only: a flag would
show it in `ps`."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

import click

from .._support.documents import secure

if TYPE_CHECKING:
    from ..auth import ResourceServer, TokenVerifier

__all__ = ["CLIENT_SECRET_VARIABLE", "auth_options", "protection_line", "resource_server_for"]

CLIENT_SECRET_VARIABLE: Final = "MCP_TASKS_AUTH_CLIENT_SECRET"
"""The introspection client's secret: from the environment only, never a flag."""
_F = TypeVar("_F", bound=Callable[..., Any])
_FLAGS: Final = {
    "auth_issuer": "--auth-issuer",
    "auth_audience": "--auth-audience",
    "auth_scopes": "--auth-scope",
    "auth_introspection_client_id": "--auth-introspection-client-id",
}


def auth_options(command: _F) -> _F:
    """`serve`'s `--auth-*` options, each also read from its `MCP_TASKS_AUTH_*` variable."""
    options = [
        click.option(
            "--auth-issuer",
            metavar="URL",
            envvar="MCP_TASKS_AUTH_ISSUER",
            help="HTTP: protect the endpoint with OAuth; URL is the authorization server "
            "that issues its tokens (its issuer, https or a loopback http). Needs "
            "mcp-tasks[auth].",
        ),
        click.option(
            "--auth-audience",
            metavar="URL",
            envvar="MCP_TASKS_AUTH_AUDIENCE",
            help="With --auth-issuer: this endpoint's URL as clients reach it "
            "(https://mcp.example.com/mcp), the resource its metadata names and the "
            "audience its tokens must name.",
        ),
        click.option(
            "--auth-scope",
            "auth_scopes",
            metavar="SCOPE",
            multiple=True,
            envvar="MCP_TASKS_AUTH_SCOPE",
            help="With --auth-issuer: a scope every request's token must hold (repeat it).",
        ),
        click.option(
            "--auth-introspection-client-id",
            metavar="ID",
            envvar="MCP_TASKS_AUTH_INTROSPECTION_CLIENT_ID",
            help="With --auth-issuer: check tokens by asking the issuer (RFC 7662 "
            "introspection) as the client ID, instead of as JWTs; its secret comes from "
            f"{CLIENT_SECRET_VARIABLE} only.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def resource_server_for(
    ctx: click.Context,
    *,
    stdio: bool,
    issuer: str | None,
    audience: str | None,
    scopes: Sequence[str],
    client_id: str | None,
) -> ResourceServer | None:
    """The endpoint's protection the `--auth-*` options ask for (None: none); what is
    wrong with them is a usage error."""
    values = {
        "auth_issuer": issuer,
        "auth_audience": audience,
        "auth_scopes": scopes,
        "auth_introspection_client_id": client_id,
    }
    given = [_named(ctx, name) for name, value in values.items() if value]
    if not given:
        return None
    if stdio:
        raise click.UsageError(
            f"{given[0]} is for --http: over stdio there is no bearer token (the client is "
            "the process that started the server)."
        )
    if issuer is None:
        raise click.UsageError(
            f"{given[0]} needs --auth-issuer: the authorization server that issues the tokens."
        )
    if audience is None:
        raise click.UsageError(
            "--auth-issuer needs --auth-audience: this endpoint's URL as clients reach it "
            "(e.g. https://mcp.example.com/mcp), the audience its tokens must name."
        )
    _check_url(ctx, "auth_issuer", issuer)
    _check_url(ctx, "auth_audience", audience)
    secret = os.environ.get(CLIENT_SECRET_VARIABLE) or None
    if client_id is not None and secret is None:
        raise click.UsageError(
            f"{_named(ctx, 'auth_introspection_client_id')} needs the client's secret in the "
            f"environment variable {CLIENT_SECRET_VARIABLE} (never on the command line, where "
            "ps would show it)."
        )
    if client_id is None and secret is not None:
        raise click.UsageError(
            f"{CLIENT_SECRET_VARIABLE} is set but --auth-introspection-client-id is not: give "
            "the client id to check tokens by introspection, or unset the variable to check "
            "them as JWTs."
        )
    return _build(issuer, audience, scopes, client_id, secret)


def _build(
    issuer: str,
    audience: str,
    scopes: Sequence[str],
    client_id: str | None,
    secret: str | None,
) -> ResourceServer:
    try:  # the auth extra (joserfc): imported only when asked for
        from ..auth import IntrospectionVerifier, JwtVerifier, ResourceServer  # noqa: PLC0415
    except ImportError as error:
        raise click.ClickException(
            f"--auth-issuer needs joserfc: pip install 'mcp-tasks[auth]' ({error})"
        ) from None
    try:
        verifier: TokenVerifier
        if client_id is not None and secret is not None:
            verifier = IntrospectionVerifier(
                issuer, audience, client_id=client_id, client_secret=secret
            )
        else:
            verifier = JwtVerifier(issuer, audience)
        return ResourceServer(
            resource=audience,
            authorization_servers=[issuer],
            verifier=verifier,
            scopes=list(scopes),
        )
    except ValueError as error:  # (never the secret: the verifiers do not show it)
        raise click.UsageError(str(error)) from None


def protection_line(protection: ResourceServer) -> str:
    """What `serve` says of the protection at startup: the issuer, how tokens are checked,
    the audience and the scopes (never a secret)."""
    from ..auth import IntrospectionVerifier  # noqa: PLC0415  (loaded by now)

    how = (
        "introspected at the issuer"
        if isinstance(protection.verifier, IntrospectionVerifier)
        else "JWTs checked against the issuer's keys"
    )
    issuers = ", ".join(protection.authorization_servers)
    scopes = f", scopes {' '.join(protection.scopes)}" if protection.scopes else ""
    return (
        f"protected by OAuth: bearer tokens from {issuers} ({how}) for {protection.resource}"
        f"{scopes}; metadata at {protection.metadata_url}"
    )


def _check_url(ctx: click.Context, name: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.UsageError(f"{_named(ctx, name)} must be an absolute URL, not {url!r}.")
    if not secure(url):
        raise click.UsageError(
            f"{_named(ctx, name)} must be https (http only to this machine), not {url!r}."
        )


def _named(ctx: click.Context, name: str) -> str:
    """The option `name`, with the variable it came from when it came from one."""
    flag = _FLAGS[name]
    if ctx.get_parameter_source(name) is not click.core.ParameterSource.ENVIRONMENT:
        return flag
    option = next(p for p in ctx.command.params if p.name == name)
    variables = [option.envvar] if isinstance(option.envvar, str) else option.envvar or []
    found = next((variable for variable in variables if os.environ.get(variable)), None)
    return flag if found is None else f"{flag} (from {found})"
