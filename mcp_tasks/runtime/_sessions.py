"""Clients of the 2025 revisions on a connection that carries their sessions (stdio):
`LegacySessions.answer` routes each claim-less message through the core's `LegacyFront`.

A message with the 2026-07-28 claim goes to the core untouched (a look for the claim's key
in its bytes is all it costs). Otherwise it is decoded once, here, and handed on decoded:
answered by the session (`initialize`, `ping`, `logging/setLevel`), rewritten as the modern
request it stands for and its reply turned back (`legacy_reply`), or left as it is.

Where the core answers with an input round (a handler's `InputRequired`), a legacy client
is asked as its revision says: each question goes to it as a request of the server's own
(`elicitation/create`, `sampling/createMessage`, `roots/list`), its responses come back on
the connection (`answer` routes them to the request waiting), and the request is handed to
the core again with the answers, as a 2026-07-28 client would send it, until it is
answered. A client that does not answer within `ANSWER_SECONDS`, answers with an error, or
cancels the request ends the wait.

A 2025-11-25 session also gets the tasks utility: its `tasks/*` queries and the tasks its
calls create are carried out by `LegacyTasks` (`_legacy_tasks`), with the same questions
machinery (`ask`) for a task that asks.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final

import anyio
import msgspec
from msgspec import UNSET, Raw

from .._support import backend as _backend
from ..core import ProtocolError, RemoteProtocolError, Reply, ServerCore
from ..core._envelope import decode_message, is_request_id
from ..core._errors import INVALID_REQUEST, METHOD_NOT_FOUND
from ..core._legacy_tasks import TaskQuery, error_reply, listed_with_task_support
from ..core._wire import META_PROTOCOL_VERSION
from ..core.legacy import (
    LegacyAnswer,
    LegacyFront,
    Question,
    Translated,
    answered,
    input_round,
    legacy_reply,
    plain_reply,
    questions,
    refused,
)
from ..core.wire import IncomingMessage
from ..transports._port import Connection, SendNotification
from ._legacy_tasks import LegacyTasks
from ._shared import Shared

__all__ = ["ANSWER_SECONDS", "LegacySessions"]

ANSWER_SECONDS: Final = 600.0
"""How long a round waits for a legacy client's answers (a person may be typing them)."""
MAX_ROUNDS: Final = 16
"""Input rounds one request may take before it is refused."""
MAX_AWAITED: Final = 64
"""Server requests awaiting a connection's answers at once; a round past it is refused."""

_CLAIM: Final = META_PROTOCOL_VERSION.encode()

Answer = Callable[[bytes | IncomingMessage], Awaitable[Reply | None]]


class _Awaited:
    """One server request's answer, once the client sent it."""

    def __init__(self) -> None:
        self.arrived = _backend.event()
        self.message: IncomingMessage | None = None


