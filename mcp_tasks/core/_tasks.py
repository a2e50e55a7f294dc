"""Tasks: their creation, `tasks/get`/`update`/`cancel`, and every outcome of their handler.

Each method takes the task's record as stored now (the shell loads it) and the time, and
returns the `Step` that follows: the record's successor to save (compare-and-set on its
version) and what the shell must do about the handler. Status changes go through
`next_status`, the one place an illegal transition is raised.
"""

from __future__ import annotations

import math
from typing import Any, Final

import msgspec
from msgspec import Raw

from . import _wire as w
from ._effects import (
    AwaitAnswer,
    CancelTask,
    DeleteTask,
    Effect,
    EndRun,
    ReleaseLease,
    ResumeTask,
    SaveTask,
    StartTask,
    Step,
    TaskLimits,
    WakeAt,
)
from ._encode import error_object, shown
from ._envelope import decode_params, invalid_params
from ._errors import INTERNAL_ERROR, SERVER_ERROR, LocalProtocolError, ProtocolError
from ._needs import FetchTask, TaskRequest, ToolCall
from ._outcomes import InputRequired, StartTaskOutcome, ToolOutcome, failure_outcome
from ._parts import Parts
from ._records import TaskRecord, task_era
from ._rounds import check_input_requests, checked_responses, method_of, needs_tasks_extension
from ._state import INITIAL_STATUS, TaskEvent, TaskStatus, can_happen, next_status
from .inputs import TaskRefused

RELATED_TASK_META: Final = "io.modelcontextprotocol/related-task"
ORPHANED_MESSAGE: Final = (
    "The process running the task stopped before the task finished (a restart, a crash, "
    "or the task store out of its reach for longer than its lease), and its work is lost"
)
RESTARTED_MESSAGE: Final = (
    "Running again from the start: the process running it stopped before it finished"
)
OUTCOME_LOST_MESSAGE: Final = (
    "The task's handler finished, but its outcome was lost: the task store could not be "
    "reached for {seconds:g} s afterwards"
)
INPUT_KEY_PREFIX: Final = "input-"
"""Keys of the questions a handler asks in place (`ctx.elicit`): input-1, input-2, ..."""


def save(
    record: TaskRecord, expected_version: int | None, event: TaskEvent | None = None
) -> SaveTask:
    """Write `record`, telling the store whether the task is still active, and which
    `event` of the status table (if any) brought it there."""
    return SaveTask(
        record=record,
        expected_version=expected_version,
        active=not record.status.is_terminal,
        event=event,
    )


