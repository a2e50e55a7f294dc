"""The client: call tools and see their tasks through, under asyncio or trio (on anyio).

Theory of operation
-------------------
`Client` sends requests through a `ClientTransport` (HTTP, stdio, or in-process) and reads
them with the pure `ClientCore`. Every request declares, in its own `_meta`, the tasks
extension and the input kinds the client has handlers for.

`call_tool` returns the tool's final result whatever the server does: it answers input
rounds before a task (echoing `requestState` exactly, sending each round only its own
answers), and when it gets a task it waits for it (`await_task`): polling at the server's
`pollIntervalMs` (clamped), answering each input request once, giving up at
`createdAt + ttlMs`, and cancelling the task if the waiting itself is cancelled. The other
requests that may ask for input (`get_prompt`, `read_resource`, `complete`, the lists) go
through the same rounds.

Over a transport that sends headers (HTTP), a tool call carries an `Mcp-Param-{Name}`
header for each argument the tool's `inputSchema` marks with `x-mcp-header`. The marks come
from `tools/list`, listed again before a call once the last list's `ttlMs` has run out,
after a `notifications/tools/list_changed`, and once when the server refuses a call with
-32020 naming an `Mcp-Param` header (the call is then sent again).

Everything here waits through anyio (sleeps, the shielded `tasks/cancel`, the cancellation
it catches), and so do the transports: one client, run by `asyncio.run` or `trio.run`.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Literal, TypeVar

import anyio
import msgspec
from msgspec import UNSET

from ..core import LocalProtocolError, RemoteProtocolError
from ..core import wire as w
from ..core._client import (
    REPEATABLE_METHODS,
    ClientCore,
    InputTracker,
    PollPolicy,
    RetryPolicy,
    RpcError,
    Task,
    TaskCancelled,
    TaskExpired,
    TaskFailed,
    ToolRejected,
    give_up_at,
    names_param_header,
)
from ..core._client_era import Era, LegacySession, legacy_task
from ..transports import (
    AuthorizationError,
    ClientTransport,
    HttpAuthorization,
    HttpClientTransport,
    ServerUnreachable,
    TransportError,
    open_stdio_transport,
)
from ..transports._telemetry import NO_TELEMETRY, Telemetry
from ._callbacks import (
    ElicitHandler,
    MissingInputHandler,
    NotificationCallback,
    RetryHandler,
    RootsHandler,
    SamplingHandler,
    StatusCallback,
    maybe_await,
    missing_handler,
)
from ._era import recalled_era, remember_era
from ._resume import ResumeEntry, ResumeLog
from ._sending import RequestSender
from ._session_tasks import SessionTasks

_Item = TypeVar("_Item")
_MAX_LIST_PAGES: Final = 1000
_MAX_REJECTIONS_LOGGED: Final = 16
"""Tools left out of one `list_tools` that are logged by name (a server may list many)."""
logger = logging.getLogger("mcp_tasks.client")
_CANCEL_SECONDS: Final = 5.0
"""How long a cancelled wait gives its `tasks/cancel`, shielded, before it lets go."""
_input_requests = msgspec.json.Decoder(dict[str, w.InputRequest])
_prompt_result = msgspec.json.Decoder(w.GetPromptResult)
_resource_result = msgspec.json.Decoder(w.ReadResourceResult)
_complete_result = msgspec.json.Decoder(w.CompleteResult)


class Client(RequestSender, SessionTasks):
    def __init__(
        self,
        transport: ClientTransport,
        *,
        info: w.Implementation | None = None,
        on_elicit: ElicitHandler | None = None,
        on_sample: SamplingHandler | None = None,
        on_roots: RootsHandler | None = None,
        poll: PollPolicy | None = None,
        retry: RetryPolicy | None = None,
        on_retry: RetryHandler | None = None,
        cancel_on_exit: bool = True,
        max_input_rounds: int = 16,
        resume_log: ResumeLog | None = None,
        journal: ResumeLog | None = None,
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry = NO_TELEMETRY,
        request_timeout_seconds: float | None = None,
        era: Era | None = None,
    ) -> None:
        if request_timeout_seconds is not None and not request_timeout_seconds > 0:
            raise ValueError("request_timeout_seconds must be positive (or None: no limit)")
        self.transport = transport
        self.request_timeout_seconds = request_timeout_seconds
        """How long one request waits for its answer before `TransportError` (and is
        cancelled); None waits as long as the transport does. Waiting on a task is many
        requests, each bounded so."""
        self.telemetry = telemetry
        """Where client spans go (e.g. `mcp_tasks.otel.OpenTelemetry()`): each request
        carries its trace context to the server in `_meta`."""
        self.resume_log = resume_log if resume_log is not None else journal
        """Where the tasks this client waits for are kept, to go on after a restart (or None)."""
        self.on_elicit = on_elicit
        self.on_sample = on_sample
        self.on_roots = on_roots
        self.poll = poll or PollPolicy()
        self.retry = retry or RetryPolicy()
        """Requests the server refuses as busy, and those a restarting server did not
        answer, are sent again (`RetryPolicy`)."""
        self.on_retry = on_retry
        """Told of each wait before a retry: `(method, seconds, error)`, e.g. to show it."""
        self._random = random.Random()
        self.cancel_on_exit = cancel_on_exit
        self.max_input_rounds = max_input_rounds
        self._clock = clock
        self._ids = itertools.count(1)
        capabilities = w.ClientCapabilities(
            elicitation={"form": {}, "url": {}} if on_elicit else UNSET,
            sampling={} if on_sample else UNSET,
            roots={} if on_roots else UNSET,
            extensions={w.TASKS_EXTENSION: {}},
        )
        identity = info or w.Implementation(name="mcp-tasks-client", version="0.1.0")
        self.core = ClientCore(info=identity, capabilities=capabilities)
        self.era = era
        """The server's era: "modern" (2026-07-28), "legacy" (a 2025 session), or None
        until the first answer says (a 2025 server's refusal opens a session)."""
        self.session = LegacySession(info=identity, capabilities=capabilities)
        self.task_support: dict[str, str] = {}
        """The 2025 session, when `era` is "legacy": its `version`, the server's info."""

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def discover(self) -> dict[str, Any]:
        """`server/discover`; in a 2025 session, the same fields from `initialize`'s answer."""
        if not self.in_session():
            try:
                return await self.request("server/discover")
            except RpcError:
                if not self.in_session():  # (the request may have found a 2025 server)
                    raise
        return self.session.discover_result()

    async def ping(self) -> None:
        """Check that the server answers: `ping` in a 2025 session (an answer shaped as a
        task is refused: a ping never makes one), `server/discover` in 2026-07-28, which
        has no ping."""
        if not self.in_session():
            await self.discover()
            if not self.in_session():
                return
        result = await self.request("ping")
        if "task" in result or "taskId" in result or result.get("resultType") == "task":
            raise RemoteProtocolError(w.INTERNAL_ERROR, "the server answered ping with a task")

    async def listen(
        self, notifications: w.SubscriptionFilter, on_notification: NotificationCallback
    ) -> None:
        """Hold a `subscriptions/listen` stream open, each notification on it given to
        `on_notification` (the first: `notifications/subscriptions/acknowledged`), until the
        server ends it or the caller is cancelled."""
        params = {"notifications": msgspec.to_builtins(notifications)}
        await self.request("subscriptions/listen", params, on_notification=on_notification)

    # --- lists, prompts, resources, completion ---------------------------------------------

    async def list_tools(self) -> list[w.Tool]:
        """Every tool (all pages) this client may call; their `x-mcp-header` marks are kept
        for `call_tool`. A tool the server describes with invalid marks is left out (logged;
        `call_tool` refuses it with `ToolRejected`)."""
        now = self._clock()
        tools, ttl_ms = await self._list_all("tools/list", "tools", list[w.Tool])
        kept = self.core.tool_headers.learn(tools, ttl_ms=ttl_ms, now=now)
        for name, why in list(self.core.tool_headers.rejected.items())[:_MAX_REJECTIONS_LOGGED]:
            logger.warning("tool %r left out: %s", name, why)
        return kept

    async def list_prompts(self) -> list[w.Prompt]:
        return (await self._list_all("prompts/list", "prompts", list[w.Prompt]))[0]

    async def list_resources(self) -> list[w.Resource]:
        return (await self._list_all("resources/list", "resources", list[w.Resource]))[0]

    async def list_resource_templates(self) -> list[w.ResourceTemplate]:
        method, key = "resources/templates/list", "resourceTemplates"
        return (await self._list_all(method, key, list[w.ResourceTemplate]))[0]

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> w.GetPromptResult:
        """The prompt's messages, its input rounds answered."""
        params = {"name": name, "arguments": dict(arguments or {})}
        result = await self._complete("prompts/get", params, f"prompt {name!r}")
        return self.core.decode(result, _prompt_result, "GetPromptResult")

    async def read_resource(self, uri: str) -> w.ReadResourceResult:
        """The resource's contents, its input rounds answered."""
        result = await self._complete("resources/read", {"uri": uri}, f"resource {uri!r}")
        return self.core.decode(_cache_hints(result), _resource_result, "ReadResourceResult")

    async def complete(
        self,
        ref: w.PromptReference | w.ResourceTemplateReference,
        argument: str,
        value: str,
        *,
        context: Mapping[str, str] | None = None,
    ) -> w.Completion:
        """Suggested values for `argument` of a prompt or resource template, given what
        was typed of it (`value`) and, in `context`, the arguments already chosen."""
        params: dict[str, Any] = {
            "ref": msgspec.to_builtins(ref),
            "argument": {"name": argument, "value": value},
        }
        if context:
            params["context"] = {"arguments": dict(context)}
        result = await self._complete("completion/complete", params, f"argument {argument!r}")
        return self.core.decode(result, _complete_result, "CompleteResult").completion

    async def _list_all(
        self, method: str, key: str, kind: type[list[_Item]]
    ) -> tuple[list[_Item], int]:
        """Every item of a paginated list, and the shortest `ttlMs` of its pages (0 when
        a page gives none: not to be kept)."""
        items: list[_Item] = []
        ttls: list[int] = []
        params: dict[str, Any] = {}
        for _ in range(_MAX_LIST_PAGES):
            page = await self._complete(method, params, method)
            if method == "tools/list":
                self._note_task_support(page.get(key))
            try:
                items += msgspec.convert(page.get(key, []), kind)
            except msgspec.ValidationError as error:
                raise RemoteProtocolError(
                    w.INTERNAL_ERROR, f"malformed {method}: {error}"
                ) from None
            ttl = page.get("ttlMs")
            ttls.append(ttl if isinstance(ttl, int) and not isinstance(ttl, bool) else 0)
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str):
                return items, min(ttls)
            params = {"cursor": cursor}
        raise RemoteProtocolError(
            w.INTERNAL_ERROR, f"{method} went on past {_MAX_LIST_PAGES} pages"
        )

    def _note_task_support(self, tools: Any) -> None:
        """Each tool's `execution.taskSupport` (2025-11-25: whether a call may be a task)."""
        for tool in tools if isinstance(tools, list) else ():
            execution = tool.get("execution") if isinstance(tool, dict) else None
            support = execution.get("taskSupport") if isinstance(execution, dict) else None
            if isinstance(support, str) and isinstance(tool.get("name"), str):
                self.task_support[tool["name"]] = support

    # --- tools ---------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        on_status: StatusCallback | None = None,
    ) -> w.CallToolResult:
        """The tool's final result: input rounds answered, a task waited for."""
        outcome = await self.call_tool_or_task(name, arguments)
        if isinstance(outcome, w.CallToolResult):
            return outcome
        return await self.await_task(outcome, on_status=on_status)

    async def call_tool_or_task(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> w.CallToolResult | Task:
        """The result, or the task the server made of the call (input rounds answered)."""
        sends_headers = getattr(self.transport, "sends_headers", True) and self.era != "legacy"
        if sends_headers and not self.core.tool_headers.is_fresh(self._clock()):
            await self.list_tools()  # the x-mcp-header marks, for Mcp-Param headers
        why = self.core.tool_headers.rejected.get(name)
        if why is not None:
            raise ToolRejected(name, why)
        if self.in_session():
            return await self.call_in_session(name, arguments or {})
        params = {"name": name, "arguments": arguments or {}}
        result = await self._through_input("tools/call", params, f"tool {name!r}")
        if self.core.kind_of(result) == "task":
            task = self.core.task_of(result)
            self._journal("started", task.task_id, name)
            return task
        return self.core.call_result_of(result)

    # --- input rounds --------------------------------------------------------------------

    async def _complete(self, method: str, params: dict[str, Any], what: str) -> dict[str, Any]:
        """A complete result, after the input rounds; a task here is the server's error."""
        result = await self._through_input(method, params, what)
        if self.core.kind_of(result) != "complete":
            kind = result.get("resultType")
            raise RemoteProtocolError(w.INTERNAL_ERROR, f"{method} answered with a {kind} result")
        return result

    async def _through_input(
        self, method: str, params: dict[str, Any], what: str
    ) -> dict[str, Any]:
        """The first result that is not an input round: each round's requests answered and
        sent back as `inputResponses` with its `requestState` echoed exactly."""
        sent, refreshed = params, False
        for _ in range(self.max_input_rounds):
            try:
                result = await self.request(method, sent)
            except RpcError as error:
                if refreshed or method != "tools/call" or not names_param_header(error):
                    raise
                refreshed = True  # the tool's marks changed since they were listed: once
                await self.list_tools()
                result = await self.request(method, sent)
            if self.core.kind_of(result) != "input_required":
                return result
            requests = _input_requests.decode(msgspec.json.encode(result.get("inputRequests", {})))
            sent = {**params, "inputResponses": await self._answer(requests)}
            if "requestState" in result:
                sent["requestState"] = result["requestState"]
        raise LocalProtocolError(
            f"{what} still asked for input after {self.max_input_rounds} rounds"
        )

    # --- tasks ---------------------------------------------------------------------------

    async def get_task(self, task_id: str) -> Task:
        result = await self.request("tasks/get", {"taskId": task_id})
        return legacy_task(result) if self.in_session() else self.core.task_of(result)

    async def update_task(self, task_id: str, responses: Mapping[str, Any]) -> None:
        if self.in_session():
            raise LocalProtocolError(
                "a 2025-11-25 task takes no tasks/update: its questions come as the server's "
                "requests, answered by the client's handlers while it waits (await_task)"
            )
        answers = {key: msgspec.to_builtins(value) for key, value in responses.items()}
        await self.request("tasks/update", {"taskId": task_id, "inputResponses": answers})

    async def cancel_task(self, task_id: str) -> None:
        await self.request("tasks/cancel", {"taskId": task_id})

    async def await_task(
        self,
        task: str | Task,
        *,
        on_status: StatusCallback | None = None,
        answered: frozenset[str] = frozenset(),
    ) -> w.CallToolResult:
        """Wait for the task to finish and return its result.

        Raises `TaskFailed` (the task's JSON-RPC error), `TaskCancelled` or `TaskExpired`.
        If this wait is cancelled, the task is cancelled too (unless `cancel_on_exit` is
        False). `answered` lists input keys answered before (say, before a restart).
        """
        current = await self.get_task(task) if isinstance(task, str) else task
        if self.in_session():
            return await self.await_in_session(current, on_status)
        task_id = current.task_id
        tracker = InputTracker(answered)
        last_status: tuple[type, Any] | None = None
        try:
            while True:
                shown = (type(current), current.status_message)
                if on_status is not None and shown != last_status:
                    await maybe_await(on_status(current))
                last_status = shown
                if current.status.is_terminal:
                    self._journal("ended", task_id, current.status.value)
                if isinstance(current, w.CompletedTask):
                    return current.result
                if isinstance(current, w.FailedTask):
                    error = current.error
                    data = None if error.data is UNSET else error.data
                    raise TaskFailed(task_id, error.code, error.message, data)
                if isinstance(current, w.CancelledTask):
                    raise TaskCancelled(task_id)
                if isinstance(current, w.InputRequiredTask):
                    questions = tracker.unanswered(current.input_requests)
                    if questions:
                        answers = await self._answer(questions)
                        await self.update_task(task_id, answers)
                        tracker.mark_answered(answers)
                        self._journal("answered", task_id, list(answers))
                        current = await self._poll(task_id, current, wait=0)
                        continue
                current = await self._poll(task_id, current, wait=self.poll.delay(current))
        except anyio.get_cancelled_exc_class():
            if self.cancel_on_exit:
                with anyio.move_on_after(_CANCEL_SECONDS, shield=True):
                    await self.cancel_task(task_id)
            raise

    async def resume_task(
        self, task_id: str, *, on_status: StatusCallback | None = None
    ) -> w.CallToolResult:
        """Go on waiting for a task after a restart, without answering a key its
        `resume_log` says was answered."""
        log = self.resume_log
        answered = log.answered_keys(task_id) if log else frozenset()
        return await self.await_task(task_id, on_status=on_status, answered=answered)

    @property
    def journal(self) -> ResumeLog | None:
        """The name of `resume_log` before issue 28: kept one release."""
        return self.resume_log

    def _journal(self, event: str, task_id: str, detail: Any) -> None:
        journal = self.resume_log
        if journal is None:
            return
        writers: dict[str, Callable[[str, Any], None]] = {
            "started": journal.started,
            "answered": journal.answered,
            "ended": journal.ended,
        }
        # A small append and fsync, done in place: a worker thread would cost more than it
        # saves, and would let the event loop's clock run on while it writes.
        writers[event](task_id, detail)

    async def _poll(self, task_id: str, current: Task, *, wait: float) -> Task:
        deadline = give_up_at(current)
        if deadline is not None:
            left = deadline - self._clock()
            if left > 0:
                wait = min(wait, left)  # a look when its time is up by this clock
        # The server judges the expiry, not this clock (which may be ahead of the
        # server's): the task has expired once the server no longer knows it.
        await anyio.sleep(wait)
        try:
            return await self.get_task(task_id)
        except RpcError as error:
            if (
                error.code == w.INVALID_PARAMS
                and deadline is not None
                and self._clock() >= deadline
            ):
                raise TaskExpired(task_id) from error
            raise

    # --- answering input ---------------------------------------------------------------

    async def _answer(self, requests: Mapping[str, w.InputRequest]) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        for key, request in requests.items():
            answers[key] = msgspec.to_builtins(await self._answer_one(key, request))
        return answers

    async def _answer_one(
        self, key: str, request: w.InputRequest
    ) -> w.ElicitResult | w.CreateMessageResult | w.ListRootsResult:
        if isinstance(request, w.ElicitRequest):
            if self.on_elicit is None:
                raise missing_handler("elicitation", "on_elicit", key)
            return await self.on_elicit(request.params)
        if isinstance(request, w.CreateMessageRequest):
            if self.on_sample is None:
                raise missing_handler("sampling", "on_sample", key)
            return await self.on_sample(request.params)
        if self.on_roots is None:
            raise missing_handler("roots", "on_roots", key)
        return await self.on_roots()


@asynccontextmanager
async def connect_http(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_seconds: float = 30.0,
    auth: HttpAuthorization | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """A `Client` for the Streamable HTTP endpoint at `url` (e.g. http://127.0.0.1:8000/mcp);
    the era the last client found at `url` in this process is tried first;
    `headers` go with every request (a fixed credential: `{"Authorization": "Bearer …"}`),
    `auth` logs in where the server asks (`mcp_tasks.oauth.OAuth`), `timeout_seconds`
    bounds the connect and each read, `options` go to `Client`."""
    transport = HttpClientTransport(
        url, headers=headers, timeout_seconds=timeout_seconds, auth=auth
    )
    async with transport:
        client = Client(transport, **options)
        if "era" not in options and recalled_era(url) == "legacy":
            client.era, client.era_guessed = "legacy", True  # (no modern request first)
        try:
            yield client
        finally:
            remember_era(url, client.era)


@asynccontextmanager
async def connect_stdio(
    command: Sequence[str],
    *,
    stderr: Literal["inherit", "capture"] = "inherit",
    era: Era | None = None,
    probe_seconds: float = 5.0,
    **options: Any,
) -> AsyncIterator[Client]:
    """A `Client` for a server command it spawns and talks to over stdio.

    Without `era`, the server is asked `server/discover` (2026-07-28) first: a result or a
    modern error code, and the client goes on with that process; any other error, the
    process ending, or no answer in `probe_seconds`, and that process is closed and a new
    one started for a 2025 session (`initialize`)."""
    if era is None:
        async with open_stdio_transport(list(command), stderr=stderr) as transport:
            client = Client(transport, **options)
            if await client.probe(probe_seconds) == "modern":
                client.era = "modern"
                yield client
                return
        era = "legacy"  # (a fresh process: the probed one may be in any state)
    async with open_stdio_transport(list(command), stderr=stderr) as transport:
        yield Client(transport, era=era, **options)


def _cache_hints(result: dict[str, Any]) -> dict[str, Any]:
    """`result` with the cache hints a server of an earlier revision may leave out, read as
    "not to be kept"."""
    return {"ttlMs": 0, "cacheScope": "private", **result}


__all__ = [
    "REPEATABLE_METHODS",
    "AuthorizationError",
    "Client",
    "ClientTransport",
    "ElicitHandler",
    "MissingInputHandler",
    "NotificationCallback",
    "PollPolicy",
    "RemoteProtocolError",
    "ResumeEntry",
    "ResumeLog",
    "RetryHandler",
    "RetryPolicy",
    "RootsHandler",
    "RpcError",
    "SamplingHandler",
    "ServerUnreachable",
    "StatusCallback",
    "Task",
    "TaskCancelled",
    "TaskExpired",
    "TaskFailed",
    "ToolRejected",
    "TransportError",
    "connect_http",
    "connect_stdio",
]
