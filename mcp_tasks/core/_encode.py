"""Every byte the server sends is encoded here: results, errors, notifications.

`Encoder` knows the server's `_meta` (its `serverInfo`) and turns results and errors into
`Reply`s; `notification` and `error_body` are the one way to build a notification and a
bare error body (the transports use it for what they refuse before the core sees it).
`shown` cuts what the peer sent before an error message quotes it back. (Validation
errors are worded by `_options.error_path`, next to the tool arguments it decodes.)
"""

from __future__ import annotations

import datetime
import functools
import typing
from typing import Any, Final

import msgspec
from msgspec import UNSET

from . import _wire as w
from ._effects import Reply
from ._errors import ProtocolError, http_status_for_code
from ._records import TaskRecord
from ._state import TaskStatus

LOG_LEVELS: Final[tuple[w.LoggingLevel, ...]] = typing.get_args(w.LoggingLevel)
"""The log levels, least severe first."""
SHOWN_CHARACTERS: Final = 100
"""How much of a peer's string an error message quotes back (a name may be megabytes)."""
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def shown(text: str) -> str:
    """`text`, cut to `SHOWN_CHARACTERS` with a note of how much was left out."""
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return f"{text[:SHOWN_CHARACTERS]}… ({len(text) - SHOWN_CHARACTERS} more characters)"


