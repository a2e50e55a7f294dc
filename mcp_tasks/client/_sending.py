"""How a `Client` sends one request: built by its core, through its transport, read back;
sent again while the server is busy or cannot be reached, as its `RetryPolicy` allows; cut
off at `request_timeout_seconds`."""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import anyio

from ..core import RemoteProtocolError
from ..core._client import ClientCore, RetryPolicy, RpcError
from ..core._client_era import after_version_refusal
from ..transports import (
    ClientTransport,
    ServerUnreachable,
    SessionExpired,
    TransportError,
    UnexpectedAnswer,
)
from ..transports._telemetry import ClientRequest, Telemetry
from ._callbacks import NotificationCallback, RetryHandler, maybe_await
from ._era import EraKeeper


class RequestSender(EraKeeper):
    """The request half of `Client` (which sets these attributes)."""

    transport: ClientTransport
    core: ClientCore
    telemetry: Telemetry
    retry: RetryPolicy
    on_retry: RetryHandler | None
    request_timeout_seconds: float | None
    _random: random.Random
    _ids: itertools.count[int]

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_notification: NotificationCallback | None = None,
    ) -> dict[str, Any]:
        """Send one request; its result, or `RpcError` for a JSON-RPC error. A request the
        server refuses as busy (`data.retryAfterMs`: HTTP 503 or 429) is sent again after
        the wait it asks for, and one a server that cannot be reached did not answer
        (`ServerUnreachable`) after a backoff, as `self.retry` allows: a refused connection
        for any request, a broken one for `REPEATABLE_METHODS` only. Notifications that come
        with the answer go to `on_notification`."""
        if not self.telemetry.enabled:
            return await self._request(method, params, on_notification, None)
        with self.telemetry.client_request(method, params) as observed:
            return await self._request(method, params, on_notification, observed)

    async def _request(
        self,
        method: str,
        params: dict[str, Any] | None,
        on_notification: NotificationCallback | None,
        observed: ClientRequest | None,
    ) -> dict[str, Any]:
        retries = 0
        unreachable_for = 0.0
        sessions_opened = 0
        version_refused = False
        notified = partial(self._notified, on_notification)
        trace_meta = None if observed is None else observed.meta
        while True:
            if self.era == "legacy" and self.session.version is None:
                await self.open_guessed_session()  # (a client made with era="legacy")
            request_id = next(self._ids)
            if self.era == "legacy":
                body, headers = self.session.request(request_id, method, params)
            else:
                body, headers = self.core.request(request_id, method, params, trace_meta)
            try:
                response = await self._send(method, body, request_id, headers, notified)
            except (SessionExpired, UnexpectedAnswer) as odd:
                if sessions_opened or not await self._reopen(odd):
                    raise
                sessions_opened += 1
                continue
            except ServerUnreachable as away:
                unreachable_for += await self._wait_to_reconnect(method, away, unreachable_for)
                continue
            if self.era is None:
                if not self.answer_says_legacy(response, None):
                    self.era = "modern"
                elif not sessions_opened and await self._fall_back():
                    sessions_opened += 1
                    continue
            try:
                return self.core.result_of(response, request_id)
            except RpcError as error:
                if not version_refused and (turn := after_version_refusal(error, self.era)):
                    version_refused = True  # (once: a server that refuses every version)
                    if turn == "modern" or await self._fall_back():
                        continue
                wait = self.retry.delay(error, retries, self._random.random())
                if wait is None:
                    if observed is not None:
                        observed.failed(error.code, error.message)
                    raise
                retries += 1
                await self._wait_to_retry(method, wait, error)

    async def _wait_to_reconnect(
        self, method: str, away: ServerUnreachable, unreachable_for: float
    ) -> float:
        """Waits before sending again to a server that could not be reached, and says how
        long; or raises `away` when `self.retry` allows no more."""
        wait = self.retry.reconnect_delay(
            method,
            may_have_arrived=away.may_have_arrived,
            waited=unreachable_for,
            draw=self._random.random(),
        )
        if wait is None:
            if not unreachable_for:
                raise away
            tried = f"{away} (tried again for {unreachable_for:.1f} s)"
            raise ServerUnreachable(tried, may_have_arrived=away.may_have_arrived) from away
        await self._wait_to_retry(method, wait, away)
        return wait

    async def _reopen(self, odd: SessionExpired | UnexpectedAnswer) -> bool:
        """After a session the server forgot, a new one; after an answer that is none to a
        first modern request, a first one if it comes from a 2025 server."""
        if isinstance(odd, SessionExpired):
            if self.era != "legacy":
                return False
            await self.open_session()
            return True
        return self.answer_says_legacy(None, odd) and await self._fall_back()

    async def _fall_back(self) -> bool:
        """Open a 2025 session; whether one is open (if `initialize` fails too, the answer
        to the modern request is what the caller gets)."""
        try:
            await self.open_session()
        except (RpcError, TransportError, RemoteProtocolError):
            return False
        return True

    async def _send(
        self,
        method: str,
        body: bytes,
        request_id: int,
        headers: Mapping[str, str],
        notified: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> dict[str, Any]:
        limit = self.request_timeout_seconds
        send = partial(
            self.transport.request,
            body,
            request_id=request_id,
            headers=headers,
            on_notification=notified,
        )
        if limit is None:
            return await send()
        with anyio.move_on_after(limit):
            return await send()
        raise TransportError(f"no answer to {method} within {limit:g} s (request_timeout_seconds)")

    async def _wait_to_retry(
        self, method: str, seconds: float, why: RpcError | ServerUnreachable
    ) -> None:
        if self.on_retry is not None:
            await maybe_await(self.on_retry(method, seconds, why))
        await anyio.sleep(seconds)

    async def _notified(self, then: NotificationCallback | None, message: dict[str, Any]) -> None:
        if message.get("method") == "notifications/tools/list_changed":
            self.core.tool_headers.forget()
        if then is not None:
            await maybe_await(then(message))
