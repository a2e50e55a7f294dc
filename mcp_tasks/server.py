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
* expiry runs in one loop that sleeps until the store's next deadline;
* a task's handler holds a lease on the task in the store while it runs; a lease that
  lapses (its process died) is found by `_reap_lapsed`, and the core fails the task or,
  for a resumable tool, runs it again (`task_orphaned`). With a store that several
  processes share, each renews its leases, and `cancel`/`resume` for a handler running
  elsewhere travel as `Signal`s, as do record changes for `notifications/tasks`;
* prompts, resources and completions run their handler in the request task, like a
  `tools/call` without a task; their `InputRequired` rounds are sealed by the core;
* a `subscriptions/listen` request stays in its request task for the life of the stream:
  it sends the acknowledgement, then whatever `_publish` queued for it, until the client
  closes the stream or the server ends it (`end_subscriptions`, or leaving `running()`).

Store calls are awaited (durable stores work in a thread), so two writers may interleave
on a record, in one process or several: every write is a compare-and-set on the record's
version, and the loser of a race reads the record again and asks the core anew
(`_transition`).
"""

from __future__ import annotations

import base64
import collections
import functools
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

from ._context import LOG_LEVELS, RequestContext, ToolContext, _no_log
from .core import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    CancelRequest,
    CancelTask,
    Complete,
    Completion,
    CompletionCall,
    CompletionOutcome,
    DeleteTask,
    ErrorObject,
    FetchTask,
    GetPrompt,
    GetPromptResult,
    HttpHeaders,
    Implementation,
    InputRequest,
    InputRequired,
    Listen,
    LoggingLevel,
    PromptArgument,
    PromptCall,
    PromptMessage,
    PromptOutcome,
    PromptReference,
    PromptSpec,
    ProtocolError,
    ReadResource,
    Reply,
    RequestId,
    RequestMeta,
    ResourceContents,
    ResourceOutcome,
    ResourceRead,
    ResourceSpec,
    ResourceTemplateSpec,
    ResumeTask,
    RunTool,
    SaveTask,
    ServerCore,
    ServerOptions,
    StartTask,
    StartTaskOutcome,
    Step,
    Subscription,
    TaskOptions,
    TaskRecord,
    TaskRequest,
    TaskStatus,
    TaskSupport,
    ToolCall,
    ToolOutcome,
    ToolSpec,
    VersionConflict,
    WakeAt,
    resource_not_found,
)
from .store import MemoryTaskStore, Signal, StoreFull, StoreUnavailable, TaskStore

logger = logging.getLogger("mcp_tasks.server")

Notify = Callable[[bytes], Awaitable[None]]
ToolHandler = Callable[..., Awaitable[Any]]
Handler = Callable[..., Awaitable[Any]]
MAX_QUEUED_NOTIFICATIONS = 1024
"""Notifications a `subscriptions/listen` stream may have waiting for its client; a client
that falls further behind gets its stream ended (it may listen again and re-read)."""
STORE_RETRY_SECONDS = 60.0
"""How long a finished handler's outcome waits for an unavailable store before it is lost."""
MAX_CONFLICT_RETRIES = 50
"""How often one transition is decided anew after losing a compare-and-set race."""


class ToolError(Exception):
    """Raise in a tool to answer with a tool-level error (`isError: true`); a task that
    raises it still ends `completed`. For a JSON-RPC error raise `ProtocolError`."""


class ResourceNotFound(Exception):
    """Raise in a resource handler when the uri names nothing: -32602 with `data.uri`."""


class Connection:
    """One client connection's requests in flight, so `notifications/cancelled` can stop
    the one it names. Request ids are only unique per connection."""

    def __init__(self) -> None:
        self.in_flight: dict[RequestId, trio.CancelScope] = {}
        self.closing = False
        """Set by a transport whose client is gone (stdio EOF): listen streams end."""

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
    record: TaskRecord | None = None
    """The record as this process last saved it: the first guess of what is stored (a
    compare-and-set tells when another process changed it since)."""
    waiting: dict[str, trio.Event] = field(default_factory=dict)
    answers: dict[str, Raw] = field(default_factory=dict)


@dataclass
class _Prompt:
    spec: PromptSpec
    handler: Handler
    decoder: msgspec.json.Decoder[Any] | None
    """None: the handler takes only the context."""


@dataclass
class _Resource:
    handler: Handler
    mime_type: str | None


@dataclass(eq=False)  # hashed by identity: the server keeps a set of them
class _Listener:
    subscription: Subscription
    connection: Connection | None
    wake: trio.Event = field(default_factory=trio.Event)
    queued: collections.deque[bytes] = field(default_factory=collections.deque)
    ended: bool = False

    def push(self, message: bytes | None) -> None:
        if message is None or self.ended:
            return
        if len(self.queued) >= MAX_QUEUED_NOTIFICATIONS:
            logger.warning(
                "subscription %r: its client fell %d notifications behind; ending it",
                self.subscription.request_id,
                len(self.queued),
            )
            self.end()
            return
        self.queued.append(message)
        self.wake.set()

    def end(self) -> None:
        self.ended = True
        self.wake.set()


