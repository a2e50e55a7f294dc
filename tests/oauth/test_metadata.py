"""The pure rules a client reads its way to a token by (mcp_tasks/oauth/_metadata.py): the
`Bearer` challenge, where the metadata documents are looked for and in which order, whether
a resource names the server, and which scopes are asked for."""

from __future__ import annotations

import pytest

from mcp_tasks.oauth import AuthorizationServerMetadata, Challenge, parse_challenge
from mcp_tasks.oauth._metadata import (
    authorization_server_urls,
    choose_scopes,
    protected_resource_urls,
    resource_covers,
)

# --- parse_challenge ----------------------------------------------------------------------


def test_a_challenge_gives_its_parameters_quoted_or_not() -> None:
    header = (
        'Bearer resource_metadata="https://s.example/.well-known/oauth-protected-resource/mcp", '
        'scope="mcp:read mcp:write", error=insufficient_scope, '
        'error_description="needs \\"write\\" \\\\ now"'
    )
    assert parse_challenge([header]) == Challenge(
        resource_metadata="https://s.example/.well-known/oauth-protected-resource/mcp",
        scope="mcp:read mcp:write",
        error="insufficient_scope",
        error_description='needs "write" \\ now',
    )
    assert parse_challenge([header]).scopes == ["mcp:read", "mcp:write"]  # type: ignore[union-attr]


def test_a_comma_or_an_equals_sign_inside_quotes_is_part_of_the_value() -> None:
    found = parse_challenge(['Bearer error_description="a, b=c", scope="x"'])
    assert found == Challenge(error_description="a, b=c", scope="x")


@pytest.mark.parametrize(
    "headers",
    [
        ['Basic realm="site", Bearer scope="s1 s2", error="invalid_token"'],
        ['Basic realm="a, b", Bearer scope="s1 s2", error="invalid_token"'],
        ['Basic realm="site"', 'Bearer scope="s1 s2", error="invalid_token"'],
        ['Negotiate, Bearer scope="s1 s2",error="invalid_token"'],
        ['bearer scope="s1 s2", error="invalid_token"'],
        ['BEARER   scope="s1 s2", error="invalid_token"'],
    ],
    ids=["after-basic", "after-basic-with-comma", "second-header", "after-bare", "lower", "upper"],
)
def test_bearer_is_found_among_other_schemes_in_any_case(headers: list[str]) -> None:
    found = parse_challenge(headers)
    assert found == Challenge(scope="s1 s2", error="invalid_token")


def test_unknown_parameters_are_ignored_and_the_first_of_a_repeated_one_kept() -> None:
    found = parse_challenge(['Bearer realm="mcp", foo=bar, scope="a", SCOPE="b", x-y="z"'])
    assert found == Challenge(scope="a")


def test_a_bare_bearer_is_a_challenge_with_nothing_in_it() -> None:
    assert parse_challenge(["Bearer"]) == Challenge()


def test_a_bare_bearer_followed_by_another_scheme_is_a_challenge() -> None:
    assert parse_challenge(['Bearer, Basic realm="site"']) == Challenge()


def test_the_parameters_of_the_scheme_after_bearer_are_not_bearers() -> None:
    found = parse_challenge(['Bearer realm="mcp", DPoP algs="ES256", error="use_dpop_nonce"'])
    assert found == Challenge()


def test_bearer_inside_another_schemes_quoted_value_is_no_challenge() -> None:
    assert parse_challenge(['Basic realm="a, Bearer scope=admin"']) is None


@pytest.mark.parametrize(
    "headers",
    [[], ['Basic realm="x"'], ['Digest realm="x", nonce="y"'], ['Bearerish scope="a"'], [""]],
)
def test_no_bearer_challenge_is_none(headers: list[str]) -> None:
    assert parse_challenge(headers) is None


def test_a_header_over_8_kib_is_ignored() -> None:
    padding = "x" * 8200
    huge = f'Bearer scope="huge", error_description="{padding}"'
    assert len(huge) > 8192
    assert parse_challenge([huge]) is None
    assert parse_challenge([huge, 'Bearer scope="small"']) == Challenge(scope="small")


def test_a_header_of_exactly_8_kib_is_read() -> None:
    start = 'Bearer scope="s", error_description="'
    header = start + "x" * (8192 - len(start) - 1) + '"'
    assert len(header) == 8192
    assert parse_challenge([header]) is not None


