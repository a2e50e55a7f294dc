"""Tools for the core tests: small handlers that exercise each outcome."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from mcp_tasks.core import (
    START_TASK,
    CallToolResult,
    CreateMessageParams,
    CreateMessageRequest,
    ElicitParams,
    ElicitRequest,
    ElicitResult,
    ErrorObject,
    InputRequired,
    ListRootsRequest,
    SamplingMessage,
    ToolCall,
    ToolOutcome,
    ToolSpec,
)

from .harness import Handler


def args(call: ToolCall) -> dict[str, Any]:
    return {} if call.arguments is None else dict(json.loads(bytes(call.arguments)))


def ask_name(message: str = "Who are you?") -> ElicitRequest:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    return ElicitRequest(params=ElicitParams(message=message, mode="form", requested_schema=schema))


def ask_confirm(message: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}
    return ElicitRequest(params=ElicitParams(message=message, requested_schema=schema))


def greet(call: ToolCall) -> ToolOutcome:
    return CallToolResult.text(f"Hello, {args(call)['name']}!")


def slow(call: ToolCall) -> ToolOutcome:
    if not call.in_task:
        return START_TASK
    return CallToolResult.text(f"done in place: {args(call).get('label', '')}")


def ask_then_task(call: ToolCall) -> ToolOutcome:
    """Asks a name before the task exists; the task run sees the same answer."""
    answer = call.input_responses.get("who")
    if answer is None:
        return InputRequired(requests={"who": ask_name()}, state="round-1")
    if not call.in_task:
        return START_TASK
    name = msgspec.json.decode(answer, type=ElicitResult).content["name"]  # type: ignore[index]
    return CallToolResult.text(f"Hello, {name}! ({call.handler_state})")


def greet_after_asking(call: ToolCall) -> ToolOutcome:
    """Asks a name in an input round, then greets (no task)."""
    raw = call.input_responses.get("who")
    try:
        answer = None if raw is None else msgspec.json.decode(raw, type=ElicitResult)
    except msgspec.ValidationError:
        answer = None
    if answer is None or not isinstance(answer.content, dict):
        return InputRequired(requests={"who": ask_name()}, state="round-1")
    return CallToolResult.text(f"Hello, {answer.content['name']}! ({call.handler_state})")


def needs_sampling(call: ToolCall) -> ToolOutcome:
    message = SamplingMessage(role="user", content={"type": "text", "text": "hi"})
    return InputRequired(
        requests={
            "s": CreateMessageRequest(params=CreateMessageParams(messages=[message], max_tokens=10))
        }
    )


def needs_roots(call: ToolCall) -> ToolOutcome:
    return InputRequired(requests={"r": ListRootsRequest()})


def fails(call: ToolCall) -> ToolOutcome:
    return ErrorObject(code=-32603, message="upstream crashed")


def start_anyway(call: ToolCall) -> ToolOutcome:
    return START_TASK


TOOLS: dict[str, tuple[ToolSpec, Handler]] = {
    "greet": (
        ToolSpec(
            name="greet",
            input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        ),
        greet,
    ),
    "slow": (ToolSpec(name="slow", task_support="optional"), slow),
    "required_job": (ToolSpec(name="required_job", task_support="required"), start_anyway),
    "ask_then_task": (
        # It asks before its task exists: a tool that runs only as a task says so, or its
        # task is created at once (as the runtime has always done: its handler never ran).
        ToolSpec(name="ask_then_task", task_support="required", input_before_task=True),
        ask_then_task,
    ),
    "greet_after_asking": (ToolSpec(name="greet_after_asking"), greet_after_asking),
    "needs_sampling": (ToolSpec(name="needs_sampling"), needs_sampling),
    "needs_roots": (ToolSpec(name="needs_roots"), needs_roots),
    "fails": (ToolSpec(name="fails"), fails),
    "none_but_starts": (ToolSpec(name="none_but_starts"), start_anyway),
}
