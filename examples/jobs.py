"""An example server with one tool for each feature of the Tasks extension.

Serve it: `mcp-tasks serve examples/jobs.py --http 127.0.0.1:8000` (or `--stdio`); or under
an ASGI server, `asgi_app(server)` (docs/embedding.md): it runs on trio and asyncio alike.

| tool | shows |
| --- | --- |
| greet | a plain synchronous tool: never a task |
| slow_compute | an optional task with progress in `statusMessage` (in place without tasks) |
| failing_job | a task-only tool whose result is a tool error (`isError`, task `completed`) |
| protocol_error_job | a task that ends `failed` with a JSON-RPC error |
| confirm_delete | asks for confirmation by returning `InputRequired`; runs again when answered |
| multi_input | a task that asks two questions at once |
| interview | a task that waits in place: `await ctx.elicit(...)`, twice |
| test_tool_with_task | asks for a name *before* it starts a task; the task sees the answer |

The tool names and behaviour match what the official conformance suite calls.
"""

from __future__ import annotations

import anyio
import msgspec

from mcp_tasks import (
    START_TASK,
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    ErrorObject,
    InputRequired,
    Server,
    TaskOptions,
    ToolContext,
    ToolError,
    ToolOutcome,
)

server = Server("jobs", "0.1.0", tasks=TaskOptions(ttl_ms=600_000, poll_interval_ms=1000))


class Greeting(msgspec.Struct):
    name: str = "world"


class SlowArgs(msgspec.Struct):
    seconds: float = 1.0
    label: str = ""


class DeleteArgs(msgspec.Struct):
    filename: str


def _ask(message: str, properties: dict[str, dict[str, str]]) -> ElicitRequest:
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return ElicitRequest(params=ElicitParams(message=message, requested_schema=schema))


@server.tool()
async def greet(ctx: ToolContext, args: Greeting) -> ToolOutcome:
    """Say hello at once."""
    return CallToolResult.text(f"Hello, {args.name}!")


@server.tool(task_support="optional")
async def slow_compute(ctx: ToolContext, args: SlowArgs) -> ToolOutcome:
    """Work for `seconds`, reporting progress; a task when the client can hold one."""
    if args.seconds > 0 and not ctx.in_task:
        return START_TASK
    steps = max(1, round(args.seconds * 10))
    for step in range(steps):
        await ctx.report_progress(step, steps, "computing")
        await anyio.sleep(args.seconds / steps)  # cancellation lands on this await
    return CallToolResult.text(f"{args.label or 'job'} done after {args.seconds:g}s")


@server.tool(task_support="required")
async def failing_job(ctx: ToolContext) -> ToolOutcome:
    """A task whose tool fails: the task completes with isError."""
    if not ctx.in_task:
        return START_TASK
    await anyio.sleep(1)
    raise ToolError("the job failed: the input file is empty")


@server.tool(task_support="required")
async def protocol_error_job(ctx: ToolContext) -> ToolOutcome:
    """A task that fails with a JSON-RPC error."""
    if not ctx.in_task:
        return START_TASK
    await anyio.sleep(0.2)
    return ErrorObject(code=-32603, message="the upstream service crashed")


@server.tool(task_support="required")
async def confirm_delete(ctx: ToolContext, args: DeleteArgs) -> ToolOutcome:
    """Ask before deleting; runs again with the answer."""
    if not ctx.in_task:
        return START_TASK
    answer = ctx.elicit_response("confirm")
    if answer is None:
        question = _ask(f"Delete {args.filename}?", {"confirm": {"type": "boolean"}})
        return InputRequired(requests={"confirm": question}, status_message="Waiting for yes/no")
    if answer.action == "accept" and answer.content and answer.content.get("confirm"):
        return CallToolResult.text(f"Deleted {args.filename}")
    return CallToolResult.text(f"Kept {args.filename}")


@server.tool(task_support="required")
async def multi_input(ctx: ToolContext) -> ToolOutcome:
    """Ask two questions at once; finish when both are answered."""
    if not ctx.in_task:
        return START_TASK
    first, second = ctx.elicit_response("first"), ctx.elicit_response("second")
    if first is None or second is None:
        return InputRequired(
            requests={
                "first": _ask("First question?", {"answer": {"type": "string"}}),
                "second": _ask("Second question?", {"answer": {"type": "string"}}),
            }
        )
    return CallToolResult.text(f"Answers: {first.action}, {second.action}")


@server.tool(task_support="required")
async def interview(ctx: ToolContext) -> ToolOutcome:
    """Ask, wait in place for the answer, ask again: no re-run, no repeated side effects."""
    if not ctx.in_task:
        return START_TASK
    name = await ctx.elicit(
        "Your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    who = (name.content or {}).get("name", "stranger")
    colour = await ctx.elicit(
        f"Favourite colour, {who}?",
        {"type": "object", "properties": {"colour": {"type": "string"}}},
    )
    return CallToolResult.text(f"{who} likes {(colour.content or {}).get('colour', 'no colour')}")


@server.tool(task_support="required", input_before_task=True)
async def test_tool_with_task(ctx: ToolContext) -> ToolOutcome:
    """Ask a name first (no task yet), then start a task that greets with it."""
    answer = ctx.elicit_response("user_name")
    if answer is None:
        return InputRequired(
            requests={"user_name": _ask("What is your name?", {"name": {"type": "string"}})}
        )
    if not ctx.in_task:
        return START_TASK
    await anyio.sleep(0.1)
    name = (answer.content or {}).get("name", "stranger")
    return CallToolResult.text(f"Hello, {name}! (from inside the task)")
