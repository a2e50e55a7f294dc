"""Recording a server's session to a journal: `Server.record(path)`, `serve --record PATH`.

`JournalWriter` is where the lines `RecordingCore` writes go: a file, rotated at a size
limit (each file starts with the journal's header and configuration again, so it replays
on its own), flushed at least once a second. Writing never fails a request: a line that
cannot be written is counted, logged (rate-limited) and, once writing works again, a
`{"gap": N}` line says how many were lost. Calls do not depend on one another, so the rest
of the journal still replays.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final

from ._logging import RateLimitedLog
from .core._journal_codec import frame

logger = logging.getLogger("mcp_tasks.recording")

DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
"""A journal file is rotated once it would grow past this."""
DEFAULT_BACKUPS: Final = 5
"""How many rotated files are kept (`PATH.1` the newest ... `PATH.5`)."""
FLUSH_SECONDS: Final = 1.0

_HEADER_PREFIX: Final = b'{"journal"'
_CONFIG_PREFIX: Final = b'{"config"'


class JournalWriter:
    """Appends journal lines to `path`, rotating it past `max_bytes` (keeping `backups`
    older files: `path.1` is the newest)."""

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
        self.max_bytes = max_bytes
        self.backups = backups
        self._clock = clock
        self._file: IO[bytes] | None = None
        self._size = 0
        self._flushed_at = clock()
        self._header = b""
        self._config = b""
        self._lost = 0
        self._complaints = RateLimitedLog(logger)
        self.lines_written = 0
        self.lines_lost = 0

    def __call__(self, line: bytes) -> None:
        """Write one line (a `RecordingCore` sink). Never raises for an I/O failure."""
        if line.startswith(_HEADER_PREFIX):
            self._header = line
        elif line.startswith(_CONFIG_PREFIX):
            self._config = line
        try:
            if self._file is None:
                self._open(line)
            elif self._size + len(line) > self.max_bytes and self.lines_written:
                self._rotate(line)
            file = self._file
            assert file is not None
            if self._lost:
                self._write(file, frame(b'{"gap":%d}' % self._lost))
                self._lost = 0
            self._write(file, line)
            self.lines_written += 1
            now = self._clock()
            if now - self._flushed_at >= FLUSH_SECONDS:
                file.flush()
                self._flushed_at = now
        except OSError as error:
            self._failed(error)

    def flush(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
            except OSError as error:
                self._failed(error)

    def close(self) -> None:
        """Flush and close the file (a later line opens it again, appending)."""
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError as error:
                self._failed(error)

    def _write(self, file: IO[bytes], data: bytes) -> None:
        file.write(data)
        self._size += len(data)

    def _open(self, current: bytes) -> None:
        """Open the file to append; a new one starts with the header and configuration
        (unless `current`, the line about to be written, is one of them)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        file = self.path.open("ab")
        self._size = file.tell()
        self._file = file
        if self._size:
            self._write(file, b"\n")  # ends a line an earlier failure cut short
            return
        for known in (self._header, self._config):
            if known and known is not current:
                self._write(file, known)

    def _rotate(self, current: bytes) -> None:
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
        self._open(current)

    def _failed(self, error: OSError) -> None:
        self._lost += 1
        self.lines_lost += 1
        self._complaints.log(
            logging.WARNING,
            "journal",
            "the journal %s could not be written (%s): lines are lost until it can",
            self.path,
            error.strerror or error,
        )
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()
