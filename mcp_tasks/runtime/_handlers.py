"""Handlers as the runtime registers them, and how each is invoked.

The decorators wrap each user function in an entry (`ToolEntry`, `PromptEntry`,
`ResourceEntry`, `CompletionEntry`) and register it with its spec in the core's catalog,
the one registry. The core hands the entry back in the `Need` that runs it; `invoke_*`
calls the function and turns every way it can end into an outcome for the core
(cancellation aside): a handler's failure is never the server's.
"""

from __future__ import annotations

import base64
import functools
import inspect
import logging
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import anyio
import msgspec
import sniffio
from msgspec import UNSET

from ..core import (
    CompletionCall,
    CompletionOutcome,
    InputRequired,
    PromptCall,
    PromptOutcome,
    PromptSpec,
    ProtocolError,
    ResourceNotFound,
    ResourceOutcome,
    ResourceRead,
    ToolCall,
    ToolError,
    ToolOutcome,
    ToolSpec,
    failure_outcome,
)
from ..core.wire import (
    CallToolResult,
    Completion,
    ErrorObject,
    GetPromptResult,
    PromptArgument,
    PromptMessage,
    ResourceContents,
)
from ._context import RequestContext, ToolContext
from ._results import Output, is_pydantic_model, tool_outcome
from ._signatures import FIRST, is_object_type
from ._threads import ToolThreads, ToolThreadsFull

logger = logging.getLogger("mcp_tasks.server")

Handler = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class ToolEntry:
    spec: ToolSpec
    function: Handler
    takes_arguments: bool
    keywords: tuple[str, ...] | None = None
    """Plain parameters: the decoded arguments are passed by these names."""
    output: Output | None = None
    """The return annotation's `outputSchema`, and how a value becomes the result."""
    is_async: bool = True
    """False: a plain function, called in a worker thread."""
    context: str | None = FIRST
    """How the context is passed (`ToolSignature.context`): first, by this name, or not."""

    @functools.cached_property
    def awaited_first(self) -> bool:
        """`async def tool(ctx, args)`: awaited with the context, then the arguments."""
        return (
            self.is_async
            and self.context == FIRST
            and self.takes_arguments
            and self.keywords is None
        )


@dataclass(frozen=True)
class PromptEntry:
    spec: PromptSpec
    function: Handler
    keywords: tuple[str, ...] | None = None
    """Plain parameters: the decoded arguments are passed by these names."""
    context: str | None = FIRST
    """How the context is passed (`PromptSignature.context`)."""


@dataclass(frozen=True)
class ResourceEntry:
    function: Handler
    mime_type: str | None
    context: str | None = FIRST
    """How the context is passed (as `ToolEntry.context`)."""


@dataclass(frozen=True)
class CompletionEntry:
    name: str
    function: Handler


async def invoke_tool(
    entry: ToolEntry,
    call: ToolCall,
    context: ToolContext,
    arguments: Any = None,
    *,
    threads: ToolThreads,
) -> ToolOutcome:
    """Run a tool with `arguments` as the core decoded them (`RunTool.arguments`, or a
    task run's `StartTask.arguments`). A plain function runs in one of `threads`; with
    none free, a call (not a task's run) raises `ToolThreadsFull`."""
    name = entry.spec.name
    try:
        if entry.awaited_first:  # most: `async def tool(ctx, args)`, awaited right here
            value = await entry.function(context, arguments)
        elif not entry.takes_arguments:
            value = await _call(entry, threads, context)
        elif entry.keywords is None:
            value = await _call(entry, threads, context, arguments)
        else:
            named = {key: getattr(arguments, key) for key in entry.keywords}
            value = await _call(entry, threads, context, **named)
        return tool_outcome(name, value, entry.output)
    except anyio.get_cancelled_exc_class():
        context._note_cancelled()  # a plain function still running may check ctx.cancelled
        raise
    except ToolThreadsFull:
        raise  # the call is refused, retryable: not the tool's failure
    except ToolError as error:
        return CallToolResult.text(str(error), is_error=True)
    except Exception as error:  # the handler's failure, not ours: it must not end the server
        _warn_if_other_loop(name, error)
        return _failed(error, f"Tool {name!r}", task_id=call.task_id)


