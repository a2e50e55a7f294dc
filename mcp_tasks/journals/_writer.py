"""Recording a server's session to a journal: `Server.record(path)`, `serve --record PATH`.

`JournalWriter` is where the lines `RecordingCore` writes go: a file, rotated at a size
limit (each file starts with the journal's header and configuration again, so it replays
on its own), written by a thread of its own at least once a second, so that a slow disk
never holds a request. Writing never fails a request: a line that cannot be written (or
that would wait behind `MAX_QUEUED_BYTES` for the disk) is counted, logged (rate-limited)
and, once writing works again, a `{"gap": N}` line says how many were lost. Calls do not
depend on one another, so the rest of the journal still replays.

A journal is the server's own record, for its operator alone: a folder it makes is made
0700, a file it makes 0600, whatever the umask (a file or folder that exists is left as it
is). It is never written through a symbolic link: one at `path` is refused when the writer
is made, and at every opening (`O_NOFOLLOW`); a rotation makes the new file with `O_EXCL`,
so nothing planted there meanwhile is written to. `/dev/stdout` and `/dev/stderr` (links on
Linux) name the process's own standard streams and are written to as such.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final

from .._support.logs import RateLimitedLog
from ._codec import frame

__all__ = [
    "BATCH_BYTES",
    "DEFAULT_BACKUPS",
    "DEFAULT_MAX_BYTES",
    "FLUSH_SECONDS",
    "MAX_QUEUED_BYTES",
    "JournalWriter",
]

logger = logging.getLogger("mcp_tasks.recording")

DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
"""A journal file is rotated once it would grow past this."""
DEFAULT_BACKUPS: Final = 5
"""How many rotated files are kept (`PATH.1` the newest ... `PATH.5`)."""
FLUSH_SECONDS: Final = 1.0
"""Lines are written at least this often (and when `BATCH_BYTES` of them wait)."""
MAX_QUEUED_BYTES: Final = 32 * 1024 * 1024
"""Lines waiting for the disk at most; past it they are lost (a disk slower than the server
must not grow the memory, nor slow the requests)."""
BATCH_BYTES: Final = 64 * 1024
"""Small enough that the lines are still in the processor's cache when they are written."""

_MAX_CHUNKS: Final = 512
"""Lines one `writev` takes (systems allow 1024)."""
_HEADER_PREFIX: Final = b'{"journal"'
_OPEN_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_MODE: Final = 0o600
_FOLDER_MODE: Final = 0o700
_CONFIG_PREFIX: Final = b'{"config"'
_CALL_PREFIX: Final = b'{"call"'
_STANDARD_STREAMS: Final = {"/dev/stdout": 1, "/dev/stderr": 2}
"""Paths that are links on Linux but name this process's own streams, never a planted file."""


