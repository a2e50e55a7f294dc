"""What a tool's signature says: the arguments it takes, what it returns, how to call it.

    async def greet(ctx, name: str, times: int = 1) -> str           plain parameters
    async def book(ctx, args: Booking) -> Confirmation               one Struct, dataclass
                                                                     or TypedDict (or dict)
    def checksum(ctx, path: str) -> str                              sync: a worker thread

Plain parameters become the fields of a msgspec Struct made for the tool (its JSON Schema
is the `inputSchema`; what does not fit is -32602 naming the argument); the handler is
called with them by name. A return annotation that is a Struct, dataclass or TypedDict
(alone, or the one such type in a union with the other outcomes) is the tool's
`outputSchema`, and a value of it is answered as `structuredContent` with its JSON as text.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ..core import (
    InputRequired,
    StartTaskOutcome,
)
from ..core.wire import (
    CallToolResult,
    ErrorObject,
)
from ._context import RequestContext

__all__ = ["FIRST", "ToolSignature", "is_object_type", "read_tool_signature"]

FIRST: Final = ""
"""`ToolSignature.context` for a context passed first, by position."""
_CONTEXT_NAMES: Final = frozenset({"ctx", "context"})


@dataclass(frozen=True)
class ToolSignature:
    arguments_type: Any
    """What the arguments decode to (None: the tool takes none)."""
    keywords: tuple[str, ...] | None
    """Plain parameters: their names, each passed from the decoded Struct's field."""
    output_type: Any
    """The Struct, dataclass or TypedDict the tool returns (None: no output schema)."""
    is_async: bool
    context: str | None = FIRST
    """How the context is passed: `FIRST` (the first positional argument), by this
    keyword, or None (the tool takes none)."""


def is_object_type(kind: Any) -> bool:
    """A type whose values are JSON objects with named fields: Struct, dataclass, TypedDict."""
    return isinstance(kind, type) and (
        issubclass(kind, msgspec.Struct)
        or dataclasses.is_dataclass(kind)
        or typing.is_typeddict(kind)
    )


def _takes_object(kind: Any) -> bool:
    return kind is Any or kind is dict or typing.get_origin(kind) is dict or is_object_type(kind)


def read_tool_signature(name: str, handler: Callable[..., Any]) -> ToolSignature:
    """What `handler`'s signature says, checked: an error names the tool, the parameter
    and the fix (a `TypeError` at registration, not a failure at the first call)."""
    if not callable(handler):
        raise TypeError(f"tool {name!r}: {handler!r} is not a function")
    is_async = inspect.iscoroutinefunction(handler)
    parameters = list(inspect.signature(handler).parameters.values())
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args and **kwargs cannot be tool arguments")
    hints = typing.get_type_hints(handler, include_extras=True)
    output_type = _output_type(hints.get("return"))
    context, rest = _context_of(name, parameters, hints)
    if not rest:
        return ToolSignature(None, None, output_type, is_async, context)
    if len(rest) == 1:
        kind = hints.get(rest[0].name, dict)  # unannotated: the arguments as a dict
        if _takes_object(_plain(kind)):
            return ToolSignature(kind, None, output_type, is_async, context)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for parameter in rest:
        kind = hints.get(parameter.name, Any)
        _check_argument_type(name, parameter.name, kind)
        if parameter.default is parameter.empty:
            fields.append((parameter.name, kind))
        else:
            fields.append((parameter.name, kind, parameter.default))
    arguments = msgspec.defstruct(name, fields, kw_only=True)
    keywords = tuple(p.name for p in rest)
    return ToolSignature(arguments, keywords, output_type, is_async, context)


def _context_of(
    name: str, parameters: list[inspect.Parameter], hints: dict[str, Any]
) -> tuple[str | None, list[inspect.Parameter]]:
    """Which parameter takes the context (`ToolSignature.context`), and the others: the
    one annotated `ToolContext` (or `RequestContext`) wherever it stands, else a first
    parameter without a default that is not annotated or is named `ctx` or `context` (as
    most tools write it, whatever its annotation), else none: a tool need not take it."""
    annotated = [
        parameter
        for parameter in parameters
        if isinstance(kind := _plain(hints.get(parameter.name)), type)
        and issubclass(kind, RequestContext)
    ]
    if len(annotated) > 1:
        names = ", ".join(parameter.name for parameter in annotated)
        raise TypeError(f"tool {name!r}: one parameter takes the context, not {names}")
    if annotated:
        found = annotated[0]
        rest = [parameter for parameter in parameters if parameter is not found]
        if found is parameters[0]:
            return FIRST, rest
        if found.kind is found.POSITIONAL_ONLY:
            raise TypeError(
                f"tool {name!r}: the context {found.name!r} is positional-only and not first: "
                "put it first, or let it be passed by name"
            )
        return found.name, rest
    first = parameters[0] if parameters else None
    if (
        first is not None
        and first.default is first.empty
        and (first.name not in hints or first.name in _CONTEXT_NAMES)
    ):
        return FIRST, parameters[1:]
    return None, parameters


def _check_argument_type(tool: str, parameter: str, kind: Any) -> None:
    """A `TypeError` naming the parameter when `kind` has no JSON Schema (so the tool
    could never be called)."""
    try:
        msgspec.json.schema(kind)
    except (TypeError, ValueError) as error:
        shown = getattr(kind, "__name__", None) or repr(kind)
        raise TypeError(
            f"tool {tool!r}: parameter {parameter!r} has the type {shown}, which cannot come from "
            "JSON arguments (use str, int, float, bool, a list or dict of them, a Literal, "
            f"an Enum, a msgspec Struct, a dataclass or a TypedDict): {error}"
        ) from None


def _plain(kind: Any) -> Any:
    """`Annotated[X, ...]` as X."""
    if typing.get_origin(kind) is typing.Annotated:
        return typing.get_args(kind)[0]
    return kind


_OUTCOMES = frozenset({CallToolResult, ErrorObject, InputRequired, StartTaskOutcome})


def _output_type(annotation: Any) -> Any:
    """The one Struct, dataclass or TypedDict of a return annotation that is not one of
    the outcomes every tool may return."""
    annotation = _plain(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [_plain(member) for member in typing.get_args(annotation)]
    else:
        members = [annotation]
    found = [kind for kind in members if is_object_type(kind) and kind not in _OUTCOMES]
    return found[0] if len(found) == 1 else None
