"""The era half of `Client`: which revision the server speaks, found by asking, and the 2025
session kept with a server of the 2025 revisions.

A client with `era=None` (the default) sends its first request as 2026-07-28. A server of
the 2025 revisions refuses it as a request outside a session (`falls_back`, or an answer
that is no JSON-RPC response to it with HTTP 400, 404 or 405): the client opens a session
(`initialize`, the version checked, `notifications/initialized`) and sends the request
again in the 2025 form; every later request goes in that session. A modern answer (any
result, or a modern error code) settles the era as modern. Only a transport that keeps
sessions (`session_id`: HTTP) falls back.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Final

import anyio
import msgspec

from ..core import wire as w
from ..core._client import ClientCore
from ..core._client_era import MODERN_CODES, Era, LegacySession, falls_back
from ..core._errors import INTERNAL_ERROR, METHOD_NOT_FOUND, RemoteProtocolError
from ..transports import ClientTransport, TransportError, UnexpectedAnswer
from ._callbacks import ElicitHandler, RootsHandler, SamplingHandler

FALL_BACK_STATUSES: Final = frozenset({400, 404, 405})
_MAX_REMEMBERED: Final = 256
_ERAS: dict[str, Era] = {}
"""The era found at each URL by this process's clients, the latest last (at most
`_MAX_REMEMBERED`)."""


def remember_era(url: str, era: Era | None) -> None:
    """Keep the era a client found at `url`, for the next client there."""
    if era is None:
        return
    _ERAS.pop(url, None)
    _ERAS[url] = era
    while len(_ERAS) > _MAX_REMEMBERED:
        del _ERAS[next(iter(_ERAS))]


def recalled_era(url: str) -> Era | None:
    return _ERAS.get(url)


"""HTTP statuses whose unreadable answer to a modern request means a 2025 server."""


class EraKeeper:
    """Finds the server's era and keeps its 2025 session (`Client` sets the attributes)."""

    transport: ClientTransport
    core: ClientCore
    on_elicit: ElicitHandler | None
    on_sample: SamplingHandler | None
    on_roots: RootsHandler | None
    _ids: itertools.count[int]
    era: Era | None
    era_guessed: bool = False
    """The era was taken from an earlier client's finding, not from this server's answer:
    a modern refusal of `initialize` then means the server changed, and it is asked anew."""
    session: LegacySession
    request_timeout_seconds: float | None

    def in_session(self) -> bool:
        """Whether requests go in a 2025 session (`era` is "legacy")."""
        return self.era == "legacy"

    def keeps_sessions(self) -> bool:
        return hasattr(self.transport, "session_id")

    async def probe(self, seconds: float) -> Era:
        """Over stdio, where nothing but the answer tells: `server/discover`, 2026-07-28. A
        result or a modern error code (-32020, -32021, -32022) says modern; any other error
        (-32601 included: every modern server serves discover), the process ending, or no
        answer in `seconds` says legacy."""
        try:
            with anyio.fail_after(seconds):
                request_id = next(self._ids)
                body, headers = self.core.request(request_id, "server/discover", None)
                response = await self.transport.request(
                    body, request_id=request_id, headers=headers
                )
        except (TimeoutError, TransportError):
            return "legacy"
        error = response.get("error")
        if isinstance(error, dict) and error.get("code") not in MODERN_CODES - {METHOD_NOT_FOUND}:
            return "legacy"  # (a modern server knows server/discover: -32601 is a 2025 one's)
        return "modern"

    def answer_says_legacy(self, response: dict[str, Any] | None, odd: Exception | None) -> bool:
        """Whether the answer to a first, modern request is a 2025 server's."""
        if self.era is not None or not self.keeps_sessions():
            return False
        if response is not None:
            return falls_back(response)
        return isinstance(odd, UnexpectedAnswer) and odd.status in FALL_BACK_STATUSES

    async def open_guessed_session(self) -> None:
        """Open the session a client starts in; when its era was only remembered and the
        server answers `initialize` with a modern error, it is a modern server now."""
        try:
            await self.open_session()
        except RemoteProtocolError as error:
            if not (self.era_guessed and getattr(error, "code", None) in MODERN_CODES):
                raise
            self.era = None  # (asked anew by the next request)
        finally:
            self.era_guessed = False

    async def open_session(self) -> None:
        """`initialize` a 2025 session (again, after the server forgot the last one)."""
        transport: Any = self.transport
        if self.keeps_sessions():
            transport.session_id = None
        transport.on_server_request = self.answer_server_request
        request_id = next(self._ids)
        body, headers = self.session.initialize_request(request_id)
        limit = self.request_timeout_seconds
        with anyio.move_on_after(math.inf if limit is None else limit) as scope:
            response = await self.transport.request(body, request_id=request_id, headers=headers)
        if scope.cancelled_caught:
            raise TransportError(f"no answer to initialize within {limit:g} s")
        self.session.accept(self.core.result_of(response, request_id))
        body, headers = self.session.initialized()
        await self.transport.notify(body, headers=headers)
        self.era = "legacy"
        listen = getattr(transport, "listen_to_session", None)
        if listen is not None:  # (HTTP: resumable streams and the session's GET stream)
            transport.resumes_streams = True
            await listen(self.session.headers(), self._session_notice)

    async def _session_notice(self, message: dict[str, Any]) -> None:
        """A notification on the session's own stream (a list that changed, say)."""
        if message.get("method") == "notifications/tools/list_changed":
            self.core.tool_headers.forget()

    async def answer_server_request(self, message: dict[str, Any]) -> bytes:
        """The answer to a request the 2025 server sent: ping, elicitation, sampling, roots,
        with the client's handlers (a kind without one: -32601)."""
        request_id, method = message.get("id"), message.get("method")
        params = message.get("params") or {}
        try:
            if method == "ping":
                return self.session.answer(request_id, {})
            if method == "elicitation/create" and self.on_elicit is not None:
                elicit = msgspec.convert(params, w.ElicitParams)
                return self.session.answer(request_id, _plain(await self.on_elicit(elicit)))
            if method == "sampling/createMessage" and self.on_sample is not None:
                sample = msgspec.convert(params, w.CreateMessageParams)
                return self.session.answer(request_id, _plain(await self.on_sample(sample)))
            if method == "roots/list" and self.on_roots is not None:
                return self.session.answer(request_id, _plain(await self.on_roots()))
        except msgspec.ValidationError as error:
            return self.session.refuse(request_id, w.INVALID_PARAMS, f"bad {method}: {error}")
        except Exception as error:  # the handler's failure: named, its words kept here
            failed = f"{method} failed on the client ({type(error).__name__})"
            return self.session.refuse(request_id, INTERNAL_ERROR, failed)
        return self.session.refuse(
            request_id, METHOD_NOT_FOUND, f"this client does not answer {method!r}"
        )


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value)
