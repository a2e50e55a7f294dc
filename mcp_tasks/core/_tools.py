"""`tools/call`: the request checked, the handler's outcome answered.

A call becomes `RunTool` once its params, its `Mcp-Param-*` headers, any input round and
its arguments (decoded with the tool's `arguments_type`) are checked; a call of a tool that
runs only as a task becomes that task at once (its handler runs inside it), with no handler
run first and no round trip through the shell. The handler's outcome
comes back to `returned`: the result, its error, another input round (MRTR), a new task,
or, for a client that cannot hold a task, the handler run again in place.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import UNSET, Raw

from . import _wire as w
from ._effects import Step
from ._encode import shown
from ._envelope import HttpHeaders, check_param_headers, decode_params, invalid_params
from ._errors import INTERNAL_ERROR, LocalProtocolError, ProtocolError
from ._needs import Need, RunTool, ToolCall, UseOnce
from ._outcomes import InputRequired, StartTaskOutcome, ToolOutcome
from ._parts import Parts
from ._records import task_era
from ._rounds import Rounds, needs_tasks_extension
from ._tasks import Tasks

SHUTTING_DOWN_MESSAGE: Final = "The server is shutting down; try again later"


class ToolCalls:
    def __init__(self, parts: Parts, rounds: Rounds, tasks: Tasks) -> None:
        self._parts = parts
        self._rounds = rounds
        self._tasks = tasks

    def call(
        self,
        request_id: w.RequestId,
        raw_params: Raw | w.CallToolParams,
        meta: w.RequestMeta,
        *,
        now: float,
        headers: HttpHeaders | None,
        principal: str | None,
        closing: bool = False,
    ) -> RunTool | Step:
        params = (
            raw_params
            if isinstance(raw_params, w.CallToolParams)
            else decode_params(raw_params, w.CallToolParams)
        )
        tool = self._parts.catalog.tools.get(params.name)
        if tool is None:
            raise invalid_params(f"Unknown tool: {shown(params.name)!r}")
        if tool.task_support == "required" and not meta.client_capabilities.has_tasks:
            raise needs_tasks_extension(f"Tool {tool.name!r} runs only as a task; it needs")
        arguments = None if params.arguments is UNSET else params.arguments
        # msgspec's raw value starts at its first byte (no space before it)
        if arguments is not None and memoryview(arguments)[:1].tobytes() != b"{":
            raise invalid_params("Invalid params: params.arguments must be an object")
        header_params = self._parts.catalog.header_params.get(tool.name)
        if header_params is not None and headers is not None:
            check_param_headers(header_params, headers.params or {}, arguments)
        responses: dict[str, Raw] = {}
        handler_state = None
        use_once = None
        if params.request_state is not UNSET or params.input_responses is not UNSET:
            opened = self._rounds.open(
                "tools/call", tool.name, arguments, params, principal=principal, now=now
            )
            responses, handler_state = opened.responses, opened.handler_state
            if tool.single_use_request_state and opened.sealed is not None:
                assert opened.expires_at is not None
                use_once = UseOnce(key=opened.sealed, until=opened.expires_at)
        decoded = self._parts.catalog.decode_arguments(tool, arguments)
        call = ToolCall(
            request_id=request_id,
            tool_name=tool.name,
            arguments=None if arguments is None else arguments.copy(),
            meta=meta,
            principal=principal,
            input_responses=responses,
            handler_state=handler_state,
        )
        # A tool that runs only as a task starts it at once: its handler runs inside it
        # (unless it asks before its task: then it runs now, as an optional one does).
        # So does an optional one a 2025 client asked to run as a task (`params.task`).
        at_once = tool.task_support == "required" or (
            tool.task_support == "optional" and task_era(meta) is not UNSET
        )
        if at_once and not tool.input_before_task and use_once is None:
            if closing:  # no new task while the server shuts down
                return self.refused_closing(request_id)
            return self._tasks.create(request_id, call, now)
        handler = self._parts.catalog.handler("tool", tool.name)
        return RunTool(call=call, handler=handler, arguments=decoded, use_once=use_once)

    def refused_closing(self, request_id: w.RequestId) -> Step:
        """The server is shutting down: no new handler runs, no new task starts."""
        error = w.ErrorObject(code=INTERNAL_ERROR, message=SHUTTING_DOWN_MESSAGE)
        return Step(reply=self._parts.encode.error_object(request_id, error))

    def replayed(self, need: RunTool) -> Step:
        """The store had `need.use_once` already: its `requestState` was used before."""
        assert need.call.request_id is not None
        error = invalid_params(
            f"requestState was used already: tool {need.call.tool_name!r} accepts each "
            "input round's answers once; call it again without requestState to start anew"
        )
        return Step(reply=self._parts.encode.error(need.call.request_id, error))

    def returned(self, call: ToolCall, outcome: ToolOutcome, now: float) -> Step | Need:
        """The handler of `call` (run for `RunTool`) returned `outcome`: the reply, a new
        task (the store checks the task limits as it saves it), or, for a client that
        cannot hold a task, the handler run again in place."""
        request_id = call.request_id
        if request_id is None or call.task_id is not None:
            raise LocalProtocolError(
                "tool_returned answers a tools/call request; a task's outcome goes to task_returned"
            )
        try:
            if isinstance(outcome, w.CallToolResult):
                return Step(reply=self._parts.encode.result(request_id, outcome))
            if isinstance(outcome, w.ErrorObject):
                return Step(reply=self._parts.encode.error_object(request_id, outcome))
            if isinstance(outcome, InputRequired):
                reply = self._rounds.ask(
                    request_id,
                    outcome,
                    method="tools/call",
                    name=call.tool_name,
                    arguments=None if call.arguments is None else bytes(call.arguments),
                    principal=call.principal,
                    what=f"Tool {call.tool_name!r}",
                    capabilities=call.client_capabilities,
                    now=now,
                )
                return Step(reply=reply)
            if isinstance(outcome, StartTaskOutcome):
                return self._start_task(request_id, call, now)
            raise _handler_error(f"Tool {call.tool_name!r} returned an unknown outcome")
        except ProtocolError as error:
            return Step(reply=self._parts.encode.error(request_id, error))

    def _start_task(self, request_id: w.RequestId, call: ToolCall, now: float) -> Step | Need:
        tool = self._parts.catalog.tools.get(call.tool_name)
        if tool is None:
            raise _handler_error(f"Tool {call.tool_name!r} was removed while it ran")
        if call.in_task:
            raise _handler_error(f"Tool {tool.name!r} asked to start a task while already running")
        if tool.task_support == "none":
            raise _handler_error(
                f"Tool {tool.name!r} asked to start a task but is registered with "
                "task_support='none'"
            )
        if not call.client_capabilities.has_tasks:
            # An optional task tool, and this client cannot hold a task: work in place.
            in_place = msgspec.structs.replace(call, in_task=True)
            handler = self._parts.catalog.handler("tool", tool.name)
            return RunTool(
                call=in_place,
                handler=handler,
                arguments=self._parts.catalog.decode_arguments(tool, call.arguments),
            )
        return self._tasks.create(request_id, call, now)


def _handler_error(message: str) -> ProtocolError:
    """A handler broke the rules (its reply is -32603, naming what it did)."""
    return LocalProtocolError(message)