class LegacySessions:
    def __init__(
        self,
        core: ServerCore,
        shared: Shared | None = None,
        start_soon: Callable[[Callable[[], Coroutine[Any, Any, None]]], None] | None = None,
    ) -> None:
        self._core = core
        self.front = LegacyFront(
            info=lambda: core.info,
            capabilities=core.catalog.capabilities,
            instructions=lambda: core.options.instructions,
            resource_exists=lambda uri: core.catalog.find_resource(uri) is not None,
            task_support=self._task_support,
        )
        prefix = secrets.token_hex(4)  # unique to the process: an answer finds its asker
        self._ids = (f"mcp-tasks-{prefix}-{n}" for n in itertools.count(1))
        self.tasks: LegacyTasks | None = None
        """The 2025-11-25 tasks utility (None: not offered, without a runtime to run it)."""
        if shared is not None and start_soon is not None:
            self.tasks = LegacyTasks(
                self.front, shared, ask=self._ask, question_ids=self._ids, start_soon=start_soon
            )

    def _task_support(self, name: str) -> str | None:
        tool = self._core.catalog.tools.get(name)
        return None if tool is None else tool.task_support

    def abandon(self, connection: Connection) -> None:
        """`connection`'s client is gone: the questions waiting on it end unanswered."""
        for awaited in connection.awaited.values():
            if isinstance(awaited, _Awaited):
                awaited.arrived.set()
        if self.tasks is not None:
            self.tasks.abandon(connection)

    def take_answer(self, message: IncomingMessage, connection: Connection) -> bool:
        """Hand `message` (a response) to the question of ours on `connection` it answers;
        False if none awaits it."""
        if not is_request_id(message.id):
            return False
        awaited = connection.awaited.pop(message.id, None)
        if not isinstance(awaited, _Awaited):
            return False
        awaited.message = message
        awaited.arrived.set()
        return True

    def routes(self, data: bytes | IncomingMessage, connection: Connection) -> bool:
        """`data` goes through `answer`: it came on a connection that carries sessions, to
        a server that serves 2025 clients, and does not carry the 2026-07-28 claim (a look
        for the claim's key in its bytes: all a modern request pays; a batch, which may
        hold such a request, is the session's to refuse)."""
        return (
            connection.carries_sessions
            and not (isinstance(data, bytes) and data.find(_CLAIM) >= 0 and data[:1] != b"[")
            and self._core.options.legacy_sessions
        )

    async def answer(
        self,
        data: bytes | IncomingMessage,
        connection: Connection,
        answer: Answer,
        notify: SendNotification | None,
        *,
        claimless: bool = False,
    ) -> Reply | None:
        """Answer `data`, which came on `connection` (`routes` said so); `answer` is the
        core's way, `notify` writes to the client (how a question is asked). `claimless`:
        the caller knows `data` carries no claim (the bytes it came in lack the key)."""
        session = connection.session
        if session is not None and session.version == BATCH_VERSION and is_batch(data):
            return await batch_reply(data, lambda one: self.answer(one, connection, answer, notify))
        if isinstance(data, bytes):  # without the claim's key (`routes`)
            try:
                message = decode_message(data)
            except ProtocolError:
                return await answer(data)  # the core names what is wrong
        else:
            message = data
        if message.method is UNSET and self.take_answer(message, connection):
            return None
        claimless = claimless or isinstance(data, bytes)
        return await self.serve(message, connection, answer, notify, claimless=claimless)

    async def serve(
        self,
        message: IncomingMessage,
        connection: Connection,
        answer: Answer,
        notify: SendNotification | None,
        *,
        claimless: bool = False,
    ) -> Reply | None:
        """Answer one decoded message that is not an answer to a question of ours (HTTP
        comes in here: its sessions hand such answers over themselves)."""
        route = self.front.route(message, connection.session, claimless=claimless)
        if type(route) is Translated:  # most: answered by the core, in one round
            reply = await answer(route.message)
            if not route.creates_task:
                plain = plain_reply(reply, route.method)  # most: a complete result
                if plain is not None:
                    return plain
            if input_round(reply) is None:
                return self._turned_back(reply, route, connection, answer, notify)
            return await self._translated(route, connection, answer, notify, first=reply)
        if route is None:
            return await answer(message)
        if isinstance(route, LegacyAnswer):
            connection.session = route.session
            return route.reply
        if isinstance(route, TaskQuery):
            if self.tasks is None:  # no runtime to carry them out (a bare LegacySessions)
                why = f"Method not found: {route.method} (no tasks here)"
                return error_reply(route.request_id, METHOD_NOT_FOUND, why)
            return await self.tasks.carry(route, connection, answer, notify)
        raise AssertionError(f"a route the session does not know: {route!r}")

    async def _translated(
        self,
        route: Translated,
        connection: Connection,
        answer: Answer,
        notify: SendNotification | None,
        *,
        first: Reply | None,
    ) -> Reply | None:
        """`route` through its input rounds: `first` is the core's first reply (a round)."""
        message, method = route.message, route.method
        reply = first
        for _ in range(MAX_ROUNDS):
            asked = input_round(reply)
            if asked is None:
                return self._turned_back(reply, route, connection, answer, notify)
            session = connection.session
            if notify is None or session is None:
                return refused(message.id, method, "the questions", "it cannot be asked here")
            try:
                round_questions = questions(asked, session, self._ids)
            except RemoteProtocolError as error:
                return refused(message.id, method, "the questions", error.message)
            answers = await self._ask(round_questions, message.id, connection, notify)
            if answers is None:
                return None  # cancelled: a cancelled request gets no response
            if isinstance(answers, str):
                return refused(message.id, method, _named(round_questions), answers)
            message = answered(message, answers, asked.request_state)
            reply = await answer(message)
        if input_round(reply) is None:
            return self._turned_back(reply, route, connection, answer, notify)
        return refused(message.id, method, "all the questions", f"more than {MAX_ROUNDS} rounds")

    def _turned_back(
        self,
        reply: Reply | None,
        route: Translated,
        connection: Connection,
        answer: Answer,
        notify: SendNotification | None,
    ) -> Reply | None:
        """The core's final `reply` to `route`, in the session's wire."""
        if route.creates_task and self.tasks is not None and reply is not None:
            created = self.tasks.created(reply, connection, answer, notify)
            if created is not None:
                return created
        turned = legacy_reply(reply, route.method)
        session = connection.session
        if route.method == "tools/list" and turned is not None and session and session.has_tasks:
            return listed_with_task_support(turned, self._task_support)
        return turned

    async def _ask(
        self,
        asked: list[Question],
        request_id: Any,
        connection: Connection,
        notify: SendNotification,
    ) -> dict[str, Raw] | str | None:
        """The answers by key; why there are none (a string); None: the request was
        cancelled (`notifications/cancelled`) while it waited."""
        if len(connection.awaited) + len(asked) > MAX_AWAITED:
            return f"{MAX_AWAITED} questions of this server await answers already"
        waiting = {question.key: _Awaited() for question in asked}
        for question in asked:
            connection.awaited[question.request_id] = waiting[question.key]
        scope = _backend.cancel_scope(deadline=anyio.current_time() + ANSWER_SECONDS)
        cancellable = is_request_id(request_id) and request_id not in connection.in_flight
        if cancellable:
            connection.in_flight[request_id] = scope
        try:
            with scope:
                for question in asked:
                    await notify(question.message)
                for awaited in waiting.values():
                    await awaited.arrived.wait()
        finally:
            if cancellable:
                connection.in_flight.pop(request_id, None)
            for question in asked:
                connection.awaited.pop(question.request_id, None)
        if scope.cancelled_caught:
            if anyio.current_time() < scope.deadline:
                return None
            return f"no answer within {ANSWER_SECONDS:g} s"
        found: dict[str, Raw] = {}
        for key, awaited in waiting.items():
            reply = awaited.message
            if reply is None:
                return "the client went away"
            if reply.error is not UNSET or reply.result is UNSET:
                return f"it answered with an error ({_error_text(reply.error)})"
            found[key] = Raw(msgspec.json.encode(reply.result))
        return found


