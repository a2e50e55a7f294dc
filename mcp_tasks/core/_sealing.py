"""Sealing `requestState`: what the server needs between input rounds, signed.

The client must echo `requestState` untouched, but it is still attacker-controlled. The
core keeps its round state in it (which keys it asked and how to read their answers, the
handler's own state) and seals it with HMAC-SHA256 under a key the shell injects, bound to
the method, a digest of the call's params and an expiry. Anything that fails to open is
refused with -32602; nothing inside is trusted before the MAC checks out.

Format: ``v1.<base64url(JSON payload)>.<base64url(MAC over "v1." + payload)>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Any, Protocol

import msgspec

from ._errors import INVALID_PARAMS, RemoteProtocolError

_PREFIX = "v1."


class RoundState(msgspec.Struct, array_like=True, frozen=True):
    method: str
    params_digest: str
    expires_at: float
    asked: dict[str, str]
    """Input key -> the method of the request asked under it."""
    handler_state: str | None


_encoder = msgspec.json.Encoder(order="sorted")
_round_decoder = msgspec.json.Decoder(RoundState)
_any_decoder = msgspec.json.Decoder()


class Sealer(Protocol):
    """The injected cryptography of input rounds: a digest naming a call, and the MAC that
    seals a round's state. `HmacSealer` is the one in use; a replayed journal plays back
    what a recorded one gave, without the key."""

    def digest(
        self, method: str, name: str, arguments: bytes | None, principal: str | None
    ) -> str: ...

    def mac(self, signed: str) -> bytes: ...

    def verify(self, signed: str, mac: bytes) -> bool: ...


class HmacSealer:
    """HMAC-SHA256 under `key` (at least 16 random bytes)."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("state_key must hold at least 16 random bytes")
        self._key = key

    def digest(self, method: str, name: str, arguments: bytes | None, principal: str | None) -> str:
        return params_digest(method, name, arguments, principal)

    def mac(self, signed: str) -> bytes:
        return hmac.new(self._key, signed.encode("ascii"), hashlib.sha256).digest()

    def verify(self, signed: str, mac: bytes) -> bool:
        return hmac.compare_digest(mac, self.mac(signed))


def params_digest(
    method: str, name: str, arguments: bytes | None, principal: str | None = None
) -> str:
    """A digest of what identifies the call, stable under JSON key order and whitespace:
    the method, the name, the arguments and who calls (a round is only good for its caller)."""
    canonical = b"null" if arguments is None else _encoder.encode(_any_decoder.decode(arguments))
    caller = b"\x00" if principal is None else b"\x01" + principal.encode()
    digest = hashlib.sha256()
    for part in (method.encode(), name.encode(), canonical, caller):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(sealer: Sealer, state: RoundState) -> str:
    signed = _PREFIX + _b64(_encoder.encode(state))
    return signed + "." + _b64(sealer.mac(signed))


def _refuse(why: str) -> RemoteProtocolError:
    return RemoteProtocolError(INVALID_PARAMS, f"requestState {why}")


def open_sealed(sealer: Sealer, token: str, *, method: str, digest: str, now: float) -> RoundState:
    """The round state inside `token`, or -32602 if it is forged, stale or not for this call."""
    signed, _, mac_text = token.rpartition(".")
    if not signed.startswith(_PREFIX) or not mac_text:
        raise _refuse("is not one this server issued")
    try:
        mac = _unb64(mac_text)
    except (binascii.Error, ValueError):
        raise _refuse("is not one this server issued") from None
    if not signed.isascii() or not sealer.verify(signed, mac):
        raise _refuse("failed its integrity check (altered, or sealed with another key)")
    try:
        state: Any = _round_decoder.decode(_unb64(signed[len(_PREFIX) :]))
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise _refuse("is not one this server issued") from None
    if now >= state.expires_at:
        raise _refuse("has expired: start the call again without it")
    if state.method != method or state.params_digest != digest:
        raise _refuse(
            "was issued for a different request (method, tool, arguments or caller differ)"
        )
    assert isinstance(state, RoundState)
    return state
