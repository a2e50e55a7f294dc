"""The 2025 session's streams, for the HTTP client transport: the session's own GET
stream, listened to in the background, and a response stream resumed after it was cut
(`Last-Event-ID`, after the server's `retry:` wait); an answer the server sends on the
session's stream instead is taken from there."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any, Final

import anyio
import anyio.abc
import httpx2
from anyio.abc import TaskGroup

from ._client_base import (
    HttpAuthorization,
    NotificationHandler,
    ServerUnreachable,
    TransportError,
    UnexpectedAnswer,
)
from ._sse_reader import EventStream

__all__ = ["SessionStreams", "media_type"]

_SESSION: Final = "mcp-session-id"
_MAX_RESUMES: Final = 8
"""Resumptions of one response stream in a row that brought no event: then it is given up."""
_MAX_UNCLAIMED: Final = 64
"""Responses on the session's own stream kept for a request not yet resuming."""
_SESSION_STREAM_FAILURES: Final = 5
_MAX_SESSION_STREAM_WAIT: Final = 30.0


class SessionStreams:
    """The session-stream half of `HttpClientTransport` (which sets these attributes)."""

    url: str
    timeout_seconds: float
    max_message_bytes: int
    session_id: str | None
    session_headers: dict[str, str]
    resumes_streams: bool
    auth: HttpAuthorization | None
    _headers: dict[str, str]
    _client: httpx2.AsyncClient
    _background: TaskGroup | None
    _awaited: dict[str, tuple[anyio.Event, list[Any]]]
    _unclaimed: dict[str, dict[str, Any]]

    async def _answer_on_stream(
        self,
        response: httpx2.Response,
        events: EventStream,
        request_id: str | int | None,
        on_notification: NotificationHandler | None,
    ) -> dict[str, Any] | None:
        raise NotImplementedError  # (HttpClientTransport's)

    async def listen_to_session(
        self, headers: Mapping[str, str], on_notification: NotificationHandler | None
    ) -> None:
        """Open the 2025 session's GET stream in the background (only inside `async
        with`, and while there is a session). Returns once the server answered the GET (or
        `timeout_seconds` passed): the stream is open before the next request is sent, so
        a server never takes it for the resumption of a later request's stream."""
        self.session_headers = dict(headers)
        if self._background is None or self.session_id is None:
            return
        opening = partial(self._session_stream, dict(headers), on_notification)
        with anyio.move_on_after(self.timeout_seconds):
            await self._background.start(opening)

    async def _resume(
        self,
        events: EventStream,
        request_id: str | int,
        on_notification: NotificationHandler | None,
        headers: Mapping[str, str],
    ) -> dict[str, Any]:
        """The answer to `request_id`, read from the stream resumed after it was cut (or
        from the session's own stream, should the server send it there)."""
        arrived = anyio.Event()
        outcome: list[dict[str, Any] | Exception] = []
        key = _id_key(request_id)
        early = self._unclaimed.pop(key, None)
        if early is not None:
            return early
        self._awaited[key] = (arrived, outcome)

        async def by_resuming() -> None:
            try:
                outcome.append(await self._resumed(events, request_id, on_notification, headers))
            except Exception as error:  # (raised below, in the caller's task)
                outcome.append(error)
            arrived.set()

        try:
            async with anyio.create_task_group() as racing:
                racing.start_soon(by_resuming)
                await arrived.wait()
                racing.cancel_scope.cancel()
        finally:
            self._awaited.pop(key, None)
        if isinstance(outcome[0], Exception):
            raise outcome[0]
        return outcome[0]

    async def _resumed(
        self,
        events: EventStream,
        request_id: str | int,
        on_notification: NotificationHandler | None,
        headers: Mapping[str, str],
    ) -> dict[str, Any]:
        for _ in range(_MAX_RESUMES):
            if not self.resumes_streams or events.last_event_id is None:
                break
            seen = events.last_event_id
            await anyio.sleep(events.retry_seconds(default=1.0))
            async with self._get(headers, seen, read_timeout=self.timeout_seconds) as response:
                if response.status_code != 200 or media_type(response) != "text/event-stream":
                    raise UnexpectedAnswer(
                        f"{self.url} answered the resumption of request {request_id!r} "
                        f"with HTTP {response.status_code}",
                        status=response.status_code,
                    )
                events.restart()
                found = await self._answer_on_stream(response, events, request_id, on_notification)
            if found is not None:
                return found
        raise ServerUnreachable(
            f"the event stream from {self.url} ended before the response to request {request_id!r}",
            may_have_arrived=True,
        )

    def _get(
        self,
        headers: Mapping[str, str],
        last_event_id: str | None,
        read_timeout: float | None = None,
    ) -> AbstractAsyncContextManager[httpx2.Response]:
        """A GET of the session's stream (resuming after `last_event_id`); by default
        without a read timeout (the session's own stream may be quiet for hours)."""
        all_headers = {**self._headers, **headers, "accept": "text/event-stream"}
        all_headers.pop("content-type", None)
        if self.session_id is not None:
            all_headers[_SESSION] = self.session_id
        if last_event_id is not None:
            all_headers["last-event-id"] = last_event_id
        return self._client.stream(
            "GET",
            self.url,
            headers=all_headers,
            timeout=httpx2.Timeout(self.timeout_seconds, read=read_timeout),
        )

    async def _session_stream(
        self,
        headers: dict[str, str],
        on_notification: NotificationHandler | None,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The session's GET stream, kept open (reopened after the server's `retry:` wait,
        longer after each failure in a row) until the session ends, the server says it
        has none, or it failed `_SESSION_STREAM_FAILURES` times in a row. Nothing here can
        fail the client: a failure only ends the listening."""
        events = EventStream(self.max_message_bytes)
        failures = 0
        answered = _Once(task_status)
        try:
            while self.session_id is not None and failures < _SESSION_STREAM_FAILURES:
                await self._session_stream_once(headers, events, on_notification, answered)
                failures = 0
                wait = events.retry_seconds(default=1.0)
                await anyio.sleep(min(wait, _MAX_SESSION_STREAM_WAIT))
        except _NoSessionStream:
            pass
        answered.now()  # (not when cancelled: then nobody waits)

    async def _session_stream_once(
        self,
        headers: dict[str, str],
        events: EventStream,
        on_notification: NotificationHandler | None,
        answered: _Once,
    ) -> None:
        """One GET of the session's stream, read to its end; `_NoSessionStream` when the
        server has none (405, or anything but an event stream)."""
        for failures in itertools.count():
            try:
                if self.auth is not None:
                    authorization = await self.auth.authorization()
                    if authorization is not None:
                        headers["authorization"] = authorization
                async with self._get(headers, events.last_event_id) as response:
                    answered.now()
                    if response.status_code != 200 or media_type(response) != "text/event-stream":
                        raise _NoSessionStream  # (405: the server offers no such stream)
                    events.restart()
                    await self._answer_on_stream(response, events, None, on_notification)
                    return
            except (httpx2.HTTPError, httpx2.StreamError, TransportError):
                answered.now()
                if failures + 1 >= _SESSION_STREAM_FAILURES:
                    raise _NoSessionStream from None
            wait = events.retry_seconds(default=1.0) * 2**failures
            await anyio.sleep(min(wait, _MAX_SESSION_STREAM_WAIT))
            wait = events.retry_seconds(default=1.0) * 2 ** max(failures - 1, 0)
            await anyio.sleep(min(wait, _MAX_SESSION_STREAM_WAIT))

    def _deliver(self, message: dict[str, Any]) -> None:
        """A response on the session's own stream: to the request resuming its stream, if
        one waits for it (else dropped)."""
        key = _id_key(message.get("id"))
        waiting = self._awaited.get(key)
        if waiting is None:  # (it may come before its stream is found cut: kept a while)
            self._unclaimed[key] = message
            while len(self._unclaimed) > _MAX_UNCLAIMED:
                del self._unclaimed[next(iter(self._unclaimed))]
        elif not waiting[0].is_set():
            waiting[1].append(message)
            waiting[0].set()


class _NoSessionStream(Exception):
    """The server has no session stream, or it failed too often in a row."""


class _Once:
    """Tells `task_status` once that the session's stream was answered (or will not be)."""

    def __init__(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        self._task_status: anyio.abc.TaskStatus[None] | None = task_status

    def now(self) -> None:
        if self._task_status is not None:
            self._task_status.started()
            self._task_status = None


def _id_key(request_id: object) -> str:
    """A request id as a key (1 and "1" are different ids)."""
    return f"{type(request_id).__name__}:{request_id}"


def media_type(response: httpx2.Response) -> str:
    content_type = response.headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower()