# --- where the metadata is looked for ------------------------------------------------------


def test_protected_resource_urls_header_then_path_form_then_root() -> None:
    header = "https://meta.example/prm"
    assert protected_resource_urls("https://s.example/mcp", header) == [
        "https://meta.example/prm",
        "https://s.example/.well-known/oauth-protected-resource/mcp",
        "https://s.example/.well-known/oauth-protected-resource",
    ]


def test_protected_resource_urls_without_a_header() -> None:
    assert protected_resource_urls("https://s.example:8443/a/b", None) == [
        "https://s.example:8443/.well-known/oauth-protected-resource/a/b",
        "https://s.example:8443/.well-known/oauth-protected-resource",
    ]


@pytest.mark.parametrize("server_url", ["https://s.example/mcp/", "https://s.example/mcp"])
def test_protected_resource_urls_ignore_a_trailing_slash(server_url: str) -> None:
    assert protected_resource_urls(server_url, None) == [
        "https://s.example/.well-known/oauth-protected-resource/mcp",
        "https://s.example/.well-known/oauth-protected-resource",
    ]


@pytest.mark.parametrize("server_url", ["https://s.example", "https://s.example/"])
def test_protected_resource_urls_of_a_server_at_the_root(server_url: str) -> None:
    assert protected_resource_urls(server_url, None) == [
        "https://s.example/.well-known/oauth-protected-resource"
    ]


@pytest.mark.parametrize(
    "header",
    [
        "https://s.example/.well-known/oauth-protected-resource/mcp",
        "https://s.example/.well-known/oauth-protected-resource",
    ],
)
def test_protected_resource_urls_have_no_duplicates(header: str) -> None:
    urls = protected_resource_urls("https://s.example/mcp", header)
    assert urls[0] == header
    assert sorted(urls) == sorted(
        [
            "https://s.example/.well-known/oauth-protected-resource/mcp",
            "https://s.example/.well-known/oauth-protected-resource",
        ]
    )


def test_protected_resource_urls_drop_the_server_urls_query() -> None:
    assert protected_resource_urls("https://s.example/mcp?tenant=1", None) == [
        "https://s.example/.well-known/oauth-protected-resource/mcp",
        "https://s.example/.well-known/oauth-protected-resource",
    ]


def test_authorization_server_urls_for_an_issuer_with_a_path_in_the_mcp_order() -> None:
    assert authorization_server_urls("https://a.example/tenant1") == [
        "https://a.example/.well-known/oauth-authorization-server/tenant1",
        "https://a.example/.well-known/openid-configuration/tenant1",
        "https://a.example/tenant1/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize("issuer", ["https://a.example", "https://a.example/"])
def test_authorization_server_urls_for_an_issuer_without_a_path(issuer: str) -> None:
    assert authorization_server_urls(issuer) == [
        "https://a.example/.well-known/oauth-authorization-server",
        "https://a.example/.well-known/openid-configuration",
    ]


def test_authorization_server_urls_keep_the_port_and_a_deep_path() -> None:
    assert authorization_server_urls("http://127.0.0.1:4455/realms/x/") == [
        "http://127.0.0.1:4455/.well-known/oauth-authorization-server/realms/x",
        "http://127.0.0.1:4455/.well-known/openid-configuration/realms/x",
        "http://127.0.0.1:4455/realms/x/.well-known/openid-configuration",
    ]


# --- resource_covers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "server_url"),
    [
        ("https://s.example/mcp", "https://s.example/mcp"),
        ("https://s.example/mcp/", "https://s.example/mcp"),
        ("https://s.example/mcp", "https://s.example/mcp/"),
        ("https://s.example", "https://s.example/mcp"),
        ("https://s.example/", "https://s.example/mcp"),
        ("https://s.example/api", "https://s.example/api/v1/mcp"),
        ("https://s.example:443/mcp", "https://s.example/mcp"),
        ("https://s.example/mcp", "https://s.example:443/mcp"),
        ("http://s.example:80/mcp", "http://s.example/mcp"),
        ("HTTPS://S.Example/mcp", "https://s.example/mcp"),
        ("http://127.0.0.1:8000/mcp", "http://127.0.0.1:8000/mcp"),
    ],
)
def test_a_resource_covers_its_server_and_the_servers_under_it(
    resource: str, server_url: str
) -> None:
    assert resource_covers(resource, server_url)