async def invoke_prompt(
    entry: PromptEntry, call: PromptCall, context: RequestContext, arguments: Any
) -> PromptOutcome:
    """Run a prompt; `arguments` as the core decoded them."""
    name = call.prompt_name
    try:
        args: tuple[Any, ...] = ()
        keywords: dict[str, Any] = {}
        if entry.keywords is not None:
            keywords = {key: getattr(arguments, key) for key in entry.keywords}
        elif entry.spec.arguments_type is not None:
            args = (arguments,)
        positional, named = _with_context(entry.context, context, args, keywords)
        value = await entry.function(*positional, **named)
        return _prompt_outcome(name, value)
    except Exception as error:
        return _failed(error, f"Prompt {name!r}")


async def invoke_resource(
    entry: ResourceEntry, call: ResourceRead, context: RequestContext
) -> ResourceOutcome:
    try:
        args, named = _with_context(entry.context, context, (), call.variables)
        value = await entry.function(*args, **named)
        return _resource_outcome(call, entry.mime_type, value)
    except Exception as error:
        return _failed(error, f"Resource {call.uri!r}", call.uri)


async def invoke_completion(entry: CompletionEntry, call: CompletionCall) -> CompletionOutcome:
    what = f"Completion for {entry.name!r}"
    try:
        value = await entry.function(call.argument, call.context)
        if isinstance(value, Completion):
            return value
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return Completion(values=value)
        raise TypeError(f"{what} returned {type(value).__name__}, not a list of str")
    except Exception as error:
        return _failed(error, what)


def _failed(
    error: Exception, what: str, uri: str | None = None, *, task_id: str | None = None
) -> ErrorObject:
    if isinstance(error, ProtocolError | ResourceNotFound):
        return failure_outcome(error, what, uri)
    if task_id is None:
        logger.error("%s raised", what, exc_info=error)  # the details stay here
    else:
        logger.error(
            "task %s: %s raised", task_id, what, exc_info=error, extra={"task_id": task_id}
        )
    return failure_outcome(error, what, uri)


_OTHER_LOOP_ERRORS: Final = {
    "asyncio": ("no running event loop", "no current event loop"),
    "trio": ("must be called from async context",),
}
"""What a coroutine of one loop's library raises when awaited on another loop, by the loop
it was written for."""
_warned_other_loop: set[str] = set()
"""The tools `_warn_if_other_loop` has named (once each per process)."""


def _warn_if_other_loop(tool: str, error: Exception) -> None:
    """A tool that awaited the other event loop's primitives (asyncio.sleep on trio,
    trio.sleep on asyncio) fails with a RuntimeError that names neither: say which, and the
    fix, once per tool."""
    if not isinstance(error, RuntimeError) or tool in _warned_other_loop:
        return
    text = str(error)
    for written_for, messages in _OTHER_LOOP_ERRORS.items():
        running = _running_loop()
        if running != written_for and any(message in text for message in messages):
            _warned_other_loop.add(tool)
            logger.warning(
                "tool %r awaited %s, but this server runs on %s (%s): serve it with --loop %s "
                "(or on that loop), or write it with anyio, which runs on both",
                tool,
                written_for,
                running,
                text,
                written_for,
            )
            return


def _running_loop() -> str:
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return "no event loop"


# --- what a handler returned, as an outcome -------------------------------------------------


async def _call(
    entry: ToolEntry, threads: ToolThreads, context: ToolContext, *args: Any, **kwargs: Any
) -> Any:
    """The tool's function: awaited, or, for a plain function, run in one of `threads` (a
    cancelled call stops waiting for the thread, which runs on to its end, holding its
    place among them). A task's run waits for a free thread; a call waits briefly."""
    if entry.is_async:
        if entry.context == FIRST and not kwargs:  # most: `async def tool(ctx, args)`
            return await entry.function(context, *args)
        positional, named = _with_context(entry.context, context, args, kwargs)
        return await entry.function(*positional, **named)
    positional, named = _with_context(entry.context, context, args, kwargs)
    work = functools.partial(entry.function, *positional, **named)
    return await threads.run(entry.spec.name, work, queue=context.task_id is not None)


