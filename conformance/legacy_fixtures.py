"""The 2025-11-25 fixtures of the official conformance suite whose names differ from the
2026-07-28 ones in base_fixtures.py, on the public API.

`register(server)` adds what the suite's 2025 server scenarios call (names, arguments and
requests as its scenarios describe them): `test_tool_with_logging`, `test_sampling`,
`test_elicitation`, `test_elicitation_sep1034_defaults`, `test_elicitation_sep1330_enums`,
`test_reconnection` (SEP-1699: it closes its POST's stream, `ToolContext.close_stream`) and
the resource `test://watched-resource`. Elicitation and sampling are written as input
rounds (`InputRequired`); a 2025 session turns each into a server-to-client request and
calls the tool again with the answer. Nothing here reaches inside the library.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import msgspec

from mcp_tasks import (
    CallToolResult,
    CreateMessageParams,
    CreateMessageRequest,
    ElicitParams,
    ElicitRequest,
    InputRequired,
    RequestContext,
    SamplingMessage,
    Server,
    ToolContext,
    ToolOutcome,
)

SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
}

SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}

USER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


class SamplingArgs(msgspec.Struct):
    prompt: str


class ElicitationArgs(msgspec.Struct):
    message: str


def _ask(message: str, schema: dict[str, Any]) -> InputRequired:
    request = ElicitRequest(params=ElicitParams(message=message, requested_schema=schema))
    return InputRequired(requests={"answer": request})


def _elicitation_completed(
    ctx: RequestContext, message: str, schema: dict[str, Any]
) -> ToolOutcome:
    """The tool's outcome: ask with `schema` first, then say what the user answered."""
    answer = ctx.elicit_response("answer")
    if answer is None:
        return _ask(message, schema)
    content = msgspec.to_builtins(answer.content) if answer.content else {}
    return CallToolResult.text(
        f"Elicitation completed: action={answer.action}, content={json.dumps(content)}"
    )


def register(server: Server) -> None:
    """Add the 2025-11-25 fixtures to `server`."""

    @server.tool()
    async def test_tool_with_logging(ctx: ToolContext) -> ToolOutcome:
        """Logs three info messages ~50 ms apart, then answers."""
        await ctx.log("info", "Tool execution started", logger="test_tool_with_logging")
        await anyio.sleep(0.05)
        await ctx.log("info", "Tool processing data", logger="test_tool_with_logging")
        await anyio.sleep(0.05)
        await ctx.log("info", "Tool execution completed", logger="test_tool_with_logging")
        return CallToolResult.text("Tool with logging executed successfully")

    @server.tool()
    async def test_sampling(ctx: ToolContext, args: SamplingArgs) -> ToolOutcome:
        """Asks the client's model `prompt` (at most 100 tokens), then repeats its answer."""
        answer = ctx.sample_response("answer")
        if answer is None:
            message = SamplingMessage(role="user", content={"type": "text", "text": args.prompt})
            params = CreateMessageParams(messages=[message], max_tokens=100)
            return InputRequired(requests={"answer": CreateMessageRequest(params=params)})
        content = answer.content if isinstance(answer.content, dict) else {}
        text = content.get("text") if content.get("type") == "text" else None
        return CallToolResult.text(f"LLM response: {text if text is not None else content}")

    @server.tool()
    async def test_elicitation(ctx: ToolContext, args: ElicitationArgs) -> ToolOutcome:
        """Asks the user for a username and an email with `message`, then repeats them."""
        answer = ctx.elicit_response("answer")
        if answer is None:
            return _ask(args.message, USER_SCHEMA)
        content = msgspec.to_builtins(answer.content) if answer.content else {}
        return CallToolResult.text(
            f"User response: action={answer.action}, content={json.dumps(content)}"
        )

    @server.tool()
    async def test_elicitation_sep1034_defaults(ctx: ToolContext) -> ToolOutcome:
        """Asks with a default for every primitive type (SEP-1034)."""
        return _elicitation_completed(ctx, "Please review your details", SEP1034_SCHEMA)

    @server.tool()
    async def test_elicitation_sep1330_enums(ctx: ToolContext) -> ToolOutcome:
        """Asks with the five enum forms (SEP-1330)."""
        return _elicitation_completed(ctx, "Please choose your options", SEP1330_SCHEMA)

    @server.tool()
    async def test_reconnection(ctx: ToolContext) -> ToolOutcome:
        """Closes its POST's SSE stream mid-call (SEP-1699): the client reconnects with
        GET and Last-Event-ID and gets the result there."""
        await ctx.log("info", "Closing the stream; reconnect", logger="test_reconnection")
        await ctx.close_stream()
        await anyio.sleep(0.1)  # the client reconnects meanwhile, or after: both resume
        return CallToolResult.text("Reconnection test completed")

    @server.resource("test://watched-resource", mime_type="text/plain")
    async def watched_resource(ctx: RequestContext) -> str:
        """A resource clients subscribe to (resources/subscribe, resources/unsubscribe)."""
        return "This resource is watched by subscribers."
