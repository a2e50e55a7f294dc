"""What a tool returns, as a result: the `outputSchema` its return annotation gives, and
how each value becomes a `CallToolResult`.

    -> str                       text
    -> int, float, bool, list    JSON text; `structuredContent` {"result": value}
    -> dict, Struct, dataclass,  JSON text and `structuredContent` (the object); the
       TypedDict, pydantic model type's schema is the `outputSchema`
    -> None                      no content
    image_content(data)          an image (and `audio_content`, `resource_content`)

A return annotation is checked when the tool is registered: one that no value can answer
(`bytes`, a socket, a generator) is a `TypeError` naming the tool and the fix.
"""

from __future__ import annotations

import base64
import dataclasses
import sys
import types
import typing
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ..core import InputRequired, StartTaskOutcome, ToolOutcome
from ..core.wire import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ErrorObject,
    ImageContent,
    ResourceContents,
    ResourceLink,
    TextContent,
)

__all__ = [
    "Output",
    "audio_content",
    "image_content",
    "is_object_type",
    "is_pydantic_model",
    "output_of",
    "resource_content",
    "tool_outcome",
]

_OUTCOMES: Final = (CallToolResult, ErrorObject, InputRequired, StartTaskOutcome)
_CONTENT: Final = (TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink)


@dataclass(frozen=True)
class Output:
    """What a return annotation says of the tool's structured result."""

    kind: Any
    """The annotated type (one of a union with the outcomes every tool may return)."""
    schema: dict[str, Any]
    """The tool's `outputSchema`."""
    wrapped: bool
    """`structuredContent` is `{"result": value}`: the value is not a JSON object."""
    optional: bool = False
    """The annotation allows None (wrapped, it is `{"result": null}`)."""


def is_pydantic_model(kind: Any) -> bool:
    """A pydantic model class (pydantic is imported only by whoever wrote one)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(kind, type) and issubclass(kind, pydantic.BaseModel)


def is_object_type(kind: Any) -> bool:
    """A type whose values are JSON objects with named fields: Struct, dataclass,
    TypedDict, pydantic model."""
    return isinstance(kind, type) and (
        issubclass(kind, msgspec.Struct)
        or dataclasses.is_dataclass(kind)
        or typing.is_typeddict(kind)
        or is_pydantic_model(kind)
    )


def _plain(kind: Any) -> Any:
    if typing.get_origin(kind) is typing.Annotated:
        return typing.get_args(kind)[0]
    return kind


def _members(annotation: Any) -> list[Any]:
    annotation = _plain(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [_plain(member) for member in typing.get_args(annotation)]
    return [annotation]


def _is_outcome(kind: Any) -> bool:
    if isinstance(kind, type) and issubclass(kind, (*_OUTCOMES, *_CONTENT)):
        return True
    if typing.get_origin(kind) is list:  # list[ImageContent], list[TextContent | ...]
        (item,) = typing.get_args(kind) or (Any,)
        return all(_is_outcome(member) for member in _members(item))
    return False


def output_of(tool: str, annotation: Any) -> Output | None:
    """The tool's output, from its return annotation (None: no `outputSchema`), checked:
    a `TypeError` names the tool, the type and the fix when no value of it is a result."""
    if annotation is None or annotation is Any or annotation is object:
        return None
    members = _members(annotation)
    data = []
    for kind in members:
        if kind is type(None) or kind is Any or _is_outcome(kind):
            continue
        _check_returnable(tool, kind)
        data.append(kind)
    if len(data) != 1 or data[0] is str:
        return None  # text, or several kinds: the values say what they are
    (kind,) = data
    if is_pydantic_model(kind):
        return Output(kind, kind.model_json_schema(mode="serialization"), wrapped=False)
    schema = _schema_of(kind)
    if is_object_type(kind) or schema.get("type") == "object":
        return Output(kind, schema, wrapped=False)
    optional = type(None) in members
    if optional:
        schema = _schema_of(kind | None)
    wrapped = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    if "$defs" in schema:
        wrapped["$defs"] = schema.pop("$defs")
    return Output(kind, wrapped, wrapped=True, optional=optional)


def _check_returnable(tool: str, kind: Any) -> None:
    if kind is bytes or kind is bytearray:
        raise TypeError(
            f"tool {tool!r} is annotated to return bytes, which have no JSON: return "
            "image_content(data), audio_content(data) or resource_content(uri, data) instead"
        )
    if is_pydantic_model(kind):
        return
    try:
        msgspec.json.schema(kind)
    except (TypeError, ValueError):
        shown = getattr(kind, "__name__", None) or repr(kind)
        raise TypeError(
            f"tool {tool!r} is annotated to return {shown}, which cannot be a tool result: "
            "return str, a number, a bool, a list or dict, a msgspec Struct, a dataclass, a "
            "TypedDict, a pydantic model, None, content (image_content, ...) or a "
            "CallToolResult"
        ) from None


def _schema_of(kind: Any) -> dict[str, Any]:
    (schema,), components = msgspec.json.schema_components([kind], ref_template="#/$defs/{name}")
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/") and set(schema) == {"$ref"}:
        schema = dict(components.pop(ref.removeprefix("#/$defs/")))
    if components:
        schema["$defs"] = components
    return dict(schema)


# --- values as results ------------------------------------------------------------------------


def tool_outcome(tool: str, value: Any, output: Output | None = None) -> ToolOutcome:
    """What the tool `tool` returned, as its outcome; a `TypeError` when it is none."""
    if isinstance(value, _OUTCOMES):
        return value
    if isinstance(value, str):
        if output is not None and output.wrapped:  # `-> Literal["a", "b"]`, an Enum of str
            return _structured(tool, value, wrap=True)
        return CallToolResult.text(value)
    if isinstance(value, _CONTENT):
        return CallToolResult(content=[value])
    if isinstance(value, list) and value and all(isinstance(item, _CONTENT) for item in value):
        return CallToolResult(content=value)
    wrap = output is not None and output.wrapped and (value is not None or output.optional)
    if wrap and not isinstance(value, dict):
        return _structured(tool, value, wrap=True)
    if value is None:  # nothing to say: done
        return CallToolResult(content=[])
    if isinstance(value, bytes | bytearray):
        raise TypeError(
            f"tool {tool!r} returned bytes: return image_content(data), audio_content(data) "
            "or resource_content(uri, data)"
        )
    if isinstance(value, list | tuple):
        return _structured(tool, value, wrap=True)
    if isinstance(value, bool | int | float):
        return CallToolResult.text(_json(tool, value).decode())
    if isinstance(value, dict) or is_object_type(type(value)):
        return _structured(tool, value, wrap=False)
    raise TypeError(f"tool {tool!r} returned {type(value).__name__}, not a tool result")


def _structured(tool: str, value: Any, *, wrap: bool) -> CallToolResult:
    """The value's JSON as text, and as `structuredContent` (wrapped: under "result")."""
    if is_pydantic_model(type(value)):
        value = value.model_dump(mode="json")
    try:
        structured = msgspec.to_builtins(value)
    except (TypeError, msgspec.EncodeError) as error:
        raise TypeError(f"tool {tool!r} returned what is not JSON: {error}") from None
    text = structured if isinstance(structured, str) else _json(tool, structured).decode()
    content: list[ContentBlock] = [TextContent(text=text)]
    if wrap:
        return CallToolResult(content=content, structured_content={"result": structured})
    return CallToolResult(content=content, structured_content=structured)


