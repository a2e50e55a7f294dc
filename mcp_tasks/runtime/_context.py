"""What a handler sees of the request it runs for: `RequestContext`, and for tools
`ToolContext`, which adds tasks and in-place questions."""

from __future__ import annotations

import threading
import typing
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET

from ..core import ToolCall
from ..core import wire as w
from ._answers import Answer, form_for, read_answer

_Answer = TypeVar("_Answer", w.ElicitResult, w.CreateMessageResult, w.ListRootsResult)
_T = TypeVar("_T")


_MAKING_EVENTS = threading.Lock()
"""Held while a context makes its cancellation event (`ToolContext._cancel_event`)."""


async def _no_log(level: w.LoggingLevel, data: Any, logger: str | None) -> None:
    """Log messages for a request that did not ask for them go nowhere."""


async def _no_stream() -> bool:
    """A call whose answer is no resumable HTTP stream has none to close."""
    return False


class _Call(typing.Protocol):
    @property
    def meta(self) -> w.RequestMeta: ...
    @property
    def input_responses(self) -> dict[str, msgspec.Raw]: ...
    @property
    def handler_state(self) -> str | None: ...


class RequestContext:
    """The request a prompt, resource or tool handler runs for, and the answers of its
    earlier input rounds (the handler returned `InputRequired`; the client answered)."""

    def __init__(
        self,
        call: _Call,
        *,
        notify_progress: Callable[[float, float | None, str | None], Awaitable[None]],
        notify_log: Callable[[w.LoggingLevel, Any, str | None], Awaitable[None]] = _no_log,
    ) -> None:
        self._call = call
        self._notify_progress = notify_progress
        self._notify_log = notify_log

    @property
    def meta(self) -> w.RequestMeta:
        """`params._meta` of the request (for a task: of the request that created it)."""
        return self._call.meta

    @property
    def client_capabilities(self) -> w.ClientCapabilities:
        return self._call.meta.client_capabilities

    @property
    def handler_state(self) -> str | None:
        """What the handler passed as `InputRequired(state=...)` in an earlier round."""
        return self._call.handler_state

    # --- answers to earlier input requests ------------------------------------------------

    def elicit_response(self, key: str) -> w.ElicitResult | None:
        return self._answer(key, w.ElicitResult)

    def sample_response(self, key: str) -> w.CreateMessageResult | None:
        return self._answer(key, w.CreateMessageResult)

    def roots_response(self, key: str) -> w.ListRootsResult | None:
        return self._answer(key, w.ListRootsResult)

    def _answer(self, key: str, kind: type[_Answer]) -> _Answer | None:
        raw = self._call.input_responses.get(key)
        if raw is None:
            return None
        try:
            return msgspec.json.decode(raw, type=kind)
        except msgspec.ValidationError:
            return None  # the answer was to a different kind of request under this key
        except RecursionError:
            return None  # nested too deeply to read: no usable answer

    # --- telling the client --------------------------------------------------------------

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """A `notifications/progress` when the request asked for progress (a
        `progressToken`); inside a task (which has no progress notifications), its
        `statusMessage`."""
        await self._notify_progress(progress, total, message)

    async def log(self, level: w.LoggingLevel, data: Any, logger: str | None = None) -> None:
        """A `notifications/message` to the client, sent only when the request asked for log
        messages (`_meta` `io.modelcontextprotocol/logLevel`) at `level` or a lower level.
        Tasks carry no log notifications: inside a task this does nothing."""
        await self._notify_log(level, data, logger)


