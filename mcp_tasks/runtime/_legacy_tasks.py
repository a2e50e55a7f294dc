"""The 2025-11-25 tasks utility carried out: `tasks/get|result|list|cancel` of a legacy
session, each done with the core's own modern task methods, and its status notifications.

Theory of operation
-------------------
Nothing here keeps a task: every query becomes one or more modern requests
(`LegacyFront.task_message`: the session's `_meta`, the tasks extension naming the 2025
era) answered by the core like any other, and `core._legacy_tasks` turns their replies
into the 2025 wire. So a legacy task has the records, handlers, state table, limits,
journal lines and telemetry of any task, and only requests of its principal and era see it.

* `tasks/get`: one modern `tasks/get`.
* `tasks/cancel`: `tasks/get` (an ended task is -32602, as 2025-11-25 requires), modern
  `tasks/cancel`, `tasks/get` again for the `Task` to answer with.
* `tasks/list`: a modern `tasks/get` for each id of the page (`LegacySession.listed`);
  those gone (expired) are passed over.
* `tasks/result`: blocks until the task ends, then answers what the `tools/call` would
  have. It reads the task, and while it is unfinished waits on the task's next change
  (`TaskWatch`: every save here, every `changed` signal of another process) taken before
  the read, so no change between the two is missed; on a shared store it also reads again
  every `RECHECK_SECONDS` (a signal lost in an outage). When the task asks (status
  `input_required`), its questions go to the client as requests of the server's own on this
  request's stream, tagged with the related task (`LegacySessions.ask`: bounded, cancelled
  with the request), and the answers go back as a modern `tasks/update` would carry them.
  A `notifications/cancelled` for the `tasks/result`, or the client leaving, ends the wait.
* `notifications/tasks/status`: each task a session creates is followed, in the server's
  task group, until it ends; a change of its status is read with a modern `tasks/get` and
  sent on the session's channel (`connection.notices`: stdio's connection, an HTTP
  session's own stream; else the `notify` of the request that created it).

What a transport with sessions must give it (stdio and Streamable HTTP sessions do):
the session on `connection.session`, saved again after a task-creating call (it lists
the task); `connection.in_flight` and `awaited` for cancellation and the client's answers;
`connection.notices`, which reaches the client for as long as the session lives (over
HTTP its `GET` stream, for the status notifications), and a `notify` on the `tasks/result`
answer's own stream (its questions); `abandon(connection)` when the session ends.
"""

from __future__ import annotations

import itertools
import logging
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from functools import partial
from typing import Any, Final

import anyio
import msgspec
from msgspec import Raw

from .._support.backend import CancelScope, cancel_scope
from ..core import Reply
from ..core import _legacy_tasks as lt
from ..core._errors import INTERNAL_ERROR, INVALID_PARAMS, RemoteProtocolError
from ..core.legacy import InputRound, LegacyFront, Question, questions, refused
from ..core.wire import IncomingMessage, RequestId
from ..transports._port import Connection, SendNotification
from ._shared import Shared
from ._task_watch import Change

__all__ = ["RECHECK_SECONDS", "LegacyTasks"]

logger = logging.getLogger("mcp_tasks.server")

RECHECK_SECONDS: Final = 5.0
"""With a store other processes share, how often a waiting `tasks/result` (or a followed
task) is read again even without a signal: a signal lost in an outage costs at most this."""
MAX_RETRY_SECONDS: Final = 60.0
"""The longest a refused read (polling too fast) is waited out before reading again."""

Answer = Callable[[IncomingMessage], Awaitable[Reply | None]]
Ask = Callable[
    [list[Question], RequestId, Connection, SendNotification],
    Awaitable[dict[str, Raw] | str | None],
]


class _Held:
    """What this process holds for one connection's session: the scopes of its waiting
    `tasks/result`s and of its followed tasks, and the questions being asked."""

    __slots__ = ("asking", "scopes")

    def __init__(self) -> None:
        self.scopes: set[CancelScope] = set()
        self.asking: set[tuple[str, str]] = set()
        """(task id, key) of the questions asked on this connection and not answered yet."""