class Tasks:
    def __init__(self, parts: Parts) -> None:
        self._parts = parts
        """Task ids and the poll policy's verdicts come from `parts.injected`, a new task's
        TTL and limits from `parts.task_options`."""

    # --- creation ----------------------------------------------------------------------

    def create(self, request_id: w.RequestId, call: ToolCall, now: float) -> Step:
        """The task a `tools/call` becomes: saved (under the limits), started, answered."""
        options = self._parts.task_options
        record = TaskRecord(
            task_id=self._parts.injected.new_task_id(),
            version=1,
            tool_name=call.tool_name,
            status=INITIAL_STATUS,
            created_at=now,
            last_updated_at=now,
            ttl_ms=options.ttl_ms,
            poll_interval_ms=options.poll_interval_ms,
            arguments=call.arguments,
            request_meta=call.meta,
            prior_responses=call.input_responses or None,
            handler_state=call.handler_state,
            principal=call.principal,
            era=task_era(call.meta),
        )
        limits = TaskLimits(
            max_tasks=options.max_tasks,
            max_bytes=options.max_stored_bytes,
            max_active_per_principal=options.max_active_per_principal,
            # Callers without a principal are one nobody: a share of it would be a limit.
            max_stored_per_principal=(
                None if call.principal is None else options.max_stored_per_principal
            ),
        )
        inside = msgspec.structs.replace(call, in_task=True, task_id=record.task_id)
        effects: list[Effect] = [
            SaveTask(record=record, expected_version=None, limits=limits, take_lease=True),
            StartTask(task_id=record.task_id, call=inside, claim_lease=False, **self._run(inside)),
        ]
        if record.expires_at is not None:
            effects.append(WakeAt(task_id=record.task_id, deadline=record.expires_at))
        return Step(
            reply=self._parts.encode.result(request_id, self._parts.encode.task_handle(record)),
            effects=tuple(effects),
        )

    def refused(self, refused: TaskRefused, now: float) -> Step:
        """The store refused to create the task `refused.call` asked for: it holds its limit
        of this principal's unfinished tasks (-32603), of its stored tasks (-32603,
        retryable: HTTP 429), or of tasks, or (`data`) of bytes of task data (-32603,
        retryable: HTTP 503). A retryable refusal carries `Retry-After` and
        `data.retryAfterMs`: the time until `next_expiry_at`, when the next stored task (of
        this principal's, or of all) expires, and at least a second."""
        request_id = refused.call.request_id
        assert request_id is not None
        per_principal, next_expiry_at = refused.per_principal, refused.next_expiry_at
        wait_ms = None
        if next_expiry_at is not None:
            # Rounded to microseconds first: 90.2 s is 90,200 ms, not 90,201.
            wait_ms = max(1000, math.ceil(round((next_expiry_at - now) * 1000, 3)))
        when = "when some have finished or expired" if wait_ms is None else f"in {wait_ms} ms"
        if per_principal and refused.stored:
            most = self._parts.task_options.max_stored_per_principal
            message = (
                f"Too many tasks for this caller: at most {most} stored at once, finished "
                f"ones included until they expire; try again {when}"
            )
            reply = self._parts.encode.retryable(
                request_id, INTERNAL_ERROR, message, http_status=429, retry_after_ms=wait_ms
            )
            return Step(reply=reply)
        if per_principal:
            most = self._parts.task_options.max_active_per_principal
            message = (
                f"Too many unfinished tasks for this caller: at most {most} at once; "
                "try again when one has finished (or cancel one)"
            )
            error = w.ErrorObject(code=INTERNAL_ERROR, message=message)
            return Step(reply=self._parts.encode.error_object(request_id, error))
        held = f"{self._parts.task_options.max_tasks}"
        if refused.data:
            held = f"{self._parts.task_options.max_stored_bytes} bytes of task data"
        message = f"Too many tasks: the server holds its limit of {held}; try again {when}"
        reply = self._parts.encode.retryable(
            request_id, INTERNAL_ERROR, message, http_status=503, retry_after_ms=wait_ms
        )
        return Step(reply=reply)

    # --- tasks/get, tasks/update, tasks/cancel ------------------------------------------

    def request(
        self,
        request_id: w.RequestId,
        method: str,
        raw_params: Raw,
        meta: w.RequestMeta,
        principal: str | None,
        *,
        task_id: Any = None,
    ) -> FetchTask:
        """`task_id`: the params' `taskId` as a first look found it (`ParamsHead`, with
        `_meta` there already): a string is all `tasks/get` and `tasks/cancel` take, so
        their params need no second decoding."""
        if not meta.client_capabilities.has_tasks:
            raise needs_tasks_extension(f"{method} needs")
        responses = None
        if method == "tasks/update":
            update = decode_params(raw_params, w.UpdateTaskParams)
            task_id, responses = update.task_id, update.input_responses
        elif type(task_id) is str:
            pass
        elif method == "tasks/get":
            task_id = decode_params(raw_params, w.GetTaskParams).task_id
        else:
            task_id = decode_params(raw_params, w.CancelTaskParams).task_id
        request = TaskRequest(
            request_id=request_id,
            method=method,
            task_id=task_id,
            meta=meta,
            principal=principal,
            input_responses=responses,
        )
        return FetchTask(request=request)

    def handle_request(self, request: TaskRequest, record: TaskRecord | None, now: float) -> Step:
        """Answer a `FetchTask`: `record` is what the store holds for the id, or None."""
        request_id = request.request_id
        if (
            record is None
            or record.task_id != request.task_id
            or record.principal != request.principal
            or record.era != task_era(request.meta)
        ):
            # Another principal's (or era's) task answers exactly as one that does not exist.
            error = invalid_params(f"Unknown task: {shown(request.task_id)!r}")
            return Step(reply=self._parts.encode.error(request_id, error))
        if record.is_expired(now):
            error = invalid_params(f"Task {request.task_id!r} has expired")
            return Step(
                reply=self._parts.encode.error(request_id, error),
                effects=self.expire(record, now).effects,
            )
        if request.method == "tasks/get":
            return self._poll(request, record, now)
        ack = w.EmptyResult(meta=self._parts.encode.result_meta)
        if request.method == "tasks/cancel":
            if not can_happen(record.status, TaskEvent.CANCEL):
                return Step(reply=self._parts.encode.result(request_id, ack))  # over: still an ack
            cancelled = _finish(record, TaskEvent.CANCEL, now)
            effects: tuple[Effect, ...] = (
                save(cancelled, record.version, TaskEvent.CANCEL),
                CancelTask(task_id=record.task_id),
            )
            return Step(reply=self._parts.encode.result(request_id, ack), effects=effects)
        try:
            effects = self._merge_answers(record, request.input_responses or {}, now)
        except ProtocolError as error:
            return Step(reply=self._parts.encode.error(request_id, error))
        return Step(reply=self._parts.encode.result(request_id, ack), effects=effects)

    def _poll(self, request: TaskRequest, record: TaskRecord, now: float) -> Step:
        encode, injected = self._parts.encode, self._parts.injected
        wait_ms = injected.poll_wait_ms(request.principal, record, now) if injected.polls else None
        if wait_ms is None:
            return Step(reply=encode.result(request.request_id, encode.shown_task(record)))
        message = (
            f"Polling too fast: task {record.task_id!r} advises pollIntervalMs="
            f"{record.poll_interval_ms}; poll again in {wait_ms} ms"
        )
        reply = encode.retryable(
            request.request_id, SERVER_ERROR, message, http_status=429, retry_after_ms=wait_ms
        )
        return Step(reply=reply)

    def _merge_answers(
        self, record: TaskRecord, given: dict[str, Raw], now: float
    ) -> tuple[Effect, ...]:
        # Only a task in input_required has outstanding requests: the core clears them when
        # the task resumes or ends, so the status needs no second check here.
        outstanding = record.input_requests or {}
        asked = {key: method_of(outstanding[key]) for key in given if key in outstanding}
        if not asked:
            return ()  # nothing outstanding was answered: ignored, still an ack
        answers = checked_responses(given, asked)
        responses = {**(record.input_responses or {}), **answers}
        still_open = {k: v for k, v in outstanding.items() if k not in answers}
        if still_open:
            updated = record.replace(
                input_requests=still_open, input_responses=responses, last_updated_at=now
            )
            return (save(updated, record.version),)
        resumed = record.replace(
            status=next_status(record.status, TaskEvent.INPUT_ANSWERED),
            input_requests=None,
            input_responses=responses,
            status_message=None,
            last_updated_at=now,
        )
        return (save(resumed, record.version, TaskEvent.INPUT_ANSWERED), self._resume(resumed))

    # --- the handler's outcome, inside a task --------------------------------------------

    def returned(self, record: TaskRecord, outcome: ToolOutcome, now: float) -> Step:
        """The handler running task `record` returned `outcome` (`record` as stored now)."""
        if record.status.is_terminal:
            return Step()  # cancelled (or otherwise ended) meanwhile: the outcome is moot
        if record.is_expired(now):
            return self.expire(record, now)
        try:
            updated, event = self._apply_outcome(record, outcome, now)
        except ProtocolError as error:
            updated, event = self._failed(record, error, now), TaskEvent.FAIL
        saved = save(updated, record.version, event)
        if updated.status.is_terminal:
            return Step(effects=(saved,))
        # It returned its questions: nothing runs until they are answered.
        return Step(effects=(saved, ReleaseLease(task_id=record.task_id)))

    def asked(self, record: TaskRecord | None, request: w.InputRequest, now: float) -> Step:
        """The handler running task `record` asks `request` and waits in place for the
        answer, under a key the task never used; if it may not ask, the task fails. Unless
        it waits (`AwaitAnswer`), its run ends (`EndRun`): nothing will answer."""
        if record is None or record.status.is_terminal:
            return Step(effects=(EndRun(task_id=None if record is None else record.task_id),))
        if record.is_expired(now):
            expired = self.expire(record, now)
            return Step(effects=(*expired.effects, EndRun(task_id=record.task_id)))
        number = len(record.issued_keys) + 1
        while f"{INPUT_KEY_PREFIX}{number}" in record.issued_keys:
            number += 1
        key = f"{INPUT_KEY_PREFIX}{number}"
        try:
            updated = self._ask(record, InputRequired(requests={key: request}), now)
        except ProtocolError as error:
            failed = self._failed(record, error, now)
            ended = EndRun(task_id=record.task_id)
            return Step(effects=(save(failed, record.version, TaskEvent.FAIL), ended))
        # Waiting before the question is saved: the answer may come as soon as it is.
        waiting = AwaitAnswer(task_id=record.task_id, key=key)
        return Step(effects=(waiting, save(updated, record.version, TaskEvent.NEED_INPUT)))

    def _apply_outcome(
        self, record: TaskRecord, outcome: ToolOutcome, now: float
    ) -> tuple[TaskRecord, TaskEvent]:
        if isinstance(outcome, w.CallToolResult):
            encoded = msgspec.json.encode(_without_related_task_meta(outcome))
            # The encoder's buffer keeps up to half again its length in spare room; a stored
            # result lives for the task's whole TTL, so keep an exact-size copy.
            result = Raw(bytes(memoryview(encoded)))
            return _finish(record, TaskEvent.COMPLETE, now, result=result), TaskEvent.COMPLETE
        if isinstance(outcome, w.ErrorObject):
            failed = _finish(
                record, TaskEvent.FAIL, now, error=outcome, status_message=outcome.message
            )
            return failed, TaskEvent.FAIL
        if isinstance(outcome, InputRequired):
            return self._ask(record, outcome, now), TaskEvent.NEED_INPUT
        if isinstance(outcome, StartTaskOutcome):
            raise LocalProtocolError(
                f"Tool {record.tool_name!r} asked to start a task while already inside one"
            )
        raise LocalProtocolError(f"Tool {record.tool_name!r} returned an unknown outcome")

    def _ask(self, record: TaskRecord, outcome: InputRequired, now: float) -> TaskRecord:
        meta = record.request_meta
        capabilities = w.ClientCapabilities() if meta is None else meta.client_capabilities
        check_input_requests(f"Tool {record.tool_name!r}", outcome.requests, capabilities)
        reused = sorted(key for key in outcome.requests if key in record.issued_keys)
        if reused:
            raise LocalProtocolError(
                f"Tool {record.tool_name!r} reused input key(s) {', '.join(reused)}; "
                "keys must be unique over a task's life"
            )
        return record.replace(
            status=next_status(record.status, TaskEvent.NEED_INPUT),
            input_requests={**(record.input_requests or {}), **outcome.requests},
            issued_keys=record.issued_keys.union(outcome.requests),
            status_message=outcome.status_message,
            last_updated_at=now,
        )

    def handler_missing(self, record: TaskRecord | None, now: float) -> Step:
        """The task's run found no handler: its tool was removed while the task waited (for
        its answers, or to be run again). The task fails, saying so."""
        if record is None:
            return Step()
        name = record.tool_name
        gone = LocalProtocolError(f"Tool {name!r} is no longer registered")
        return self.returned(record, failure_outcome(gone, f"Tool {name!r}"), now)

    def _failed(self, record: TaskRecord, error: ProtocolError, now: float) -> TaskRecord:
        return _finish(
            record, TaskEvent.FAIL, now, error=error_object(error), status_message=error.message
        )

    def set_status_message(
        self, record: TaskRecord | None, message: str | None, now: float
    ) -> Step:
        """Show `message` as the task's `statusMessage` (progress); no status change."""
        if record is None or record.status.is_terminal or record.status_message == message:
            return Step()
        updated = record.replace(status_message=message, last_updated_at=now)
        return Step(effects=(save(updated, record.version),))

    # --- the process running it stopped, its time ran out ---------------------------------

    def orphaned(self, record: TaskRecord | None, now: float) -> Step:
        """The process running `record`'s handler stopped before the task ended (a
        restart, a crash, a lease that lapsed). A resumable tool runs again from the start,
        keeping the answers it was given; any other task fails, saying why."""
        if record is None or record.status.is_terminal:
            return Step()
        if record.is_expired(now):
            return self.expire(record, now)
        tool = self._parts.catalog.tools.get(record.tool_name)
        if tool is not None and tool.resumable and record.request_meta is not None:
            restarted = record.replace(
                status=next_status(record.status, TaskEvent.RESTART),
                input_requests=None,
                status_message=RESTARTED_MESSAGE,
                last_updated_at=now,
            )
            call = task_call(restarted)
            start = StartTask(task_id=record.task_id, call=call, **self._run(call))
            return Step(effects=(save(restarted, record.version, TaskEvent.RESTART), start))
        error = w.ErrorObject(code=INTERNAL_ERROR, message=ORPHANED_MESSAGE)
        failed = _finish(record, TaskEvent.ORPHAN, now, error=error, status_message=error.message)
        return Step(effects=(save(failed, record.version, TaskEvent.ORPHAN),))

    def outcome_lost(self, record: TaskRecord | None, waited: float, now: float) -> Step:
        """The handler running `record` finished, but its outcome could not be saved for
        `waited` seconds and was dropped: the task fails, saying so."""
        if record is None or record.status.is_terminal:
            return Step()
        if record.is_expired(now):
            return self.expire(record, now)
        message = OUTCOME_LOST_MESSAGE.format(seconds=waited)
        error = w.ErrorObject(code=INTERNAL_ERROR, message=message)
        failed = _finish(record, TaskEvent.ORPHAN, now, error=error, status_message=message)
        return Step(effects=(save(failed, record.version, TaskEvent.ORPHAN),))

    def resumed(self, record: TaskRecord | None) -> ResumeTask | None:
        """Run `record`'s handler again, or wake it, with every answer it has so far; None
        if the task is not working (it ended, or waits for more answers)."""
        if record is None or record.status is not TaskStatus.WORKING:
            return None
        if record.request_meta is None:
            return None
        return self._resume(record)

    def _resume(self, record: TaskRecord) -> ResumeTask:
        call = task_call(record)
        return ResumeTask(task_id=record.task_id, call=call, **self._run(call))

    def _run(self, call: ToolCall) -> dict[str, Any]:
        """What a `StartTask` or `ResumeTask` carries to run `call`: the tool's handler as
        registered now, and the arguments decoded for it, or why they no longer fit."""
        catalog = self._parts.catalog
        handler = catalog.handler("tool", call.tool_name)
        tool = catalog.tools.get(call.tool_name)
        if tool is None:  # removed: the run says so (`HandlerMissing`)
            return {"handler": handler}
        try:
            arguments = catalog.decode_arguments(tool, call.arguments)
        except ProtocolError as refused:
            return {"handler": handler, "arguments_refused": error_object(refused)}
        return {"handler": handler, "arguments": arguments}

    def expire(self, record: TaskRecord | None, now: float) -> Step:
        """A `WakeAt` came due: remove the record if its TTL has run out."""
        if record is None or record.expires_at is None:
            return Step()
        if now < record.expires_at:
            return Step(effects=(WakeAt(task_id=record.task_id, deadline=record.expires_at),))
        active = can_happen(record.status, TaskEvent.EXPIRE)
        delete = DeleteTask(
            task_id=record.task_id, expected_version=record.version, record=record, expired=active
        )
        if active:
            return Step(effects=(CancelTask(task_id=record.task_id), delete))
        return Step(effects=(delete,))