class ToolContext(RequestContext):
    """The call a tool handler is running for, and what it may do from inside it.

    `in_task` is True when the handler should do the work: inside a task (then `task_id`
    names it), or in place when the client cannot hold a task (then `task_id` is None).

    `cancelled` is for plain-function (`def`) tools, which run in a worker thread that
    nothing can stop: it turns True when the call is cancelled (the client hung up or sent
    `notifications/cancelled`, `tasks/cancel`, the server stops), and a function that
    checks it between steps (or sleeps with `wait_cancelled`) ends early and frees its
    thread. Async tools are cancelled at their next `await` and need neither.
    """

    def __init__(
        self,
        call: ToolCall,
        *,
        set_status: Callable[[str | None], Awaitable[None]],
        ask: Callable[[w.InputRequest], Awaitable[msgspec.Raw]] | None,
        notify_progress: Callable[[float, float | None, str | None], Awaitable[None]],
        notify_log: Callable[[w.LoggingLevel, Any, str | None], Awaitable[None]] = _no_log,
        close_stream: Callable[[], Awaitable[bool]] = _no_stream,
    ) -> None:
        super().__init__(call, notify_progress=notify_progress, notify_log=notify_log)
        self._tool_call = call
        self._close_stream = close_stream
        self._set_status = set_status
        self._ask = ask
        self._cancelled: threading.Event | None = None
        """Made when first asked for (`_cancel_event`): most calls never are, and an event
        is a lock and a condition, a microsecond of a stdio tool call."""

    # Properties, not `AttributeOf`: a tool reads them on every call (a C-level property
    # and a method a third of the look-up).
    @property
    def in_task(self) -> bool:
        """Do the work now: in a task, or in place."""
        return self._tool_call.in_task

    @property
    def task_id(self) -> str | None:
        """The task's id (None: not in one)."""
        return self._tool_call.task_id

    @property
    def tool_name(self) -> str:
        """The name the tool was called by."""
        return self._tool_call.tool_name

    # --- cancellation, for plain functions in worker threads ------------------------------

    @property
    def cancelled(self) -> bool:
        """True once the call is cancelled; safe to read from any thread."""
        event = self._cancelled
        return event is not None and event.is_set()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block this (worker) thread until the call is cancelled or `timeout` seconds
        have passed; True if it was cancelled. A plain function's cancellable sleep: never
        call it from async code, which it would block."""
        return self._cancel_event().wait(timeout)

    def _note_cancelled(self) -> None:
        """The runtime's: the call was cancelled."""
        self._cancel_event().set()

    def _cancel_event(self) -> threading.Event:
        """The call's cancellation event, made once even when two threads ask at once."""
        with _MAKING_EVENTS:
            if self._cancelled is None:
                self._cancelled = threading.Event()
            return self._cancelled

    # --- acting from inside -----------------------------------------------------------------

    async def close_stream(self) -> bool:
        """End the HTTP response stream this call's messages go on while the call runs on:
        a 2025-11-25 client reconnects with `GET` and `Last-Event-ID` and gets the rest
        (what the call sends next, and its result), to any process on the store. A call
        whose answer was not streaming yet starts its stream (the priming event) and ends
        it. True when it did; elsewhere (stdio, a 2026-07-28 request, a 2025-06-18
        session, a client that accepts no SSE answer, inside a task) it does nothing and
        returns False."""
        return await self._close_stream()

    async def set_status_message(self, message: str | None) -> None:
        """Inside a task: show `message` as its `statusMessage`. Outside one: nothing."""
        await self._set_status(message)

    @typing.overload
    async def elicit(self, message: str, kind: type[_T]) -> Answer[_T]: ...
    @typing.overload
    async def elicit(
        self, message: str, kind: dict[str, Any] | None = None, *, url: str | None = None
    ) -> Answer[dict[str, Any]]: ...
    async def elicit(
        self, message: str, kind: Any = None, *, url: str | None = None
    ) -> Answer[Any]:
        """Inside a task: ask the client and wait here for the answer (form or URL mode).

        `kind` is what to ask for: `bool`, `str`, `int`, `float`, a `Literal` or an `Enum`
        (a form of one field), a msgspec Struct, a dataclass or a TypedDict (a form of its
        fields), a JSON Schema dict, or None (an empty form: a confirmation). The answer is
        `Accepted(value)`, the value as that type (the content dict for a schema or None),
        `Declined()` or `Cancelled()`; each has `.action` and `.content` as the wire's
        `ElicitResult`. An accepted answer that does not fit `kind` raises a -32602 error
        (uncaught, it fails the task saying so). The task shows `input_required` until the
        client answers with `tasks/update`.
        """
        if url is not None:
            return read_answer(await self.elicit_result(message, url=url), None)
        return read_answer(await self.elicit_result(message, form_for(kind, message)), kind)

    async def elicit_result(
        self,
        message: str,
        requested_schema: dict[str, Any] | None = None,
        *,
        url: str | None = None,
    ) -> w.ElicitResult:
        """`elicit`, answered with the client's `ElicitResult` as it came (no typing)."""
        if url is not None:
            params = w.ElicitParams(message=message, mode="url", url=url)
        else:
            schema = requested_schema or {"type": "object", "properties": {}}
            params = w.ElicitParams(message=message, mode="form", requested_schema=schema)
        raw = await self._wait_for(w.ElicitRequest(params=params))
        return msgspec.json.decode(raw, type=w.ElicitResult)

    async def sample(
        self, messages: str | list[w.SamplingMessage], max_tokens: int, **options: Any
    ) -> w.CreateMessageResult:
        """Inside a task: ask the client's model and wait here for the answer. `messages`
        may be one user prompt as a str; `options` are `CreateMessageParams` fields
        (`system_prompt`, `temperature`...). The answer's `content` is the model's message
        (`sampled_text(result)` gives its text)."""
        if isinstance(messages, str):
            messages = [w.SamplingMessage(role="user", content={"type": "text", "text": messages})]
        params = w.CreateMessageParams(messages=messages, max_tokens=max_tokens, **options)
        raw = await self._wait_for(w.CreateMessageRequest(params=params))
        return msgspec.json.decode(raw, type=w.CreateMessageResult)

    async def list_roots(self) -> w.ListRootsResult:
        """Inside a task: ask the client for its roots and wait here for the answer."""
        raw = await self._wait_for(w.ListRootsRequest(params=UNSET))
        return msgspec.json.decode(raw, type=w.ListRootsResult)

    async def roots(self) -> list[w.Root]:
        """`list_roots()`, answered with the roots themselves."""
        return (await self.list_roots()).roots

    async def _wait_for(self, request: w.InputRequest) -> msgspec.Raw:
        if self._ask is None:
            raise RuntimeError(
                "await ctx.elicit()/sample()/list_roots() works only inside a task; outside "
                "one, return InputRequired(...) and read the answer on the next round"
            )
        return await self._ask(request)


def sampled_text(result: w.CreateMessageResult) -> str | None:
    """The text of a sampling answer (`ctx.sample(...)`), or None if it is not text."""
    content = result.content
    if isinstance(content, dict) and content.get("type") == "text":
        text = content.get("text")
        return text if isinstance(text, str) else None
    return None