class LegacyTasks:
    """Carries out a legacy session's task queries (`carry`), and follows the tasks it
    creates (`created`)."""

    def __init__(
        self,
        front: LegacyFront,
        shared: Shared,
        *,
        ask: Ask,
        question_ids: Iterator[str],
        start_soon: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
    ) -> None:
        self._front = front
        self._shared = shared
        self._ask = ask
        self._question_ids = question_ids
        self._start_soon = start_soon
        self._ids = (f"mcp-tasks-legacy-{n}" for n in itertools.count(1))
        self._held: weakref.WeakKeyDictionary[Connection, _Held] = weakref.WeakKeyDictionary()

    def abandon(self, connection: Connection) -> None:
        """`connection`'s client is gone: its waits and followers end."""
        held = self._held.pop(connection, None)
        for scope in () if held is None else held.scopes:
            scope.cancel()

    def _holding(self, connection: Connection) -> _Held:
        held = self._held.get(connection)
        if held is None:
            held = self._held[connection] = _Held()
        return held

    # --- creation ------------------------------------------------------------------------

    def created(
        self,
        reply: Reply,
        connection: Connection,
        answer: Answer,
        notify: SendNotification | None,
    ) -> Reply | None:
        """The core's reply to a task-creating `tools/call` in the 2025 form (None: it
        created no task, an error or a result, worded as any other call's); the session
        remembers the task (`tasks/list`), and its status changes are followed."""
        legacy, task_id = lt.created_reply(reply)
        session = connection.session
        if task_id is None or session is None:
            return None
        connection.session = session.remembered(task_id)
        lasting = connection.notices or notify  # the session's own channel, where it has one
        if lasting is not None and not connection.closing:
            self._follow(task_id, connection, answer, lasting)
        return legacy

    def _follow(
        self, task_id: str, connection: Connection, answer: Answer, notify: SendNotification
    ) -> None:
        # The change is taken now, before anything else runs: none is missed.
        change = self._shared.watch.next_change(task_id)
        scope = cancel_scope()
        held = self._holding(connection)
        held.scopes.add(scope)
        follow = partial(
            self._following,
            task_id,
            change,
            connection=connection,
            answer=answer,
            notify=notify,
            scope=scope,
        )
        self._start_soon(follow)

    async def _following(
        self,
        task_id: str,
        change: Change,
        *,
        connection: Connection,
        answer: Answer,
        notify: SendNotification,
        scope: CancelScope,
    ) -> None:
        watch = self._shared.watch
        last_saved, last_shown = "working", "working"
        try:
            with scope:
                while True:
                    try:
                        await self._wait(change)
                    finally:
                        watch.forget(task_id, change)
                    happened, change = change, watch.next_change(task_id)  # before the read
                    saved = _record_status(happened)
                    if saved is not None and saved == last_saved:
                        continue  # saved here, its status unchanged (a message, progress)
                    read = await self._read(connection, answer, task_id)
                    if isinstance(read, Reply):
                        if _retry_after(read) is not None:
                            continue
                        return  # gone (expired)
                    last_saved = read.modern_status
                    if read.status != last_shown:
                        last_shown = read.status
                        await notify(lt.status_notification(read))
                    if read.is_terminal:
                        return
        except Exception:  # a notification must never cost the server its work
            logger.exception(
                "task %s: notifications/tasks/status failed", task_id, extra={"task_id": task_id}
            )
        finally:
            watch.forget(task_id, change)
            held = self._held.get(connection)
            if held is not None:
                held.scopes.discard(scope)

    # --- queries -------------------------------------------------------------------------

    async def carry(
        self,
        query: lt.TaskQuery,
        connection: Connection,
        answer: Answer,
        notify: SendNotification | None,
    ) -> Reply | None:
        """Answer a legacy `tasks/*` query (None: it was cancelled while it waited)."""
        request_id = query.request_id
        if query.method == "tasks/list":
            return await self._list(query, connection, answer)
        assert query.task_id is not None
        if query.method == "tasks/get":
            return lt.task_reply(request_id, await self._read(connection, answer, query.task_id))
        if query.method == "tasks/cancel":
            return await self._cancel(query.task_id, request_id, connection, answer)
        return await self._result(query.task_id, request_id, connection, answer, notify)

    def _modern(
        self,
        connection: Connection,
        method: str,
        task_id: str,
        answers: dict[str, Raw] | None = None,
    ) -> IncomingMessage:
        session = connection.session
        assert session is not None
        if answers is None and method != "tasks/update":
            return self._front.task_id_message(session, next(self._ids), method, task_id)
        message = IncomingMessage(jsonrpc="2.0", id=next(self._ids), method=method)
        params = lt.modern_params(method, task_id, answers)
        return self._front.task_message(session, message, params)

    async def _read(
        self, connection: Connection, answer: Answer, task_id: str
    ) -> lt.ReadTask | Reply:
        reply = await answer(self._modern(connection, "tasks/get", task_id))
        if reply is None:
            return lt.error_reply(None, INTERNAL_ERROR, "The task could not be read")
        return lt.read_task(reply)

    async def _cancel(
        self, task_id: str, request_id: RequestId, connection: Connection, answer: Answer
    ) -> Reply:
        read = await self._read(connection, answer, task_id)
        if isinstance(read, Reply):
            return lt.task_reply(request_id, read)
        if read.is_terminal:
            return lt.terminal_refusal(request_id, read)
        cancelled = await answer(self._modern(connection, "tasks/cancel", task_id))
        if cancelled is not None and cancelled.error_code is not None:
            return lt.task_reply(request_id, cancelled)
        read = await self._read(connection, answer, task_id)
        if isinstance(read, lt.ReadTask) and read.modern_status != "cancelled":
            return lt.terminal_refusal(request_id, read)  # it ended first
        return lt.task_reply(request_id, read)

    async def _list(self, query: lt.TaskQuery, connection: Connection, answer: Answer) -> Reply:
        session = connection.session
        assert session is not None
        try:
            position = lt.position_of(query.cursor)
        except RemoteProtocolError as error:
            return lt.error_reply(query.request_id, error.code, error.message)
        page, after = session.listed(position)
        tasks = []
        for task_id in page:
            read = await self._read(connection, answer, task_id)
            if isinstance(read, Reply):
                if read.error_code == INVALID_PARAMS:
                    continue  # expired since: no longer a task
                return lt.task_reply(query.request_id, read)
            tasks.append(read.task)
        next_cursor = None if after is None else lt.cursor_at(after)
        return lt.list_reply(query.request_id, tasks, next_cursor)

    async def _result(
        self,
        task_id: str,
        request_id: RequestId,
        connection: Connection,
        answer: Answer,
        notify: SendNotification | None,
    ) -> Reply | None:
        held = self._holding(connection)
        scope = cancel_scope()
        cancellable = request_id not in connection.in_flight
        if cancellable:
            connection.in_flight[request_id] = scope
        held.scopes.add(scope)
        try:
            with scope:
                if connection.closing:
                    return None  # nobody is left to read it
                return await self._until_ended(task_id, request_id, connection, answer, notify)
        finally:
            held.scopes.discard(scope)
            if cancellable:
                connection.in_flight.pop(request_id, None)
        return None  # cancelled (`notifications/cancelled`, the client left)

    async def _until_ended(
        self,
        task_id: str,
        request_id: RequestId,
        connection: Connection,
        answer: Answer,
        notify: SendNotification | None,
    ) -> Reply | None:
        watch = self._shared.watch
        while True:
            change = watch.next_change(task_id)
            try:
                read = await self._read(connection, answer, task_id)
                if isinstance(read, Reply):
                    wait = _retry_after(read)
                    if wait is None:
                        return lt.payload_reply(request_id, read)
                    await anyio.sleep(wait)  # polled too fast: the server's own limit
                    continue
                if read.is_terminal:
                    return lt.payload_reply(request_id, read)
                if read.input_requests and read.modern_status == "input_required":
                    asked = await self._ask_client(read, request_id, connection, answer, notify)
                    if asked is not None:
                        return asked
                    if _asked_already(read, self._holding(connection)):
                        await self._wait(change)
                    continue
                await self._wait(change)
            finally:
                watch.forget(task_id, change)

    async def _ask_client(
        self,
        read: lt.ReadTask,
        request_id: RequestId,
        connection: Connection,
        answer: Answer,
        notify: SendNotification | None,
    ) -> Reply | None:
        """Ask the task's questions not asked on this connection yet; hand the answers to
        the task. A reply when that failed (the `tasks/result` ends with it), else None."""
        task_id = read.task_id
        held = self._holding(connection)
        assert read.input_requests is not None
        open_keys = [key for key in read.input_requests if (task_id, key) not in held.asking]
        session = connection.session
        if not open_keys:
            return None
        if notify is None or session is None:
            return refused(request_id, "tasks/result", "the questions", "they cannot be asked here")
        round = InputRound(
            requests={key: read.input_requests[key] for key in open_keys}, request_state=None
        )
        try:
            asked = questions(round, session, self._question_ids, related_task=task_id)
        except RemoteProtocolError as error:
            return refused(request_id, "tasks/result", "the questions", error.message)
        held.asking.update((task_id, key) for key in open_keys)
        try:
            answers = await self._ask(asked, request_id, connection, notify)
        finally:
            held.asking.difference_update((task_id, key) for key in open_keys)
        if answers is None:  # only this request's scope cancels the wait: never here
            answers = "the wait for them was cancelled"
        if isinstance(answers, str):
            return refused(request_id, "tasks/result", _named(asked), answers)
        updated = await answer(self._modern(connection, "tasks/update", task_id, answers))
        if updated is not None and updated.error_code is not None:
            return lt.task_reply(request_id, updated)
        return None

    async def _wait(self, change: Change) -> None:
        if self._shared.store.coordination.shared:
            with anyio.move_on_after(RECHECK_SECONDS):
                await change.happened.wait()
        else:
            await change.happened.wait()


def _record_status(change: Change) -> str | None:
    record = change.record
    return None if record is None else record.status.value


def _asked_already(read: lt.ReadTask, held: _Held) -> bool:
    task_id = read.task_id
    return all((task_id, key) in held.asking for key in read.input_requests or {})


def _retry_after(reply: Reply) -> float | None:
    """Seconds to wait before reading again, for a read refused as too soon; else None."""
    if reply.retry_after_seconds is None:
        error = msgspec.json.decode(reply.body).get("error") or {}
        data = error.get("data")
        wait_ms = data.get("retryAfterMs") if isinstance(data, dict) else None
        if not isinstance(wait_ms, int | float):
            return None
        return min(max(wait_ms / 1000, 0.01), MAX_RETRY_SECONDS)
    return min(float(reply.retry_after_seconds), MAX_RETRY_SECONDS)


def _named(asked: list[Question]) -> str:
    methods = sorted({msgspec.json.decode(question.message)["method"] for question in asked})
    return " and ".join(methods)
