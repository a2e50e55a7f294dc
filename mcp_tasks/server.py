"""The trio server: tools as async functions, tasks run in a nursery the server owns.

Theory of operation
-------------------
`Server` wraps a `ServerCore` (the protocol) and a `TaskStore` (the records). Transports
hand each incoming message to `Server.handle`, inside `async with server.running():`.
`handle` asks the core what the message means and performs the effects it returns, in
order, in one place (`_perform`):

* a `tools/call` runs its handler right there, in the transport's request task, so the
  transport can cancel it (stdio `notifications/cancelled`, a closed HTTP stream);
* a task's handler runs in the server's nursery, in a cancel scope of its own:
  `tasks/cancel` cancels that scope, so any `await` in the handler is where it stops (code
  that never awaits cannot be cancelled until it does);
* `await ctx.elicit(...)` inside a task records the question through the core (the task
  shows `input_required`) and waits on an event that `tasks/update` sets once answered;
  a handler that *returns* `InputRequired` instead is run again with the answers;
* expiry runs in one loop that sleeps until the store's next deadline.

Reading a record and writing its successor never has an `await` in between, so within one
process no two writers can interleave on a record.
"""

from __future__ import annotations

import inspect
import logging
import math
import secrets
import time
import typing
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import msgspec
import trio
from msgspec import UNSET, Raw

from ._context import LOG_LEVELS, ToolContext, _no_log
from .core import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    CancelRequest,
    CancelTask,
    DeleteTask,
    ErrorObject,
    FetchTask,
    HttpHeaders,
    Implementation,
    InputRequest,
    InputRequired,
    LoggingLevel,
    ProtocolError,
    Reply,
    RequestId,
    ResumeTask,
    RunTool,
    SaveTask,
    ServerCore,
    ServerOptions,
    StartTask,
    StartTaskOutcome,
    Step,
    TaskOptions,
    TaskStatus,
    TaskSupport,
    ToolCall,
    ToolOutcome,
    ToolSpec,
    WakeAt,
)
from .store import MemoryTaskStore, TaskStore

logger = logging.getLogger("mcp_tasks.server")

Notify = Callable[[bytes], Awaitable[None]]
ToolHandler = Callable[..., Awaitable[Any]]


class ToolError(Exception):
    """Raise in a tool to answer with a tool-level error (`isError: true`); a task that
    raises it still ends `completed`. For a JSON-RPC error raise `ProtocolError`."""


class Connection:
    """One client connection's requests in flight, so `notifications/cancelled` can stop
    the one it names. Request ids are only unique per connection."""

    def __init__(self) -> None:
        self.in_flight: dict[RequestId, trio.CancelScope] = {}

    def cancel(self, request_id: RequestId) -> None:
        scope = self.in_flight.get(request_id)
        if scope is not None:
            scope.cancel()


@dataclass
class _Tool:
    spec: ToolSpec
    handler: ToolHandler
    args_type: Any
    """None: the handler takes only the context."""
    decoder: msgspec.json.Decoder[Any] | None

    def decode_arguments(self, arguments: Raw | None) -> Any:
        if self.decoder is None:
            return None
        try:
            return self.decoder.decode(b"{}" if arguments is None else arguments)
        except msgspec.ValidationError as error:
            message = str(error).replace("`$", "`arguments")
            raise ProtocolError(
                INVALID_PARAMS, f"Invalid arguments for tool {self.spec.name!r}: {message}"
            ) from None


@dataclass
class _RunningTask:
    scope: trio.CancelScope
    waiting: dict[str, trio.Event] = field(default_factory=dict)
    answers: dict[str, Raw] = field(default_factory=dict)


def _input_schema(args_type: Any) -> dict[str, Any]:
    if args_type is None or args_type in (dict, Any) or typing.get_origin(args_type) is dict:
        return {"type": "object"}
    if not (isinstance(args_type, type) and issubclass(args_type, msgspec.Struct)):
        raise TypeError(f"tool arguments must be a msgspec.Struct (or dict), not {args_type!r}")
    (_,), components = msgspec.json.schema_components([args_type], ref_template="#/$defs/{name}")
    schema = dict(components.pop(args_type.__name__))
    if components:
        schema["$defs"] = components
    return schema


def _as_outcome(tool_name: str, value: Any) -> ToolOutcome:
    if isinstance(value, CallToolResult | ErrorObject | InputRequired | StartTaskOutcome):
        return value
    if isinstance(value, str):
        return CallToolResult.text(value)
    raise TypeError(f"tool {tool_name!r} returned {type(value).__name__}, not a tool outcome")