BATCH_VERSION: Final = "2025-03-26"
"""The one revision whose clients may send a batch (a JSON array of messages)."""
MAX_BATCH: Final = 64
"""Messages one batch may hold."""


def is_batch(data: bytes | IncomingMessage) -> bool:
    return isinstance(data, bytes) and data.lstrip()[:1] == b"["


async def batch_reply(
    data: bytes | IncomingMessage, answer: Callable[[bytes], Awaitable[Reply | None]]
) -> Reply | None:
    """A 2025-03-26 batch answered message by message, in order (`answer` each): the
    array of the replies, or None when none has one (notifications and responses)."""
    try:
        messages = msgspec.json.decode(data, type=list[Raw])  # type: ignore[arg-type]
    except (msgspec.DecodeError, msgspec.ValidationError):
        return error_reply(None, INVALID_REQUEST, "Invalid request: the batch is not JSON")
    if not messages or len(messages) > MAX_BATCH:
        why = "empty" if not messages else f"more than {MAX_BATCH} messages"
        return error_reply(None, INVALID_REQUEST, f"Invalid request: the batch is {why}")
    replies = []
    for message in messages:
        one = bytes(message)
        if _CLAIM in one:  # a 2026-07-28 request is never batched
            why = "Invalid request: a 2026-07-28 request (params._meta) cannot be in a batch"
            replies.append(error_reply(None, INVALID_REQUEST, why).body)
            continue
        reply = await answer(one)
        if reply is not None:
            replies.append(reply.body)
    if not replies:
        return None
    return Reply(body=b"[" + b",".join(replies) + b"]")


def _named(asked: list[Question]) -> str:
    methods = sorted({msgspec.json.decode(question.message)["method"] for question in asked})
    return " and ".join(methods)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('code')}: {str(error.get('message'))[:200]}"
    return "no result"
