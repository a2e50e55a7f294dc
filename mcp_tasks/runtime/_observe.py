"""A task's life as an operator sees it: one log line per status change, and telemetry.

The interpreter calls `saved` after the store took a write, and `removed` after it deleted
a record, so a line never tells of a change that lost its compare-and-set. Lines go to the
logger `mcp_tasks.tasks` at INFO, each with the task's fields as `extra` (`task_id`,
`tool`, `principal`, `status`, `event`, `age_seconds`, `error_code`):

    task tsk_... created: tool 'render', principal 'alice', working, age 0.000 s
    task tsk_... input requested (input-1): tool 'render', principal 'alice', ...
    task tsk_... failed with -32603: tool 'render', principal 'alice', failed, age 2.310 s

Refusals a peer causes (JSON-RPC errors in a reply) are logged through `RateLimitedLog`,
at INFO, or WARNING when the server turned the peer away for want of room (HTTP 5xx).

A task line is made as `Logger.log` makes it (the logger's `makeRecord`, then its `handle`:
the record factory, filters and handlers all see the same record), less the walk up the
stack that `Logger.log` takes to find who called it: `_write` names its own caller, the
frame `Logger.log` would have found. Every task created at INFO writes two lines, and the
walk was a tenth of each.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Final

import msgspec

from .._support.logs import RateLimitedLog
from ..core import (
    Reply,
    TaskEvent,
    TaskRecord,
)
from ..core.commands import (
    DeleteTask,
    SaveTask,
)
from ..core.wire import (
    INTERNAL_ERROR,
)
from ..transports._telemetry import Telemetry

task_logger = logging.getLogger("mcp_tasks.tasks")
refusal_log = RateLimitedLog(logging.getLogger("mcp_tasks.server"))

_WORDS: Final = {
    TaskEvent.NEED_INPUT: "input requested",
    TaskEvent.INPUT_ANSWERED: "input answered",
    TaskEvent.COMPLETE: "completed",
    TaskEvent.FAIL: "failed",
    TaskEvent.CANCEL: "cancelled",
    TaskEvent.EXPIRE: "expired",
    TaskEvent.ORPHAN: "orphaned",
    TaskEvent.RESTART: "restarted",
}


def task_fields(record: TaskRecord, age_seconds: float) -> dict[str, Any]:
    """The `extra` of a log line about `record`."""
    return {
        "task_id": record.task_id,
        "tool": record.tool_name,
        "principal": record.principal,
        "status": record.status.value,
        "age_seconds": round(age_seconds, 3),
    }


def saved(telemetry: Telemetry, effect: SaveTask, now: float) -> None:
    """The store took `effect`: log the status change it records, report it."""
    event = effect.event
    created = effect.created
    if event is None and not created:
        return  # a status message, some of the answers: no change of status
    record = effect.record
    if telemetry.enabled:
        telemetry.task_saved(record, event, created=created, now=now)
    if not task_logger.isEnabledFor(logging.INFO):
        return
    word = "created" if event is None else _WORDS[event]
    extra = task_fields(record, record.last_updated_at - record.created_at)
    extra["event"] = "create" if event is None else event.value
    if event is TaskEvent.NEED_INPUT and record.input_requests:
        word += f" ({', '.join(sorted(record.input_requests))})"
    error = record.error
    if error is not None and record.status.is_terminal:
        word += f" with {error.code}"
        extra["error_code"] = error.code
    message = "task %s %s: tool %r, principal %s, %s, age %.3f s"
    args = (record.task_id, word, record.tool_name, _shown(record.principal), extra["status"])
    _write(logging.INFO, message, (*args, extra["age_seconds"]), extra)


def removed(telemetry: Telemetry, effect: DeleteTask, now: float) -> None:
    """The store deleted a record whose TTL ran out."""
    record = effect.record
    if telemetry.enabled:
        telemetry.task_removed(record, expired=effect.expired, now=now)
    if record is None:
        return
    level = logging.INFO if effect.expired else logging.DEBUG
    if not task_logger.isEnabledFor(level):
        return
    extra = task_fields(record, now - record.created_at)
    if effect.expired:  # still active: it ends here, failed, and is gone at once
        extra["event"] = TaskEvent.EXPIRE.value
        message = "task %s expired: tool %r, principal %s, %s until now, age %.3f s"
    else:
        extra["event"] = "remove"
        message = "task %s removed (its TTL ran out): tool %r, principal %s, %s, age %.3f s"
    args = (record.task_id, record.tool_name, _shown(record.principal), extra["status"])
    _write(level, message, (*args, extra["age_seconds"]), extra)


_NOWHERE: Final = ("(unknown file)", 0, "(unknown function)")
"""Where a line comes from when `logging` is told not to look (`logging._srcfile = None`)."""


def _write(level: int, message: str, args: tuple[object, ...], extra: dict[str, Any]) -> None:
    """`task_logger.log(level, message, *args, extra=extra)`, the same record through the
    same handlers, named after the function that called this one."""
    if logging._srcfile:
        caller = sys._getframe(1)
        code = caller.f_code
        where = (code.co_filename, caller.f_lineno, code.co_name)
    else:
        where = _NOWHERE
    name = task_logger.name
    record = task_logger.makeRecord(name, level, where[0], where[1], message, args, None, where[2])
    record.__dict__.update(extra)  # none of them a record's own (makeRecord would check)
    task_logger.handle(record)


def _shown(principal: str | None) -> str:
    return "(none)" if principal is None else repr(principal)


class _ErrorReply(msgspec.Struct):
    error: _Error


class _Error(msgspec.Struct):
    code: int
    message: str = ""


_error_reply = msgspec.json.Decoder(_ErrorReply)


def refused(telemetry: Telemetry, reply: Reply) -> None:
    """`reply` is a JSON-RPC error: if the peer caused it, log it (rate-limited) and
    report it. Our own failures (-32603) are logged where they happen, with a traceback."""
    code = reply.error_code
    if code is None or (code == INTERNAL_ERROR and reply.http_status == 500):
        return
    reason = "poll_rate" if reply.http_status == 429 else str(code)
    if telemetry.enabled:
        telemetry.refused(reason)
    level = logging.WARNING if reply.http_status >= 500 else logging.INFO
    if not refusal_log.logger.isEnabledFor(level):
        return
    try:
        message = _error_reply.decode(reply.body).error.message
    except msgspec.DecodeError:
        message = ""
    refusal_log.log(
        level,
        reason,
        "refused with %d (HTTP %d): %s",
        code,
        reply.http_status,
        message,
        error_code=code,
        http_status=reply.http_status,
    )