def _json(tool: str, value: Any) -> bytes:
    try:
        return msgspec.json.encode(value)
    except (TypeError, msgspec.EncodeError) as error:
        raise TypeError(f"tool {tool!r} returned what is not JSON: {error}") from None


# --- content helpers --------------------------------------------------------------------------

_IMAGE_MAGIC: Final = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_AUDIO_MAGIC: Final = (
    (b"ID3", "audio/mpeg"),
    (b"\xff\xfb", "audio/mpeg"),
    (b"\xff\xf3", "audio/mpeg"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
)


def _sniffed(data: bytes, magic: tuple[tuple[bytes, str], ...], riff: bytes, riff_type: str) -> str:
    for prefix, mime_type in magic:
        if data.startswith(prefix):
            return mime_type
    if data[:4] == b"RIFF" and data[8:12] == riff:
        return riff_type
    return ""


def image_content(data: bytes, mime_type: str | None = None) -> ImageContent:
    """An image a tool returns (or puts among its content): PNG, JPEG, GIF and WebP are
    recognised by their first bytes; pass `mime_type` for any other kind."""
    kind = mime_type or _sniffed(data, _IMAGE_MAGIC, b"WEBP", "image/webp")
    if not kind:
        raise ValueError("image_content: not PNG, JPEG, GIF or WebP: pass its mime_type")
    return ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=kind)


def audio_content(data: bytes, mime_type: str | None = None) -> AudioContent:
    """Audio a tool returns: WAV, MP3, Ogg and FLAC are recognised by their first bytes;
    pass `mime_type` for any other kind."""
    kind = mime_type or _sniffed(data, _AUDIO_MAGIC, b"WAVE", "audio/wav")
    if not kind:
        raise ValueError("audio_content: not WAV, MP3, Ogg or FLAC: pass its mime_type")
    return AudioContent(data=base64.b64encode(data).decode("ascii"), mime_type=kind)


def resource_content(
    uri: str, data: bytes | str, mime_type: str = "application/octet-stream"
) -> EmbeddedResource:
    """A file's contents a tool returns, embedded: bytes as a base64 blob, a str as text
    (`mime_type` then defaults to text/plain)."""
    if isinstance(data, str):
        text_type = "text/plain" if mime_type == "application/octet-stream" else mime_type
        contents = ResourceContents(uri=uri, mime_type=text_type, text=data)
    else:
        blob = base64.b64encode(data).decode("ascii")
        contents = ResourceContents(uri=uri, mime_type=mime_type, blob=blob)
    return EmbeddedResource(resource=contents)
