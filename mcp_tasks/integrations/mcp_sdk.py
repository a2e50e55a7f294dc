"""The Tasks extension for servers of the official MCP Python SDK (`mcp` 2.3).

```python
from mcp.server.mcpserver import MCPServer
from mcp_tasks.integrations.mcp_sdk import TasksExtension

tasks = TasksExtension(task_support={"slow_compute": "optional"})
mcp = MCPServer("demo", extensions=[tasks], lifespan=tasks.lifespan)

@mcp.tool()
async def slow_compute(seconds: float) -> str:
    ...
```

Theory of operation
-------------------
The extension holds a `mcp_tasks.Server` of its own (its core makes every protocol
decision; its store keeps the tasks), whose catalog has one proxy tool for each tool named
in `task_support`. It plugs into the SDK's public extension interface:

* `intercept_tool_call`: a call to a named tool is handed to `Server.handle` as the
  JSON-RPC message the client sent, with the SDK's `call_next` (and the request's context)
  in a context variable, where the proxy the core runs finds it (a task's run inherits the
  variable from the request that started it). Before a task the proxy answers `START_TASK`;
  an `input_first` tool runs in the request until it calls `start_task()`. Inside the task
  the proxy runs `call_next` with a request context of the task's own (`_sdk_task`): the
  request's own is torn down once the task handle is sent. Calls to other tools go
  straight to `call_next`.
* `tasks/get`, `tasks/update`, `tasks/cancel`: bound as methods, handed to `Server.handle`
  the same way; each reply becomes the SDK's result, or an `MCPError`.
* `streamable_http_app(mcp)`: the SDK's HTTP app, with `tasks/get|update|cancel` (the
  polling, most of a client's requests) answered by this library's ASGI app before the
  SDK's stack (its `Mcp-Method` header says which they are): about three times cheaper.
  Not when the SDK authenticates (`auth=`): then every request goes through the SDK.
* The runtime (the tasks' nursery, the expiry and lease loops) runs inside `lifespan` when
  the server was given it (then shutdown grants running tasks their grace period), and
  otherwise starts at the first request, in a task of its own that ends with the event
  loop or `aclose()`.

An `InputRequiredResult` a tool returns inside its task becomes the task's questions; once
they are answered the tool runs again from the start, with the answers in
`ctx.input_responses` (as the SDK's input rounds do). The answers must reach the process
that runs the task.
"""

from __future__ import annotations

try:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.extension import Extension, MethodBinding
    from mcp.server.request_state import authenticated_principal
    from mcp.shared.exceptions import MCPError
    from mcp_types import CallToolRequestParams, RequestParams
except ImportError as missing:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        "mcp_tasks.integrations.mcp_sdk needs the official MCP SDK: pip install 'mcp-tasks[sdk]'"
    ) from missing

import contextvars
import dataclasses
import itertools
import logging
import time
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, Raw
from pydantic import ConfigDict

from .._support.backend import Event, event, spawn_detached
from ..asgi import AsgiApp, Receive, Scope, Send
from ..core import (
    START_TASK,
    InputRequired,
    Reply,
    ServerOptions,
    TaskOptions,
    ToolOutcome,
)
from ..core.wire import (
    INTERNAL_ERROR,
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
    CallToolResult,
    ErrorObject,
    Implementation,
    IncomingMessage,
)
from ..runtime import Server
from ..runtime._context import ToolContext
from ..store import TaskStore
from ..transports import HttpConfig
from . import _sdk_task
from ._sdk_auth import SdkTokenVerifier

__all__ = ["SdkTokenVerifier", "TaskSupport", "TasksExtension", "start_task"]

logger = logging.getLogger("mcp_tasks.integrations.mcp_sdk")

TaskSupport = Literal["optional", "required"]
TASK_METHODS: Final = ("tasks/get", "tasks/update", "tasks/cancel")
_TASK_METHOD_HEADERS: Final = frozenset(method.encode() for method in TASK_METHODS)
_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
_replies = msgspec.json.Decoder(dict[str, Any])


@dataclasses.dataclass(eq=False)
class _Invocation:
    """One `tools/call` of a named tool: how to run it, and what its runs left behind."""

    call_next: CallNext
    context: ServerRequestContext[Any, Any]
    params: CallToolRequestParams
    input_first: bool
    returned: HandlerResult = None
    """What the tool returned when it ran in the request (sent back as the SDK made it)."""
    asked: dict[str, str] = dataclasses.field(default_factory=dict)
    """Inside the task: the keys of the questions it returned (an `InputRequiredResult`)."""
    state: str | None = None
    """Inside the task: the `requestState` it returned with them."""
    kept_until: float | None = None
    """While it waits for answers: when its task expires (then it is forgotten)."""


