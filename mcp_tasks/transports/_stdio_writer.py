"""The one writer of a stdio session's stdout, for `_stdio` (its docstring tells how the
replies of a read go out together, and when the pump writes them itself)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeAlias

import anyio
import anyio.abc
import trio

from .._support import backend as _backend
from ._stdio_pipes import WritesAtOnce

__all__ = ["GONE", "OutStream", "StdoutWriter"]

logger = logging.getLogger("mcp_tasks.transports.stdio")

OutStream: TypeAlias = trio.abc.SendStream | anyio.abc.ByteSendStream
"""What `serve_stdio` writes to: a trio or an anyio byte stream."""
GONE: Final = (
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)
"""What a read or write of a stream whose other end is gone raises."""


class StdoutWriter:
    """The one writer of stdout. Messages sent while a write is under way, or in the same
    scheduler round, go out together in the next write, each as one whole line: replies and
    notifications never interleave, and a burst of answers costs one system call.

    A notification's sender waits until its line is written. A reply's does not: the
    request's task ends, and once the reply is written `on_written` hands back what it held
    (how many replies, how many bytes), so the request stays in flight until then."""

    def __init__(self, stdout: OutStream, session: anyio.CancelScope) -> None:
        self._stdout = _sender(stdout)
        self._at_once = stdout if isinstance(stdout, WritesAtOnce) else None
        """stdout's write that never waits (None: it has none), for `release`."""
        self._rest: tuple[int, int] | None = None
        """The replies and bytes of a write `release` began whose rest stdout holds: the
        writer sees it out."""
        self._session = session
        self._lines: list[bytes] = []
        self._replies = 0
        self._held = 0
        """The replies among `_lines`, and the bytes they hold (theirs and their requests')."""
        self._pending = _backend.event()
        self._written = _backend.event()
        self._in_write: _backend.Event | None = None
        """While a write is under way, the event it sets when it is done."""
        self._stopped = False
        self.queued_at: float | None = None
        """When the oldest message waiting to be written was queued (`time.perf_counter`)."""
        self.on_written: Callable[[int, int], None] = lambda replies, held: None

    async def send(self, body: bytes) -> None:
        """Queue one message and wait until it is written (the `notify` of every request).
        Once the writer has stopped, a message goes nowhere: nobody can read it."""
        if self._stopped:
            return
        self._queue(body)
        written = self._written
        self._pending.set()
        await written.wait()

    def reply(self, body: bytes, held: int, *, released: bool = False) -> None:
        """Queue a request's reply, which holds `held` bytes until it is written.
        `released`: the caller lets it out itself (`release`) before it next waits."""
        if self._stopped:
            return
        self._queue(body)
        self._replies += 1
        self._held += held
        if not released:
            self._pending.set()

    def release(self) -> bool:
        """Let out what is queued: written here and now when the writer is free and stdout
        takes it without waiting (no task switch: most reads' replies), or else handed to the
        writer. True once it is all out (or nothing was queued)."""
        if not self._lines or self._stopped:
            return True
        if self._at_once is None or self._in_write is not None:  # the writer has one
            self._pending.set()
            return False
        data, replies, held = self._take()
        try:
            out = self._at_once.write_at_once(data)
        except GONE:
            self._gone()
            return True
        if not out:  # stdout holds the rest: the writer waits for it to drain
            self._rest = replies, held
            self._pending.set()
            return False
        self._done(replies, held)
        return True

    async def flush(self) -> None:
        """Wait until every message queued so far is written (or the writer has stopped)."""
        while not self._stopped:
            if self._lines:
                self._pending.set()
                await self._written.wait()
            elif self._in_write is not None:
                await self._in_write.wait()
            else:
                return

    async def run(self) -> None:
        try:
            while True:
                await self._pending.wait()
                self._pending = _backend.event()
                if self._rest is not None:  # `release` began it
                    assert self._at_once is not None
                    try:
                        await self._at_once.drained()
                    except GONE:
                        self._gone()
                        return
                    replies, held = self._rest
                    self._rest = None
                    self._done(replies, held)
                if not self._lines:  # `release` took them
                    continue
                data, replies, held = self._take()
                try:
                    await self._stdout(data)
                except GONE:
                    self._gone()
                    return
                self._done(replies, held)
        finally:  # nobody waits for a write that will not come
            self._stopped = True
            if self._in_write is not None:
                self._in_write.set()
            self._written.set()

    def _done(self, replies: int, held: int) -> None:
        """The write under way is out: its waiters go on, its requests end."""
        assert self._in_write is not None
        self._in_write.set()
        self._in_write = None
        self.on_written(replies, held)

    def _gone(self) -> None:
        """stdout broke: the session ends, and the write under way is over."""
        logger.warning("stdout is closed: the client is gone; stopping")
        self._stopped = True
        self._session.cancel()
        if self._in_write is not None:
            self._in_write.set()

    async def let_out(self) -> None:
        """Let the writer take what is queued now, if it is free to (a write under way
        takes it when it ends): the caller goes on once it has, without waiting for the
        write."""
        queued_at = self.queued_at
        while (
            queued_at is not None
            and self.queued_at == queued_at
            and self._in_write is None
            and not self._stopped
        ):
            await anyio.lowlevel.checkpoint()  # the writer is ready to run: its turn

    def _queue(self, body: bytes) -> None:
        if not self._lines:
            self.queued_at = time.perf_counter()
        self._lines.append(body + b"\n")

    def _take(self) -> tuple[bytes, int, int]:
        """The messages queued, as one write (`_in_write` until it is out): its bytes, its
        replies and what they hold. The next messages queue afresh."""
        taken = (b"".join(self._lines), self._replies, self._held)
        self._in_write, self._lines, self._written = self._written, [], _backend.event()
        self.queued_at = None
        self._replies = self._held = 0
        return taken


def _sender(stdout: OutStream) -> Callable[[bytes], Awaitable[None]]:
    """Write all of some bytes to `stdout`."""
    if isinstance(stdout, trio.abc.SendStream):
        return stdout.send_all
    return stdout.send