def _prompt_arguments(args_type: Any) -> tuple[PromptArgument, ...]:
    """A prompt's arguments from its msgspec Struct: every field a string."""
    if not (isinstance(args_type, type) and issubclass(args_type, msgspec.Struct)):
        raise TypeError(f"prompt arguments must be a msgspec.Struct, not {args_type!r}")
    arguments = []
    for info in msgspec.structs.fields(args_type):
        if info.type not in (str, str | None):
            raise TypeError(
                f"prompt argument {info.name!r} must be a str (prompt arguments are strings)"
            )
        arguments.append(PromptArgument(name=info.encode_name, required=info.required))
    return tuple(arguments)


def _prompt_outcome(name: str, value: Any) -> PromptOutcome:
    if isinstance(value, GetPromptResult | ErrorObject | InputRequired):
        return value
    if isinstance(value, str):
        return GetPromptResult(messages=[PromptMessage.user(value)])
    if isinstance(value, list) and all(isinstance(item, PromptMessage) for item in value):
        return GetPromptResult(messages=value)
    raise TypeError(f"prompt {name!r} returned {type(value).__name__}, not prompt messages")


def _resource_outcome(read: ResourceRead, mime_type: str | None, value: Any) -> ResourceOutcome:
    if isinstance(value, ErrorObject | InputRequired):
        return value
    mime = UNSET if mime_type is None else mime_type
    if isinstance(value, str):
        return [ResourceContents(uri=read.uri, mime_type=mime, text=value)]
    if isinstance(value, bytes):
        blob = base64.b64encode(value).decode("ascii")
        return [ResourceContents(uri=read.uri, mime_type=mime, blob=blob)]
    if isinstance(value, ResourceContents):
        return [value]
    if isinstance(value, list) and all(isinstance(item, ResourceContents) for item in value):
        return value
    raise TypeError(
        f"resource {read.uri!r} returned {type(value).__name__}, not str, bytes or ResourceContents"
    )


def _handler_parameters(kind: str, handler: Handler, most: int = 2) -> list[str]:
    if not inspect.iscoroutinefunction(handler):
        raise TypeError(f"{kind} {handler.__name__!r} must be an async function")
    parameters = list(inspect.signature(handler).parameters)
    if not 1 <= len(parameters) <= most:
        raise TypeError(f"{kind} {handler.__name__!r} must take (ctx) or (ctx, args)")
    return parameters


def _first_paragraph(handler: Handler) -> Any:
    doc = inspect.getdoc(handler)
    return doc.split("\n\n")[0] if doc else UNSET


