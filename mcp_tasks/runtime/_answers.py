"""Typed answers to the questions a handler asks: `Accepted`, `Declined`, `Cancelled`.

`ctx.elicit(message, kind)` takes what it wants back as a Python type and builds the form
from it:

    bool, str, int, float, a Literal or an Enum   one field, named "value"
    a msgspec Struct, a dataclass, a TypedDict     its fields (flat: strings, numbers,
                                                   booleans, enums; the client's form)
    a JSON Schema (a dict)                         as given; the answer is the content dict
    None                                           an empty form: a yes/no confirmation

and answers `Accepted(value)` (the value decoded to that type), `Declined()` or
`Cancelled()`. Each also reads like the wire's `ElicitResult`: `.action` and `.content`.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import msgspec

from ..core import (
    LocalProtocolError,
    RemoteProtocolError,
)
from ..core.wire import (
    INVALID_PARAMS,
    ElicitResult,
)

__all__ = ["Accepted", "Answer", "Cancelled", "Declined", "form_for", "read_answer"]

T = TypeVar("T")

VALUE_FIELD = "value"
"""The one field of a form asked for a plain type (`bool`, `str`, ...)."""

_SCALARS: dict[Any, dict[str, Any]] = {
    bool: {"type": "boolean"},
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
}


@dataclass(frozen=True)
class Accepted(Generic[T]):
    """The user answered: `value` is the answer, as the type that was asked for."""

    value: T
    content: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The form's fields as the client sent them."""
    action: Literal["accept"] = "accept"


@dataclass(frozen=True)
class Declined:
    """The user said no to answering."""

    action: Literal["decline"] = "decline"
    content: None = None


@dataclass(frozen=True)
class Cancelled:
    """The user dismissed the question without choosing."""

    action: Literal["cancel"] = "cancel"
    content: None = None


Answer = Accepted[T] | Declined | Cancelled
"""What `ctx.elicit` returns."""


def _is_scalar(kind: Any) -> bool:
    return (
        kind in _SCALARS
        or typing.get_origin(kind) is Literal
        or (isinstance(kind, type) and issubclass(kind, enum.Enum))
    )


def form_for(kind: Any, message: str) -> dict[str, Any]:
    """The `requestedSchema` that asks for a value of `kind` (see the module's table)."""
    if kind is None:
        return {"type": "object", "properties": {}}
    if isinstance(kind, dict):
        return kind
    if _is_scalar(kind):
        field = {**(_SCALARS.get(kind) or _choices(kind)), "title": message}
        return {"type": "object", "properties": {VALUE_FIELD: field}, "required": [VALUE_FIELD]}
    (_,), components = msgspec.json.schema_components([kind], ref_template="#/$defs/{name}")
    schema = dict(components.pop(kind.__name__))
    if components:
        raise LocalProtocolError(
            f"an elicitation form is flat: {kind.__name__} has nested types "
            f"({', '.join(sorted(components))})"
        )
    return schema


def _choices(kind: Any) -> dict[str, Any]:
    """A Literal's values or an Enum's: a form's choices are strings."""
    if typing.get_origin(kind) is Literal:
        values = list(typing.get_args(kind))
    else:
        values = [member.value for member in kind]
    if not all(isinstance(value, str) for value in values):
        raise LocalProtocolError(f"the choices of an elicitation form are strings: {values!r}")
    return {"type": "string", "enum": values}


def read_answer(result: ElicitResult, kind: Any) -> Accepted[Any] | Declined | Cancelled:
    """The client's `ElicitResult` as the answer to a question asked for `kind`."""
    if result.action == "decline":
        return Declined()
    if result.action != "accept":
        return Cancelled()
    content = dict(result.content or {})
    if kind is None or isinstance(kind, dict):
        return Accepted(value=content, content=content)
    try:
        if _is_scalar(kind):
            value = msgspec.convert(content.get(VALUE_FIELD), kind)
        else:
            value = msgspec.convert(content, kind)
    except msgspec.ValidationError as error:
        raise RemoteProtocolError(
            INVALID_PARAMS, f"The answer does not fit the form it was asked with: {error}"
        ) from None
    return Accepted(value=value, content=content)
