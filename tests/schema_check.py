"""Validate what the library sends against the official 2026-07-28 JSON Schemas (2020-12)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

_HERE = Path(__file__).parent / "schema"
CORE = "core-2026-07-28.schema.json"
TASKS = "tasks-ext-2026-07-28.schema.json"

_ERROR_DEF_FOR_CODE = {
    -32020: "HeaderMismatchError",
    -32021: "MissingRequiredClientCapabilityError",
    -32022: "UnsupportedProtocolVersionError",
}
_RESPONSE_DEF_FOR_METHOD = {
    "server/discover": "DiscoverResultResponse",
    "tools/list": "ListToolsResultResponse",
}
_TASK_RESULT_DEF_FOR_METHOD = {
    "tasks/get": "GetTaskResult",
    "tasks/update": "UpdateTaskResult",
    "tasks/cancel": "CancelTaskResult",
}


@functools.cache
def _defs(filename: str) -> dict[str, Any]:
    defs: dict[str, Any] = json.loads((_HERE / filename).read_text())["$defs"]
    return defs


@functools.cache
def validator(filename: str, definition: str) -> Draft202012Validator:
    defs = _defs(filename)
    assert definition in defs, f"{definition} is not in {filename}"
    return Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": defs})


def check(filename: str, definition: str, instance: Any) -> None:
    errors = sorted(validator(filename, definition).iter_errors(instance), key=str)
    assert not errors, f"{definition} rejects {json.dumps(instance)[:400]}: {errors[0].message}"


def check_reply(method: str | None, body: bytes) -> None:
    """Validate one reply the server sent to a request with this method."""
    message = json.loads(body)
    if "error" in message:
        check(CORE, "JSONRPCErrorResponse", message)
        definition = _ERROR_DEF_FOR_CODE.get(message["error"]["code"])
        if definition:
            check(CORE, definition, message)
        return
    check(CORE, "JSONRPCResultResponse", message)
    result = message["result"]
    if method in _RESPONSE_DEF_FOR_METHOD:
        check(CORE, _RESPONSE_DEF_FOR_METHOD[method], message)
    elif method in _TASK_RESULT_DEF_FOR_METHOD:
        check(TASKS, _TASK_RESULT_DEF_FOR_METHOD[method], result)
        if result.get("status") == "completed":
            check(CORE, "CallToolResult", result["result"])
    elif method == "tools/call":
        kind = result.get("resultType")
        if kind == "task":
            check(TASKS, "CreateTaskResult", result)
        elif kind == "input_required":
            check(CORE, "InputRequiredResult", result)
            for request in result.get("inputRequests", {}).values():
                check(CORE, "InputRequest", request)
        else:
            check(CORE, "CallToolResultResponse", message)
    else:
        raise AssertionError(f"no schema known for a result to {method!r}")


LEGACY = "core-2025-11-25.schema.json"
_LEGACY_RESULT_FOR_METHOD = {
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "completion/complete": "CompleteResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "tasks/get": "GetTaskResult",
    "tasks/cancel": "CancelTaskResult",
    "tasks/list": "ListTasksResult",
    "tasks/result": "CallToolResult",
}
_LEGACY_SERVER_MESSAGE = {
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "roots/list": "ListRootsRequest",
    "notifications/progress": "ProgressNotification",
    "notifications/message": "LoggingMessageNotification",
    "notifications/resources/updated": "ResourceUpdatedNotification",
    "notifications/tools/list_changed": "ToolListChangedNotification",
    "notifications/prompts/list_changed": "PromptListChangedNotification",
    "notifications/resources/list_changed": "ResourceListChangedNotification",
    "notifications/tasks/status": "TaskStatusNotification",
}


def check_legacy(method: str | None, message: dict[str, Any]) -> None:
    """Validate one message the server sent a 2025-11-25 client against that revision's
    schema: a response to a request of `method`, or a request or notification of its own."""
    if "method" in message:
        check(LEGACY, _LEGACY_SERVER_MESSAGE[message["method"]], message)
        return
    if "error" in message:
        check(LEGACY, "JSONRPCErrorResponse", message)
        return
    check(LEGACY, "JSONRPCResultResponse", message)
    if method == "tools/call" and "task" in message["result"]:  # a task-augmented call
        check(LEGACY, "CreateTaskResult", message["result"])
        return
    check(LEGACY, _LEGACY_RESULT_FOR_METHOD[method or ""], message["result"])