def task_call(record: TaskRecord) -> ToolCall:
    """The call that runs `record`'s handler again, with every answer it has so far."""
    assert record.request_meta is not None, "only a running task is run again"
    return ToolCall(
        request_id=None,
        tool_name=record.tool_name,
        arguments=record.arguments,
        meta=record.request_meta,
        input_responses={**(record.prior_responses or {}), **(record.input_responses or {})},
        handler_state=record.handler_state,
        in_task=True,
        task_id=record.task_id,
        principal=record.principal,
    )


def progress_text(progress: float, total: float | None, message: str | None) -> str:
    """How a task shows progress: its `statusMessage` (tasks have no progress notifications)."""
    amount = f"{progress:g}" if total is None else f"{progress:g}/{total:g}"
    return amount if message is None else f"{message} ({amount})"


def _without_related_task_meta(result: w.CallToolResult) -> w.CallToolResult:
    if result.meta is None or RELATED_TASK_META not in result.meta:
        return result
    meta = {k: v for k, v in result.meta.items() if k != RELATED_TASK_META}
    return msgspec.structs.replace(result, meta=meta or None)


_ONLY_WHILE_RUNNING: Final = dict.fromkeys(
    (
        "arguments",
        "request_meta",
        "prior_responses",
        "handler_state",
        "input_requests",
        "input_responses",
    )
)
"""What a record holds only for its handler to run (again) or be answered: an ended task
drops it (None each)."""


def _finish(record: TaskRecord, event: TaskEvent, now: float, **changes: Any) -> TaskRecord:
    """The record after a terminal event, without what only a running task needs."""
    changes.setdefault("status_message", None)  # a waiting or progress message is over too
    return record.replace(
        status=next_status(record.status, event),
        last_updated_at=now,
        **_ONLY_WHILE_RUNNING,
        **changes,
    )
