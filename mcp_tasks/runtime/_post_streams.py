"""The SSE streams of a 2025-11-25 session's POSTs, resumable (SEP-1699, "SSE polling").

Theory of operation
-------------------
A request of a 2025-11-25 session whose answer may become an SSE stream (`MAY_STREAM`:
its handler may notify, or ask the client) must outlive its POST: a client that
disconnects does not cancel it (the revision says it SHOULD NOT be taken as one), and the
handler may end the POST early (`close_stream`); `notifications/cancelled`, `DELETE`, the
server stopping and the question wait still end it, as they do any request. Two ways:

- `run_inline`, when the transport's notify is a `PostAnswer` (the built-in HTTP
  server): the request runs in the POST's own task. The transport tells its `PostStream`
  when the client goes (`client_gone`) instead of cancelling it, and ends the POST's
  answer when asked (`PostAnswer.end`: `close_stream`, or a GET that resumed the stream),
  closing the connection once the request ends, so the client resumes on another; it is
  cancelled through the transport too (`PostAnswer.cancel`, in `Connection.in_flight`:
  its connection closes), with no cancel scope of its own. It costs a call nothing over
  any other request.
- `run_apart`, for any other transport (the ASGI app): the request runs in a task of its
  own (in a task group that is a task of the server's: `_host`), and the POST waits for
  its `PostStream` to be released: by the reply, or by `close_stream`. A task and an
  event more a call (about 15 µs).

The request's notify is its `PostStream`. Until it first notifies, nothing is kept: its
answer is one JSON body. At the first
notification the stream is primed: an event with an id, the client's reconnection delay
(`retry:`, `HttpSessionLimits.reconnect_ms`) and empty data (kept in the store as an empty
event, skipped on replay). From then on every message of the request, its final response
too, is kept with the session in the store (`append_event`) under the stream's name, and
carries the id `<stream>-<number>`: the number is the store's, per stream.

A stream's name is unique within the session across processes, and there are few of them:
`p` + 4 hex digits chosen by the process + `.` + a slot 0..63, the first slot of the
session not in use here, taken as the stream is primed. A name used again continues its
numbering, so a replay stops after the first JSON-RPC response it meets: the final
response of the request the client's id belongs to.

The POST may end before the request does (its client went away, or the handler called
`close_stream`). A client resumes with `GET` and `Last-Event-ID: <stream>-<n>`, to any
process: that GET is sent the kept events after `n` (none when some were dropped already,
or `n` names no kept event: a gap is no resume) and, unless the final response was among
them, becomes the stream's live writer until it comes (`_Resumed`). The request's process
writes there itself if the GET is its own, else it publishes each event as an `event`
signal (`<stream> <number> <message>`) and the GET's process writes it. The GET registers
before it reads the store, and holds its lock while it replays: an event that comes live
meanwhile waits, and is skipped if the replay sent its number already.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any, Final

import anyio
import msgspec
import trio

from .._support import backend as _backend
from .._support.logs import RateLimitedLog
from ..core import Reply
from ..core._envelope import is_request_id
from ..core._internal_error import internal_error_for
from ..core.wire import IncomingMessage, RequestId
from ..store import Signal, StoreUnavailable, TaskStore
from ..store._sessions import SessionRecords
from ..transports._exchange import sse_frame
from ..transports._port import PostAnswer, SendNotification, SessionHeaders
from ._http_session_parts import unavailable_reply

__all__ = [
    "MAY_STREAM",
    "SLOTS",
    "STREAM_VERSION",
    "PostStream",
    "PostStreams",
    "post_event_id",
    "runs_apart",
]

logger = logging.getLogger("mcp_tasks.server")
_complaints = RateLimitedLog(logger)
"""Events a store outage kept or passed on no more: a few lines a window, then a count."""
_NOT_KEPT: Final = "a 2025 session's stream event was not kept: %r"
_NOT_PASSED: Final = "a 2025 session's stream event was not passed on: %r"

STREAM_VERSION: Final = "2025-11-25"
"""The revision whose POST streams carry ids and outlive their POST."""
MAY_STREAM: Final = frozenset({"tools/call", "prompts/get", "resources/read", "tasks/result"})
"""The methods whose answer may become an SSE stream (a handler notifies, or asks): run
apart from their POST. Any other (`*/list`, `tasks/get`, `ping`...) is answered inline."""
SLOTS: Final = 64
"""Stream names a session has in one process (its requests streaming at once, at most)."""
_MAX_NAME: Final = 12


class _Kind(msgspec.Struct):
    method: str | None = None


_kind = msgspec.json.Decoder(_Kind)


def _is_response(data: bytes) -> bool:
    """Whether the kept event `data` is a JSON-RPC response (the end of its request)."""
    if not data:
        return False  # a priming event
    try:
        return _kind.decode(data).method is None
    except msgspec.DecodeError:
        return False


def post_event_id(last_event_id: str | None) -> tuple[str, int] | None:
    """The stream and number of a POST stream's event id (`p1a2b.3-17`); None when it is
    none (a session stream's `g5`, or anything else)."""
    if last_event_id is None or not last_event_id.startswith("p"):
        return None
    name, _, number = last_event_id.rpartition("-")
    if not (0 < len(name) <= _MAX_NAME and number.isdigit() and len(number) <= 18):
        return None
    if not all(char.isalnum() or char == "." for char in name):
        return None
    return name, int(number)


def runs_apart(message: IncomingMessage, version: str, session: SessionHeaders | None) -> bool:
    """Whether a session's request runs apart from its POST, its stream resumable: a
    2025-11-25 request (not a notification) that may stream, to a client that accepts
    an SSE answer."""
    return (
        message.method in MAY_STREAM
        and version == STREAM_VERSION
        and session is not None
        and session.event_stream
        and is_request_id(message.id)
    )


class PostStream:
    """One request's answer on its POST, as a resumable SSE stream: the request's notify
    (`__call__`), its end (`finish`), and the handler's `close_stream`."""

    __slots__ = (
        "_ids",
        "_lock",
        "_posts",
        "_writer",
        "name",
        "post",
        "primed_at",
        "released",
        "reply",
        "session_id",
        "slot",
        "streaming",
    )

    def __init__(
        self,
        posts: PostStreams,
        session_id: str,
        writer: SendNotification,
        post: PostAnswer | None = None,
    ) -> None:
        self._posts = posts
        self.session_id = session_id
        self.slot = -1
        """Its slot among the session's streams here, once primed (`PostStreams.claim`)."""
        self.name = ""
        """Its name in event ids, once primed."""
        self._writer: SendNotification | None = writer
        """The POST's: None once it ended (released, or its client went away)."""
        self.streaming = False
        """A message of the request was sent, or its stream closed: its reply is an event."""
        self._ids: bool | None = None  # primed: its events are kept and numbered (None: not yet)
        self._lock: anyio.Lock | None = None
        self.primed_at = 0
        """The number of its priming event (0: not primed): its client's ids are from there."""
        self.post = post
        """The POST's transport, when the request runs in the POST's task (`run_inline`)."""
        self.released = _backend.event() if post is None else None
        """Set when the POST may end (`run_apart`'s): the reply is in `reply` (None: it
        went on the stream)."""
        self.reply: Reply | None = None

    async def wait(self) -> Reply | None:
        """The POST's: wait for the request's reply (None: the stream carried it, or was
        closed). Cancelled (the client went away), the request runs on without it."""
        assert self.released is not None
        try:
            await self.released.wait()
        finally:
            self._writer = None
        return self.reply

    async def __call__(self, message: bytes) -> None:
        """Send a message of the request: kept, numbered, and written where its client
        listens (the POST, or a GET that resumed the stream)."""
        if not self.streaming:
            if self._writer is None:
                return  # the client left before any id: nobody can resume
            self.streaming = True
        async with self._locked():
            await self._send(message)

    async def close_stream(self) -> bool:
        """End the POST (primed first if it was not streaming yet) while the request runs
        on; its client resumes with `GET` and `Last-Event-ID`. False when its messages
        cannot be kept (the store refused)."""
        self.streaming = True
        async with self._locked():
            if self._ids is None:
                await self._prime()
            if not self._ids:
                return False
            self._writer = None
            self.release()
            if self.post is not None:
                await self.post.end()
        return True

    def client_gone(self) -> None:
        """The transport's (`PostAnswer.outlive_client`): the POST's client went away; what
        comes next is kept for a GET that resumes."""
        self._writer = None

    async def finish(self, reply: Reply | None) -> None:
        """The request's end: its reply sent as JSON (it never notified), or as the
        stream's last event."""
        if self.streaming and reply is not None:
            async with self._locked():
                await self._send(reply.body, final=True)
            reply = None
        self.reply = reply
        self.release()

    def release(self) -> None:
        """Let the POST end (`run_apart`'s: it waits)."""
        if self.released is not None:
            self.released.set()

    def _locked(self) -> anyio.Lock:
        if self._lock is None:
            self._lock = anyio.Lock()
        return self._lock

    def take_over(self) -> None:
        """A GET resumed the stream here: what comes next goes there, and the POST ends."""
        self._writer = None
        self.release()
        if self.post is not None:
            self._posts.spawn(self.post.end)

    async def _send(self, message: bytes, *, final: bool = False) -> None:
        if self._ids is None:
            await self._prime()
        number = await self._posts.keep(self.session_id, self.name, message) if self._ids else 0
        if number:
            await self._deliver(number, message, final=final)
        elif self._writer is not None:  # not kept: on the POST without an id, as before
            await self._writer(message)

    async def _prime(self) -> None:
        self._posts.claim(self)
        number = await self._posts.keep(self.session_id, self.name, b"")
        self._ids = number > 0
        self.primed_at = number
        if number and self._writer is not None:
            retry_ms = self._posts.reconnect_ms()
            await self._writer(sse_frame(b"", f"{self.name}-{number}", retry_ms=retry_ms))

    async def _deliver(self, number: int, message: bytes, *, final: bool) -> None:
        if self._writer is not None:
            await self._writer(sse_frame(message, f"{self.name}-{number}"))
            if not final:
                return
            # Its POST may have gone unnoticed yet, its client resumed: the response goes
            # where a GET resumed too (to another process by number only: it reads it).
            if not await self._posts.deliver(self.session_id, self.name, number, message):
                await self._posts.publish(self.session_id, self.name, number, b"")
        elif not await self._posts.deliver(self.session_id, self.name, number, message):
            await self._posts.publish(self.session_id, self.name, number, message)


def _failed(request_id: RequestId, error: Exception) -> Reply:
    """What the client of a request that failed with `error` is told (and the log)."""
    if isinstance(error, StoreUnavailable):
        logger.warning("the task store is unavailable: %s", error)
        return unavailable_reply()
    logger.error("the server failed on a request", exc_info=error)
    return internal_error_for(request_id)


class _Resumed:
    """A GET that resumed a POST stream: its live writer until the final response."""

    __slots__ = ("ended", "last", "lock", "notify")

    def __init__(self, notify: SendNotification, last: int) -> None:
        self.notify = notify
        self.last = last  # the number of the last event it was sent
        self.lock = anyio.Lock()
        self.ended = _backend.event()


class PostStreams:
    """The POST streams of a process's 2025-11-25 sessions (theory of operation)."""

    def __init__(
        self,
        records: Callable[[], SessionRecords],
        store: Callable[[], TaskStore],
        spawn: Callable[[Callable[[], Coroutine[Any, Any, Any]]], None],
        reconnect_ms: Callable[[], int],
    ) -> None:
        self._records = records
        self._store = store
        self.spawn = spawn
        """Run a function in the server's task group."""
        self.reconnect_ms = reconnect_ms
        self.prefix = "p" + secrets.token_hex(2)
        """Unique to the process (as far as 4 hex digits go): its streams' names."""
        self._live: dict[str, dict[int, PostStream]] = {}
        """The streams of each session's requests running here, by slot."""
        self._start_soon: Callable[[Callable[[], Coroutine[Any, Any, Any]]], object] | None = None
        """The requests' task group (`_host`), once open."""
        self._hosting = False
        self._resumed: dict[tuple[str, str], _Resumed] = {}

    # --- the request's side ---------------------------------------------------------------

    def claim(self, stream: PostStream) -> None:
        """Name a stream as it is primed: the session's first slot free here (every one in
        use: the first, shared)."""
        live = self._live.setdefault(stream.session_id, {})
        slot = next((slot for slot in range(SLOTS) if slot not in live), 0)
        live[slot], stream.slot, stream.name = stream, slot, f"{self.prefix}.{slot}"

    async def run_apart(
        self,
        session_id: str,
        request_id: RequestId,
        writer: SendNotification,
        run: Callable[[SendNotification], Awaitable[Reply | None]],
    ) -> Reply | None:
        """The POST's: `run(notify)` in a task of its own, its notify a new `PostStream`
        writing with `writer`; the reply to send as JSON (None: the stream carried it, or
        ended first). Cancelled (the client went away), the request runs on."""
        stream = PostStream(self, session_id, writer)

        async def request() -> None:
            try:
                try:
                    reply = await run(stream)
                except Exception as error:
                    reply = _failed(request_id, error)
                await stream.finish(reply)
            finally:  # cancelled too (the server stops): the POST ends
                stream.release()
                self.close(stream)

        start_soon = self._start_soon
        if start_soon is None:  # the first, or the server restarts: open the group
            if not self._hosting:
                self._hosting = True
                self.spawn(self._host)
            start_soon = self.spawn
        start_soon(request)
        return await stream.wait()

    async def run_inline(
        self,
        session_id: str,
        request_id: RequestId,
        post: PostAnswer,
        run: Callable[[SendNotification], Awaitable[Reply | None]],
    ) -> Reply | None:
        """`run_apart`, in the POST's own task: its transport (`post`) lets the request
        outlive its client, and ends the POST's answer early when the handler closes the
        stream or a GET resumes it. A task of its own is paid for by none of its calls."""
        stream = PostStream(self, session_id, post, post)
        post.outlive_client(stream.client_gone)
        try:
            try:
                reply = await run(stream)
            except Exception as error:
                reply = _failed(request_id, error)
            if stream.streaming:
                await stream.finish(reply)
                reply = stream.reply
        finally:
            if stream.slot >= 0:  # primed (else it holds nothing)
                self.close(stream)
        return reply  # never streamed (most): sent as JSON

    async def _host(self) -> None:
        """The requests' task group, a task of the server's: it ends (and its requests
        with it) when the server stops. A trio nursery on trio: anyio's task group starts
        a task there for about 15 µs more (a 2025 session's tool call pays it)."""
        try:
            if trio.lowlevel.in_trio_task():
                async with trio.open_nursery() as nursery:
                    self._start_soon = nursery.start_soon
                    await trio.sleep_forever()
            else:
                async with anyio.create_task_group() as group:
                    self._start_soon = group.start_soon
                    await anyio.sleep_forever()
        finally:
            self._start_soon, self._hosting = None, False

    def close(self, stream: PostStream) -> None:
        """The request of `stream` ended: its slot (if it had one) is free again."""
        live = self._live.get(stream.session_id) if stream.slot >= 0 else None
        if live is not None and live.get(stream.slot) is stream:
            del live[stream.slot]
            if not live:
                del self._live[stream.session_id]

    async def keep(self, session_id: str, name: str, message: bytes) -> int:
        """Keep `message` as the next event of the stream: its number (0: not kept)."""
        try:
            return await self._records().append_event(session_id, name, message)
        except Exception as error:  # the store failed: the event goes without an id
            _complaints.log(logging.WARNING, "event-not-kept", _NOT_KEPT, error)
            return 0

    async def publish(self, session_id: str, name: str, number: int, message: bytes) -> None:
        """Hand an event to the process whose GET resumed the stream (an `event` signal)."""
        coordination = self._store().coordination
        if coordination.signals is None:
            return  # one process: nobody listens
        data = b"%s %d %s" % (name.encode(), number, message)
        try:
            await coordination.signals.publish(
                Signal("event", session_id, coordination.origin, data=data)
            )
        except Exception as error:  # kept all the same: a GET resuming later gets it
            _complaints.log(logging.WARNING, "event-not-passed", _NOT_PASSED, error)

    # --- the resuming GET's side ----------------------------------------------------------

    async def resume(
        self, session_id: str, name: str, after: int, notify: SendNotification
    ) -> None:
        """Serve a GET that resumes stream `name` after event `after`: the kept events
        after it, then the live ones until the final response (or `ended`)."""
        key = (session_id, name)
        taken = self._resumed.get(key)
        if taken is not None:
            taken.ended.set()  # a client reconnecting again: the newer GET takes over
        resumed = self._resumed[key] = _Resumed(notify, after)
        resumed.lock.acquire_nowait()  # what comes live waits for the replay
        try:
            try:
                self._take_over(session_id, name, after)
                done = await self._replay(session_id, name, resumed)
            finally:
                resumed.lock.release()
            if not done:
                await resumed.ended.wait()
        finally:
            if self._resumed.get(key) is resumed:
                del self._resumed[key]

    def _take_over(self, session_id: str, name: str, after: int) -> None:
        """The stream `name`'s request runs here (and the client's id `after` is of this
        request, not of one before it on the same name): its next events go to the GET."""
        head, _, slot = name.rpartition(".")
        if head == self.prefix and slot.isdigit():
            stream = self._live.get(session_id, {}).get(int(slot))
            if stream is not None and 0 < stream.primed_at <= after:
                stream.take_over()

    async def _replay(self, session_id: str, name: str, resumed: _Resumed) -> bool:
        """Send the kept events after `resumed.last`; True when the stream is done (its
        final response sent, or nothing can be resumed there)."""
        after = resumed.last
        if after < 1:
            return True  # no event is numbered 0
        kept = await self._records().events_after(session_id, name, after - 1)
        if not kept or kept[0][0] != after or _is_response(kept[0][1]):
            return True  # a gap, an id never kept, or the client had the response
        for number, data in kept[1:]:
            resumed.last = number
            if data:
                await resumed.notify(sse_frame(data, f"{name}-{number}"))
            if _is_response(data):
                return True
        return False

    async def deliver(self, session_id: str, name: str, number: int, message: bytes) -> bool:
        """Write a live event on the GET that resumed its stream here; False if none did."""
        resumed = self._resumed.get((session_id, name))
        if resumed is None:
            return False
        async with resumed.lock:
            if not message:  # by number only (`PostStream._deliver`): read from the store
                await self._fill(session_id, name, resumed, number + 1)
                return True
            if number > resumed.last + 1 and not resumed.ended.is_set():
                await self._fill(session_id, name, resumed, number)
            if number > resumed.last and not resumed.ended.is_set():
                resumed.last = number
                await resumed.notify(sse_frame(message, f"{name}-{number}"))
                if _is_response(message):
                    resumed.ended.set()
        return True

    async def _fill(self, session_id: str, name: str, resumed: _Resumed, before: int) -> None:
        """Send the kept events a resumed GET missed before event `before` (they went to
        a POST whose client had gone, before its process noticed)."""
        if resumed.ended.is_set():
            return
        for number, data in (
            await self._records().events_after(session_id, name, resumed.last) or ()
        ):
            if number >= before:
                return
            resumed.last = number
            if data:
                await resumed.notify(sse_frame(data, f"{name}-{number}"))
            if _is_response(data):
                resumed.ended.set()
                return

    def on_event(self, session_id: str, name: bytes, rest: bytes) -> None:
        """An `event` signal of another process for stream `name` (`<number> <message>`)."""
        number, _, message = rest.partition(b" ")
        stream = name.decode("ascii", "replace")
        if number.isdigit() and (session_id, stream) in self._resumed:
            self.spawn(partial(self.deliver, session_id, stream, int(number), message))

    def ended(self, session_id: str | None = None) -> None:
        """End the resuming GETs of a session (all of them when None)."""
        for (resumed_of, _), resumed in list(self._resumed.items()):
            if session_id is None or resumed_of == session_id:
                resumed.ended.set()
