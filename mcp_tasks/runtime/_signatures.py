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

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ._context import RequestContext
from ._docstrings import parameter_descriptions
from ._results import Output, is_object_type, is_pydantic_model, output_of

__all__ = [
    "FIRST",
    "PromptSignature",
    "ToolSignature",
    "is_object_type",
    "read_prompt_signature",
    "read_resource_context",
    "read_tool_signature",
]

FIRST: Final = ""
"""`ToolSignature.context` for a context passed first, by position."""
_CONTEXT_NAMES: Final = frozenset({"ctx", "context"})


@dataclass(frozen=True)
class ToolSignature:
    arguments_type: Any
    """What the arguments decode to (None: the tool takes none)."""
    keywords: tuple[str, ...] | None
    """Plain parameters: their names, each passed from the decoded Struct's field."""
    output: Output | None
    """The `outputSchema` the return annotation gives, and how values become results
    (None: no schema)."""
    is_async: bool
    context: str | None = FIRST
    """How the context is passed: `FIRST` (the first positional argument), by this
    keyword, or None (the tool takes none)."""
    arguments_decoder: Callable[[bytes], Any] | None = None
    """Decodes the arguments when msgspec cannot: a pydantic model's validation."""


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
    output = output_of(name, hints.get("return"))
    context, rest = _context_of(name, parameters, hints)
    if not rest:
        return ToolSignature(None, None, output, is_async, context)
    if len(rest) == 1:
        kind = hints.get(rest[0].name, dict)  # unannotated: the arguments as a dict
        if is_pydantic_model(_plain(kind)):
            decoder = _pydantic_decoder(_plain(kind))
            return ToolSignature(kind, None, output, is_async, context, decoder)
        if _takes_object(_plain(kind)):
            return ToolSignature(kind, None, output, is_async, context)
    described = parameter_descriptions(inspect.getdoc(handler))
    keywords = tuple(p.name for p in rest)
    if any(_is_pydantic_parameter(hints.get(p.name)) for p in rest):
        model = _pydantic_arguments(name, rest, hints, described)
        decoder = _pydantic_decoder(model)
        return ToolSignature(model, keywords, output, is_async, context, decoder)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for parameter in rest:
        kind = _described(hints.get(parameter.name, Any), described.get(parameter.name))
        _check_argument_type(name, parameter.name, kind)
        if parameter.default is parameter.empty:
            fields.append((parameter.name, kind))
        else:
            fields.append((parameter.name, kind, parameter.default))
    arguments = msgspec.defstruct(name, fields, kw_only=True)
    return ToolSignature(arguments, keywords, output, is_async, context)


@dataclass(frozen=True)
class PromptSignature:
    arguments_type: Any
    """A msgspec Struct of `str` fields (None: the prompt takes no arguments)."""
    keywords: tuple[str, ...] | None
    """Plain parameters: their names, each passed from the decoded Struct's field."""
    context: str | None = FIRST
    """How the context is passed, as `ToolSignature.context`."""


def read_prompt_signature(name: str, handler: Callable[..., Any]) -> PromptSignature:
    """A prompt handler's arguments: plain `str` parameters (`async def review(code: str,
    focus: str = "bugs")`), or one msgspec Struct of `str` fields; the context where it is
    annotated, as for tools. A `TypeError` names the prompt and the fix."""
    if not inspect.iscoroutinefunction(handler):
        raise TypeError(f"prompt {name!r} must be an async function")
    parameters = list(inspect.signature(handler).parameters.values())
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"prompt {name!r}: *args and **kwargs cannot be prompt arguments")
    hints = typing.get_type_hints(handler, include_extras=True)
    context, rest = _context_of(name, parameters, hints, what="prompt")
    if not rest:
        return PromptSignature(None, None, context)
    if len(rest) == 1 and isinstance(hints.get(rest[0].name), type):
        only = hints[rest[0].name]
        if issubclass(only, msgspec.Struct):
            return PromptSignature(only, None, context)
    described = parameter_descriptions(inspect.getdoc(handler))
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for parameter in rest:
        if parameter.name not in hints:
            raise TypeError(
                f"prompt {name!r}: annotate {parameter.name!r}: `str` for one argument, or the "
                "msgspec.Struct of the prompt's arguments"
            )
        kind = hints[parameter.name]
        if _plain(kind) not in (str, str | None):
            raise TypeError(
                f"prompt {name!r}: parameter {parameter.name!r} must be a str (prompt arguments "
                "are strings), or the one msgspec.Struct of str fields the arguments decode to"
            )
        kind = _described(kind, described.get(parameter.name))
        if parameter.default is parameter.empty:
            fields.append((parameter.name, kind))
        else:
            fields.append((parameter.name, kind, parameter.default))
    arguments = msgspec.defstruct(name, fields, kw_only=True)
    return PromptSignature(arguments, tuple(p.name for p in rest), context)