class JournalWriter:
    """Appends journal lines to `path`, rotating it past `max_bytes` (keeping `backups`
    older files: `path.1` is the newest). `ValueError` if `path` is a symbolic link."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        backups: int = DEFAULT_BACKUPS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_bytes < 4096:
            raise ValueError("max_bytes must be at least 4096")
        if backups < 0:
            raise ValueError("backups must not be negative")
        self.path = Path(path)
        if self.path.is_symlink() and str(self.path) not in _STANDARD_STREAMS:
            raise ValueError(
                f"{self.path} is a symbolic link: a journal is never written through one"
            )
        self.max_bytes = max_bytes
        self.backups = backups
        self._clock = clock
        self._file: IO[bytes] | None = None
        self._rotates = False
        self._pending: list[bytes | bytearray] = []
        self._pending_bytes = 0
        self._size = 0
        self._flushed_at = clock()
        self._header: bytes | bytearray = b""
        self._config: bytes | bytearray = b""
        self._lost = 0
        self._complaints = RateLimitedLog(logger)
        self._queue: queue.SimpleQueue[list[bytes | bytearray] | None] = queue.SimpleQueue()
        self._done = threading.Condition()
        """Guards what both threads count: batches and bytes queued, lines lost."""
        self._queued_bytes = 0
        self._batches = 0
        self._thread: threading.Thread | None = None
        self.lines_written = 0
        self.lines_lost = 0

    def __call__(self, line: bytes | bytearray) -> None:
        """Take one line (a `RecordingCore` sink): kept in memory and written with others
        when `BATCH_BYTES` wait, at `flush()` (a server calls it every second) or, once 64
        wait, when the last write is a second old. Never raises for an I/O failure."""
        if line.startswith(_CALL_PREFIX):  # most lines: one test
            pass
        elif line.startswith(_CONFIG_PREFIX):
            self._config = line
        elif line.startswith(_HEADER_PREFIX):
            self._header = line
        pending = self._pending
        pending.append(line)
        self._pending_bytes += len(line)
        if self._pending_bytes >= BATCH_BYTES or (
            not len(pending) % 64 and self._clock() - self._flushed_at >= FLUSH_SECONDS
        ):
            self.flush()

    def flush(self) -> None:
        """Hand what was taken so far to the writing thread (a server calls it every
        second). Never waits for the disk: past `MAX_QUEUED_BYTES` waiting for it, lines
        are lost (counted, logged, a gap noted) rather than requests slowed."""
        self._flushed_at = self._clock()
        if not self._pending:
            return
        lines, size = self._pending, self._pending_bytes
        self._pending, self._pending_bytes = [], 0
        with self._done:
            if self._queued_bytes + size > MAX_QUEUED_BYTES:
                self._lose(len(lines), "the disk does not keep up")
                return
            self._queued_bytes += size
            self._batches += 1
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._write_batches, name=f"journal {self.path.name}", daemon=True
            )
            self._thread.start()
        self._queue.put(lines)

    def wait_written(self, timeout: float | None = None) -> bool:
        """Block until every line taken so far is written (or lost); False on timeout."""
        self.flush()
        with self._done:
            return self._done.wait_for(lambda: self._batches == 0, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is left (waiting up to `timeout` for the disk), stop the writing
        thread and close the file (a later line opens it again, appending)."""
        self.wait_written(timeout)
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError as error:
                self._failed(error, 0)

    def _write_batches(self) -> None:
        """The writing thread: a slow disk holds it, never the server. It alone opens,
        writes and (on a failure) closes the file while it runs."""
        while (lines := self._queue.get()) is not None:
            try:
                self._write_batch(lines)
            finally:  # whatever happened, the batch is done: nobody waits for it forever
                with self._done:
                    self._queued_bytes -= sum(map(len, lines))
                    self._batches -= 1
                    self._done.notify_all()

    def _write_batch(self, lines: list[bytes | bytearray]) -> None:
        with self._done:
            lost, self._lost = self._lost, 0
        try:
            if self._file is None:
                self._open(lines)
            elif self._rotates and self._size + sum(map(len, lines)) > self.max_bytes:
                self._rotate(lines)
            file = self._file
            assert file is not None
            gap = [frame(b'{"gap":%d}' % lost)] if lost else []
            self._write(file, *gap, *lines)
            self.lines_written += len(lines)
        except OSError as error:
            with self._done:
                self._lost += lost
            self._failed(error, len(lines))

    def _write(self, file: IO[bytes], *chunks: bytes | bytearray) -> None:
        """Write `chunks` at once (one system call, no copy of them joined)."""
        for start in range(0, len(chunks), _MAX_CHUNKS):
            some = chunks[start : start + _MAX_CHUNKS]
            size = sum(map(len, some))
            written = os.writev(file.fileno(), some)
            if written < size:  # cut short (a full disk, a pipe): the rest, or an OSError
                rest = b"".join(some)[written:]
                while rest:
                    rest = rest[os.write(file.fileno(), rest) :]
            self._size += size

    def _open(self, batch: list[bytes | bytearray], *, new: bool = False) -> None:
        """Open the file to append (`new`: make it, or fail); a new one starts with the
        header and configuration (unless `batch`, the lines about to be written, has them)."""
        _make_folder(self.path.parent)
        descriptor = _open_journal(self.path, new=new)
        file = os.fdopen(descriptor, "ab", buffering=0)
        # Only a regular file is rotated: a device or a pipe (a FIFO) is written on.
        status = os.fstat(descriptor)
        self._rotates = stat.S_ISREG(status.st_mode)
        self._size = status.st_size if self._rotates else 0
        self._file = file
        if self._size:
            self._write(file, b"\n")  # ends a line an earlier failure cut short
            return
        for known in (self._header, self._config):
            if known and known not in batch:
                self._write(file, known)

    def _rotate(self, batch: list[bytes | bytearray]) -> None:
        assert self._file is not None
        self._file.close()
        self._file = None
        for number in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{number}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{number + 1}"))
        if self.backups:
            self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink()
        self._open(batch, new=True)

    def _failed(self, error: OSError, lines: int) -> None:
        if error.errno == errno.ELOOP:
            why = "it is a symbolic link: a journal is never written through one"
        elif error.errno == errno.EEXIST:
            why = "a file appeared where the rotated one was to be made"
        else:
            why = str(error.strerror or error)
        self._lose(lines, why)
        file, self._file = self._file, None  # opened again for the next batch
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()

    def _lose(self, lines: int, why: str) -> None:
        """Count `lines` lost (noted as a gap before the next lines written) and say why,
        rate-limited. Either thread: the file is the writing thread's alone."""
        with self._done:
            self._lost += lines
            self.lines_lost += lines
            self._complaints.log(
                logging.WARNING,
                "journal",
                "the journal %s could not be written (%s): lines are lost until it can",
                self.path,
                why,
            )


def _make_folder(folder: Path) -> None:
    """Make `folder` and its missing parents 0700, whatever the umask."""
    missing = []
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        try:
            os.mkdir(made, _FOLDER_MODE)
        except FileExistsError:
            continue
        os.chmod(made, _FOLDER_MODE)


def _open_journal(path: Path, *, new: bool) -> int:
    """A descriptor appending to `path`, never through a symbolic link: a file made here
    is 0600 (`new`: only a file made here, `FileExistsError` otherwise). `/dev/stdout` and
    `/dev/stderr` are the process's own streams."""
    stream = _STANDARD_STREAMS.get(str(path))
    if stream is not None:
        return os.dup(stream)
    try:
        descriptor = os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, _FILE_MODE)
    except FileExistsError:
        if new:
            raise
        return os.open(path, _OPEN_FLAGS)  # ELOOP for a link
    os.fchmod(descriptor, _FILE_MODE)  # what the umask took away
    return descriptor
