"""The SSE stream of a 2025-11-25 session's POST, which its client may resume: the request
runs apart from the POST that brought it, and what it sends is kept with the session.

Theory of operation
-------------------
A request of a 2025-11-25 session that may stream (`STREAMED`: a tool call, a prompt, a
resource read, `tasks/result`...) sends its messages through a `PostStream`, and runs
shielded from the end of the POST that brought it (`HttpSessions._serve`): a client that
leaves cancels nothing (the revision says it SHOULD NOT), and only `notifications/cancelled`,
`DELETE`, the server stopping or the questions' own limit end it. The first message opens
the stream with a priming event (an id, `retry: reconnect_ms`, no data); every message
after it, the response last, is an event with an id, kept with the session in the store
(`append_event`) before it is written. A request that never sends anything before its
response is answered with plain JSON and keeps nothing. A tool may end the POST's answer
early (`ToolContext.close_stream`): the driver is told with `END_OF_ANSWER`, and sends
nothing of the request after it.

A client that lost the stream sends `GET` with `Last-Event-ID: <stream>-<n>`: the events
kept after `n` are written to it (`resume`), and, while the request runs in this process,
the events that follow, up to the response, which ends the `GET`. A request running in
another process sends what it writes to no client as `event` signals of the store, which
the process holding the `GET` writes.

Stream names are `p` + 4 hex digits of the process + a slot, at most `MAX_LIVE` a session
at once in a process: a name is used again, and its events numbered on, so a replay stops
at the first response it finds (the one of the request the client's id belongs to).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Final

import anyio
import msgspec

from .._support import backend as _backend
from ..core import Reply
from ..store._sessions import SessionRecords
from ..transports._exchange import END_OF_ANSWER, sse_frame
from ..transports._port import SendNotification

__all__ = [
    "MAX_LIVE",
    "RESUMABLE_VERSION",
    "STREAMED",
    "PostStream",
    "PostStreams",
    "is_post_stream",
]

STREAMED: Final = frozenset(
    {"tools/call", "prompts/get", "resources/read", "completion/complete", "tasks/result"}
)
"""The methods whose answer may stream (questions, progress, logs): resumable."""
MAX_LIVE: Final = 64
"""Resumable POST streams one session may have running at once in a process; past it a
request runs as before (its stream not resumable)."""
RESUMABLE_VERSION: Final = "2025-11-25"
"""The revision whose clients resume a POST's stream (priming events are its own)."""

Publish = Callable[[str, str, int, bytes], Awaitable[None]]
"""Send an event nobody here writes to the other processes: session, stream, number, data."""


def is_post_stream(event_id: str) -> tuple[str, int] | None:
    """(stream, number) of a POST stream's event id (`p…-n`), or None."""
    name, dash, number = event_id.rpartition("-")
    if not dash or not name.startswith("p") or len(name) > 16 or not number.isdigit():
        return None
    return name, int(number)


def _is_response(data: bytes) -> bool:
    try:
        message = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    return isinstance(message, dict) and "method" not in message


class PostStream:
    """One request's stream: its `notify` (call it with a message), `close` for the tool."""

    def __init__(
        self,
        records: SessionRecords,
        session_id: str,
        name: str,
        *,
        reconnect_ms: int,
        writer: SendNotification,
        publish: Publish,
    ) -> None:
        self._records = records
        self.session_id = session_id
        self.name = name
        self._reconnect_ms = reconnect_ms
        self.writer: SendNotification | None = writer
        """Where the events go now: the POST, a `GET` that resumed it, or nobody."""
        self._publish = publish
        self.started = False
        self._lock: anyio.Lock | None = None  # made once the stream starts: most never do
        self.released = False
        """The POST's answer is over: the tool closed the stream, or a `GET` took it."""
        self.done: _backend.Event | None = None
        """Made by a `GET` that waits for the response (`attach`), set by `finish`."""
        self.answered = False
        self.final: Reply | None = None
        """The response, once the request is answered (its event, when the stream started)."""

    @property
    def lock(self) -> anyio.Lock:
        if self._lock is None:
            self._lock = anyio.Lock()
        return self._lock

    async def __call__(self, message: bytes) -> None:
        async with self.lock:
            await self._start()
            number = await self._records.append_event(self.session_id, self.name, message)
            if number:
                await self._write(message, number)

    async def close(self) -> bool:
        """End the POST's answer now (its client resumes with `GET`); the request runs on."""
        async with self.lock:
            await self._start()
            writer, self.writer = self.writer, None
            if writer is not None and not self.released:
                await self._written(writer, END_OF_ANSWER)
            self.released = True
        return True

    async def finish(self, reply: Reply | None) -> None:
        """The request is answered: its response is the stream's last event (the POST
        sends it if it is still there; else whoever resumed the stream, or nobody)."""
        if not self.started:  # never streamed: a plain answer
            self._answered(reply)
            return
        async with self.lock:
            if reply is not None:
                number = await self._records.append_event(self.session_id, self.name, reply.body)
                framed = sse_frame(reply.body, f"{self.name}-{number}")
                if self.writer is not None and self.released:
                    await self._write(reply.body, number)  # a `GET` took the stream over
                elif self.writer is None:
                    await self._publish(self.session_id, self.name, number, reply.body)
                reply = msgspec.structs.replace(reply, body=framed)
            self._answered(reply)

    def _answered(self, reply: Reply | None) -> None:
        self.final, self.answered = reply, True
        if self.done is not None:
            self.done.set()

    def detach(self) -> None:
        """The POST's client is gone: what follows is kept for it."""
        self.writer = None

    async def attach(self, writer: SendNotification, after: int) -> bool:
        """A `GET` resumes the stream after event `after`: what was kept is written to
        it, then it takes what follows. False if the request is answered already."""
        async with self.lock:
            events = await self._records.events_after(self.session_id, self.name, after)
            for number, data in events or ():
                if data:
                    await writer(sse_frame(data, f"{self.name}-{number}"))
                    if _is_response(data):
                        return False
            if self.answered:
                return False
            self.writer, self.released = writer, True
            if self.done is None:
                self.done = _backend.event()
            return True

    async def _start(self) -> None:
        """Open the stream with its priming event (once)."""
        if self.started:
            return
        self.started = True
        number = await self._records.append_event(self.session_id, self.name, b"")
        priming = sse_frame(b"", f"{self.name}-{number}", retry_ms=self._reconnect_ms)
        writer = self.writer
        if writer is not None:
            await self._written(writer, priming)

    async def _write(self, data: bytes, number: int) -> None:
        writer = self.writer
        if writer is None:
            await self._publish(self.session_id, self.name, number, data)
            return
        await self._written(writer, sse_frame(data, f"{self.name}-{number}"))

    async def _written(self, writer: SendNotification, frame: bytes) -> None:
        try:
            await writer(frame)
        except Exception:  # the client is gone: what follows is kept for it
            if self.writer is writer:
                self.detach()