def read_resource_context(
    what: str, name: str, handler: Callable[..., Any], variables: list[str]
) -> str | None:
    """How a resource handler takes the context (as `ToolSignature.context`), checked: it
    is async, and its other parameters are the uri template's `variables`."""
    if not inspect.iscoroutinefunction(handler):
        raise TypeError(f"{what} {name!r} must be an async function")
    parameters = list(inspect.signature(handler).parameters.values())
    hints = typing.get_type_hints(handler, include_extras=True)
    context, rest = _context_of(name, parameters, hints, what=what)
    if (parameters[0].name if context == FIRST else context) in variables:
        context, rest = None, parameters  # `async def file(name)`: a variable, not the context
    if sorted(parameter.name for parameter in rest) != sorted(variables):
        wanted = ", ".join(variables) if variables else "no parameters"
        raise TypeError(
            f"{what} {name!r} must take {wanted} (and the context, if it needs it), "
            f"not ({', '.join(parameter.name for parameter in parameters)})"
        )
    return context


def _described(kind: Any, docstring: str | None) -> Any:
    """`kind` with its description for the schema: `Annotated[int, "How many"]` (a plain
    string) as msgspec's `Meta(description=...)`, else the docstring's words for it."""
    if typing.get_origin(kind) is typing.Annotated:
        base, *extras = typing.get_args(kind)
        if any(isinstance(extra, msgspec.Meta) and extra.description for extra in extras):
            return kind
        texts = [extra for extra in extras if isinstance(extra, str)]
        others = [extra for extra in extras if not isinstance(extra, str)]
        text = texts[0] if texts else docstring
        if text:
            return typing.Annotated[(base, *others, msgspec.Meta(description=text))]
        return typing.Annotated[(base, *others)] if others else base
    if docstring:
        return typing.Annotated[kind, msgspec.Meta(description=docstring)]
    return kind


def _is_pydantic_parameter(kind: Any) -> bool:
    """A parameter only pydantic can decode: a model, or `Annotated[x, Field(...)]`."""
    if typing.get_origin(kind) is typing.Annotated:
        base, *extras = typing.get_args(kind)
        return is_pydantic_model(base) or any(
            type(extra).__module__.startswith("pydantic") for extra in extras
        )
    return is_pydantic_model(kind)


def _pydantic_arguments(
    tool: str, parameters: list[inspect.Parameter], hints: dict[str, Any], described: dict[str, str]
) -> Any:
    """A pydantic model made from the parameters, when one of them is pydantic's."""
    import pydantic  # noqa: PLC0415 (a parameter is pydantic's: it is installed)

    fields: dict[str, Any] = {}
    for parameter in parameters:
        kind = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        text = described.get(parameter.name)
        if text and not _is_pydantic_parameter(kind):
            kind = typing.Annotated[kind, pydantic.Field(description=text)]
        fields[parameter.name] = (kind, default)
    return pydantic.create_model(tool, **fields)


def _pydantic_decoder(model: Any) -> Callable[[bytes], Any]:
    """The arguments' JSON validated by `model`; what does not fit is a
    `msgspec.ValidationError` in msgspec's words (the core answers it with -32602)."""
    import pydantic  # noqa: PLC0415 (only when a tool takes a pydantic model)

    def decode(data: bytes) -> Any:
        try:
            return model.model_validate_json(bytes(data))
        except pydantic.ValidationError as error:
            errors = error.errors(include_input=False, include_url=False)
            first = errors[0]
            path = "".join(_path_part(part) for part in first["loc"])
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise msgspec.ValidationError(f"{first['msg']}{more} - at `${path}`") from None

    return decode


def _path_part(part: str | int) -> str:
    """One step of a pydantic error's location in msgspec's words: `[3]` for an index,
    `.name` for a field, `[...]` for what may be a peer's dict key (as msgspec writes it:
    a key the peer chose is not echoed, however long)."""
    if isinstance(part, int):
        return f"[{part}]"
    if part.isidentifier() and len(part) <= _FIELD_NAME_CHARS:
        return f".{part}"
    return "[...]"


_FIELD_NAME_CHARS: Final = 64


def _context_of(
    name: str, parameters: list[inspect.Parameter], hints: dict[str, Any], what: str = "tool"
) -> tuple[str | None, list[inspect.Parameter]]:
    """Which parameter takes the context (`ToolSignature.context`), and the others: the
    one annotated `ToolContext` (or `RequestContext`) wherever it stands, else a first
    parameter without a default that is not annotated or is named `ctx` or `context` (as
    most tools write it, whatever its annotation), else an unannotated `ctx` or `context`
    further on, else none: a tool need not take it."""
    annotated = [
        parameter
        for parameter in parameters
        if isinstance(kind := _plain(hints.get(parameter.name)), type)
        and issubclass(kind, RequestContext)
    ]
    if len(annotated) > 1:
        names = ", ".join(parameter.name for parameter in annotated)
        raise TypeError(f"{what} {name!r}: one parameter takes the context, not {names}")
    if annotated:
        found = annotated[0]
        rest = [parameter for parameter in parameters if parameter is not found]
        if found is parameters[0]:
            return FIRST, rest
        if found.kind is found.POSITIONAL_ONLY:
            raise TypeError(
                f"{what} {name!r}: the context {found.name!r} is positional-only and not first: "
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
    for parameter in parameters[1:]:  # `async def tool(a: int, ctx)`: named, not annotated
        if parameter.name in _CONTEXT_NAMES and parameter.name not in hints:
            if parameter.kind is parameter.POSITIONAL_ONLY:
                break
            return parameter.name, [other for other in parameters if other is not parameter]
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