@pytest.mark.parametrize(
    ("resource", "server_url"),
    [
        ("https://other.example/mcp", "https://s.example/mcp"),
        ("http://s.example/mcp", "https://s.example/mcp"),
        ("https://s.example:8443/mcp", "https://s.example/mcp"),
        ("https://s.example/mcp", "https://s.example:8443/mcp"),
        ("http://s.example:443/mcp", "http://s.example/mcp"),
        ("https://s.example/mcp", "https://s.example/mcpx"),
        ("https://s.example/mcpx", "https://s.example/mcp"),
        ("https://s.example/mcp/v2", "https://s.example/mcp"),
        ("https://s.example/other", "https://s.example/mcp"),
        ("https://s.example.evil/mcp", "https://s.example/mcp"),
        ("http://127.0.0.1:8001/mcp", "http://127.0.0.1:8000/mcp"),
    ],
)
def test_a_resource_of_another_origin_or_path_does_not_cover_the_server(
    resource: str, server_url: str
) -> None:
    assert not resource_covers(resource, server_url)


def test_a_resource_with_a_port_that_is_no_number_covers_nothing() -> None:
    assert not resource_covers("https://s.example:https/mcp", "https://s.example/mcp")


# --- choose_scopes -------------------------------------------------------------------------

WITH_OFFLINE = AuthorizationServerMetadata(
    issuer="https://a.example", scopes_supported=["openid", "offline_access"]
)
WITHOUT_OFFLINE = AuthorizationServerMetadata(issuer="https://a.example", scopes_supported=["a"])
NOTHING_LISTED = AuthorizationServerMetadata(issuer="https://a.example")


def test_the_challenges_scopes_come_first_and_alone() -> None:
    chosen = choose_scopes(
        ["files:read"],
        ["files:read", "files:write", "admin"],
        WITHOUT_OFFLINE,
        asked_before=[],
        want_offline=True,
    )
    assert chosen == ["files:read"]


def test_a_step_up_asks_for_the_union_with_what_was_asked_before_in_order() -> None:
    chosen = choose_scopes(
        ["files:write", "files:read"],
        ["admin"],
        WITHOUT_OFFLINE,
        asked_before=["files:read", "other"],
        want_offline=False,
    )
    assert chosen == ["files:read", "other", "files:write"]


def test_without_a_challenged_scope_what_was_asked_before_is_asked_again() -> None:
    chosen = choose_scopes([], ["admin"], WITHOUT_OFFLINE, asked_before=["a"], want_offline=False)
    assert chosen == ["a"]


def test_without_a_challenge_scope_the_resources_scopes_supported_are_asked() -> None:
    chosen = choose_scopes(
        [], ["mcp:read", "mcp:write"], WITHOUT_OFFLINE, asked_before=[], want_offline=True
    )
    assert chosen == ["mcp:read", "mcp:write"]


@pytest.mark.parametrize("resource_scopes", [None, []])
def test_with_nothing_to_go_by_no_scope_is_asked(resource_scopes: list[str] | None) -> None:
    for server in (WITH_OFFLINE, WITHOUT_OFFLINE, NOTHING_LISTED):
        chosen = choose_scopes([], resource_scopes, server, asked_before=[], want_offline=True)
        assert chosen == []


def test_offline_access_only_when_the_authorization_server_lists_it_and_is_wanted() -> None:
    def chosen(server: AuthorizationServerMetadata, want_offline: bool) -> list[str]:
        return choose_scopes(["s"], None, server, asked_before=[], want_offline=want_offline)

    assert chosen(WITH_OFFLINE, True) == ["s", "offline_access"]
    assert chosen(WITH_OFFLINE, False) == ["s"]
    assert chosen(WITHOUT_OFFLINE, True) == ["s"]
    assert chosen(NOTHING_LISTED, True) == ["s"]


def test_offline_access_is_never_doubled() -> None:
    chosen = choose_scopes(
        ["s", "offline_access"],
        None,
        WITH_OFFLINE,
        asked_before=["offline_access"],
        want_offline=True,
    )
    assert chosen == ["offline_access", "s"]
