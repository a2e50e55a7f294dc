"""`Server`: tools as async functions, tasks run in a nursery the server owns.

Theory of operation
-------------------
`Server` puts together a `ServerCore` (every protocol decision), a `TaskStore` (the
records) and the parts that carry out what the core decides, on anyio: the same code runs
under trio and under asyncio (see `mcp_tasks._support.backend`):

* `Registry` (the decorators, `server.registry`; `Server` hands its own decorators on to
  it) registers each spec with its handler in the core's catalog;
* `Interpreter` turns each message into a reply: it fulfils the core's `Need`s (runs a
  handler in the transport's request task, where the client may cancel it; loads a task;
  carries a listen stream) and performs the commands of its `Step`, in order;
* `TaskRunner` runs each task's handler in the server's nursery, in a cancel scope of its
  own, holding the task's lease in the store while it runs;
* `Background` runs expiry, lease renewal and takeover, and the signals between the
  processes sharing a store;
* `ListenStreams` carries `subscriptions/listen` streams.

Each part is given what it uses when `Server` makes them (no part holds the `Server`).
What `Server` may change before it runs (the store, the telemetry, `lease_seconds`) and the
`closing` flag live in one `Shared` every part holds, so a change reaches every part.

Transports hand each incoming message to `Server.handle`, inside `async with
server.running():`.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import anyio

from .._support.backend import event, spawning
from .._support.handing_on import AttributeOf, handed_on
from .._support.task_ids import TaskIds
from ..core import (
    HttpHeaders,
    Need,
    Reply,
    ServerCore,
    ServerOptions,
    Step,
    TaskOptions,
)
from ..core._wire import META_PROTOCOL_VERSION
from ..core.inputs import Received, ServerFailed, StoreUnreachable
from ..core.wire import (
    Implementation,
    RequestId,
)
from ..journals._recorder import Recorder
from ..journals._writer import DEFAULT_BACKUPS, DEFAULT_MAX_BYTES, FLUSH_SECONDS, JournalWriter
from ..store import MemoryTaskStore, StoreUnavailable, TaskStore
from ..store._legacy import as_task_store
from ..transports._port import Connection, Notify, SessionHeaders
from ..transports._telemetry import NO_TELEMETRY, Telemetry
from . import _observe
from ._background import Background
from ._decide import Decide
from ._http_session_parts import unavailable_reply
from ._http_sessions import HttpSessions
from ._interpreter import Interpreter
from ._legacy_notices import LegacyNotices
from ._listen_streams import ListenStreams
from ._registry import Registering, Registry
from ._sessions import LegacySessions
from ._shared import Shared
from ._tasks import TaskRunner
from ._threads import ToolThreads

if TYPE_CHECKING:
    from ..core.wire import IncomingMessage
    from ..transports._port import HostedHandler

logger = logging.getLogger("mcp_tasks.server")

_CLAIM: Final = META_PROTOCOL_VERSION.encode()
READINESS_PROBE_ID = "tsk_readiness_probe"
"""The id `readiness` reads: no task has it, so the store answers with nothing, cheaply."""


class Server(Registering):
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
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        held = MemoryTaskStore() if store is None else as_task_store(store)
        self.core = ServerCore(
            info=self.info,
            new_task_id=TaskIds("tsk_"),
            state_key=secrets.token_bytes(32) if state_key is None else state_key,
            tasks=tasks,
            options=options,
        )
        self._state_key_given = state_key is not None
        self.shutdown_grace_seconds = shutdown_grace_seconds
        self._journal: JournalWriter | None = None
        self.recorder: Recorder | None = None
        """What writes each input to the journal (`record`), or None."""
        decide = self.decide = Decide(self.core, clock)
        """The one way the runtime asks the core: `decide(input)`."""
        threads = self.tool_threads = ToolThreads(self.core.options.max_tool_threads)
        """The worker threads plain-function tools hold (`ServerOptions.max_tool_threads`)."""
        shared = self._shared = Shared(
            decide, threads, held, NO_TELEMETRY, clock=clock, lease_seconds=lease_seconds
        )
        listeners = self.listeners = ListenStreams(shared)
        self.registry = Registry(self.core, listeners)
        """The decorators' registry: `server.tool` and the others hand on to it."""
        runner = self.runner = TaskRunner(shared)
        interpreter = self.interpreter = Interpreter(shared, runner=runner, listeners=listeners)
        runner.saves_through(interpreter.transition)  # the one circle, closed here
        self.background = Background(
            shared, interpreter=interpreter, runner=runner, listeners=listeners
        )
        self._sessions = LegacySessions(self.core, shared, self.start_soon)
        spawn_notice = partial(_spawn_if_running, self.runner)
        self.http_sessions = HttpSessions(
            self._sessions, lambda: shared.store, shared.now, spawn_notice
        )
        self.http_sessions.serving = lambda: self.core.options.legacy_sessions
        """2025 clients' HTTP sessions (`http_sessions.limits`: idle time, how many)."""
        self.background.on_session_signal = self.http_sessions.on_signal
        self._notices = LegacyNotices(self.http_sessions, spawn_notice)
        listeners.sessions_told = self._notices

    # --- what the parts share (`Shared`) -------------------------------------------------

    store = AttributeOf[TaskStore](
        "_shared",
        doc="Where tasks are kept (`use_store`); with telemetry, wrapped to report its calls.",
    )
    telemetry = AttributeOf[Telemetry](
        "_shared", doc="Where spans and metrics go (`use_telemetry`); by default nowhere."
    )
    closing = AttributeOf[bool](
        "_shared", doc="Leaving `running()`: new tool calls are refused.", writable=True
    )

    @property
    def lease_seconds(self) -> float:
        """With a shared store: how long after its process dies a task is failed (or run
        again) by another. Leases are renewed every third of it."""
        return self._shared.lease_seconds

    @lease_seconds.setter
    def lease_seconds(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        self._shared.lease_seconds = seconds

    # --- running -------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Server]:
        """Run the server's task nursery and expiry loop; transports serve inside this.

        On entry the server takes its sealing key from the store (unless given one) and
        takes over the tasks whose process stopped. On exit new tool calls are refused,
        running tasks get `shutdown_grace_seconds` to finish, and are then cancelled.
        """
        runner = self.runner
        if runner.nursery is not None:
            raise RuntimeError("this server is already running")
        self.closing = False
        runner.all_ended = None
        async with anyio.create_task_group() as nursery, spawning() as spawner:
            runner.nursery, runner.spawner = nursery, spawner
            self.tool_threads.start(self.core.options.max_tool_threads)
            try:
                if not self._state_key_given:  # the store's: any process opens a round
                    key = await self.store.coordination.shared_key(secrets.token_bytes(32))
                    self.core.use_state_key(key)
                await self.background.reap_lapsed()  # tasks a previous process left
                background: anyio.CancelScope = await nursery.start(self.background.serve)
                if self._journal is not None:
                    nursery.start_soon(self._flush_journal_every_second)
            except BaseException:
                runner.nursery = runner.spawner = None  # never started: it may be tried again
                raise
            try:
                yield self
            finally:
                self.closing = True
                self.end_subscriptions()
                background.cancel()
                await self._wind_down()
                nursery.cancel_scope.cancel()
                runner.nursery = runner.spawner = None
                if self._journal is not None:
                    self._flush_journal()
                    self._journal.close()

    async def _wind_down(self) -> None:
        runner = self.runner
        if not runner.idle:  # handlers running, or outcomes being saved
            runner.all_ended = event()
            # Shielded: leaving by cancellation (Ctrl-C) still grants the grace period.
            with anyio.move_on_after(self.shutdown_grace_seconds, shield=True):
                await runner.all_ended.wait()
        unfinished = runner.held
        for task_id in unfinished:
            runner.cancel(task_id)
        if unfinished and self.store.coordination.shared:
            # Let the leases lapse now, so another process takes these tasks over at once
            # instead of a lease time from now.
            with anyio.move_on_after(self.shutdown_grace_seconds, shield=True):
                try:
                    await self.store.coordination.renew(unfinished, self.now())
                except StoreUnavailable as error:  # they lapse in their own time
                    logger.warning("leases not handed over: %s", error)

    def use_store(self, store: TaskStore) -> None:
        """Keep tasks in `store` from now on (e.g. one `open_store(url)` opened). Only
        before `running()`: tasks already stored elsewhere are not moved."""
        if self.runner.nursery is not None:
            raise RuntimeError("use_store() while the server is running: stop it first")
        self._shared.store = self.telemetry.wrap_store(as_task_store(store))

    def record(
        self,
        journal: str | os.PathLike[str] | JournalWriter,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        backups: int = DEFAULT_BACKUPS,
    ) -> JournalWriter:
        """Write everything that crosses the core's boundary to `journal` (a path, or a
        `JournalWriter`) from now on: each message with the headers the core checks and the
        principal, the clock, what handlers and the store gave, every reply, notification and
        command. `mcp-tasks replay` replays it. Credentials, the sealing key and the
        arguments a tool marks `sensitive` are never written. Only before `running()`."""
        if self.runner.nursery is not None:
            raise RuntimeError("record() while the server is running: stop it first")
        if self.recorder is not None:
            raise RuntimeError("this server records already")
        if not isinstance(journal, JournalWriter):
            journal = JournalWriter(journal, max_bytes=max_bytes, backups=backups)
        writer = journal
        self._journal = writer
        self.recorder = Recorder(self.core, writer, on_error=_unrecorded)
        self.decide.use(self.recorder)
        return writer

    def _flush_journal(self) -> None:
        if self.recorder is not None:
            self.recorder.flush()
        if self._journal is not None:
            self._journal.flush()

    async def _flush_journal_every_second(self) -> None:
        """A journal's lines reach its file within a second, however quiet the server."""
        while True:
            await anyio.sleep(FLUSH_SECONDS)
            self._flush_journal()

    def use_telemetry(self, telemetry: Telemetry) -> None:
        """Report spans and metrics to `telemetry` (e.g. `mcp_tasks.otel.OpenTelemetry()`)
        from now on. Only before `running()`."""
        if self.runner.nursery is not None:
            raise RuntimeError("use_telemetry() while the server is running: stop it first")
        shared = self._shared
        shared.telemetry = telemetry
        shared.store = telemetry.wrap_store(shared.store)

    async def readiness(self, timeout_seconds: float = 1.0) -> str | None:
        """None if the server may be sent requests now; otherwise why not: "not running",
        "draining" (leaving `running()`), "store unreachable" (the store did not answer a
        read within `timeout_seconds`). What `/readyz` answers."""
        if self.runner.nursery is None:
            return "not running"
        if self.closing:
            return "draining"
        with anyio.move_on_after(timeout_seconds):
            try:
                await self.store.get(READINESS_PROBE_ID)
            except Exception:  # unavailable, or failing in a way of its own: not ready
                return "store unreachable"
            return None
        return "store unreachable"

    def use_options(self, options: ServerOptions) -> None:
        """Answer under `options` from now on (e.g. `accept_missing_task_name_header` given
        on the command line). Only before `running()`."""
        if self.runner.nursery is not None:
            raise RuntimeError("use_options() while the server is running: stop it first")
        self.core.use_options(options)

    def use_task_options(self, options: TaskOptions) -> None:
        """Create tasks under `options` from now on (e.g. limits given on the command
        line). Only before `running()`."""
        if self.runner.nursery is not None:
            raise RuntimeError("use_task_options() while the server is running: stop it first")
        self.core.use_task_options(options)

    @property
    def is_running(self) -> bool:
        """True inside `async with server.running():`, where `handle` may be called."""
        return self.runner.nursery is not None

    def start_soon(self, function: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `function()` in the server's task group, beside its tasks: it is cancelled
        when the server stops. Transports run their background work here (the ASGI app's
        keeper). Only inside `running()`."""
        nursery = self.runner.nursery
        if nursery is None:
            raise RuntimeError("start_soon() outside `async with server.running():`")
        nursery.start_soon(function)

    now = handed_on("_shared", Shared.now)
    lease_until = handed_on("_shared", Shared.lease_until)
    poll_seconds = AttributeOf[float](
        "_shared", doc="How often loops waiting on a shared store look again."
    )

    async def handle(
        self,
        data: bytes | IncomingMessage,
        *,
        headers: HttpHeaders | None = None,
        notify: Notify | None = None,
        connection: Connection | None = None,
        principal: str | None = None,
        session: SessionHeaders | None = None,
    ) -> Reply | None:
        """Answer one incoming message: the reply to send, or None (a notification, or a
        request cancelled while it ran). `notify` sends a notification to this request's
        client while the request runs (progress). `principal` is who sent it (the HTTP
        authenticator's answer): tasks it creates are its own, and only its own tasks
        answer it. `data` is the message's bytes, or the message a host decoded already
        (an `IncomingMessage`, its `params` as JSON: see `Received`). `session` is what
        an HTTP request says of a 2025 client's session (`Mcp-Session-Id`, `GET`...).

        A `tools/call` is entered in `connection.in_flight` before this coroutine first
        yields, so a `notifications/cancelled` read right after it always finds it.
        """
        if self.runner.nursery is None:
            raise RuntimeError("use `async with server.running():` around the transport")
        telemetry = self._shared.telemetry
        if session is not None or (headers is not None and self._http_legacy(data)):
            try:
                reply = await self.http_sessions.answer(
                    data,
                    headers=headers,
                    session=session,
                    notify=notify,
                    principal=principal,
                    answer=self._observed if telemetry.enabled else self._answer,
                )
            except StoreUnavailable as error:  # the sessions are in the store: try again soon
                logger.warning("the task store is unavailable: %s", error)
                reply = unavailable_reply()
        elif not telemetry.enabled:
            reply = await self._answer(data, headers, notify, connection, principal)
        else:
            with telemetry.request(data, principal) as observation:
                reply = await self._answer(data, headers, notify, connection, principal)
                observation.finish(reply)
        if reply is not None and reply.error_code is not None:
            _observe.refused(telemetry, reply)
        return reply

    @property
    def serves_sessions(self) -> bool:
        """2025 clients get sessions (`ServerOptions.legacy_sessions`): over HTTP, `GET`
        and `DELETE` are allowed on the endpoint."""
        return self.core.options.legacy_sessions

    def _http_legacy(self, data: bytes | IncomingMessage) -> bool:
        """An HTTP request's bytes without the 2026-07-28 claim's key, while 2025 clients
        get sessions (a look in the bytes: all a modern request pays). A message a host
        decoded (the SDK integration) is the host's to sort by era. (`find`, not `in`:
        see `core.legacy.has_claim`.)"""
        return (
            isinstance(data, bytes) and data.find(_CLAIM) < 0 and self.core.options.legacy_sessions
        )

    async def _observed(
        self,
        data: bytes | IncomingMessage,
        headers: HttpHeaders | None,
        notify: Notify | None,
        connection: Connection | None,
        principal: str | None,
        *,
        routed: bool,
    ) -> Reply | None:
        """`_answer`, observed by the telemetry (the way of a 2025 HTTP session's requests)."""
        telemetry = self._shared.telemetry
        with telemetry.request(data, principal) as observation:
            reply = await self._answer(data, headers, notify, connection, principal, routed=routed)
            observation.finish(reply)
            return reply

    async def _answer(
        self,
        data: bytes | IncomingMessage,
        headers: HttpHeaders | None,
        notify: Notify | None,
        connection: Connection | None,
        principal: str | None,
        *,
        routed: bool = False,
    ) -> Reply | None:
        if not routed and connection is not None and self._sessions.routes(data, connection):
            way = connection.core_way  # made once a connection: headers and principal None
            answer_modern: Callable[..., Awaitable[Reply | None]]
            if way is None or way[0] != notify or headers is not None or principal is not None:
                answer_modern = partial(
                    self._answer,
                    headers=headers,
                    notify=notify,
                    connection=connection,
                    principal=principal,
                    routed=True,
                )  # a 2025 session's request comes back here rewritten, or another as it is
                if headers is None and principal is None:
                    connection.core_way = (notify, answer_modern)
            else:
                answer_modern = way[1]
            reply = await self._sessions.answer(data, connection, answer_modern, notify)
            self._notices.saw(connection, notify)
            return reply
        answer = self.decide(Received(data, headers, principal, self._shared.closing))
        try:
            return await self.interpreter.drive(answer, notify, connection)
        except StoreUnavailable as error:
            logger.warning("the task store is unavailable: %s", error)
            request_id = _request_id_of(answer)
            if request_id is None:
                return None  # a notification: nobody to tell
            return self.decide(StoreUnreachable(request_id)).reply
        except Exception:  # the store (or the server) failed: this request, not the server
            logger.exception("the server failed on a request")
            request_id = _request_id_of(answer)
            if request_id is None:
                return None
            return self.decide(ServerFailed(request_id)).reply

    # --- listen streams ------------------------------------------------------------------

    def end_subscriptions(self, connection: Connection | None = None) -> None:
        """End the `subscriptions/listen` streams gracefully, each with its closing response
        after what was already queued for it: all of them, or those of `connection`.
        Transports call this when they start to shut down or their client is gone; the
        questions a 2025 session's requests wait on end too (the client will not answer)."""
        self.listeners.end(connection)
        if connection is not None:
            self._sessions.abandon(connection)
            self._notices.gone(connection)
        else:
            self.http_sessions.ended()  # the sessions' streams, and their questions

    @property
    def subscription_count(self) -> int:
        """How many `subscriptions/listen` streams are open."""
        return len(self.listeners)


if TYPE_CHECKING:

    def _implements_the_port(server: Server) -> HostedHandler:
        """mypy proves that a `Server` is what the transports and the ASGI app take."""
        return server


def _unrecorded(call: str, error: Exception) -> None:
    logger.warning("a call of %s could not be written to the journal: %r", call, error)


def _request_id_of(answer: Step | Need) -> RequestId | None:
    """The id of the request `answer` is for (None: a notification)."""
    if isinstance(answer, Step):
        return None if answer.reply is None else answer.reply.request_id
    return answer.request_id


def _spawn_if_running(runner: TaskRunner, send: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run `send()` (a 2025 session's notice) in the server's task group; dropped when the
    server is not running: nobody is connected."""
    nursery = runner.nursery
    if nursery is not None:
        nursery.start_soon(send)
