"""What a handler can hand back to the core.

A tool handler returns one of:

* a `CallToolResult`: the answer (with `is_error=True` for a tool-level failure);
* an `ErrorObject`: a JSON-RPC error; inside a task the task ends `failed`;
* `InputRequired(...)`: questions for the client. Before a task exists this becomes an
  `InputRequiredResult` round (MRTR); inside a task the task waits in `input_required`;
* `START_TASK`: turn this call into a task and run the handler again inside it.
"""

from __future__ import annotations

import enum
from typing import Final

from msgspec import Struct

from ._encode import error_object, shown
from ._errors import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError, RemoteProtocolError
from ._wire import (
    CallToolResult,
    Completion,
    ErrorObject,
    GetPromptResult,
    InputRequest,
    ResourceContents,
)


class StartTaskOutcome(enum.Enum):
    START_TASK = "start_task"


START_TASK: Final = StartTaskOutcome.START_TASK


class InputRequired(Struct, frozen=True, kw_only=True):
    requests: dict[str, InputRequest]
    state: str | None = None
    """Before a task: carried (sealed) to the next round and handed back to the handler."""
    status_message: str | None = None
    """Inside a task: the status message while it waits."""


ToolOutcome = CallToolResult | ErrorObject | InputRequired | StartTaskOutcome

PromptOutcome = GetPromptResult | ErrorObject | InputRequired
"""What a prompt handler hands back: the messages, an error, or questions (MRTR)."""
ResourceOutcome = list[ResourceContents] | ErrorObject | InputRequired
"""What a resource handler hands back: the contents, an error, or questions (MRTR)."""
CompletionOutcome = Completion | ErrorObject


class ToolError(Exception):
    """Raise in a tool to answer with a tool-level error (`isError: true`); a task that
    raises it still ends `completed`. For a JSON-RPC error raise `RemoteProtocolError`."""


class ResourceNotFound(Exception):
    """Raise in a resource handler when the uri names nothing: -32602 with `data.uri`."""


def failure_outcome(error: Exception, what: str, uri: str | None = None) -> ErrorObject:
    """The JSON-RPC error a handler's exception becomes: its own `ProtocolError`, -32602
    with `data.uri` for `ResourceNotFound`, else -32603 without the details (those belong
    in the server's log, not in the client's reply). `what` names the handler."""
    if isinstance(error, ProtocolError):
        return error_object(error)
    if isinstance(error, ResourceNotFound) and uri is not None:
        return failure_outcome(resource_not_found(uri), what)
    return ErrorObject(code=INTERNAL_ERROR, message=f"{what} failed with an internal error")


def resource_not_found(uri: str) -> RemoteProtocolError:
    """The error for a `resources/read` of a uri nothing on the server names."""
    return RemoteProtocolError(INVALID_PARAMS, f"Resource not found: {shown(uri)}", {"uri": uri})
