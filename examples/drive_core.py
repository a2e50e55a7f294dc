"""Drive the pure core from your own transport: a complete, synchronous shell in one page.

The shell owns the clock, the id source, the store and the handlers; the core decides.
Each incoming message goes to `core.handle(Received(data), now)`; while the core answers
with a `Need` (run this handler, load that task), the shell fulfils it and hands the
result back as the input the need names (`need.returned(outcome)`, `need.fetched(record)`);
then it performs the commands of the final `Step`, in order, and sends the reply. Here
tasks run to completion right after they start (a real shell runs them concurrently: see
`mcp_tasks.runtime`).

Run it: `python examples/drive_core.py` prints a short exchange.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from mcp_tasks.core import (
    START_TASK,
    FetchTask,
    Need,
    Reply,
    RunTool,
    ServerCore,
    Step,
    TaskRecord,
    ToolCall,
    ToolOutcome,
    ToolSpec,
)
from mcp_tasks.core.commands import DeleteTask, ResumeTask, SaveTask, StartTask
from mcp_tasks.core.inputs import Received, TaskReturned
from mcp_tasks.core.wire import PROTOCOL_VERSION, TASKS_EXTENSION, CallToolResult, Implementation


def shout(call: ToolCall) -> ToolOutcome:
    """A tool that becomes a task when the client can hold one."""
    if not call.in_task:
        return START_TASK
    text = json.loads(bytes(call.arguments or b"{}")).get("text", "")
    return CallToolResult.text(text.upper())


class MiniShell:
    def __init__(self) -> None:
        self.records: dict[str, TaskRecord] = {}  # the store (the real ones are async)
        self.core = ServerCore(
            info=Implementation(name="mini", version="1.0"),
            new_task_id=lambda: "tsk_" + secrets.token_urlsafe(24),
            state_key=secrets.token_bytes(32),
        )
        # One registry: the spec and its handler together; the core hands the handler back.
        self.core.catalog.add_tool(ToolSpec(name="shout", task_support="optional"), shout)
        self.pending: list[StartTask | ResumeTask] = []

    def handle(self, data: bytes) -> bytes | None:
        reply = self.drive(self.core.handle(Received(data), time.time()))
        while self.pending:  # run started tasks to the end (a real shell runs them apart)
            job = self.pending.pop(0)
            outcome = job.handler(job.call)
            record = self.records.get(job.task_id)  # as stored now: it may have been cancelled
            self.perform(self.core.handle(TaskReturned(record, outcome), time.time()))
        return None if reply is None else reply.body

    def drive(self, answer: Step | Need) -> Reply | None:
        """Fulfil what the core needs until it answers with a `Step`; perform that."""
        while not isinstance(answer, Step):
            if isinstance(answer, RunTool):
                outcome = answer.handler(answer.call)
                answer = self.core.handle(answer.returned(outcome), time.time())
            elif isinstance(answer, FetchTask):
                record = self.records.get(answer.request.task_id)
                answer = self.core.handle(answer.fetched(record), time.time())
            else:
                raise NotImplementedError(f"this shell serves tools and tasks only: {answer!r}")
        return self.perform(answer)

    def perform(self, step: Step) -> Reply | None:
        for effect in step.effects:
            if isinstance(effect, SaveTask):
                # One thread, no await: nothing else can have written since the core read it.
                self.records[effect.record.task_id] = effect.record
            elif isinstance(effect, DeleteTask):
                self.records.pop(effect.task_id, None)
            elif isinstance(effect, StartTask | ResumeTask):
                self.pending.append(effect)
            # CancelTask, CancelRequest, WakeAt, ...: nothing runs concurrently here, and
            # expiry is swept by the caller.
        return step.reply


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
