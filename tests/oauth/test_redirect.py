"""The check of the URL an authorization server sends the user back to
(mcp_tasks/oauth/_steps.py `check_redirect`): `iss` as RFC 9207 says, compared as a string;
`state`; an `error` believed only from a response that passed those checks; the code."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from mcp_tasks.oauth import AuthorizationError
from mcp_tasks.oauth._steps import check_redirect

ISSUER = "https://auth.example/tenant"
STATE = "s-123"
CALLBACK = "http://127.0.0.1:5555/callback"


def callback(**query: str) -> str:
    return f"{CALLBACK}?{urlencode(query)}"


def check(url: str, *, promised: bool) -> str:
    return check_redirect(url, state=STATE, issuer=ISSUER, issuer_promised=promised)


# The RFC 9207 table: (metadata promises iss, callback has iss) -> what the client does.
@pytest.mark.parametrize(
    ("promised", "iss", "accepted"),
    [
        (True, ISSUER, True),
        (True, None, False),
        (False, ISSUER, True),
        (False, None, True),
    ],
)
def test_the_iss_table(promised: bool, iss: str | None, accepted: bool) -> None:
    query = {"code": "c-1", "state": STATE} | ({} if iss is None else {"iss": iss})
    if accepted:
        assert check(callback(**query), promised=promised) == "c-1"
    else:
        with pytest.raises(AuthorizationError, match=r"has no iss.*promised"):
            check(callback(**query), promised=promised)


@pytest.mark.parametrize("promised", [True, False])
@pytest.mark.parametrize(
    "iss",
    [
        ISSUER + "/",
        "https://AUTH.example/tenant",
        "https://auth.example:443/tenant",
        "https://auth.example/tenant/../tenant",
        "https://auth.example/%74enant",
        "https://evil.example/tenant",
        "",
    ],
)
def test_another_iss_is_refused_by_exact_string_compare(promised: bool, iss: str) -> None:
    with pytest.raises(AuthorizationError, match="mix-up") as raised:
        check(callback(code="c-1", state=STATE, iss=iss), promised=promised)
    assert repr(iss[:200]) in str(raised.value)


def test_iss_is_compared_after_the_form_decoding() -> None:
    encoded = f"{CALLBACK}?code=c-1&state={STATE}&iss=https%3A%2F%2Fauth.example%2Ftenant"
    assert check(encoded, promised=True) == "c-1"


@pytest.mark.parametrize(
    "query",
    [
        {"code": "c-1", "state": "other", "iss": ISSUER},
        {"code": "c-1", "iss": ISSUER},
        {"code": "c-1", "state": "", "iss": ISSUER},
        {"code": "c-1", "state": STATE + " ", "iss": ISSUER},
    ],
)
def test_a_state_that_does_not_match_is_refused(query: dict[str, str]) -> None:
    with pytest.raises(AuthorizationError, match="state does not match"):
        check(callback(**query), promised=True)


def test_an_error_from_the_authorization_server_is_reported() -> None:
    url = callback(
        error="access_denied", error_description="the user said no", state=STATE, iss=ISSUER
    )
    with pytest.raises(AuthorizationError, match=r"refused: access_denied \(the user said no\)"):
        check(url, promised=True)


@pytest.mark.parametrize(
    ("query", "promised", "instead"),
    [
        ({"state": STATE, "iss": "https://evil.example"}, False, "mix-up"),
        ({"state": STATE}, True, "has no iss"),
        ({"state": "forged", "iss": ISSUER}, True, "state does not match"),
    ],
)
def test_an_error_is_believed_only_after_iss_and_state_pass(
    query: dict[str, str], promised: bool, instead: str
) -> None:
    url = callback(error="evil_error", error_description="click https://evil.example", **query)
    with pytest.raises(AuthorizationError, match=instead) as raised:
        check(url, promised=promised)
    assert "evil_error" not in str(raised.value)
    assert "click" not in str(raised.value)


@pytest.mark.parametrize("code", [None, ""])
def test_a_response_without_a_code_is_refused(code: str | None) -> None:
    query = {"state": STATE, "iss": ISSUER} | ({} if code is None else {"code": code})
    with pytest.raises(AuthorizationError, match="carries no code"):
        check(callback(**query), promised=True)


def test_the_code_is_returned_decoded() -> None:
    assert check(callback(code="a/b+c=", state=STATE, iss=ISSUER), promised=True) == "a/b+c="


def test_a_long_hostile_iss_is_cut_in_the_message() -> None:
    iss = "https://evil.example/" + "x" * 5000
    with pytest.raises(AuthorizationError) as raised:
        check(callback(code="c", state=STATE, iss=iss), promised=False)
    assert len(str(raised.value)) < 600
