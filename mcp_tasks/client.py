"""The trio client: call tools and see their tasks through.

Theory of operation
-------------------
`Client` sends requests through a `ClientTransport` (HTTP, stdio, or in-process) and reads
them with the pure `ClientCore`. Every request declares, in its own `_meta`, the tasks
extension and the input kinds the client has handlers for.

`call_tool` returns the tool's final result whatever the server does: it answers input
rounds before a task (echoing `requestState` exactly, sending each round only its own
answers), and when it gets a task it waits for it (`await_task`): polling at the server's
`pollIntervalMs` (clamped), answering each input request once, giving up at
`createdAt + ttlMs`, and cancelling the task if the waiting itself is cancelled.
"""

from __future__ import annotations

import inspect
import itertools
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import msgspec
import trio
from msgspec import UNSET

from .core import (
    INVALID_PARAMS,
    TASKS_EXTENSION,
    CallToolResult,
    CancelledTask,
    ClientCapabilities,
    CompletedTask,
    CreateMessageParams,
    CreateMessageRequest,
    CreateMessageResult,
    DetailedTask,
    ElicitParams,
    ElicitRequest,
    ElicitResult,
    FailedTask,
    Implementation,
    InputRequest,
    InputRequiredTask,
    ListRootsResult,
    LocalProtocolError,
    RemoteProtocolError,
    Tool,
)
from .core._client import (
    ClientCore,
    InputTracker,
    PollPolicy,
    RetryPolicy,
    RpcError,
    TaskCancelled,
    TaskExpired,
    TaskFailed,
    give_up_at,
    task_status,
)
from .journal import TaskJournal
from .transports import (
    ClientTransport,
    HttpClientTransport,
    TransportError,
    open_stdio_transport,
)

ElicitHandler = Callable[[ElicitParams], Awaitable[ElicitResult]]
SamplingHandler = Callable[[CreateMessageParams], Awaitable[CreateMessageResult]]
RootsHandler = Callable[[], Awaitable[ListRootsResult]]
RetryHandler = Callable[[str, float, RpcError], Awaitable[None] | None]
"""Told `(method, seconds, error)` before each wait for a retry."""
StatusCallback = Callable[[DetailedTask], Awaitable[None] | None]

_input_requests = msgspec.json.Decoder(dict[str, InputRequest])
_call_result = msgspec.json.Decoder(CallToolResult)


class MissingInputHandler(LocalProtocolError):
    """The server asked for a kind of input this client has no handler for."""


