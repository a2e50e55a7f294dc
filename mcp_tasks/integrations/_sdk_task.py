"""What an SDK tool sees while it runs as a task, and how its answers cross over.

A tool of the official SDK reaches its client through `ctx.session` (a `ServerSession`
over a per-request channel). Once the `tools/call` that created the task is answered, that
channel is gone, so the task's run gets a request context of its own: the same request,
with a session whose channel is a `TaskChannel`:

* a server-to-client request (`ctx.elicit()`, `ctx.elicit_url()`, `session.create_message()`,
  `session.list_roots()`) becomes the task's question: the task shows `input_required`
  until the client answers with `tasks/update`, and the answer comes back as the SDK's
  result type. Questions asked at once (a task group) are put one after the other;
  to ask several at once, return an `InputRequiredResult`.
* progress (`ctx.report_progress()`) becomes the task's `statusMessage`;
* notifications (log messages among them) are dropped: a task has no stream to carry them.

Results cross the other way: `outcome_of` turns what the SDK's `tools/call` handler
returned into the outcome our core takes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, Final

import anyio
import msgspec
from mcp.server.connection import Connection
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import MessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    METHOD_NOT_FOUND,
    RequestId,
)
from mcp_types import CreateMessageResult as SdkCreateMessageResult
from mcp_types import ElicitResult as SdkElicitResult
from mcp_types import ListRootsResult as SdkListRootsResult
from pydantic import BaseModel

from ..core import (
    HttpHeaders,
    InputRequired,
    ToolOutcome,
)
from ..core.wire import (
    INTERNAL_ERROR,
    CallToolResult,
    CreateMessageParams,
    CreateMessageRequest,
    ElicitParams,
    ElicitRequest,
    ErrorObject,
    InputRequest,
    ListRootsRequest,
)
from ..runtime._context import ToolContext

logger = logging.getLogger("mcp_tasks.integrations.mcp_sdk")

TRANSPORT: Final = TransportContext(kind="mcp-tasks-task", can_send_request=True)
_input_requests = msgspec.json.Decoder(dict[str, InputRequest])
_METHOD: Final[Mapping[type, str]] = {
    ElicitRequest: "elicitation/create",
    CreateMessageRequest: "sampling/createMessage",
    ListRootsRequest: "roots/list",
}
_SDK_ANSWER: Final[Mapping[str, type[BaseModel]]] = {
    "elicitation/create": SdkElicitResult,
    "sampling/createMessage": SdkCreateMessageResult,
    "roots/list": SdkListRootsResult,
}


class TaskChannel:
    """The request-scoped channel of a task's run (an SDK `DispatchContext`): questions
    go to the task, progress to its status, notifications nowhere."""

    def __init__(self, tool: ToolContext, request_id: RequestId | None) -> None:
        self._tool = tool
        self._asking = anyio.Lock()
        self.request_id = request_id
        self.cancel_requested = anyio.Event()
        """Never set: a task is cancelled with `tasks/cancel`, which cancels its run."""

    transport: Final = TRANSPORT
    can_send_request: Final = True
    message_metadata: Final[MessageMetadata] = None

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        """Ask the client through the task and wait for the answer (one question at a
        time: questions asked at once wait their turn)."""
        async with self._asking:
            answer = await self._ask(method, dict(params or {}))
        return dict(msgspec.to_builtins(answer))

    async def _ask(self, method: str, params: dict[str, Any]) -> msgspec.Struct:
        tool = self._tool
        if method == "elicitation/create":
            elicit = msgspec.convert(params, ElicitParams)
            if elicit.effective_mode == "url" and isinstance(elicit.url, str):
                return await tool.elicit_result(elicit.message, url=elicit.url)
            schema = elicit.requested_schema
            return await tool.elicit_result(elicit.message, schema)
        if method == "sampling/createMessage":
            sample = msgspec.convert(params, CreateMessageParams)
            options = {
                name: value
                for name, value in msgspec.structs.asdict(sample).items()
                if value is not None and name not in ("messages", "max_tokens")
            }
            return await tool.sample(sample.messages, sample.max_tokens, **options)
        if method == "roots/list":
            return await tool.list_roots()
        raise MCPError(METHOD_NOT_FOUND, f"{method} cannot be sent from inside a task")

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        logger.debug(
            "task %s: %s dropped (a task carries no notifications)", self._tool.task_id, method
        )

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        await self._tool.report_progress(progress, total, message)


def task_context(
    context: ServerRequestContext[Any, Any], tool: ToolContext
) -> ServerRequestContext[Any, Any]:
    """`context` (of the `tools/call` that made the task) with a session that reaches the
    client through the task (`TaskChannel`), for a run that outlives that request."""
    channel = TaskChannel(tool, context.request_id)
    meta = (context.params or {}).get("_meta") or {}
    connection = Connection.from_envelope(
        context.protocol_version,
        meta.get(CLIENT_INFO_META_KEY),
        meta.get(CLIENT_CAPABILITIES_META_KEY),
        outbound=channel,
    )
    session = ServerSession(channel, connection)
    return dataclasses.replace(
        context, session=session, close_sse_stream=None, close_standalone_sse_stream=None
    )


# --- results --------------------------------------------------------------------------------


def dumped(result: HandlerResult) -> dict[str, Any]:
    """A handler's result as its wire dict."""
    if result is None:
        return {}
    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(result)


def outcome_of(result: HandlerResult) -> ToolOutcome:
    """What the SDK's `tools/call` handler returned, as our core's tool outcome: a
    `CallToolResult`, or the questions of an `InputRequiredResult`."""
    data = dumped(result)
    kind = data.get("resultType", "complete")
    try:
        if kind == "input_required":
            requests = _input_requests.decode(msgspec.json.encode(data.get("inputRequests", {})))
            state = data.get("requestState")
            return InputRequired(requests=requests, state=state if isinstance(state, str) else None)
        if kind == "complete":
            return msgspec.convert(data, CallToolResult)
    except msgspec.ValidationError as error:
        return ErrorObject(
            code=INTERNAL_ERROR, message=f"The tool returned an invalid result: {error}"
        )
    return ErrorObject(code=INTERNAL_ERROR, message=f"The tool returned a {kind!r} result")


def error_of(error: MCPError) -> ErrorObject:
    data = error.data
    return ErrorObject(
        code=error.code, message=error.message, data=msgspec.UNSET if data is None else data
    )


def sdk_answers(tool: ToolContext, asked: Mapping[str, str]) -> dict[str, Any]:
    """The answers to the questions `asked` (key -> method) that the task has, as the
    SDK's input response models (what `ctx.input_responses` holds)."""
    answers: dict[str, Any] = {}
    for key, method in asked.items():
        if method == "elicitation/create":
            answer: msgspec.Struct | None = tool.elicit_response(key)
        elif method == "sampling/createMessage":
            answer = tool.sample_response(key)
        else:
            answer = tool.roots_response(key)
        if answer is not None:
            answers[key] = _SDK_ANSWER[method].model_validate(msgspec.to_builtins(answer))
    return answers


def methods_asked(questions: InputRequired) -> dict[str, str]:
    """Each question's key and method."""
    return {key: _METHOD[type(request)] for key, request in questions.requests.items()}


# --- the request as the core reads it --------------------------------------------------------


def headers_of(context: ServerRequestContext[Any, Any]) -> HttpHeaders | None:
    """The MCP headers of the HTTP request behind `context` (None: not over HTTP)."""
    request = context.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    return HttpHeaders(
        protocol_version=headers.get("mcp-protocol-version"),
        method=headers.get("mcp-method"),
        name=headers.get("mcp-name"),
    )
