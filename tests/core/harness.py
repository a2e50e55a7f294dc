"""A synchronous shell for driving the core in tests: the effects are performed in memory.

Handlers are plain functions `ToolCall -> ToolOutcome`. Tasks do not run by themselves: a
test says when a task's handler returns (`finish`), so every interleaving is explicit.
Every reply body is kept, with the method it answered, for schema validation.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp_tasks.core import (
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
    CancelRequest,
    CancelTask,
    DeleteTask,
    FetchTask,
    HttpHeaders,
    Implementation,
    ResumeTask,
    RunTool,
    SaveTask,
    ServerCore,
    ServerOptions,
    StartTask,
    Step,
    TaskOptions,
    TaskRecord,
    ToolCall,
    ToolOutcome,
    ToolSpec,
    WakeAt,
)
from mcp_tasks.store import MemoryTaskStore

Handler = Callable[[ToolCall], ToolOutcome]

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
    task_options: TaskOptions = field(default_factory=TaskOptions)
    options: ServerOptions = field(default_factory=ServerOptions)
    now: float = T0
    state_key: bytes = b"k" * 32

    def __post_init__(self) -> None:
        counter = itertools.count(1)
        self.store = MemoryTaskStore()
        self.core = ServerCore(
            info=Implementation(name="test-server", version="0.1.0"),
            tools=[spec for spec, _ in self.tools.values()],
            new_task_id=lambda: f"tsk-{next(counter):04d}",
            state_key=self.state_key,
            tasks=self.task_options,
            options=self.options,
        )
        self.exchanges: list[Exchange] = []
        self.started: dict[str, ToolCall] = {}
        self.resumed: list[ResumeTask] = []
        self.cancelled: list[str] = []
        self.cancelled_requests: list[CancelRequest] = []
        self.wakes: list[WakeAt] = []
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
        self.perform(step)

    def expire_due(self) -> None:
        for record in self.store.pop_due(self.now):
            self.perform(self.core.expire_task(record, self.now))

    # --- the shell ----------------------------------------------------------------------

    def perform(self, step: Step) -> Any:
        reply = step.reply
        for effect in step.effects:
            if isinstance(effect, RunTool):
                assert reply is None
                _, handler = self.tools[effect.call.tool_name]
                outcome = handler(effect.call)
                reply = self.perform(
                    self.core.tool_returned(
                        effect.call, outcome, self.now, stored_tasks=self.store.count()
                    )
                )
            elif isinstance(effect, FetchTask):
                assert reply is None
                record = self.store.get(effect.request.task_id)
                reply = self.perform(
                    self.core.handle_task_request(effect.request, record, self.now)
                )
            elif isinstance(effect, SaveTask):
                self.store.save(effect.record, effect.expected_version)
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
            else:  # pragma: no cover - a new effect type the harness must learn
                raise AssertionError(f"unknown effect {effect!r}")
        return reply