@functools.lru_cache(maxsize=4096)
def _second(seconds: int) -> str:
    return (_EPOCH + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")


def iso_utc(when: float) -> str:
    """ISO 8601 in UTC with milliseconds, e.g. `2026-08-01T12:00:00.000Z`.

    Every task poll formats two of these, most often of a task polled before: the last
    `_FORMATTED_KEPT` are kept, and the date-and-time part of each second is memoised
    (pure caches: the same input always gives the same text).
    """
    text = _formatted.get(when)
    if text is not None:
        return text
    seconds = int(when)
    micros = round((when - seconds) * 1_000_000)  # rounded to microseconds, as datetime does
    if not 0 <= micros < 1_000_000:  # rounded up to the next second, or before 1970
        seconds, micros = divmod(seconds * 1_000_000 + micros, 1_000_000)
    text = f"{_second(seconds)}.{micros // 1000:03d}Z"
    if len(_formatted) >= _FORMATTED_KEPT:
        _formatted.clear()
    _formatted[when] = text
    return text


_SHOWN_KEPT: Final = 256
"""Tasks whose `tasks/get` result an `Encoder` keeps encoded (`shown_task`)..."""
_SHOWN_MAX_BYTES: Final = 16 * 1024
"""...each at most this long (a larger result is encoded each time): 4 MiB at most."""
_FORMATTED_KEPT: Final = 4096
_formatted: dict[float, str] = {}


def notification(method: str, params: dict[str, Any]) -> bytes:
    """A JSON-RPC notification."""
    return w.json_encoder.encode({"jsonrpc": "2.0", "method": method, "params": params})


def progress_notification(
    meta: w.RequestMeta, progress: float, total: float | None, message: str | None
) -> bytes | None:
    """`notifications/progress`, or None if the request asked for none (no token)."""
    token = meta.progress_token
    if token is UNSET:
        return None
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    return notification("notifications/progress", params)


def log_notification(
    meta: w.RequestMeta, level: w.LoggingLevel, data: Any, logger: str | None
) -> bytes | None:
    """`notifications/message`, or None if the request asked for no log messages at
    `level` (`_meta` `io.modelcontextprotocol/logLevel` names the lowest it wants)."""
    wanted = meta.log_level
    if wanted is UNSET or LOG_LEVELS.index(level) < LOG_LEVELS.index(wanted):
        return None
    params: dict[str, Any] = {"level": level, "data": data}
    if logger is not None:
        params["logger"] = logger
    return notification("notifications/message", params)


def error_body(request_id: w.RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """A JSON-RPC error response (without an id when the request's is unknown)."""
    error = w.ErrorObject(code=code, message=message, data=unset_if_none(data))
    return _error_response(request_id, error)


def _error_response(request_id: w.RequestId | None, error: w.ErrorObject) -> bytes:
    response = w.ErrorResponse(id=UNSET if request_id is None else request_id, error=error)
    return w.json_encoder.encode(response)


def error_object(error: ProtocolError) -> w.ErrorObject:
    """The JSON-RPC error object a `ProtocolError` stands for."""
    return w.ErrorObject(code=error.code, message=error.message, data=unset_if_none(error.data))


def unset_if_none(value: Any) -> Any:
    return UNSET if value is None else value


class Encoder:
    """Replies carrying the server's `_meta`."""

    def __init__(self, info: w.Implementation) -> None:
        self.use_info(info)

    def use_info(self, info: w.Implementation) -> None:
        """Name `info` as the server in the `_meta` of replies from now on."""
        self.result_meta = w.ResultMeta(server_info=info)
        self.meta_dict: dict[str, Any] = msgspec.to_builtins(self.result_meta)
        self._shown: dict[tuple[str, int, TaskStatus, float], msgspec.Raw] = {}

    def result(self, request_id: w.RequestId, result: Any) -> Reply:
        body = w.json_encoder.encode(w.ResultResponse(id=request_id, result=result))
        return Reply(body=body, request_id=request_id)

    def error(self, request_id: w.RequestId | None, error: ProtocolError) -> Reply:
        return self.error_object(request_id, error_object(error))

    def error_object(self, request_id: w.RequestId | None, error: w.ErrorObject) -> Reply:
        return Reply(
            body=_error_response(request_id, error),
            http_status=http_status_for_code(error.code),
            request_id=request_id,
            error_code=error.code,
        )

    def retryable(
        self,
        request_id: w.RequestId | None,
        code: int,
        message: str,
        *,
        http_status: int,
        retry_after_ms: int | None,
    ) -> Reply:
        """An error the client may retry: over HTTP `http_status` (429, 503) with
        `Retry-After` in whole seconds (at least 1), and `data.retryAfterMs` for every
        transport. Without `retry_after_ms` neither hint is given."""
        data = UNSET if retry_after_ms is None else {"retryAfterMs": retry_after_ms}
        reply = self.error_object(request_id, w.ErrorObject(code=code, message=message, data=data))
        seconds = None if retry_after_ms is None else max(1, -(-retry_after_ms // 1000))
        return msgspec.structs.replace(reply, http_status=http_status, retry_after_seconds=seconds)

    def shown_task(self, record: TaskRecord) -> msgspec.Raw:
        """`detailed_task`, encoded: kept for the record's version (and, should a write
        have bypassed the core, its status and time of change), as a client polls the
        same task again and again until it changes."""
        key = (record.task_id, record.version, record.status, record.last_updated_at)
        shown = self._shown.get(key)
        if shown is None:
            shown = msgspec.Raw(w.json_encoder.encode(self.detailed_task(record)))
            if len(shown) <= _SHOWN_MAX_BYTES:
                if len(self._shown) >= _SHOWN_KEPT:
                    self._shown.clear()
                self._shown[key] = shown
        return shown

    def detailed_task(self, record: TaskRecord) -> w.DetailedTask:
        """The task as `tasks/get` shows it."""
        common: dict[str, Any] = {
            "task_id": record.task_id,
            "created_at": iso_utc(record.created_at),
            "last_updated_at": iso_utc(record.last_updated_at),
            "ttl_ms": record.ttl_ms,
            "poll_interval_ms": record.poll_interval_ms,
            "status_message": record.status_message,
            "meta": self.result_meta,
        }
        status = record.status
        if status is TaskStatus.WORKING:
            return w.WorkingTask(**common)
        if status is TaskStatus.INPUT_REQUIRED:
            return w.InputRequiredTask(**common, input_requests=record.input_requests or {})
        if status is TaskStatus.COMPLETED:
            assert record.result is not None
            return w.CompletedTask(**common, result=record.result)
        if status is TaskStatus.FAILED:
            assert record.error is not None
            return w.FailedTask(**common, error=record.error)
        return w.CancelledTask(**common)

    def task_handle(self, record: TaskRecord) -> w.CreateTaskResult:
        """The `CreateTaskResult` that answers the `tools/call` creating `record`."""
        return w.CreateTaskResult(
            task_id=record.task_id,
            status=record.status.value,
            created_at=iso_utc(record.created_at),
            last_updated_at=iso_utc(record.last_updated_at),
            ttl_ms=record.ttl_ms,
            poll_interval_ms=record.poll_interval_ms,
            meta=self.result_meta,
        )
