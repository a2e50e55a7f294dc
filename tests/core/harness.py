"""A synchronous shell for driving the core in tests: the effects are performed in memory.

Handlers are plain functions `ToolCall -> ToolOutcome`. Tasks do not run by themselves: a
test says when a task's handler returns (`finish`), so every interleaving is explicit.
Every reply body is kept, with the method it answered, for schema validation.
"""

from __future__ import annotations

import importlib
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_tasks.core import (
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
    AwaitAnswer,
    CancelRequest,
    CancelTask,
    Complete,
    CompletionCall,
    CompletionOutcome,
    DeleteTask,
    GetPrompt,
    HttpHeaders,
    Implementation,
    Listen,
    Need,
    Notify,
    PromptCall,
    PromptOutcome,
    PromptReference,
    PromptSpec,
    ReadResource,
    ReleaseLease,
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
    Step,
    Subscription,
    TaskLimits,
    TaskOptions,
    TaskRecord,
    ToolCall,
    ToolOutcome,
    ToolSpec,
    VersionConflict,
    WakeAt,
)
from mcp_tasks.store import StoreFull

Handler = Callable[[ToolCall], ToolOutcome]
PromptHandler = Callable[[PromptCall], PromptOutcome]
ResourceHandler = Callable[[ResourceRead], ResourceOutcome]
CompletionHandler = Callable[[CompletionCall], CompletionOutcome]
CompletionTarget = tuple[Literal["ref/prompt", "ref/resource"], str]

T0 = 1_785_585_600.0  # 2026-08-01T12:00:00Z
TASKS_CAPS: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
ALL_CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {},
    "extensions": {TASKS_EXTENSION: {}},
}


def meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": TASKS_CAPS if caps is None else caps,
        "io.modelcontextprotocol/clientInfo": {"name": "test-client", "version": "1.0"},
        **extra,
    }


class RecordBook:
    """The shell's records for core tests: a synchronous dict with the stores' version
    check (the real stores are async and tested against their own contract)."""

    def __init__(self) -> None:
        self.records: dict[str, TaskRecord] = {}

    def get(self, task_id: str) -> TaskRecord | None:
        return self.records.get(task_id)

    def save(
        self, record: TaskRecord, expected_version: int | None, limits: TaskLimits | None = None
    ) -> None:
        current = self.records.get(record.task_id)
        found = None if current is None else current.version
        if found != expected_version:
            raise VersionConflict(record.task_id, expected_version, found)
        if current is None and limits is not None:
            if len(self.records) >= limits.max_tasks:
                raise StoreFull(limits.max_tasks)
            held = sum(r.data_bytes for r in self.records.values()) + record.data_bytes
            if limits.max_bytes is not None and held > limits.max_bytes:
                raise StoreFull(limits.max_bytes, data=True)
            most = limits.max_active_per_principal
            active = [
                r
                for r in self.records.values()
                if r.principal == record.principal and not r.status.is_terminal
            ]
            if most is not None and len(active) >= most:
                raise StoreFull(most, per_principal=True)
            share = limits.max_stored_per_principal
            owned = [r for r in self.records.values() if r.principal == record.principal]
            if share is not None and len(owned) >= share:
                first = min((r.expires_at for r in owned if r.expires_at is not None), default=None)
                raise StoreFull(share, per_principal=True, stored=True, room_at=first)
        self.records[record.task_id] = record

    def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        current = self.records.get(task_id)
        if current is None:
            return False
        if expected_version is not None and current.version != expected_version:
            raise VersionConflict(task_id, expected_version, current.version)
        del self.records[task_id]
        return True

    def count(self) -> int:
        return len(self.records)

    def pop_due(self, now: float) -> list[TaskRecord]:
        """Every record whose time has come (the core tests hold a handful)."""
        return sorted(
            (r for r in self.records.values() if r.is_expired(now)),
            key=lambda r: (r.expires_at, r.task_id),
        )


@dataclass
class Exchange:
    """One message in and what came out, for schema checks and replay."""

    method: str | None
    sent: bytes
    reply: bytes | None
    http_status: int | None


