"""Drive the pure core from your own transport: a complete, synchronous shell in one page.

The shell owns the clock, the id source, the store and the handlers; the core decides.
Each incoming message goes to `core.receive`; the shell performs the effects of the `Step`
it gets back, in order, then sends the reply. Here tasks run to completion right after
they start (a real shell runs them concurrently: see the trio runtime).

Run it: `python examples/drive_core.py` prints a short exchange.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from mcp_tasks.core import (
    PROTOCOL_VERSION,
    START_TASK,
    TASKS_EXTENSION,
    CallToolResult,
    CancelRequest,
    CancelTask,
    DeleteTask,
    FetchTask,
    Implementation,
    Reply,
    ResumeTask,
    RunTool,
    SaveTask,
    ServerCore,
    StartTask,
    Step,
    TaskRecord,
    ToolCall,
    ToolOutcome,
    ToolSpec,
    WakeAt,
)


def shout(call: ToolCall) -> ToolOutcome:
    """A tool that becomes a task when the client can hold one."""
    if not call.in_task:
        return START_TASK
    text = json.loads(bytes(call.arguments or b"{}")).get("text", "")
    return CallToolResult.text(text.upper())


class MiniShell:
    def __init__(self) -> None:
        self.records: dict[str, TaskRecord] = {}  # the store (the real ones are async)
        self.handlers = {"shout": shout}
        self.core = ServerCore(
            info=Implementation(name="mini", version="1.0"),
            tools=[ToolSpec(name="shout", task_support="optional")],
            new_task_id=lambda: "tsk_" + secrets.token_urlsafe(24),
            state_key=secrets.token_bytes(32),
        )
        self.pending: list[StartTask | ResumeTask] = []

    def handle(self, data: bytes) -> bytes | None:
        reply = self.perform(self.core.receive(data, time.time()))
        while self.pending:  # run started tasks to the end (a real shell runs them apart)
            job = self.pending.pop(0)
            outcome = self.handlers[job.call.tool_name](job.call)
            record = self.records.get(job.task_id)  # as stored now: it may have been cancelled
            if record is not None:
                self.perform(self.core.task_returned(record, outcome, time.time()))
        return None if reply is None else reply.body

    def perform(self, step: Step) -> Reply | None:
        reply = step.reply
        for effect in step.effects:
            now = time.time()
            if isinstance(effect, RunTool):
                outcome = self.handlers[effect.call.tool_name](effect.call)
                stored = len(self.records)
                reply = self.perform(
                    self.core.tool_returned(effect.call, outcome, now, stored_tasks=stored)
                )
            elif isinstance(effect, FetchTask):
                record = self.records.get(effect.request.task_id)
                reply = self.perform(self.core.handle_task_request(effect.request, record, now))
            elif isinstance(effect, SaveTask):
                # One thread, no await: nothing else can have written since the core read it.
                self.records[effect.record.task_id] = effect.record
            elif isinstance(effect, DeleteTask):
                self.records.pop(effect.task_id, None)
            elif isinstance(effect, StartTask | ResumeTask):
                self.pending.append(effect)
            elif isinstance(effect, CancelTask | CancelRequest | WakeAt):
                pass  # nothing runs concurrently here, and expiry is swept by the caller
        return reply


def request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
    }
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": meta},
    }
    return json.dumps(message).encode()


def main() -> list[dict[str, Any]]:
    shell = MiniShell()
    created = json.loads(
        shell.handle(request(1, "tools/call", {"name": "shout", "arguments": {"text": "hello"}}))
        or b""
    )
    print("tools/call ->", created["result"]["resultType"], created["result"]["status"])
    task = json.loads(
        shell.handle(request(2, "tasks/get", {"taskId": created["result"]["taskId"]})) or b""
    )
    print("tasks/get  ->", task["result"]["status"], task["result"]["result"]["content"])
    return [created, task]


if __name__ == "__main__":
    main()