class Client:
    def __init__(
        self,
        transport: ClientTransport,
        *,
        info: Implementation | None = None,
        on_elicit: ElicitHandler | None = None,
        on_sample: SamplingHandler | None = None,
        on_roots: RootsHandler | None = None,
        poll: PollPolicy | None = None,
        retry: RetryPolicy | None = None,
        on_retry: RetryHandler | None = None,
        cancel_on_exit: bool = True,
        max_input_rounds: int = 16,
        journal: TaskJournal | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.transport = transport
        self.journal = journal
        self.on_elicit = on_elicit
        self.on_sample = on_sample
        self.on_roots = on_roots
        self.poll = poll or PollPolicy()
        self.retry = retry or RetryPolicy()
        """Requests the server refuses as busy are sent again (`RetryPolicy`)."""
        self.on_retry = on_retry
        """Told of each wait before a retry: `(method, seconds, error)`, e.g. to show it."""
        self._random = random.Random()
        self.cancel_on_exit = cancel_on_exit
        self.max_input_rounds = max_input_rounds
        self._clock = clock
        self._ids = itertools.count(1)
        capabilities = ClientCapabilities(
            elicitation={"form": {}, "url": {}} if on_elicit else UNSET,
            sampling={} if on_sample else UNSET,
            roots={} if on_roots else UNSET,
            extensions={TASKS_EXTENSION: {}},
        )
        self.core = ClientCore(
            info=info or Implementation(name="mcp-tasks-client", version="0.1.0"),
            capabilities=capabilities,
        )

    async def aclose(self) -> None:
        await self.transport.aclose()

    # --- plain requests ----------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request; its result, or `RpcError` for a JSON-RPC error. A request the
        server refuses as busy (`data.retryAfterMs`: HTTP 503 or 429) is sent again after
        the wait it asks for, as `self.retry` allows."""
        retries = 0
        while True:
            request_id = next(self._ids)
            body, headers = self.core.request(request_id, method, params)
            response = await self.transport.request(body, request_id=request_id, headers=headers)
            try:
                return self.core.result_of(response, request_id)
            except RpcError as error:
                wait = self.retry.delay(error, retries, self._random.random())
                if wait is None:
                    raise
                retries += 1
                if self.on_retry is not None:
                    await _maybe_await(self.on_retry(method, wait, error))
                await trio.sleep(wait)

    async def discover(self) -> dict[str, Any]:
        return await self.request("server/discover")

    async def list_tools(self) -> list[Tool]:
        result = await self.request("tools/list")
        return msgspec.convert(result.get("tools", []), list[Tool])

    # --- tools ---------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        on_status: StatusCallback | None = None,
    ) -> CallToolResult:
        """The tool's final result: input rounds answered, a task waited for."""
        outcome = await self.call_tool_or_task(name, arguments)
        if isinstance(outcome, CallToolResult):
            return outcome
        return await self.await_task(outcome, on_status=on_status)

    async def call_tool_or_task(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> CallToolResult | DetailedTask:
        """The result, or the task the server made of the call (input rounds answered)."""
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        for _ in range(self.max_input_rounds):
            result = await self.request("tools/call", params)
            kind = self.core.kind_of(result)
            if kind == "complete":
                return _call_result.decode(msgspec.json.encode(result))
            if kind == "task":
                task = self.core.task_of(result)
                self._journal("started", task.task_id, name)
                return task
            requests = _input_requests.decode(msgspec.json.encode(result.get("inputRequests", {})))
            params = {"name": name, "arguments": arguments or {}}
            params["inputResponses"] = await self._answer(requests)
            if "requestState" in result:
                params["requestState"] = result["requestState"]
        raise LocalProtocolError(
            f"tool {name!r} still asked for input after {self.max_input_rounds} rounds"
        )

    # --- tasks ---------------------------------------------------------------------------

    async def get_task(self, task_id: str) -> DetailedTask:
        return self.core.task_of(await self.request("tasks/get", {"taskId": task_id}))

    async def update_task(self, task_id: str, responses: Mapping[str, Any]) -> None:
        answers = {key: msgspec.to_builtins(value) for key, value in responses.items()}
        await self.request("tasks/update", {"taskId": task_id, "inputResponses": answers})

    async def cancel_task(self, task_id: str) -> None:
        await self.request("tasks/cancel", {"taskId": task_id})

    async def await_task(
        self,
        task: str | DetailedTask,
        *,
        on_status: StatusCallback | None = None,
        answered: frozenset[str] = frozenset(),
    ) -> CallToolResult:
        """Wait for the task to finish and return its result.

        Raises `TaskFailed` (the task's JSON-RPC error), `TaskCancelled` or `TaskExpired`.
        If this wait is cancelled, the task is cancelled too (unless `cancel_on_exit` is
        False). `answered` lists input keys answered before (say, before a restart).
        """
        current = await self.get_task(task) if isinstance(task, str) else task
        task_id = current.task_id
        tracker = InputTracker(answered)
        last_status: tuple[type, Any] | None = None
        try:
            while True:
                shown = (type(current), current.status_message)
                if on_status is not None and shown != last_status:
                    await _maybe_await(on_status(current))
                last_status = shown
                if task_status(current).is_terminal:
                    self._journal("ended", task_id, type(current).__name__)
                if isinstance(current, CompletedTask):
                    return _call_result.decode(current.result)
                if isinstance(current, FailedTask):
                    error = current.error
                    data = None if error.data is UNSET else error.data
                    raise TaskFailed(task_id, error.code, error.message, data)
                if isinstance(current, CancelledTask):
                    raise TaskCancelled(task_id)
                if isinstance(current, InputRequiredTask):
                    questions = tracker.unanswered(current.input_requests)
                    if questions:
                        answers = await self._answer(questions)
                        await self.update_task(task_id, answers)
                        tracker.mark_answered(answers)
                        self._journal("answered", task_id, list(answers))
                        current = await self._poll(task_id, current, wait=0)
                        continue
                current = await self._poll(task_id, current, wait=self.poll.delay(current))
        except trio.Cancelled:
            if self.cancel_on_exit:
                with trio.move_on_after(5) as scope:
                    scope.shield = True
                    await self.cancel_task(task_id)
            raise

    async def resume_task(
        self, task_id: str, *, on_status: StatusCallback | None = None
    ) -> CallToolResult:
        """Go on waiting for a task after a restart, without answering a journaled key."""
        answered = self.journal.answered_keys(task_id) if self.journal else frozenset()
        return await self.await_task(task_id, on_status=on_status, answered=answered)

    def _journal(self, event: str, task_id: str, detail: Any) -> None:
        journal = self.journal
        if journal is None:
            return
        writers: dict[str, Callable[[str, Any], None]] = {
            "started": journal.started,
            "answered": journal.answered,
            "ended": journal.ended,
        }
        # A small append and fsync, done in place: a worker thread would cost more than it
        # saves, and would let trio's clock run on while it writes.
        writers[event](task_id, detail)

    async def _poll(self, task_id: str, current: DetailedTask, *, wait: float) -> DetailedTask:
        deadline = give_up_at(current)
        if deadline is not None:
            left = deadline - self._clock()
            if left <= 0:
                raise TaskExpired(task_id)
            wait = min(wait, left)
        await trio.sleep(wait)
        try:
            return await self.get_task(task_id)
        except RpcError as error:
            if error.code == INVALID_PARAMS and deadline is not None and self._clock() >= deadline:
                raise TaskExpired(task_id) from error
            raise

    # --- answering input ---------------------------------------------------------------

    async def _answer(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        for key, request in requests.items():
            answers[key] = msgspec.to_builtins(await self._answer_one(key, request))
        return answers

    async def _answer_one(
        self, key: str, request: InputRequest
    ) -> ElicitResult | CreateMessageResult | ListRootsResult:
        if isinstance(request, ElicitRequest):
            if self.on_elicit is None:
                raise _missing("elicitation", "on_elicit", key)
            return await self.on_elicit(request.params)
        if isinstance(request, CreateMessageRequest):
            if self.on_sample is None:
                raise _missing("sampling", "on_sample", key)
            return await self.on_sample(request.params)
        if self.on_roots is None:
            raise _missing("roots", "on_roots", key)
        return await self.on_roots()


@asynccontextmanager
async def connect_http(
    url: str, *, headers: Mapping[str, str] | None = None, **options: Any
) -> AsyncIterator[Client]:
    """A `Client` for the Streamable HTTP endpoint at `url` (e.g. http://127.0.0.1:8000/mcp);
    `headers` go with every request (credentials: `{"Authorization": "Bearer …"}`), `options`
    go to `Client`."""
    async with HttpClientTransport(url, headers=headers) as transport:
        yield Client(transport, **options)


@asynccontextmanager
async def connect_stdio(
    command: Sequence[str], *, stderr: Literal["inherit", "capture"] = "inherit", **options: Any
) -> AsyncIterator[Client]:
    """A `Client` for a server command it spawns and talks to over stdio."""
    async with open_stdio_transport(list(command), stderr=stderr) as transport:
        yield Client(transport, **options)


def _missing(kind: str, handler: str, key: str) -> MissingInputHandler:
    return MissingInputHandler(
        f"the server asked for {kind} (input key {key!r}) but this client has no "
        f"{handler} handler: pass Client({handler}=...)"
    )


async def _maybe_await(value: Awaitable[None] | None) -> None:
    if inspect.isawaitable(value):
        await value


__all__ = [
    "Client",
    "ClientTransport",
    "ElicitHandler",
    "MissingInputHandler",
    "PollPolicy",
    "RemoteProtocolError",
    "RetryHandler",
    "RetryPolicy",
    "RootsHandler",
    "RpcError",
    "SamplingHandler",
    "StatusCallback",
    "TaskCancelled",
    "TaskExpired",
    "TaskFailed",
    "TransportError",
    "connect_http",
    "connect_stdio",
]