class Server:
    """An MCP server with the Tasks extension.

    ```python
    server = Server("jobs", "0.1.0", tasks=TaskOptions(ttl_ms=600_000))

    @server.tool(task_support="optional")
    async def slow_compute(ctx: ToolContext, args: SlowArgs) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        ...
    ```
    """

    def __init__(
        self,
        name: str,
        version: str,
        *,
        tasks: TaskOptions | None = None,
        options: ServerOptions | None = None,
        store: TaskStore | None = None,
        state_key: bytes | None = None,
        shutdown_grace_seconds: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.info = Implementation(name=name, version=version)
        self.store: TaskStore = MemoryTaskStore() if store is None else store
        self.core = ServerCore(
            info=self.info,
            new_task_id=lambda: "tsk_" + secrets.token_urlsafe(24),
            state_key=secrets.token_bytes(32) if state_key is None else state_key,
            tasks=tasks,
            options=options,
        )
        self.shutdown_grace_seconds = shutdown_grace_seconds
        self._clock = clock
        self._tools: dict[str, _Tool] = {}
        self._running: dict[str, _RunningTask] = {}
        self._nursery: trio.Nursery | None = None
        self._closing = False
        self._wake = trio.Event()
        self._all_tasks_ended: trio.Event | None = None

    # --- tools -------------------------------------------------------------------------

    def tool(
        self,
        name: str | None = None,
        *,
        task_support: TaskSupport = "none",
        description: str | None = None,
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
    ) -> Callable[[ToolHandler], ToolHandler]:
        """Register an async tool handler `(ctx, args)` or `(ctx)`.

        `args` is typed with a msgspec Struct: its JSON Schema is the tool's `inputSchema`,
        and arguments that do not fit are refused with -32602 naming the field.
        """

        def register(handler: ToolHandler) -> ToolHandler:
            if not inspect.iscoroutinefunction(handler):
                raise TypeError(f"tool {handler.__name__!r} must be an async function")
            parameters = list(inspect.signature(handler).parameters)
            if not 1 <= len(parameters) <= 2:
                raise TypeError(f"tool {handler.__name__!r} must take (ctx) or (ctx, args)")
            args_type = None
            if len(parameters) == 2:
                hints = typing.get_type_hints(handler)
                args_type = hints.get(parameters[1], dict)
            doc = inspect.getdoc(handler)
            spec = ToolSpec(
                name=name or handler.__name__,
                input_schema=_input_schema(args_type),
                task_support=task_support,
                title=UNSET if title is None else title,
                description=description or (doc.split("\n\n")[0] if doc else UNSET),
                annotations=UNSET if annotations is None else annotations,
            )
            decoder = None if args_type is None else msgspec.json.Decoder(args_type)
            self.core.add_tool(spec)
            self._tools[spec.name] = _Tool(spec, handler, args_type, decoder)
            return handler

        return register

    # --- running -------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Server]:
        """Run the server's task nursery and expiry loop; transports serve inside this.

        On exit new tool calls are refused, running tasks get `shutdown_grace_seconds` to
        finish, and are then cancelled.
        """
        if self._nursery is not None:
            raise RuntimeError("this server is already running")
        self._closing = False
        self._all_tasks_ended = None
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            expiry = trio.CancelScope()
            nursery.start_soon(self._expire_loop, expiry)
            try:
                yield self
            finally:
                self._closing = True
                expiry.cancel()
                if self._running:
                    self._all_tasks_ended = trio.Event()
                    # Shielded: leaving by cancellation (Ctrl-C) still grants the grace period.
                    with trio.move_on_after(self.shutdown_grace_seconds) as grace:
                        grace.shield = True
                        await self._all_tasks_ended.wait()
                for running in self._running.values():
                    running.scope.cancel()
                nursery.cancel_scope.cancel()
                self._nursery = None

    @property
    def is_running(self) -> bool:
        """True inside `async with server.running():`, where `handle` may be called."""
        return self._nursery is not None

    def now(self) -> float:
        return self._clock()

    async def handle(
        self,
        data: bytes,
        *,
        headers: HttpHeaders | None = None,
        notify: Notify | None = None,
        connection: Connection | None = None,
    ) -> Reply | None:
        """Answer one incoming message: the reply to send, or None (a notification, or a
        request cancelled while it ran). `notify` sends a notification to this request's
        client while the request runs (progress).

        A `tools/call` is entered in `connection.in_flight` before this coroutine first
        yields, so a `notifications/cancelled` read right after it always finds it.
        """
        if self._nursery is None:
            raise RuntimeError("use `async with server.running():` around the transport")
        step = self.core.receive(data, self.now(), headers)
        return await self._perform(step, notify, connection)

    async def _perform(
        self, step: Step, notify: Notify | None = None, connection: Connection | None = None
    ) -> Reply | None:
        reply = step.reply
        for effect in step.effects:
            if isinstance(effect, RunTool):
                reply = await self._run_call(effect.call, notify, connection)
            elif isinstance(effect, FetchTask):
                record = self.store.get(effect.request.task_id)
                step = self.core.handle_task_request(effect.request, record, self.now())
                reply = await self._perform(step)
            elif isinstance(effect, SaveTask):
                self.store.save(effect.record, effect.expected_version)
            elif isinstance(effect, DeleteTask):
                self.store.delete(effect.task_id, effect.expected_version)
            elif isinstance(effect, StartTask):
                self._start(effect.call)
            elif isinstance(effect, ResumeTask):
                self._resume(effect)
            elif isinstance(effect, CancelTask):
                running = self._running.get(effect.task_id)
                if running is not None:
                    running.scope.cancel()
            elif isinstance(effect, CancelRequest):
                if connection is not None:
                    connection.cancel(effect.request_id)
            elif isinstance(effect, WakeAt):
                self._wake.set()
        return reply

    # --- a tools/call, before (or without) a task -----------------------------------------

    async def _run_call(
        self, call: ToolCall, notify: Notify | None, connection: Connection | None
    ) -> Reply | None:
        if self._closing:
            outcome: ToolOutcome = ErrorObject(
                code=INTERNAL_ERROR, message="The server is shutting down; try again later"
            )
            return await self._perform(self.core.tool_returned(call, outcome, self.now()))
        tool = self._tools[call.tool_name]
        context = ToolContext(
            call,
            set_status=_no_status,
            ask=None,
            notify_progress=_progress_sender(call, notify),
            notify_log=_log_sender(call, notify),
        )
        request_id = call.request_id
        if connection is None or request_id is None:  # nothing can cancel it but its caller
            outcome = await self._invoke(tool, context, call)
        else:
            with trio.CancelScope() as scope:
                connection.in_flight[request_id] = scope
                try:
                    outcome = await self._invoke(tool, context, call)
                finally:
                    connection.in_flight.pop(request_id, None)
            if scope.cancelled_caught:
                return None  # the client cancelled the request: it wants no reply
        step = self.core.tool_returned(call, outcome, self.now(), stored_tasks=self.store.count())
        return await self._perform(step, notify, connection)

    async def _invoke(self, tool: _Tool, context: ToolContext, call: ToolCall) -> ToolOutcome:
        """Run the handler; every way it can end becomes an outcome (cancellation aside)."""
        try:
            if tool.args_type is None:
                value = await tool.handler(context)
            else:
                value = await tool.handler(context, tool.decode_arguments(call.arguments))
            return _as_outcome(tool.spec.name, value)
        except ToolError as error:
            return CallToolResult.text(str(error), is_error=True)
        except ProtocolError as error:
            data = UNSET if error.data is None else error.data
            return ErrorObject(code=error.code, message=error.message, data=data)
        except Exception:  # the handler's failure, not ours: it must not end the server
            logger.exception("tool %r raised", tool.spec.name)
            return ErrorObject(
                code=INTERNAL_ERROR,
                message=f"Tool {tool.spec.name!r} failed with an internal error",
            )

    # --- inside a task -------------------------------------------------------------------

    def _start(self, call: ToolCall) -> None:
        assert self._nursery is not None and call.task_id is not None
        # Shielded: a task ends by its own scope only (tasks/cancel, expiry, the end of the
        # shutdown grace), never because whoever runs the server was cancelled.
        running = _RunningTask(scope=trio.CancelScope(shield=True))
        self._running[call.task_id] = running
        self._nursery.start_soon(self._run_task, call, running)

    def _resume(self, effect: ResumeTask) -> None:
        running = self._running.get(effect.task_id)
        if running is not None and running.waiting:  # a handler awaits its answers in place
            for key, event in list(running.waiting.items()):
                answer = effect.call.input_responses.get(key)
                if answer is not None:
                    running.answers[key] = answer
                    del running.waiting[key]
                    event.set()
            return
        self._start(effect.call)  # a handler that returned InputRequired runs again

    async def _run_task(self, call: ToolCall, running: _RunningTask) -> None:
        task_id = call.task_id
        assert task_id is not None
        tool = self._tools[call.tool_name]
        context = ToolContext(
            call,
            set_status=lambda message: self._set_status(task_id, message),
            ask=lambda request: self._ask(task_id, running, request),
            notify_progress=lambda p, total, message: self._set_status(
                task_id, _progress_text(p, total, message)
            ),
        )
        try:
            with running.scope:
                outcome = await self._invoke(tool, context, call)
        finally:
            if self._running.get(task_id) is running:
                del self._running[task_id]
            if not self._running and self._all_tasks_ended is not None:
                self._all_tasks_ended.set()
        if running.scope.cancelled_caught:
            return  # cancelled, expired or shut down: the record says so already, or is gone
        record = self.store.get(task_id)
        if record is not None:
            await self._perform(self.core.task_returned(record, outcome, self.now()))

    async def _set_status(self, task_id: str, message: str | None) -> None:
        record = self.store.get(task_id)
        if record is not None:
            await self._perform(self.core.set_status_message(record, message, self.now()))

    async def _ask(self, task_id: str, running: _RunningTask, request: InputRequest) -> Raw:
        record = self.store.get(task_id)
        if record is None:
            await _stop_run(running)  # the task is gone (expired): nothing will answer
        assert record is not None
        number = len(record.issued_keys) + 1
        while f"input-{number}" in record.issued_keys:
            number += 1
        key = f"input-{number}"
        event = running.waiting[key] = trio.Event()
        await self._perform(
            self.core.task_returned(record, InputRequired(requests={key: request}), self.now())
        )
        after = self.store.get(task_id)
        if after is None or after.status is not TaskStatus.INPUT_REQUIRED:
            # The core refused the question (the client cannot answer it) and failed the
            # task: nothing will answer, so this run ends here.
            running.waiting.pop(key, None)
            await _stop_run(running)
        await event.wait()
        return running.answers.pop(key)

    # --- expiry ------------------------------------------------------------------------------

    async def _expire_loop(self, scope: trio.CancelScope) -> None:
        with scope:
            while True:
                deadline = self.store.next_deadline()
                delay = math.inf if deadline is None else deadline - self.now()
                if delay > 0:
                    with trio.move_on_after(delay):
                        await self._wake.wait()
                    self._wake = trio.Event()
                    continue
                for record in self.store.pop_due(self.now()):
                    await self._perform(self.core.expire_task(record, self.now()))


def _notification(method: str, params: dict[str, Any]) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", "method": method, "params": params})


def _log_sender(
    call: ToolCall, notify: Notify | None
) -> Callable[[LoggingLevel, Any, str | None], Awaitable[None]]:
    wanted = call.meta.log_level
    if notify is None or wanted is UNSET:
        return _no_log  # the request asked for no log messages
    threshold = LOG_LEVELS.index(wanted)

    async def send(level: LoggingLevel, data: Any, logger: str | None) -> None:
        if LOG_LEVELS.index(level) < threshold:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await notify(_notification("notifications/message", params))

    return send


async def _stop_run(running: _RunningTask) -> None:
    """End a task's run from inside it: its own cancel scope catches the cancellation."""
    running.scope.cancel()
    await trio.lowlevel.checkpoint()
    raise AssertionError("unreachable: the checkpoint raised Cancelled")


async def _no_progress(progress: float, total: float | None, message: str | None) -> None:
    """Progress for a request that did not ask for it goes nowhere."""


async def _no_status(message: str | None) -> None:
    """Outside a task there is no status to show."""


def _progress_text(progress: float, total: float | None, message: str | None) -> str:
    amount = f"{progress:g}" if total is None else f"{progress:g}/{total:g}"
    return amount if message is None else f"{message} ({amount})"


def _progress_sender(
    call: ToolCall, notify: Notify | None
) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    token = call.meta.progress_token
    if notify is None or token is UNSET:
        return _no_progress  # the request did not ask for progress, or cannot receive it

    async def send(progress: float, total: float | None, message: str | None) -> None:
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await notify(_notification("notifications/progress", params))

    return send