def _with_context(
    how: str | None, context: RequestContext, args: tuple[Any, ...], named: Mapping[str, Any]
) -> tuple[tuple[Any, ...], Mapping[str, Any]]:
    """A handler's arguments with the context where it takes it (`ToolSignature.context`):
    first, by the name `how`, or not at all. `named` is not changed."""
    if how == FIRST:
        return (context, *args), named
    if how is not None:
        return args, {**named, how: context}
    return args, named


def _prompt_outcome(name: str, value: Any) -> PromptOutcome:
    if isinstance(value, GetPromptResult | ErrorObject | InputRequired):
        return value
    if isinstance(value, str):
        return GetPromptResult(messages=[PromptMessage.user(value)])
    if isinstance(value, list) and all(isinstance(item, PromptMessage) for item in value):
        return GetPromptResult(messages=value)
    raise TypeError(f"prompt {name!r} returned {type(value).__name__}, not prompt messages")


def _resource_outcome(read: ResourceRead, mime_type: str | None, value: Any) -> ResourceOutcome:
    if isinstance(value, ErrorObject | InputRequired):
        return value
    if isinstance(value, str):
        return [ResourceContents(uri=read.uri, mime_type=mime_type, text=value)]
    if isinstance(value, bytes):
        blob = base64.b64encode(value).decode("ascii")
        return [ResourceContents(uri=read.uri, mime_type=mime_type, blob=blob)]
    if isinstance(value, ResourceContents):
        return [value]
    if isinstance(value, list) and all(isinstance(item, ResourceContents) for item in value):
        return value
    raise TypeError(
        f"resource {read.uri!r} returned {type(value).__name__}, not str, bytes or ResourceContents"
    )


# --- reading a handler's signature ----------------------------------------------------------


def first_paragraph(handler: Handler) -> Any:
    doc = inspect.getdoc(handler)
    return doc.split("\n\n")[0] if doc else UNSET


def listing(
    handler: Handler,
    name: str | None,
    title: str | None,
    description: str | None,
    mime_type: str | None,
) -> dict[str, Any]:
    """How a resource or template is listed: its name defaults to the handler's, its
    description to the docstring's first paragraph."""
    return {
        "name": name or handler.__name__,
        "title": UNSET if title is None else title,
        "description": description or first_paragraph(handler),
        "mime_type": UNSET if mime_type is None else mime_type,
    }


def schema_for(args_type: Any) -> dict[str, Any]:
    """A tool's `inputSchema` (or `outputSchema`), from the Struct, dataclass or TypedDict
    its arguments decode to (or its result is)."""
    if typing.get_origin(args_type) is typing.Annotated:
        args_type = typing.get_args(args_type)[0]
    if args_type is None or args_type in (dict, Any) or typing.get_origin(args_type) is dict:
        return {"type": "object"}
    if is_pydantic_model(args_type):
        return dict(args_type.model_json_schema())
    if not is_object_type(args_type):
        raise TypeError(
            f"tool arguments must be a msgspec.Struct, a dataclass or a TypedDict (or dict), "
            f"not {args_type!r}"
        )
    (_,), components = msgspec.json.schema_components([args_type], ref_template="#/$defs/{name}")
    schema = dict(components.pop(args_type.__name__))
    if components:
        schema["$defs"] = components
    return schema


def prompt_arguments(args_type: Any) -> tuple[PromptArgument, ...]:
    """A prompt's arguments from its msgspec Struct: every field a string."""
    if not (isinstance(args_type, type) and issubclass(args_type, msgspec.Struct)):
        raise TypeError(f"prompt arguments must be a msgspec.Struct, not {args_type!r}")
    arguments = []
    for info in msgspec.structs.fields(args_type):
        kind, description = info.type, None
        if typing.get_origin(kind) is typing.Annotated:
            kind, *extras = typing.get_args(kind)
            for extra in extras:
                if isinstance(extra, msgspec.Meta) and extra.description:
                    description = extra.description
        if kind not in (str, str | None):
            raise TypeError(
                f"prompt argument {info.name!r} must be a str (prompt arguments are strings)"
            )
        arguments.append(
            PromptArgument(
                name=info.encode_name,
                required=info.required,
                description=description,
            )
        )
    return tuple(arguments)
