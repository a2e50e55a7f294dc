"""Log lines an operator reads: task fields, rate-limited refusals, one JSON object a line.

Every line about a task carries its fields as `extra` (`task_id`, `tool`, `principal`,
`status`, `age_seconds`, ...), so `JsonFormatter` writes them as keys of their own and the
text format reads them in its message. `RateLimitedLog` keeps a flood of refusals from
flooding the log: a few lines per reason and window, then one line that counts the rest.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable
from typing import Any, Final

__all__ = ["TEXT_FORMAT", "JsonFormatter", "RateLimitedLog", "TextFormatter", "configure_logging"]

TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"

FIELDS: Final = (
    "task_id",
    "tool",
    "principal",
    "status",
    "event",
    "age_seconds",
    "error_code",
    "method",
    "mcp_name",
    "http_status",
    "duration_ms",
    "reason",
    "client",
)
"""The `extra` keys a JSON line carries as keys of its own (when a line has them)."""


class JsonFormatter(logging.Formatter):
    """One JSON object a line: `time` (UTC, ISO 8601), `level`, `logger`, `message`, the
    task and request fields the line has (`FIELDS`), and `exception` for a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _iso_utc(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = record.__dict__
        for key in FIELDS:
            value = fields.get(key)
            if value is not None:
                line[key] = value
        if record.exc_info is not None and record.exc_info[0] is not None:
            line["exception"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return json.dumps(line, default=str, ensure_ascii=False)


def _iso_utc(seconds: float) -> str:
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{whole}.{int(seconds % 1 * 1000):03d}Z"


class TextFormatter(logging.Formatter):
    """`logging.Formatter(TEXT_FORMAT)`, the same lines for less: the date and time of a
    second are formatted once for all the lines of that second, and a line without a
    traceback or a stack skips the checks for them."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")
        """The last second formatted, and its text (one tuple: swapped whole)."""

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)
        record.message = record.getMessage()
        record.asctime = self.formatTime(record)
        return self.formatMessage(record)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second, text = self._second
        if int(record.created) != second:
            second = int(record.created)
            text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (second, text)
        return f"{text},{int(record.msecs):03d}"  # as logging.Formatter.default_msec_format


def configure_logging(level: str, log_format: str = "text") -> None:
    """Logs to stderr at `level` ("debug", "info", ...), as text or one JSON object a line
    (`log_format="json"`): what `mcp-tasks serve` sets up."""
    if log_format not in ("text", "json"):
        raise ValueError(f"log_format must be 'text' or 'json', not {log_format!r}")
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class RateLimitedLog:
    """At most `lines_per_window` lines per key every `window_seconds`; the lines held back
    are counted, and the next line of that key after the window says how many there were.

    A key is the kind of line (a refusal's reason): a flood of one kind costs a few lines
    a window, and never hides a line of another kind."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        lines_per_window: int = 5,
        window_seconds: float = 10.0,
        max_keys: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if lines_per_window <= 0 or window_seconds <= 0:
            raise ValueError("lines_per_window and window_seconds must be positive")
        self.logger = logger
        self.lines_per_window = lines_per_window
        self.window_seconds = window_seconds
        self.max_keys = max_keys
        self._clock = clock
        self._windows: dict[str, list[float]] = {}
        """key -> [window start, lines logged in it, lines held back in it]"""

    def log(self, level: int, key: str, message: str, *args: object, **extra: object) -> bool:
        """Log `message % args` at `level` unless its key is over its share; True if it
        was written. `extra` goes on the line (see `FIELDS`)."""
        if not self.logger.isEnabledFor(level):
            return False
        now = self._clock()
        window = self._windows.get(key)
        held = 0
        if window is None or now - window[0] >= self.window_seconds:
            if window is not None:
                held = int(window[2])
            elif len(self._windows) >= self.max_keys:
                self._windows.clear()  # a peer inventing keys: start counting afresh
            window = self._windows[key] = [now, 0.0, 0.0]
        if window[1] >= self.lines_per_window:
            window[2] += 1
            return False
        window[1] += 1
        if held:
            message += f" (and {held} more like it in the last {self.window_seconds:g} s)"
        self.logger.log(level, message, *args, extra={"reason": key, **extra})
        return True
