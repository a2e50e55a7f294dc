"""What the Python task-client drivers share: the summary they print and the records in it.

A driver runs the steps of tasks_scenario.py through its client's own task API and prints
one JSON object on stdout, the summary (the node driver prints the same shape):

    {"client": "mcp 1.30.0",
     "connect": {"protocol_version", "tasks": the server's tasks capability,
                 "task_support": {tool: execution.taskSupport}},
     "slow":   {"created": TASK, "polled": [TASK], "result": RESULT, "after": TASK},
     "cancel": {"created": TASK, "cancelled": TASK, "after": TASK, "result": RESULT},
     "ask":    {"created": TASK, "polled": [TASK], "result": RESULT, "after": TASK},
     "fail":   {"created": TASK, "polled": [TASK], "result": RESULT, "after": TASK},
     "list":   {"ids": [...], "statuses": {id: status}, "next_cursor": ...},
     "questions": [{"method", "message", "fields", "related_task", "during_result"}],
     "status_notifications": [[task id, status], ...]}

TASK is {"task_id", "status", "status_message", "ttl", "poll_interval", "timestamps"}
(`timestamps`: both `createdAt` and `lastUpdatedAt` present); RESULT is {"is_error",
"text", "related_task", "keys"} (`related_task` the taskId of the result's related-task
`_meta`; `keys` the result's own keys, `_meta` aside, so an empty payload shows). A step that
raised holds {"error": {"type", "message", "code"}} where its value would be (a step's
earlier records kept), and the driver goes on with the next step. `during_result` is the
id of the task whose blocking `tasks/result` was outstanding when the question arrived.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from tasks_scenario import POLL_SECONDS_AT_MOST, STEP_SECONDS

RELATED_TASK = "io.modelcontextprotocol/related-task"
TERMINAL = {"completed", "failed", "cancelled"}


def emit(summary: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(summary, default=str) + "\n")
    sys.stdout.flush()


def describe(error: BaseException) -> dict[str, Any]:
    """The error as JSON; an SDK `McpError` keeps its JSON-RPC code."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    found: dict[str, Any] = {"type": type(error).__name__, "message": str(error), "code": None}
    inner = getattr(error, "error", None)  # mcp.shared.exceptions.McpError.error: ErrorData
    if inner is not None and hasattr(inner, "code"):
        found.update(code=inner.code, message=inner.message)
    return found


def as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    dumped: dict[str, Any] = value.model_dump(by_alias=True, mode="json")
    return dumped


def task_record(value: Any) -> dict[str, Any]:
    """A Task, GetTaskResult or CancelTaskResult (model or dict) as a TASK record."""
    task = as_dict(value)
    return {
        "task_id": task.get("taskId"),
        "status": task.get("status"),
        "status_message": task.get("statusMessage"),
        "ttl": task.get("ttl"),
        "poll_interval": task.get("pollInterval"),
        "timestamps": bool(task.get("createdAt")) and bool(task.get("lastUpdatedAt")),
    }


def result_record(value: Any) -> dict[str, Any]:
    """A CallToolResult (model or dict) as a RESULT record."""
    result = as_dict(value)
    meta = result.get("_meta") or {}
    return {
        "is_error": bool(result.get("isError")),
        "text": [block["text"] for block in result.get("content") or [] if "text" in block],
        "related_task": (meta.get(RELATED_TASK) or {}).get("taskId"),
        "keys": sorted(
            key for key, value in result.items() if key != "_meta" and value is not None
        ),
    }


class Summary(dict[str, Any]):
    """The summary being built; `step` runs one step into it, errors recorded."""

    def __init__(self, client: str) -> None:
        super().__init__(client=client, questions=[], status_notifications=[])
        self.awaiting_result: str | None = None  # the task whose tasks/result is outstanding

    @asynccontextmanager
    async def step(self, name: str) -> AsyncIterator[dict[str, Any]]:
        record: dict[str, Any] = {}
        self[name] = record
        try:
            with anyio.fail_after(STEP_SECONDS):
                yield record
        except Exception as error:
            record["error"] = describe(error)

    async def blocking_result(self, task_id: str, read: Callable[[], Awaitable[Any]]) -> Any:
        """Read `tasks/result` for `task_id`, marked outstanding while it blocks."""
        self.awaiting_result = task_id
        try:
            return await read()
        finally:
            self.awaiting_result = None

    def question(self, method: str, params: dict[str, Any]) -> None:
        """Record a server request that arrived (its params as sent)."""
        meta = params.get("_meta") or {}
        schema = params.get("requestedSchema") or {}
        self["questions"].append(
            {
                "method": method,
                "message": params.get("message"),
                "fields": sorted(schema.get("properties") or {}),
                "related_task": (meta.get(RELATED_TASK) or {}).get("taskId"),
                "during_result": self.awaiting_result,
            }
        )


async def poll(
    get: Callable[[str], Awaitable[Any]], task_id: str, until: set[str]
) -> list[dict[str, Any]]:
    """tasks/get `task_id` until its status is in `until`, honouring its pollInterval (at most
    POLL_SECONDS_AT_MOST apart); every answer as a TASK record."""
    polled: list[dict[str, Any]] = []
    while True:
        record = task_record(await get(task_id))
        polled.append(record)
        if record["status"] in until:
            return polled
        interval = (record["poll_interval"] or 0) / 1000
        await anyio.sleep(min(interval, POLL_SECONDS_AT_MOST) if interval else POLL_SECONDS_AT_MOST)


def list_record(value: Any) -> dict[str, Any]:
    listed = as_dict(value)
    tasks = [as_dict(task) for task in listed.get("tasks") or []]
    return {
        "ids": [task.get("taskId") for task in tasks],
        "statuses": {task.get("taskId"): task.get("status") for task in tasks},
        "next_cursor": listed.get("nextCursor"),
    }
