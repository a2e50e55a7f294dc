"""The base 2026-07-28 fixtures of the official conformance suite, on the public API.

`register(server)` adds what the suite's base scenarios call (names and behaviour as its
reference "everything" server has them): the `test_*` tools, the MRTR tools and prompt,
resources and a template, prompts, a completion, the list-changed triggers, a tool whose
`inputSchema` uses JSON Schema 2020-12 keywords, and a tool with an `x-mcp-header`
argument. Nothing here reaches inside the library.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import msgspec

from mcp_tasks import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    CallToolResult,
    Completion,
    CompletionArgument,
    CreateMessageParams,
    CreateMessageRequest,
    ElicitParams,
    ElicitRequest,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    InputRequest,
    InputRequired,
    ListRootsRequest,
    PromptMessage,
    ProtocolError,
    RequestContext,
    ResourceContents,
    SamplingMessage,
    Server,
    TextContent,
    ToolContext,
    ToolError,
    ToolOutcome,
)

# A 1x1 red PNG, and a tiny WAV header: real media, small enough to read.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
    "rkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _elicit(message: str, **properties: str) -> ElicitRequest:
    schema = {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
    }
    return ElicitRequest(params=ElicitParams(message=message, requested_schema=schema))


ASK_NAME = _elicit("What is your name?", name="string")


def _sample(text: str, max_tokens: int = 100) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content={"type": "text", "text": text})
    return CreateMessageRequest(
        params=CreateMessageParams(messages=[message], max_tokens=max_tokens)
    )


def _accepted(ctx: RequestContext, key: str) -> dict[str, Any] | None:
    """The content of an accepted elicitation answer under `key`, if there is one."""
    answer = ctx.elicit_response(key)
    if answer is None or answer.action != "accept" or not isinstance(answer.content, dict):
        return None
    return dict(answer.content)


class PromptArgs(msgspec.Struct):
    arg1: str
    arg2: str


class EmbeddedResourceArgs(msgspec.Struct):
    resource_uri: str = msgspec.field(name="resourceUri")


class HeaderArgs(msgspec.Struct):
    region: str


def register(server: Server) -> None:  # noqa: PLR0915 - one fixture after another
    """Add the base fixtures to `server`; `test_simple_text` becomes its first tool when
    `server` has none yet (the suite calls the first listed tool with no arguments)."""

    # --- content --------------------------------------------------------------------------

    @server.tool()
    async def test_simple_text(ctx: ToolContext) -> ToolOutcome:
        """Returns one text block."""
        return CallToolResult.text("This is a simple text response for testing.")

    @server.tool()
    async def test_image_content(ctx: ToolContext) -> ToolOutcome:
        """Returns one PNG image."""
        return CallToolResult(content=[ImageContent(data=PNG, mime_type="image/png")])

    @server.tool()
    async def test_audio_content(ctx: ToolContext) -> ToolOutcome:
        """Returns one WAV clip."""
        return CallToolResult(content=[AudioContent(data=WAV, mime_type="audio/wav")])

    @server.tool()
    async def test_embedded_resource(ctx: ToolContext) -> ToolOutcome:
        """Returns an embedded text resource."""
        resource = ResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
        return CallToolResult(content=[EmbeddedResource(resource=resource)])

    @server.tool()
    async def test_multiple_content_types(ctx: ToolContext) -> ToolOutcome:
        """Returns text, an image and a resource together."""
        resource = ResourceContents(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text=json.dumps({"test": "data", "value": 123}),
        )
        return CallToolResult(
            content=[
                TextContent(text="Multiple content types test:"),
                ImageContent(data=PNG, mime_type="image/png"),
                EmbeddedResource(resource=resource),
            ]
        )

    @server.tool()
    async def test_error_handling(ctx: ToolContext) -> ToolOutcome:
        """Always answers with a tool error (isError)."""
        raise ToolError("This tool intentionally returns an error for testing")

    @server.tool()
    async def test_tool_with_progress(ctx: ToolContext) -> ToolOutcome:
        """Reports progress 0, 50 and 100 of 100, then answers."""
        for step in (0, 50, 100):
            await ctx.report_progress(step, 100, f"step {step}")
            await anyio.sleep(0.05)
        return CallToolResult.text("Progress reported")

    # --- stateless-wire diagnostics -------------------------------------------------------

    @server.tool()
    async def test_missing_capability(ctx: ToolContext) -> ToolOutcome:
        """Needs the client's sampling capability; without it, -32021."""
        if not ctx.client_capabilities.has_sampling:
            raise ProtocolError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                "test_missing_capability needs the sampling client capability",
                {"requiredCapabilities": {"sampling": {}}},
            )
        return CallToolResult.text("sampling is declared")

    @server.tool()
    async def test_streaming_elicitation(ctx: ToolContext) -> ToolOutcome:
        """Asks for a name in an input round (never a server-to-client request)."""
        content = _accepted(ctx, "user_name")
        if content is None:
            return InputRequired(
                requests={"user_name": _elicit("What is your name?", name="string")}
            )
        return CallToolResult.text(f"Hello, {content.get('name')}!")

    @server.tool()
    async def test_logging_tool(ctx: ToolContext) -> ToolOutcome:
        """Logs three messages; they go out only when the request names a log level."""
        for n in range(3):
            await ctx.log("info", f"log message {n + 1}", logger="test_logging_tool")
        return CallToolResult.text("Logged three messages")

    @server.tool()
    async def test_trigger_tool_change(ctx: ToolContext) -> ToolOutcome:
        """Tells listen streams the tool list changed (the list itself stays as it is)."""
        server.notify_list_changed("tools")
        return CallToolResult.text("notifications/tools/list_changed published")

    @server.tool()
    async def test_trigger_prompt_change(ctx: ToolContext) -> ToolOutcome:
        """Tells listen streams the prompt list changed."""
        server.notify_list_changed("prompts")
        return CallToolResult.text("notifications/prompts/list_changed published")

    # --- multi round-trip requests (MRTR) ---------------------------------------------------

    @server.tool()
    async def test_input_required_result_elicitation(ctx: ToolContext) -> ToolOutcome:
        """Asks the user's name (key user_name), then greets them."""
        content = _accepted(ctx, "user_name")
        if content is None or not isinstance(content.get("name"), str):
            return InputRequired(
                requests={"user_name": _elicit("What is your name?", name="string")}
            )
        return CallToolResult.text(f"Hello, {content['name']}!")

    @server.tool()
    async def test_input_required_result_sampling(ctx: ToolContext) -> ToolOutcome:
        """Asks the client's model a question, then repeats its answer."""
        answer = ctx.sample_response("capital_question")
        if answer is None:
            return InputRequired(
                requests={"capital_question": _sample("What is the capital of France?")}
            )
        return CallToolResult.text(f"The model said: {json.dumps(answer.content)}")

    @server.tool()
    async def test_input_required_result_list_roots(ctx: ToolContext) -> ToolOutcome:
        """Asks for the client's roots, then lists them."""
        answer = ctx.roots_response("client_roots")
        if answer is None:
            return InputRequired(requests={"client_roots": ListRootsRequest()})
        return CallToolResult.text("Roots: " + ", ".join(root.uri for root in answer.roots))

    @server.tool()
    async def test_input_required_result_request_state(ctx: ToolContext) -> ToolOutcome:
        """Carries its own state to the next round in requestState."""
        content = _accepted(ctx, "confirm")
        if content is None or ctx.handler_state != "state-ok":
            ask = _elicit("Please confirm", ok="boolean")
            return InputRequired(requests={"confirm": ask}, state="state-ok")
        return CallToolResult.text(f"state-ok: confirmed={content.get('ok')}")

    @server.tool()
    async def test_input_required_result_multiple_inputs(ctx: ToolContext) -> ToolOutcome:
        """Asks an elicitation, a sampling and the roots in one round."""
        name = _accepted(ctx, "user_name")
        greeting = ctx.sample_response("greeting")
        roots = ctx.roots_response("client_roots")
        if name is None or greeting is None or roots is None:
            requests: dict[str, InputRequest] = {
                "user_name": _elicit("What is your name?", name="string"),
                "greeting": _sample("Generate a greeting", max_tokens=50),
                "client_roots": ListRootsRequest(),
            }
            return InputRequired(requests=requests, state="multiple-inputs")
        return CallToolResult.text(
            f"name={name.get('name')} roots={len(roots.roots)} greeting received"
        )

    @server.tool()
    async def test_input_required_result_multi_round(ctx: ToolContext) -> ToolOutcome:
        """Two rounds: a name, then a colour (the name travels in requestState)."""
        state = json.loads(ctx.handler_state) if ctx.handler_state else {}
        step1 = _accepted(ctx, "step1")
        if "name" not in state and step1 is None:
            ask = _elicit("Step 1: What is your name?", name="string")
            return InputRequired(requests={"step1": ask}, state=json.dumps({"step": 1}))
        if "name" not in state:
            assert step1 is not None
            ask = _elicit("Step 2: What is your favorite color?", color="string")
            carried = json.dumps({"step": 2, "name": step1.get("name")})
            return InputRequired(requests={"step2": ask}, state=carried)
        step2 = _accepted(ctx, "step2")
        if step2 is None:
            ask = _elicit("Step 2: What is your favorite color?", color="string")
            return InputRequired(requests={"step2": ask}, state=ctx.handler_state)
        return CallToolResult.text(f"{state['name']} likes {step2.get('color')}")

    @server.tool()
    async def test_input_required_result_tampered_state(ctx: ToolContext) -> ToolOutcome:
        """Needs its sealed requestState back untouched (a tampered one is -32602)."""
        content = _accepted(ctx, "confirm")
        if content is None or ctx.handler_state != "sealed":
            return InputRequired(
                requests={"confirm": _elicit("Please confirm", ok="boolean")}, state="sealed"
            )
        return CallToolResult.text("state verified")

    @server.tool()
    async def test_input_required_result_capabilities(ctx: ToolContext) -> ToolOutcome:
        """Asks only what this request's client capabilities allow."""
        capabilities = ctx.client_capabilities
        requests: dict[str, InputRequest] = {}
        if capabilities.has_elicitation("form") and _accepted(ctx, "user_name") is None:
            requests["user_name"] = _elicit("What is your name?", name="string")
        if capabilities.has_sampling and ctx.sample_response("question") is None:
            requests["question"] = _sample("Say hello")
        if capabilities.has_roots and ctx.roots_response("client_roots") is None:
            requests["client_roots"] = ListRootsRequest()
        if requests:
            return InputRequired(requests=requests)
        return CallToolResult.text("every declared capability answered")

    # --- schema and headers ---------------------------------------------------------------

    @server.tool(
        description="Tool with JSON Schema 2020-12 features", input_schema=JSON_SCHEMA_2020_12
    )
    async def json_schema_2020_12_tool(ctx: ToolContext) -> ToolOutcome:
        return CallToolResult.text("ok")

    @server.tool(
        input_schema={
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        }
    )
    async def test_custom_header_tool(ctx: ToolContext, args: HeaderArgs) -> ToolOutcome:
        """Echoes its region argument, which HTTP mirrors in the Mcp-Param-Region header."""
        return CallToolResult.text(f"region: {args.region}")

    # --- resources ----------------------------------------------------------------------

    @server.resource("test://static-text", mime_type="text/plain")
    async def static_text(ctx: RequestContext) -> str:
        """A fixed text resource."""
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", mime_type="image/png")
    async def static_binary(ctx: RequestContext) -> bytes:
        """A fixed binary resource (a PNG)."""
        return base64.b64decode(PNG)

    @server.resource_template("test://template/{id}/data", mime_type="application/json")
    async def template_data(ctx: RequestContext, id: str) -> str:
        """Data for any id."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    # --- prompts ------------------------------------------------------------------------

    @server.prompt()
    async def test_simple_prompt(ctx: RequestContext) -> str:
        """A prompt without arguments."""
        return "This is a simple prompt for testing."

    @server.prompt()
    async def test_prompt_with_arguments(ctx: RequestContext, args: PromptArgs) -> str:
        """A prompt with two required arguments."""
        return f"Prompt with arguments: arg1='{args.arg1}', arg2='{args.arg2}'"

    @server.completion(prompt="test_prompt_with_arguments")
    async def complete_arguments(
        argument: CompletionArgument, resolved: dict[str, str]
    ) -> Completion:
        candidates = ["paris", "park", "party"]
        values = [value for value in candidates if value.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)

    @server.prompt()
    async def test_prompt_with_embedded_resource(
        ctx: RequestContext, args: EmbeddedResourceArgs
    ) -> list[PromptMessage]:
        """A prompt that embeds the resource it is given."""
        resource = ResourceContents(
            uri=args.resource_uri,
            mime_type="text/plain",
            text="Embedded resource content for testing.",
        )
        return [
            PromptMessage(role="user", content=EmbeddedResource(resource=resource)),
            PromptMessage.user("Please process the embedded resource above."),
        ]

    @server.prompt()
    async def test_prompt_with_image(ctx: RequestContext) -> list[PromptMessage]:
        """A prompt with an image."""
        return [
            PromptMessage(role="user", content=ImageContent(data=PNG, mime_type="image/png")),
            PromptMessage.user("Please analyze the image above."),
        ]

    @server.prompt()
    async def test_input_required_result_prompt(
        ctx: RequestContext,
    ) -> GetPromptResult | InputRequired:
        """A prompt that first asks the user for context (an input round)."""
        content = _accepted(ctx, "user_context")
        if content is None:
            ask = _elicit("What context should the prompt use?", context="string")
            return InputRequired(requests={"user_context": ask})
        text = f"Use this context: {content.get('context')}"
        return GetPromptResult(messages=[PromptMessage.user(text)])