def _listing(
    handler: Handler,
    name: str | None,
    title: str | None,
    description: str | None,
    mime_type: str | None,
) -> dict[str, Any]:
    """How a resource or template is listed: its name defaults to the handler's, its
    description to the docstring's first paragraph."""
    return {
        "name": name or handler.__name__,
        "title": UNSET if title is None else title,
        "description": description or _first_paragraph(handler),
        "mime_type": UNSET if mime_type is None else mime_type,
    }


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
        lease_seconds: float = 30.0,
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
        self._state_key_given = state_key is not None
        self.shutdown_grace_seconds = shutdown_grace_seconds
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        self.lease_seconds = lease_seconds
        """With a shared store: how long after its process dies a task is failed (or run
        again) by another. Leases are renewed every third of it."""
        self._clock = clock
        self._tools: dict[str, _Tool] = {}
        self._prompts: dict[str, _Prompt] = {}
        self._resources: dict[str, _Resource] = {}
        """By uri, and by uri template."""
        self._completions: dict[tuple[str, str], Handler] = {}
        self._listeners: set[_Listener] = set()
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
        input_schema: dict[str, Any] | None = None,
        resumable: bool = False,
    ) -> Callable[[ToolHandler], ToolHandler]:
        """Register an async tool handler `(ctx, args)` or `(ctx)`.

        `args` is typed with a msgspec Struct: its JSON Schema is the tool's `inputSchema`,
        and arguments that do not fit are refused with -32602 naming the field. Pass
        `input_schema` to publish a schema of your own instead (the Struct still decodes).
        `resumable=True` says the handler may safely run again from the start: a task whose
        server stopped mid-run (restart, crash) runs again instead of failing.
        """

        def register(handler: ToolHandler) -> ToolHandler:
            parameters = _handler_parameters("tool", handler)
            args_type = None
            if len(parameters) == 2:
                hints = typing.get_type_hints(handler)
                args_type = hints.get(parameters[1], dict)
            spec = ToolSpec(
                name=name or handler.__name__,
                input_schema=_input_schema(args_type) if input_schema is None else input_schema,
                task_support=task_support,
                title=UNSET if title is None else title,
                description=description or _first_paragraph(handler),
                annotations=UNSET if annotations is None else annotations,
                resumable=resumable,
            )
            decoder = None if args_type is None else msgspec.json.Decoder(args_type)
            self.core.add_tool(spec)
            self._tools[spec.name] = _Tool(spec, handler, args_type, decoder)
            self.notify_list_changed("tools")
            return handler

        return register

    def remove_tool(self, name: str) -> None:
        """Take a tool away; `subscriptions/listen` streams that asked are told. Its tasks
        already running go on to their end."""
        self.core.remove_tool(name)
        del self._tools[name]
        self.notify_list_changed("tools")

    # --- prompts -------------------------------------------------------------------------

    def prompt(
        self, name: str | None = None, *, title: str | None = None, description: str | None = None
    ) -> Callable[[Handler], Handler]:
        """Register an async prompt handler `(ctx)` or `(ctx, args)`.

        `args` is a msgspec Struct of `str` fields: they are the prompt's arguments, the ones
        without a default required. The handler returns the messages (`str` for one user
        message, a list of `PromptMessage`, or a `GetPromptResult`), or `InputRequired`.
        """

        def register(handler: Handler) -> Handler:
            parameters = _handler_parameters("prompt", handler)
            args_type = None
            if len(parameters) == 2:
                args_type = typing.get_type_hints(handler).get(parameters[1])
                if args_type is None:
                    raise TypeError(
                        f"prompt {handler.__name__!r}: annotate {parameters[1]!r} with the "
                        "msgspec.Struct of its arguments"
                    )
            spec = PromptSpec(
                name=name or handler.__name__,
                arguments=() if args_type is None else _prompt_arguments(args_type),
                title=UNSET if title is None else title,
                description=description or _first_paragraph(handler),
            )
            decoder = None if args_type is None else msgspec.json.Decoder(args_type)
            self.core.catalog.add_prompt(spec)
            self._prompts[spec.name] = _Prompt(spec, handler, decoder)
            self.notify_list_changed("prompts")
            return handler

        return register

    def remove_prompt(self, name: str) -> None:
        self.core.catalog.remove_prompt(name)
        del self._prompts[name]
        self._completions.pop(("ref/prompt", name), None)
        self.notify_list_changed("prompts")

    # --- resources -----------------------------------------------------------------------

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        ttl_ms: int = 0,
    ) -> Callable[[Handler], Handler]:
        """Register an async handler `(ctx)` that reads the resource at `uri`.

        It returns `str` (text contents), `bytes` (a base64 blob), `ResourceContents` or a
        list of them, or `InputRequired`. `ttl_ms` is the cache freshness its read result
        advises (`ttlMs`).
        """

        def register(handler: Handler) -> Handler:
            _handler_parameters("resource", handler, most=1)
            spec = ResourceSpec(
                uri=uri, ttl_ms=ttl_ms, **_listing(handler, name, title, description, mime_type)
            )
            self.core.catalog.add_resource(spec)
            self._resources[uri] = _Resource(handler, mime_type)
            self.notify_list_changed("resources")
            return handler

        return register

    def remove_resource(self, uri: str) -> None:
        self.core.catalog.remove_resource(uri)
        del self._resources[uri]
        self.notify_list_changed("resources")

    def resource_template(
        self,
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        ttl_ms: int = 0,
    ) -> Callable[[Handler], Handler]:
        """Register an async handler `(ctx, **variables)` for the uris `uri_template` fits,
        e.g. `"files://{name}"` and `async def file(ctx, name: str)`. Raise
        `ResourceNotFound` for a uri that fits but names nothing."""

        def register(handler: Handler) -> Handler:
            spec = ResourceTemplateSpec(
                uri_template=uri_template,
                ttl_ms=ttl_ms,
                **_listing(handler, name, title, description, mime_type),
            )
            if not inspect.iscoroutinefunction(handler):
                raise TypeError(f"resource template {handler.__name__!r} must be async")
            parameters = list(inspect.signature(handler).parameters)[1:]
            if sorted(parameters) != sorted(spec.variables):
                raise TypeError(
                    f"resource template {handler.__name__!r} must take (ctx, "
                    f"{', '.join(spec.variables)}): the variables of {uri_template!r}"
                )
            self.core.catalog.add_template(spec)
            self._resources[uri_template] = _Resource(handler, mime_type)
            self.notify_list_changed("resources")
            return handler

        return register

    def notify_resource_updated(self, uri: str) -> None:
        """Tell the `subscriptions/listen` streams subscribed to `uri` that it changed."""
        for listener in self._listeners:
            listener.push(self.core.resource_updated(listener.subscription, uri))

    # --- completions ---------------------------------------------------------------------

    def completion(
        self, *, prompt: str | None = None, uri_template: str | None = None
    ) -> Callable[[Handler], Handler]:
        """Register an async handler `(argument, resolved)` that completes an argument of
        `prompt` (or a variable of `uri_template`): `argument` is the `CompletionArgument`
        (name, value typed so far), `resolved` the other values the client already chose.
        It returns the candidate values (`list[str]`, at most 100 go out) or a `Completion`.
        """
        if (prompt is None) == (uri_template is None):
            raise TypeError("completion() takes exactly one of prompt= and uri_template=")
        target: tuple[typing.Literal["ref/prompt", "ref/resource"], str]
        if prompt is not None:
            target = ("ref/prompt", prompt)
        else:
            assert uri_template is not None
            target = ("ref/resource", uri_template)

        def register(handler: Handler) -> Handler:
            if not inspect.iscoroutinefunction(handler):
                raise TypeError(f"completion {handler.__name__!r} must be an async function")
            self.core.catalog.add_completion(target)
            self._completions[target] = handler
            return handler

        return register

    # --- running -------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Server]:
        """Run the server's task nursery and expiry loop; transports serve inside this.

        On entry the server takes its sealing key from the store (unless given one) and
        takes over the tasks whose process stopped. On exit new tool calls are refused,
        running tasks get `shutdown_grace_seconds` to finish, and are then cancelled.
        """
        if self._nursery is not None:
            raise RuntimeError("this server is already running")
        self._closing = False
        self._all_tasks_ended = None
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                if not self._state_key_given:  # the store's: any process opens a round
                    key = await self.store.shared_key(secrets.token_bytes(32))
                    self.core.use_state_key(key)
                await self._reap_lapsed()  # tasks a previous process left unfinished
                background: trio.CancelScope = await nursery.start(self._background)
            except BaseException:
                self._nursery = None  # never started: it may be tried again
                raise
            try:
                yield self
            finally:
                self._closing = True
                self.end_subscriptions()
                background.cancel()
                if self._running:
                    self._all_tasks_ended = trio.Event()
                    # Shielded: leaving by cancellation (Ctrl-C) still grants the grace period.
                    with trio.move_on_after(self.shutdown_grace_seconds) as grace:
                        grace.shield = True
                        await self._all_tasks_ended.wait()
                unfinished = list(self._running)
                for running in self._running.values():
                    running.scope.cancel()
                if unfinished and self.store.shared:
                    # Let the leases lapse now, so another process takes these tasks over
                    # at once instead of a lease time from now.
                    with trio.move_on_after(self.shutdown_grace_seconds) as handover:
                        handover.shield = True
                        try:
                            await self.store.renew(unfinished, self.now())
                        except StoreUnavailable as error:  # they lapse in their own time
                            logger.warning("leases not handed over: %s", error)
                nursery.cancel_scope.cancel()
                self._nursery = None

    def use_store(self, store: TaskStore) -> None:
        """Keep tasks in `store` from now on (e.g. one `open_store(url)` opened). Only
        before `running()`: tasks already stored elsewhere are not moved."""
        if self._nursery is not None:
            raise RuntimeError("use_store() while the server is running: stop it first")
        self.store = store

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
        principal: str | None = None,
    ) -> Reply | None:
        """Answer one incoming message: the reply to send, or None (a notification, or a
        request cancelled while it ran). `notify` sends a notification to this request's
        client while the request runs (progress). `principal` is who sent it (the HTTP
        authenticator's answer): tasks it creates are its own, and only its own tasks
        answer it.

        A `tools/call` is entered in `connection.in_flight` before this coroutine first
        yields, so a `notifications/cancelled` read right after it always finds it.
        """
        if self._nursery is None:
            raise RuntimeError("use `async with server.running():` around the transport")
        step = self.core.receive(data, self.now(), headers, principal)
        try:
            return await self._perform(step, notify, connection)
        except StoreUnavailable as error:
            logger.warning("the task store is unavailable: %s", error)
            request_id = _request_id_of(step)
            if request_id is None:
                return None  # a notification: nobody to tell
            message = f"The task store is unavailable; try again shortly ({error})"
            return self.core.error_reply(request_id, INTERNAL_ERROR, message, http_status=503)
        except Exception:  # the store (or the server) failed: this request, not the server
            logger.exception("the server failed on a request")
            request_id = _request_id_of(step)
            if request_id is None:
                return None
            message = "Internal error: the server failed on this request"
            return self.core.error_reply(request_id, INTERNAL_ERROR, message, http_status=500)

    async def _perform(
        self, step: Step, notify: Notify | None = None, connection: Connection | None = None
    ) -> Reply | None:
        reply = step.reply
        created: dict[str, TaskRecord] = {}
        for effect in step.effects:
            if isinstance(effect, RunTool):
                reply = await self._run_call(effect.call, notify, connection)
            elif isinstance(effect, GetPrompt | ReadResource | Complete):
                reply = await self._run_in_request(effect, notify, connection)
            elif isinstance(effect, Listen):
                reply = await self._listen(effect.subscription, notify, connection)
            elif isinstance(effect, FetchTask):
                request = effect.request
                reply = await self._transition(
                    request.task_id, functools.partial(self._decide_request, request)
                )
            elif isinstance(effect, SaveTask):
                record = effect.record
                if effect.expected_version is None:  # a new task: its handler starts here
                    await self.store.save(
                        record,
                        None,
                        limit=self._max_tasks,
                        principal_limit=self.core.task_options.max_active_per_principal,
                        lease_until=self._lease_until(),
                    )
                    created[record.task_id] = record
                else:
                    await self.store.save(record, effect.expected_version)
                    if (running := self._running.get(record.task_id)) is not None:
                        running.record = record
                if self._listeners:
                    self._publish_task(record)
            elif isinstance(effect, DeleteTask):
                await self.store.delete(effect.task_id, effect.expected_version)
            elif isinstance(effect, StartTask):
                self._start(effect.call, created.get(effect.task_id))
            elif isinstance(effect, ResumeTask):
                await self._route_resume(effect)
            elif isinstance(effect, CancelTask):
                await self._route_cancel(effect.task_id)
            elif isinstance(effect, CancelRequest):
                if connection is not None:
                    connection.cancel(effect.request_id)
            elif isinstance(effect, WakeAt):
                self._wake.set()
        return reply

    def _decide_request(self, request: TaskRequest, record: TaskRecord | None) -> Step:
        return self.core.handle_task_request(request, record, self.now())

    @property
    def _max_tasks(self) -> int:
        return self.core.task_options.max_tasks

    async def _transition(
        self,
        task_id: str,
        decide: Callable[[TaskRecord | None], Step],
        known: TaskRecord | None = None,
    ) -> Reply | None:
        """Read the record (or take `known`, as this process last wrote it), let `decide`
        (the core) say what happens, perform it; when a write finds the record changed
        underneath it, read it again and decide anew."""
        record = known
        for _ in range(MAX_CONFLICT_RETRIES):
            if record is None:
                record = await self.store.get(task_id)
            try:
                return await self._perform(decide(record))
            except VersionConflict:
                record = None
                continue
        raise RuntimeError(
            f"task {task_id!r} kept changing underneath {MAX_CONFLICT_RETRIES} writes"
        )

    async def _route_cancel(self, task_id: str) -> None:
        running = self._running.get(task_id)
        if running is not None:
            running.scope.cancel()
        elif (signals := self.store.signals) is not None:
            await signals.publish(Signal("cancel", task_id, self.store.origin))

    async def _route_resume(self, effect: ResumeTask) -> None:
        """Answers are in: wake the handler where it waits, here or in the process holding
        the task's lease; with no live handler anywhere, run it again here."""
        signals = self.store.signals
        if effect.task_id in self._running or signals is None:
            self._resume(effect)
            return
        holder = await self.store.lease_holder(effect.task_id, self.now())
        if holder is None or holder == self.store.origin:
            self._resume(effect)
        else:
            await signals.publish(Signal("resume", effect.task_id, self.store.origin, to=holder))

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
            notify_progress=_progress_sender(call.meta, notify),
            notify_log=_log_sender(call.meta, notify),
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
        # The store checks the task limit as it creates the record, across every process
        # sharing it; only when it refuses does the core hear the count, and answer so.
        try:
            return await self._perform(
                self.core.tool_returned(call, outcome, self.now()), notify, connection
            )
        except StoreFull as full:
            count = {"active_for_principal" if full.per_principal else "stored_tasks": full.limit}
            step = self.core.tool_returned(call, outcome, self.now(), **count)
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
        except Exception as error:  # the handler's failure, not ours: it must not end the server
            return _error_object(error, f"Tool {tool.spec.name!r}")

    # --- prompts/get, resources/read, completion/complete --------------------------------

    async def _run_in_request(
        self,
        effect: GetPrompt | ReadResource | Complete,
        notify: Notify | None,
        connection: Connection | None,
    ) -> Reply | None:
        """Run a prompt, resource or completion handler in the request's own task; the
        client may cancel it like a `tools/call`."""
        call = effect.call
        request_id = call.request_id
        if connection is None:
            step = await self._handler_step(effect, notify)
        else:
            with trio.CancelScope() as scope:
                connection.in_flight[request_id] = scope
                try:
                    step = await self._handler_step(effect, notify)
                finally:
                    connection.in_flight.pop(request_id, None)
            if scope.cancelled_caught:
                return None
        return await self._perform(step, notify, connection)

    async def _handler_step(
        self, effect: GetPrompt | ReadResource | Complete, notify: Notify | None
    ) -> Step:
        if isinstance(effect, Complete):
            completion = await self._complete(effect.call)
            return self.core.completion_returned(effect.call, completion)
        context = RequestContext(
            effect.call,
            notify_progress=_progress_sender(effect.call.meta, notify),
            notify_log=_log_sender(effect.call.meta, notify),
        )
        if isinstance(effect, GetPrompt):
            prompt_outcome = await self._get_prompt(effect.call, context)
            return self.core.prompt_returned(effect.call, prompt_outcome, self.now())
        read_outcome = await self._read_resource(effect.call, context)
        return self.core.resource_returned(effect.call, read_outcome, self.now())

    async def _get_prompt(self, call: PromptCall, context: RequestContext) -> PromptOutcome:
        prompt = self._prompts.get(call.prompt_name)
        if prompt is None:  # removed since the core looked
            return ErrorObject(code=INVALID_PARAMS, message=f"Unknown prompt: {call.prompt_name!r}")
        try:
            if prompt.decoder is None:
                value = await prompt.handler(context)
            else:
                try:
                    args = prompt.decoder.decode(msgspec.json.encode(call.arguments))
                except msgspec.ValidationError as error:
                    message = str(error).replace("`$", "`arguments")
                    return ErrorObject(
                        code=INVALID_PARAMS,
                        message=f"Invalid arguments for prompt {call.prompt_name!r}: {message}",
                    )
                value = await prompt.handler(context, args)
            return _prompt_outcome(call.prompt_name, value)
        except Exception as error:
            return _error_object(error, f"Prompt {call.prompt_name!r}")

    async def _read_resource(self, call: ResourceRead, context: RequestContext) -> ResourceOutcome:
        resource = self._resources.get(call.uri if call.template is None else call.template)
        if resource is None:  # removed since the core looked
            return _error_object(ResourceNotFound(call.uri), f"Resource {call.uri!r}", call.uri)
        try:
            value = await resource.handler(context, **call.variables)
            return _resource_outcome(call, resource.mime_type, value)
        except Exception as error:
            return _error_object(error, f"Resource {call.uri!r}", call.uri)

    async def _complete(self, call: CompletionCall) -> CompletionOutcome:
        ref = call.ref
        key = (
            ("ref/prompt", ref.name)
            if isinstance(ref, PromptReference)
            else ("ref/resource", ref.uri)
        )
        name = key[1]
        handler = self._completions.get(key)
        if handler is None:
            return Completion(values=[])
        try:
            value = await handler(call.argument, call.context)
        except Exception as error:
            return _error_object(error, f"Completion for {name!r}")
        if isinstance(value, Completion):
            return value
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return Completion(values=value)
        logger.error("completion for %r returned %s, not a list of str", name, type(value))
        return ErrorObject(
            code=INTERNAL_ERROR, message=f"Completion for {name!r} failed with an internal error"
        )

    # --- subscriptions/listen ----------------------------------------------------------------

    async def _listen(
        self, subscription: Subscription, notify: Notify | None, connection: Connection | None
    ) -> Reply | None:
        """Carry one listen stream until the client closes it (no reply: it is gone) or the
        server ends it (the closing response)."""
        if notify is None:
            return self.core.subscription_ended(subscription)  # nowhere to send anything
        listener = _Listener(subscription, connection)
        if self._closing or (connection is not None and connection.closing):
            listener.end()
        self._listeners.add(listener)
        scope = trio.CancelScope()
        if connection is not None:
            connection.in_flight[subscription.request_id] = scope
        try:
            with scope:
                await notify(self.core.subscription_acknowledged(subscription))
                while listener.queued or not listener.ended:  # what was queued goes out first
                    if not listener.queued:
                        await listener.wake.wait()
                        listener.wake = trio.Event()
                        continue
                    await notify(listener.queued.popleft())
        finally:
            self._listeners.discard(listener)
            if connection is not None:
                connection.in_flight.pop(subscription.request_id, None)
        if scope.cancelled_caught:
            return None
        return self.core.subscription_ended(subscription)

    def end_subscriptions(self, connection: Connection | None = None) -> None:
        """End the `subscriptions/listen` streams gracefully, each with its closing response
        after what was already queued for it: all of them, or those of `connection`.
        Transports call this when they start to shut down or their client is gone."""
        if connection is not None:
            connection.closing = True
        for listener in self._listeners:
            if connection is None or listener.connection is connection:
                listener.end()

    @property
    def subscription_count(self) -> int:
        """How many `subscriptions/listen` streams are open."""
        return len(self._listeners)

    def notify_list_changed(self, kind: typing.Literal["tools", "prompts", "resources"]) -> None:
        """Tell the `subscriptions/listen` streams that asked that a list changed. The
        server does this itself on each registration and removal; call it when what a list
        shows changed some other way."""
        for listener in self._listeners:
            listener.push(self.core.list_changed(listener.subscription, kind))

    def _publish_task(self, record: TaskRecord) -> None:
        for listener in self._listeners:
            try:
                message = self.core.task_changed(listener.subscription, record)
            except Exception:  # a notification must never cost the task its own work
                logger.exception("notifications/tasks for %r failed", record.task_id)
                continue
            listener.push(message)

    # --- inside a task -------------------------------------------------------------------

    def _start(self, call: ToolCall, created: TaskRecord | None = None) -> None:
        """Run the handler of task `call.task_id` in the server's nursery; `created` is the
        record if this process just created it (and took its lease)."""
        assert self._nursery is not None and call.task_id is not None
        # Shielded: a task ends by its own scope only (tasks/cancel, expiry, the end of the
        # shutdown grace), never because whoever runs the server was cancelled.
        running = _RunningTask(scope=trio.CancelScope(shield=True), record=created)
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
                if running.record is None:  # not created just now: not leased yet
                    await self.store.claim(task_id, self._lease_until())
                outcome = await self._invoke(tool, context, call)
        finally:
            if self._running.get(task_id) is running:
                del self._running[task_id]
            if not self._running and self._all_tasks_ended is not None:
                self._all_tasks_ended.set()
        if running.scope.cancelled_caught:
            # Cancelled, failed or expired: the record says so already (a terminal save drops
            # the lease), or is gone with its lease. Shut down: the lease stays, so the task
            # is taken over (or failed) as one left unfinished.
            return
        now = self.now()
        saved: list[TaskRecord] = []

        def decide(record: TaskRecord) -> Step:
            step = self.core.task_returned(record, outcome, now)
            saved[:] = [effect.record for effect in step.effects if isinstance(effect, SaveTask)]
            return step

        await self._keep_trying(
            f"saving the outcome of task {task_id!r}",
            lambda: self._transition(task_id, _if_stored(decide), running.record),
        )
        if saved and not saved[-1].status.is_terminal:  # waits for answers: nothing runs
            await self._release(task_id)  # (a terminal save drops the lease itself)

    async def _keep_trying(self, what: str, attempt: Callable[[], Awaitable[Any]]) -> None:
        """`attempt()` until the store takes it, for up to `STORE_RETRY_SECONDS`: a handler's
        outcome must not be lost to a store's blip. Past that it is (the task is then taken
        over as one whose process stopped, once its lease lapses)."""
        with trio.move_on_after(STORE_RETRY_SECONDS):
            while True:
                try:
                    await attempt()
                    return
                except StoreUnavailable as error:
                    logger.warning("%s: %s; trying again", what, error)
                await trio.sleep(self._poll_seconds)
        logger.error("%s: the store stayed unavailable; giving up", what)

    async def _release(self, task_id: str) -> None:
        if task_id not in self._running:  # not run again meanwhile
            await self.store.release(task_id)

    def _lease_until(self) -> float:
        # A store only this process uses hears of no other process to take over: its
        # leases never lapse while it runs (and all of them do when it is opened anew).
        return self.now() + self.lease_seconds if self.store.shared else math.inf

    async def _set_status(self, task_id: str, message: str | None) -> None:
        now = self.now()
        running = self._running.get(task_id)
        try:
            await self._transition(
                task_id,
                _if_stored(lambda record: self.core.set_status_message(record, message, now)),
                None if running is None else running.record,
            )
        except StoreUnavailable as error:  # progress is worth no more than a warning
            logger.warning("task %r: status message not saved: %s", task_id, error)

    async def _ask(self, task_id: str, running: _RunningTask, request: InputRequest) -> Raw:
        event = trio.Event()
        asked: list[str] = []

        def decide(record: TaskRecord | None) -> Step:
            for key in asked:  # decided before, on a record that has changed since
                running.waiting.pop(key, None)
            asked.clear()
            if record is None:
                return Step()
            number = len(record.issued_keys) + 1
            while f"input-{number}" in record.issued_keys:
                number += 1
            key = f"input-{number}"
            asked.append(key)
            # Waiting before the question is saved: the answer may come as soon as it is.
            running.waiting[key] = event
            outcome = InputRequired(requests={key: request})
            return self.core.task_returned(record, outcome, self.now())

        await self._transition(task_id, decide, running.record)
        after = running.record  # as the transition saved it
        if not asked or after is None or after.status is not TaskStatus.INPUT_REQUIRED:
            # The task is gone (expired), or the core refused the question (the client
            # cannot answer it) and failed the task: nothing will answer, so the run ends.
            for key in asked:
                running.waiting.pop(key, None)
            if not event.is_set():
                await _stop_run(running)
        await event.wait()
        return running.answers.pop(asked[0])

    # --- expiry, leases, signals ---------------------------------------------------------

    async def _background(
        self, *, task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Expiry, and with a shared store leases and signals, until its scope is cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._keep_going, self._expire_loop)
            if self.store.shared:
                nursery.start_soon(self._keep_going, self._lease_loop)
            if self.store.signals is not None:
                await nursery.start(self._keep_going, self._signal_loop)
            task_status.started(nursery.cancel_scope)

    async def _keep_going(
        self,
        loop: Callable[..., Awaitable[None]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run `loop` again a moment after it fails (the store was unreachable, say): a
        store's hiccup must not end the server."""
        once = _StartedOnce(task_status)
        while True:
            try:
                await loop(task_status=once)
                return
            except Exception:
                logger.exception("%s failed; starting it again", loop.__name__)
            once.started()  # serve on without it meanwhile
            await trio.sleep(self._poll_seconds)

    async def _expire_loop(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        # Another process may index an earlier deadline without waking this one: with a
        # shared store, look again at least every `_poll_seconds`.
        most = self._poll_seconds if self.store.shared else math.inf
        task_status.started()
        while True:
            deadline = await self.store.next_deadline()
            delay = math.inf if deadline is None else deadline - self.now()
            if delay > 0:
                with trio.move_on_after(min(delay, most)):
                    await self._wake.wait()
                self._wake = trio.Event()
                if delay > most:
                    continue
            now = self.now()
            for record in await self.store.pop_due(now):
                try:
                    await self._perform(self.core.expire_task(record, now))
                except VersionConflict:  # changed since it came due: decide on it anew
                    await self._transition(
                        record.task_id,
                        _if_stored(functools.partial(self._decide_expiry, now=now)),
                    )

    def _decide_expiry(self, record: TaskRecord, now: float) -> Step:
        return self.core.expire_task(record, now)

    @property
    def _poll_seconds(self) -> float:
        return min(1.0, self.lease_seconds / 3)

    async def _lease_loop(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Renew this process's leases, and take over the tasks of processes that died."""
        task_status.started()
        while True:
            await trio.sleep(self.lease_seconds / 3)
            if self._running:
                await self.store.renew(list(self._running), self._lease_until())
            await self._reap_lapsed()

    async def _reap_lapsed(self) -> None:
        now = self.now()
        for task_id in await self.store.lapsed(now):
            logger.warning("task %r: the process running it stopped; taking it over", task_id)
            await self._transition(
                task_id, _if_stored(lambda record: self.core.task_orphaned(record, now))
            )

    async def _signal_loop(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        signals = self.store.signals
        assert signals is not None and self._nursery is not None
        async with signals.listen() as stream:
            task_status.started()
            async for signal in stream:
                if signal.kind == "cancel":
                    running = self._running.get(signal.task_id)
                    if running is not None:
                        running.scope.cancel()
                elif signal.kind == "resume":
                    if signal.to == self.store.origin:
                        self._nursery.start_soon(self._resume_from_signal, signal.task_id)
                elif signal.origin != self.store.origin and self._wants_task(signal.task_id):
                    self._nursery.start_soon(self._publish_stored_task, signal.task_id)

    async def _resume_from_signal(self, task_id: str) -> None:
        try:
            record = await self.store.get(task_id)
        except StoreUnavailable as error:
            logger.warning("task %r: answers not delivered: %s", task_id, error)
            return
        call = None if record is None else self.core.resume_call(record)
        if call is not None and record is not None and record.status is TaskStatus.WORKING:
            self._resume(ResumeTask(task_id=task_id, call=call))

    def _wants_task(self, task_id: str) -> bool:
        return any(
            task_id in (listener.subscription.notifications.task_ids or ())
            for listener in self._listeners
        )

    async def _publish_stored_task(self, task_id: str) -> None:
        try:
            record = await self.store.get(task_id)
        except StoreUnavailable as error:
            logger.warning("notifications/tasks for %r not sent: %s", task_id, error)
            return
        if record is not None:
            self._publish_task(record)


class _StartedOnce:
    """A task status that passes on only the first `started()`: a loop run again after
    a failure starts again without telling its nursery twice."""

    def __init__(self, status: trio.TaskStatus[None]) -> None:
        self._status = status
        self._told = False

    def started(self, value: None = None) -> None:
        if not self._told:
            self._told = True
            self._status.started(value)


def _request_id_of(step: Step) -> RequestId | None:
    """The id of the request `step` answers, from its reply or its first effect."""
    if step.reply is not None and step.reply.request_id is not None:
        return step.reply.request_id
    for effect in step.effects:
        if isinstance(effect, FetchTask):
            return effect.request.request_id
        if isinstance(effect, RunTool | GetPrompt | ReadResource | Complete):
            return effect.call.request_id
        if isinstance(effect, Listen):
            return effect.subscription.request_id
    return None


def _if_stored(decide: Callable[[TaskRecord], Step]) -> Callable[[TaskRecord | None], Step]:
    """`decide`, for a record that may be gone meanwhile (then nothing happens)."""
    return lambda record: Step() if record is None else decide(record)


def _error_object(error: Exception, what: str, uri: str | None = None) -> ErrorObject:
    """The JSON-RPC error a handler's exception becomes: its own `ProtocolError`, -32602
    for `ResourceNotFound`, else -32603 without the details (they go to the log)."""
    if isinstance(error, ProtocolError):
        return ErrorObject(
            code=error.code, message=error.message, data=UNSET if error.data is None else error.data
        )
    if isinstance(error, ResourceNotFound) and uri is not None:
        found = resource_not_found(uri)
        return ErrorObject(code=found.code, message=found.message, data=found.data)
    logger.error("%s raised", what, exc_info=error)
    return ErrorObject(code=INTERNAL_ERROR, message=f"{what} failed with an internal error")


def _notification(method: str, params: dict[str, Any]) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", "method": method, "params": params})


def _log_sender(
    meta: RequestMeta, notify: Notify | None
) -> Callable[[LoggingLevel, Any, str | None], Awaitable[None]]:
    wanted = meta.log_level
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
    meta: RequestMeta, notify: Notify | None
) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    token = meta.progress_token
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