class PostStreams:
    """The resumable POST streams running in this process, by session and name, and the
    `GET`s here that wait for events of a stream running elsewhere."""

    def __init__(
        self, records: Callable[[], SessionRecords], publish: Publish, others: Callable[[], bool]
    ) -> None:
        self._records = records
        self._publish = publish
        self._others = others
        """Whether other processes share the store (its signals reach them)."""
        self._prefix = "p" + secrets.token_hex(2)
        self._live: dict[tuple[str, str], PostStream] = {}
        self._next_slot: dict[str, int] = {}
        self._remote: dict[tuple[str, str], tuple[SendNotification, list[int], _backend.Event]] = {}

    def open(
        self, session_id: str, writer: SendNotification, reconnect_ms: int
    ) -> PostStream | None:
        """A new stream for a request of `session_id` answered on `writer` (None: the
        session has `MAX_LIVE` running here)."""
        slot = self._next_slot.get(session_id, 0)
        for _ in range(MAX_LIVE):
            name = f"{self._prefix}{slot}"
            slot = (slot + 1) % MAX_LIVE
            if (session_id, name) not in self._live:
                break
        else:
            return None
        if len(self._next_slot) >= 4096 and session_id not in self._next_slot:
            self._next_slot.clear()
        self._next_slot[session_id] = slot
        stream = PostStream(
            self._records(),
            session_id,
            name,
            reconnect_ms=reconnect_ms,
            writer=writer,
            publish=self._publish,
        )
        self._live[session_id, name] = stream
        return stream

    def ended(self, stream: PostStream) -> None:
        if self._live.get((stream.session_id, stream.name)) is stream:
            del self._live[stream.session_id, stream.name]

    async def resume(
        self, session_id: str, name: str, after: int, writer: SendNotification, *, wait: float
    ) -> None:
        """Serve a `GET` resuming stream `name` after event `after`: until its response
        is written, or for `wait` seconds at most when the request runs elsewhere."""
        live = self._live.get((session_id, name))
        if live is not None:
            if await live.attach(writer, after):
                assert live.done is not None
                await live.done.wait()
            return
        events = await self._records().events_after(session_id, name, after)
        last = [after]
        for number, data in events or ():
            if data:
                await writer(sse_frame(data, f"{name}-{number}"))
                last[0] = number
                if _is_response(data):
                    return
        if events is None or not self._others():
            return  # events were lost meanwhile, or no other process runs requests
        if not events:  # is the client's event one of the stream's at all?
            known = await self._records().events_after(session_id, name, after - 1)
            if not known or after < 1:
                return
        answered = _backend.event()
        key = (session_id, name)
        self._remote[key] = (writer, last, answered)
        try:
            with anyio.move_on_after(wait):
                await answered.wait()
        finally:
            if self._remote.get(key, (None,))[0] is writer:
                del self._remote[key]

    def on_event(self, session_id: str, name: str) -> bool:
        """An event of stream `name` running elsewhere came: True if a `GET` here waits
        for it (the caller spawns `write_remote`)."""
        return (session_id, name) in self._remote

    async def write_remote(self, session_id: str, name: str, number: int, data: bytes) -> None:
        waiting = self._remote.get((session_id, name))
        if waiting is None:
            return
        writer, last, answered = waiting
        if number <= last[0]:
            return  # replayed already
        last[0] = number
        try:
            await writer(sse_frame(data, f"{name}-{number}"))
        except Exception:
            answered.set()
            return
        if _is_response(data):
            answered.set()