_calling: contextvars.ContextVar[_Invocation | None] = contextvars.ContextVar(
    "mcp_tasks_sdk_calling", default=None
)
"""The `tools/call` being handed to the core (a task's first run inherits it)."""
_phase: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mcp_tasks_sdk_phase", default=None
)
"""How the tool runs now: "asking" (an input-first tool before its task), "in place" or
"task"; None: not run by the extension."""


class _StartTask(BaseException):
    """Raised by `start_task()` before the task exists: unwinds the tool (a BaseException,
    so the SDK's handler does not turn it into a tool error)."""


def start_task() -> None:
    """In a tool named in `TasksExtension(input_first=...)`: go on as a task from here.

    What the tool did before (its input rounds: returning an `InputRequiredResult`, reading
    `ctx.input_responses`) runs again at the start of the task, so it must be free of side
    effects. Inside the task, or in place for a client without the extension, this does
    nothing.
    """
    phase = _phase.get()
    if phase == "asking":
        raise _StartTask
    if phase is None:
        raise RuntimeError(
            "start_task() works only in a tool named in TasksExtension(input_first=...)"
        )


class _TaskMethodParams(RequestParams):
    """`tasks/*` params, taken as they come: the core checks them."""

    model_config = ConfigDict(extra="allow")


class TasksExtension(Extension):
    """The Tasks extension (`io.modelcontextprotocol/tasks`) for `MCPServer(extensions=[...])`.

    `task_support` names the server's tools that may run as tasks: "optional" (a task
    when the client declares the extension, in place otherwise) or "required" (a task
    only; a client without the extension gets -32021). Other tools stay synchronous.
    `store` keeps the tasks (memory when None: any `mcp_tasks.store` store); `tasks`
    sets their TTL, poll interval and limits. `input_first` names tools that run in the
    request until they call `start_task()`, so that their input rounds come before the
    task exists.
    """

    identifier = TASKS_EXTENSION

    def __init__(
        self,
        task_support: Mapping[str, TaskSupport],
        store: TaskStore | None = None,
        tasks: TaskOptions | None = None,
        *,
        input_first: Collection[str] = (),
        options: ServerOptions | None = None,
        shutdown_grace_seconds: float = 5.0,
        lease_seconds: float = 30.0,
    ) -> None:
        if not isinstance(task_support, Mapping):
            raise TypeError(
                "task_support maps tool names to 'optional' or 'required', e.g. "
                f"{{'slow_compute': 'optional'}}; got {type(task_support).__name__}"
            )
        if isinstance(input_first, str):
            raise TypeError(f"input_first is a collection of tool names, e.g. {{{input_first!r}}}")
        for name, support in task_support.items():
            if support not in ("optional", "required"):
                raise ValueError(
                    f"task_support[{name!r}] is {support!r}: a tool may be 'optional' or "
                    "'required' (leave out the tools that never run as tasks)"
                )
        strays = sorted(set(input_first) - set(task_support))
        if strays:
            raise ValueError(f"input_first names tools not in task_support: {strays}")
        self.task_support: Mapping[str, TaskSupport] = dict(task_support)
        self.input_first = frozenset(input_first)
        self.server = Server(
            "mcp-sdk-tasks",
            "0",
            tasks=tasks,
            options=options,
            store=store,
            shutdown_grace_seconds=shutdown_grace_seconds,
            lease_seconds=lease_seconds,
        )
        """The runtime behind the extension: its core, store and task runner."""
        for name, support in self.task_support.items():
            self.server.tool(
                name,
                task_support=support,
                description=f"{name} (SDK)",
                input_before_task=name in self.input_first,
            )(self._run_tool)
        self._ids = itertools.count(1)
        self._waiting: dict[str, _Invocation] = {}
        """Tasks between runs (their questions out), by task id."""
        self._starting: Event | None = None
        self._stop: Event | None = None
        self._stopped: Event | None = None

    # --- the SDK's extension interface -----------------------------------------------------

    def methods(self) -> Sequence[MethodBinding]:
        return [
            MethodBinding(
                method,
                _TaskMethodParams,
                self._task_method,
                protocol_versions=frozenset({PROTOCOL_VERSION}),
            )
            for method in TASK_METHODS
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if params.name not in self.task_support or ctx.protocol_version != PROTOCOL_VERSION:
            return await call_next(ctx)
        server = await self._running_server()
        invocation = _Invocation(call_next, ctx, params, params.name in self.input_first)
        calling = _calling.set(invocation)
        try:
            reply = await self._handle(server, ctx)
        finally:
            _calling.reset(calling)
        return self._answer(reply, invocation)

    async def _task_method(
        self, ctx: ServerRequestContext[Any, Any], params: _TaskMethodParams
    ) -> HandlerResult:
        server = await self._running_server()
        return self._answer(await self._handle(server, ctx), None)

    async def _handle(self, server: Server, ctx: ServerRequestContext[Any, Any]) -> Reply | None:
        """The core's reply to the request of `ctx`, as the client sent it: the message
        the SDK decoded, handed on as it is (its params encoded back, the core's form)."""
        params = UNSET if ctx.params is None else Raw(msgspec.json.encode(ctx.params))
        message = IncomingMessage("2.0", next(self._ids), ctx.method, params)
        return await server.handle(
            message,
            headers=_sdk_task.headers_of(ctx),
            principal=authenticated_principal(ctx),
        )

    def _answer(self, reply: Reply | None, invocation: _Invocation | None) -> HandlerResult:
        """The core's reply as the SDK's: the result, or the error raised as `MCPError`."""
        if reply is None:  # only a cancelled request has none, and nobody waits for it
            raise MCPError(INTERNAL_ERROR, "The request was cancelled")
        body = _replies.decode(reply.body)
        error = body.get("error")
        if error is not None:
            raise MCPError(error["code"], error["message"], error.get("data"))
        result: dict[str, Any] = body["result"]
        if (
            invocation is not None
            and invocation.returned is not None
            and result.get("resultType") == "complete"
        ):
            return invocation.returned  # the tool's own result, ran in the request
        meta = result.get("_meta")
        if isinstance(meta, dict) and _SERVER_INFO in meta:  # the SDK stamps its own
            del meta[_SERVER_INFO]
            if not meta:
                del result["_meta"]
        return result

    # --- the proxy the core runs for each named tool ---------------------------------------

    async def _run_tool(self, tool: ToolContext) -> ToolOutcome:
        """Run the SDK tool for the core: before its task, in place, or inside the task."""
        task_id = tool.task_id
        invocation = _calling.get() if task_id is None else self._waiting.pop(task_id, None)
        if invocation is None and task_id is not None:
            invocation = _calling.get()  # the task's first run
        if invocation is None or invocation.params.name != tool.tool_name:
            return ErrorObject(
                code=INTERNAL_ERROR,
                message=f"Tool {tool.tool_name!r} can run only in the process that started "
                "its task",
            )
        if not tool.in_task and not invocation.input_first:
            return START_TASK
        phase = "asking" if not tool.in_task else "task" if task_id is not None else "in place"
        outcome = await self._run_sdk_tool(invocation, tool, phase)
        if task_id is not None and isinstance(outcome, InputRequired):
            invocation.asked.update(_sdk_task.methods_asked(outcome))
            invocation.kept_until = self._expires_at()
            self._forget_expired()
            self._waiting[task_id] = invocation  # run again once they are answered
        return outcome

    async def _run_sdk_tool(
        self, invocation: _Invocation, tool: ToolContext, phase: str
    ) -> ToolOutcome:
        params, context = invocation.params, invocation.context
        if phase == "task":
            if invocation.asked:
                earlier = params.input_responses or {}
                params.input_responses = {
                    **earlier,
                    **_sdk_task.sdk_answers(tool, invocation.asked),
                }
            params.request_state = invocation.state or tool.handler_state
            context = _sdk_task.task_context(context, tool)
        elif params.request_state is not None:
            params.request_state = tool.handler_state  # the tool's own, unsealed by the core
        running = _phase.set(phase)
        try:
            result = await invocation.call_next(context)
        except _StartTask:
            return START_TASK
        except MCPError as error:
            return _sdk_task.error_of(error)
        finally:
            _phase.reset(running)
        outcome = _sdk_task.outcome_of(result)
        if phase == "task" and isinstance(outcome, InputRequired):
            invocation.state = outcome.state
        if phase != "task" and isinstance(outcome, CallToolResult):
            invocation.returned = result
        return outcome

    def _expires_at(self) -> float | None:
        ttl_ms = self.server.core.task_options.ttl_ms
        return None if ttl_ms is None else time.time() + ttl_ms / 1000

    def _forget_expired(self) -> None:
        """Drop the tasks that waited past their TTL (cancelled or expired meanwhile)."""
        now = time.time()
        for task_id, waiting in list(self._waiting.items()):
            if waiting.kept_until is not None and waiting.kept_until < now:
                del self._waiting[task_id]

    # --- serving over HTTP -------------------------------------------------------------------

    def streamable_http_app(
        self, mcp: Any, *, config: HttpConfig | None = None, **options: Any
    ) -> Any:
        """`mcp.streamable_http_app(**options)` (an `MCPServer`'s), with `tasks/get`,
        `tasks/update` and `tasks/cancel` answered before the SDK's stack by this
        library's ASGI app (`mcp_tasks.asgi`, under `config`: Host and Origin checks,
        limits), about three times faster. A server that authenticates (`MCPServer(auth=
        ...)`) gets the SDK's app unchanged: every request goes through its checks."""
        sdk_app = mcp.streamable_http_app(**options)
        if mcp.settings.auth is not None:
            return sdk_app
        # Answered here, the replies name the SDK server, as the ones through its stack do.
        self.server.core.use_info(Implementation(name=mcp.name, version=mcp.version))
        endpoint = options.get("streamable_http_path", "/mcp")
        config = HttpConfig(endpoint=endpoint) if config is None else config
        if config.endpoint != endpoint:
            config = dataclasses.replace(config, endpoint=endpoint)
        return _TaskRequestsFirst(self, AsgiApp(self.server, config), sdk_app)

    # --- running -----------------------------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[dict[str, Any]]:
        """For `MCPServer(lifespan=tasks.lifespan)`: checks that `app` has every tool named
        in `task_support`, and runs the tasks runtime while the server runs (at shutdown,
        running tasks get `shutdown_grace_seconds` to finish, then are cancelled)."""
        await self.check_tools(app)
        async with self.running():
            yield {}

    async def check_tools(self, app: Any) -> None:
        """Raise `ValueError` unless the `MCPServer` `app` has every tool named in
        `task_support`."""
        listed = {tool.name for tool in await app.list_tools()}
        missing = sorted(set(self.task_support) - listed)
        if missing:
            raise ValueError(
                f"TasksExtension: task_support names tools the server does not have: "
                f"{missing} (its tools: {sorted(listed)})"
            )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the tasks runtime while inside (wrap your own lifespan's `yield` in it)."""
        async with self.server.running():
            yield

    async def aclose(self) -> None:
        """Stop the runtime started at the first request (running tasks get their grace
        period). Nothing to do for one run by `lifespan` or `running()`."""
        stop, stopped = self._stop, self._stopped
        if stop is not None and stopped is not None:
            stop.set()
            await stopped.wait()

    async def _running_server(self) -> Server:
        server = self.server
        if server.is_running:
            return server
        if self._starting is None:
            self._starting, self._stop, self._stopped = event(), event(), event()
            spawn_detached(self._run_detached)
        await self._starting.wait()
        if not server.is_running:
            raise MCPError(INTERNAL_ERROR, "The tasks runtime did not start (see the server log)")
        return server

    async def _run_detached(self) -> None:
        starting, stop, stopped = self._starting, self._stop, self._stopped
        assert starting is not None and stop is not None and stopped is not None
        try:
            async with self.server.running():
                starting.set()
                await stop.wait()
        except Exception:
            logger.exception("the tasks runtime stopped")
        finally:
            self._starting = self._stop = self._stopped = None
            starting.set()
            stopped.set()


class _TaskRequestsFirst:
    """An ASGI app: `tasks/*` requests (by their `Mcp-Method` header) to ours, everything
    else (and the lifespan) to the SDK's."""

    def __init__(self, extension: TasksExtension, ours: AsgiApp, sdk_app: Any) -> None:
        self._extension = extension
        self._ours = ours
        self._sdk_app = sdk_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            for name, value in scope["headers"]:
                if name == b"mcp-method":
                    if value in _TASK_METHOD_HEADERS:
                        await self._extension._running_server()  # started by now, usually
                        await self._ours(scope, receive, send)
                        return
                    break
        await self._sdk_app(scope, receive, send)