@dataclass
class Harness:
    tools: dict[str, tuple[ToolSpec, Handler]] = field(default_factory=dict)
    prompts: dict[str, tuple[PromptSpec, PromptHandler]] = field(default_factory=dict)
    resources: dict[str, tuple[ResourceSpec | ResourceTemplateSpec, ResourceHandler]] = field(
        default_factory=dict
    )
    """By uri, or uri template for a `ResourceTemplateSpec`."""
    completions: dict[CompletionTarget, CompletionHandler] = field(default_factory=dict)
    task_options: TaskOptions = field(default_factory=TaskOptions)
    options: ServerOptions = field(default_factory=ServerOptions)
    now: float = T0
    state_key: bytes = b"k" * 32

    def __post_init__(self) -> None:
        counter = itertools.count(1)
        self.store = RecordBook()
        self.core = ServerCore(
            info=Implementation(name="test-server", version="0.1.0"),
            tools=[spec for spec, _ in self.tools.values()],
            new_task_id=lambda: f"tsk-{next(counter):04d}",
            state_key=self.state_key,
            tasks=self.task_options,
            options=self.options,
        )
        for prompt, _ in self.prompts.values():
            self.core.catalog.add_prompt(prompt)
        for resource, _ in self.resources.values():
            if isinstance(resource, ResourceSpec):
                self.core.catalog.add_resource(resource)
            else:
                self.core.catalog.add_template(resource)
        for target in self.completions:
            self.core.catalog.add_completion(target)
        self.exchanges: list[Exchange] = []
        self.started: dict[str, ToolCall] = {}
        self.resumed: list[ResumeTask] = []
        self.cancelled: list[str] = []
        self.cancelled_requests: list[CancelRequest] = []
        self.wakes: list[WakeAt] = []
        self.other_effects: list[AwaitAnswer | ReleaseLease | Notify] = []
        self.subscriptions: list[Subscription] = []
        self.ids = itertools.count(1)

    # --- sending --------------------------------------------------------------------

    def send(self, data: bytes, headers: HttpHeaders | None = None) -> Exchange:
        try:
            method = json.loads(data).get("method")
        except (ValueError, AttributeError, RecursionError):
            method = None
        reply = self.perform(self.core.receive(data, self.now, headers))
        exchange = Exchange(
            method=method if isinstance(method, str) else None,
            sent=data,
            reply=None if reply is None else reply.body,
            http_status=None if reply is None else reply.http_status,
        )
        self.exchanges.append(exchange)
        return exchange

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        caps: dict[str, Any] | None = None,
        headers: HttpHeaders | None = None,
    ) -> dict[str, Any]:
        """Send a request with a fresh id and standard `_meta`; return the decoded reply."""
        full = {**(params or {}), "_meta": meta(caps)}
        message = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": full}
        exchange = self.send(json.dumps(message).encode(), headers)
        assert exchange.reply is not None, f"no reply to {method}"
        decoded: dict[str, Any] = json.loads(exchange.reply)
        assert decoded["id"] == message["id"]
        return decoded

    def call(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        params.update(kw.pop("extra", {}))
        return self.request("tools/call", params, **kw)

    def get(self, task_id: str, **kw: Any) -> dict[str, Any]:
        return self.request("tasks/get", {"taskId": task_id}, **kw)

    def update(self, task_id: str, responses: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return self.request("tasks/update", {"taskId": task_id, "inputResponses": responses}, **kw)

    def cancel(self, task_id: str, **kw: Any) -> dict[str, Any]:
        return self.request("tasks/cancel", {"taskId": task_id}, **kw)

    # --- tasks ------------------------------------------------------------------------

    def record(self, task_id: str) -> TaskRecord:
        record = self.store.get(task_id)
        assert record is not None, f"no record for {task_id}"
        return record

    def finish(self, task_id: str, outcome: ToolOutcome) -> None:
        """The handler running `task_id` returns `outcome`."""
        step = self.core.task_returned(self.record(task_id), outcome, self.now)
        assert step.reply is None
        self.carry_out(step)

    def expire_due(self) -> None:
        for record in self.store.pop_due(self.now):
            self.carry_out(self.core.expire_task(record, self.now))

    # --- the shell ----------------------------------------------------------------------

    def perform(self, answer: Step | Need) -> Any:
        """Fulfil needs until the core answers with a `Step`, perform it; its reply."""
        tool_call: ToolCall | None = None
        while not isinstance(answer, Step):
            if isinstance(answer, RunTool):
                tool_call = answer.call
            answer = self.fulfil(answer)
            if answer is None:
                return None
        try:
            return self.carry_out(answer)
        except StoreFull as full:  # the task a call created (at once, for a required tool)
            starts = [e.call for e in answer.effects if isinstance(e, StartTask)]
            tool_call = tool_call or starts[0]
            return self.carry_out(
                self.core.task_refused(tool_call, per_principal=full.per_principal)
            )

    def fulfil(self, need: Need) -> Step | Need | None:
        if isinstance(need, RunTool):
            _, handler = self.tools[need.call.tool_name]
            return self.core.tool_returned(need.call, handler(need.call), self.now)
        if isinstance(need, GetPrompt):
            _, prompt_handler = self.prompts[need.call.prompt_name]
            return self.core.prompt_returned(need.call, prompt_handler(need.call), self.now)
        if isinstance(need, ReadResource):
            read = need.call
            _, resource_handler = self.resources[
                read.uri if read.template is None else read.template
            ]
            return self.core.resource_returned(read, resource_handler(read), self.now)
        if isinstance(need, Complete):
            ref = need.call.ref
            target: CompletionTarget = (
                ("ref/prompt", ref.name)
                if isinstance(ref, PromptReference)
                else ("ref/resource", ref.uri)
            )
            completion = self.completions[target](need.call)
            return self.core.completion_returned(need.call, completion)
        if isinstance(need, Listen):
            self.subscriptions.append(need.subscription)
            return None
        record = self.store.get(need.request.task_id)
        return self.core.handle_task_request(need.request, record, self.now)

    def carry_out(self, step: Step) -> Any:
        for effect in step.effects:
            if isinstance(effect, SaveTask):
                self.store.save(effect.record, effect.expected_version, effect.limits)
            elif isinstance(effect, DeleteTask):
                self.store.delete(effect.task_id, effect.expected_version)
            elif isinstance(effect, StartTask):
                self.started[effect.task_id] = effect.call
            elif isinstance(effect, ResumeTask):
                self.resumed.append(effect)
            elif isinstance(effect, CancelTask):
                self.cancelled.append(effect.task_id)
            elif isinstance(effect, CancelRequest):
                self.cancelled_requests.append(effect)
            elif isinstance(effect, WakeAt):
                self.wakes.append(effect)
            elif isinstance(effect, AwaitAnswer | ReleaseLease | Notify):
                self.other_effects.append(effect)
            else:  # pragma: no cover - a new effect type the harness must learn
                raise AssertionError(f"unknown effect {effect!r}")
        return step.reply


# --- schema checks for what the catalog answers -----------------------------------------

# schema_check (tests/) imports jsonschema, which ships no type stubs: load it untyped.
_schema_check: Any = importlib.import_module("schema_check")
CORE: str = _schema_check.CORE
TASKS: str = _schema_check.TASKS
_CATALOG_RESPONSE_DEF_FOR_METHOD = {
    "prompts/list": "ListPromptsResultResponse",
    "prompts/get": "GetPromptResultResponse",
    "resources/list": "ListResourcesResultResponse",
    "resources/templates/list": "ListResourceTemplatesResultResponse",
    "resources/read": "ReadResourceResultResponse",
    "completion/complete": "CompleteResultResponse",
}


def check_schema(filename: str, definition: str, instance: Any) -> None:
    """Validate `instance` against `definition` of the official schema `filename`."""
    _schema_check.check(filename, definition, instance)


def check_any_reply(method: str | None, body: bytes) -> None:
    """`schema_check.check_reply`, which also knows prompts, resources and completion."""
    definition = _CATALOG_RESPONSE_DEF_FOR_METHOD.get(method or "")
    message = json.loads(body)
    if definition is None or "error" in message:
        _schema_check.check_reply(None if definition else method, body)
    elif message["result"].get("resultType") == "input_required":
        check_schema(CORE, "JSONRPCResultResponse", message)
        check_schema(CORE, "InputRequiredResult", message["result"])
        for request in message["result"]["inputRequests"].values():
            check_schema(CORE, "InputRequest", request)
    else:
        check_schema(CORE, definition, message)


def checked_harnesses() -> Iterator[type[Harness]]:
    """The body of a `make_harness` fixture whose replies are checked with `check_any_reply`
    when the test ends (conftest's knows only tools and tasks)."""
    made: list[Harness] = []

    class Checked(Harness):
        def __post_init__(self) -> None:
            super().__post_init__()
            made.append(self)

    yield Checked
    for harness in made:
        for exchange in harness.exchanges:
            if exchange.reply is not None:
                check_any_reply(exchange.method, exchange.reply)
