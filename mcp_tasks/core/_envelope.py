"""The envelope of an incoming message: JSON-RPC shape, `_meta`, the HTTP headers.

Checked in the order the conformance suite expects: JSON and JSON-RPC shape, `_meta`,
HTTP headers against the body, protocol version, method, the capability gate; the params
of each method are decoded by its own module with `decode_params`.
"""

from __future__ import annotations

import base64
import decimal
import re
from collections.abc import Callable
from typing import Any, Final, TypeVar

import msgspec
from msgspec import UNSET, Raw, Struct

from . import _wire as w
from ._depth import MAX_DEPTH, too_deep
from ._encode import shown
from ._errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    RemoteProtocolError,
)
from ._options import error_path

TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
KNOWN_METHODS: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "subscriptions/listen",
    }
    | TASK_METHODS
)
CAPABILITY_OF: Final = {  # methods that exist only while the server offers the capability
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "completion/complete": "completions",
}
# The params field each method's `Mcp-Name` HTTP header mirrors (wire names).
MCP_NAME_PARAM: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
# A header value that is not plain visible ASCII travels as `=?base64?<UTF-8, base64>?=`.
BASE64_HEADER_PREFIX: Final = "=?base64?"
BASE64_HEADER_SUFFIX: Final = "?="

TOO_DEEP: Final = f"JSON nested more deeply than this server accepts ({MAX_DEPTH} levels)"

_Params = TypeVar("_Params")


class HttpHeaders(Struct, frozen=True, kw_only=True):
    """The MCP request headers of a Streamable HTTP POST, as received (None: absent)."""

    protocol_version: str | None = None
    method: str | None = None
    name: str | None = None
    params: dict[str, str] | None = None
    """`Mcp-Param-{Name}` headers by lower-cased Name (None: the request had none)."""


def invalid_params(message: str, data: Any = UNSET) -> RemoteProtocolError:
    return RemoteProtocolError(INVALID_PARAMS, message, data)


def decode_params(raw: Raw, kind: type[_Params]) -> _Params:
    """`raw` decoded as `kind`, or -32602 naming the field that does not fit."""
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as error:
        raise invalid_params(f"Invalid params: {error_path(error, 'params')}") from None


def is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def decode_message(data: bytes) -> w.IncomingMessage:
    try:
        # msgspec checks UTF-8 only in what it decodes; params stay raw until later, so the
        # whole body is checked here, once (ASCII, nearly every body, without a copy).
        if not data.isascii():
            data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RemoteProtocolError(
            PARSE_ERROR,
            f"Parse error: the body is not UTF-8 ({error.reason} at byte {error.start})",
        ) from None
    if too_deep(data):  # before msgspec, whose own limit depends on the interpreter
        raise RemoteProtocolError(INVALID_REQUEST, f"Invalid request: {_too_deep_why(data)}")
    try:
        return msgspec.json.decode(data, type=w.IncomingMessage)
    except msgspec.ValidationError as error:
        if str(error).endswith("at `$.id`"):  # a number beyond a double
            raise RemoteProtocolError(
                INVALID_REQUEST, f"Invalid request: id must be a string or an integer ({error})"
            ) from None
        if data.lstrip(b" \t\r\n").startswith(b"{"):  # an object, with a value out of range
            raise RemoteProtocolError(INVALID_REQUEST, f"Invalid request: {error}") from None
        raise RemoteProtocolError(
            INVALID_REQUEST, "Invalid request: a JSON-RPC message must be a JSON object"
        ) from None
    except msgspec.DecodeError as error:
        raise RemoteProtocolError(
            PARSE_ERROR, f"Parse error: the body is not valid JSON ({error})"
        ) from None
    except RecursionError:  # a stack already deep below us: the same refusal
        raise RemoteProtocolError(INVALID_REQUEST, f"Invalid request: {TOO_DEEP}") from None


def message_of(data: bytes | w.IncomingMessage) -> w.IncomingMessage:
    """The message `data` is: its bytes decoded (`decode_message`), or the message a host
    decoded already, its params held to the same depth."""
    if not isinstance(data, w.IncomingMessage):
        return decode_message(data)
    params = data.params
    if params is not UNSET and too_deep(memoryview(params)):
        raise RemoteProtocolError(INVALID_REQUEST, f"Invalid request: {TOO_DEEP}")
    return data


def _too_deep_why(data: bytes) -> str:
    if data.lstrip(b" \t\r\n").startswith(b"{"):
        return TOO_DEEP
    return "a JSON-RPC message must be a JSON object"  # what msgspec would have said first


def check_envelope(message: w.IncomingMessage) -> str:
    """The method of a request or notification whose envelope is sound."""
    if message.jsonrpc != "2.0":
        raise RemoteProtocolError(INVALID_REQUEST, 'Invalid request: jsonrpc must be "2.0"')
    if message.method is UNSET:
        raise RemoteProtocolError(INVALID_REQUEST, "Invalid request: method is missing")
    if not isinstance(message.method, str):
        raise RemoteProtocolError(INVALID_REQUEST, "Invalid request: method must be a string")
    return message.method


LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
"""The 2025 revisions a legacy session negotiates (`core.legacy`), newest first."""


def supported_versions(legacy: bool) -> list[str]:
    """The versions a server names (`server/discover`, -32022): the 2025 revisions too
    while it serves their sessions (`legacy`; a client of those opens with `initialize`)."""
    return [*w.SUPPORTED_VERSIONS, *LEGACY_VERSIONS] if legacy else list(w.SUPPORTED_VERSIONS)


def request_meta(
    head: w.ParamsHead,
    method: str,
    raw_params: Raw,
    headers: HttpHeaders | None,
    *,
    legacy: bool = False,
) -> w.RequestMeta:
    if head.meta is UNSET:
        older = _older_era_version(method, raw_params, headers)
        if older is not None:
            modern = ", ".join(w.SUPPORTED_VERSIONS)
            if legacy:
                spoken = (
                    f"{modern}, where every request carries its version in params._meta, "
                    f"and {', '.join(LEGACY_VERSIONS)} in a session that initialize opens"
                )
            else:
                spoken = (
                    f"{modern} only, where there is no initialize and every request "
                    "carries its version in params._meta"
                )
            raise RemoteProtocolError(
                UNSUPPORTED_PROTOCOL_VERSION,
                f"Unsupported protocol version {shown(older)!r}: this server speaks MCP {spoken}",
                {"supported": supported_versions(legacy), "requested": older},
            )
        raise invalid_params(
            "Invalid params: params._meta is required (protocol version and client "
            "capabilities travel in every request)"
        )
    return head.meta


class _InitializeParams(msgspec.Struct):
    protocolVersion: Any = None  # noqa: N815 - the wire's name


def _older_era_version(method: str, raw_params: Raw, headers: HttpHeaders | None) -> str | None:
    """The protocol version a client of an earlier revision named (its `initialize`, or
    the `MCP-Protocol-Version` header it sends afterwards), or None: not such a client."""
    header = None if headers is None else headers.protocol_version
    if header is not None and header.strip() in w.SUPPORTED_VERSIONS:
        header = None  # a current client that left `_meta` out: -32602 says what is missing
    if method == "initialize":
        try:
            given = msgspec.json.decode(raw_params, type=_InitializeParams).protocolVersion
        except (msgspec.ValidationError, msgspec.DecodeError):
            given = None
        if isinstance(given, str):
            return given
        return header.strip() if header is not None else "none given"
    return None if header is None else header.strip()


def check_version_and_method(
    method: str, meta: w.RequestMeta, offered: Callable[[], dict[str, Any]], *, legacy: bool = False
) -> None:
    """The protocol version, then the method: known, and offered by this server (`offered`
    gives the capabilities it declares, asked only for methods that need one). `legacy`:
    the server serves 2025 sessions, and names their revisions as supported too."""
    if meta.protocol_version not in w.SUPPORTED_VERSIONS:
        raise RemoteProtocolError(
            UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version {meta.protocol_version!r}",
            {"supported": supported_versions(legacy), "requested": meta.protocol_version},
        )
    if method not in KNOWN_METHODS:
        raise RemoteProtocolError(METHOD_NOT_FOUND, f"Method not found: {shown(method)}")
    needs = CAPABILITY_OF.get(method)
    if needs is not None and needs not in offered():
        raise RemoteProtocolError(
            METHOD_NOT_FOUND, f"Method not found: {method} (this server offers no {needs})"
        )


def check_headers(
    headers: HttpHeaders,
    method: str,
    head: w.ParamsHead,
    meta: w.RequestMeta,
    *,
    accept_missing_task_name: bool,
) -> None:
    """The MCP headers of an HTTP request must mirror its body."""
    if headers.protocol_version is None:
        raise RemoteProtocolError(HEADER_MISMATCH, "MCP-Protocol-Version header is missing")
    if headers.protocol_version.strip() != meta.protocol_version:
        raise RemoteProtocolError(
            HEADER_MISMATCH,
            "MCP-Protocol-Version header does not match "
            "params._meta[io.modelcontextprotocol/protocolVersion]",
        )
    if headers.method is None:
        raise RemoteProtocolError(HEADER_MISMATCH, "Mcp-Method header is missing")
    if headers.method.strip() != method:
        raise RemoteProtocolError(HEADER_MISMATCH, "Mcp-Method header does not match method")
    wire_name = MCP_NAME_PARAM.get(method)
    if wire_name is None:
        return
    body_value = getattr(head, "task_id" if wire_name == "taskId" else wire_name)
    if not isinstance(body_value, str):
        return  # absent or mistyped: the params check reports it
    if headers.name is None:
        if method in TASK_METHODS:
            if accept_missing_task_name:
                return
            raise RemoteProtocolError(
                HEADER_MISMATCH,
                f"Mcp-Name header is missing (it must carry params.{wire_name}); a client that "
                "leaves it out of tasks/* is served only by a server configured to accept that "
                "(mcp-tasks serve --accept-missing-task-name)",
            )
        raise RemoteProtocolError(
            HEADER_MISMATCH, f"Mcp-Name header is missing (it must carry params.{wire_name})"
        )
    if _decode_header_value(headers.name) != body_value:
        raise RemoteProtocolError(
            HEADER_MISMATCH, f"Mcp-Name header does not match params.{wire_name}"
        )


def check_param_headers(
    header_params: dict[str, str], given: dict[str, str], arguments: Raw | None
) -> None:
    """Each annotated argument in the body must be mirrored, exactly, by its header; a
    header without its argument is a mismatch too."""
    values = {} if arguments is None else msgspec.json.decode(arguments)
    for argument, header in header_params.items():
        value = values.get(argument)
        sent = given.get(header.lower())
        if value is None and sent is None:
            continue
        name = f"Mcp-Param-{header}"
        if sent is None:
            raise RemoteProtocolError(
                HEADER_MISMATCH, f"{name} header is missing (it must carry arguments.{argument})"
            )
        if value is None:
            raise RemoteProtocolError(
                HEADER_MISMATCH, f"{name} header is sent but arguments.{argument} is not"
            )
        if not _header_mirrors(_decode_header_value(sent, name), value):
            raise RemoteProtocolError(
                HEADER_MISMATCH, f"{name} header does not match arguments.{argument}"
            )


def _decode_header_value(value: str, name: str = "Mcp-Name") -> str:
    value = value.strip()
    start, end = BASE64_HEADER_PREFIX, BASE64_HEADER_SUFFIX
    if value.startswith(start) and value.endswith(end) and len(value) >= len(start) + len(end):
        try:
            return base64.b64decode(value[len(start) : -len(end)], validate=True).decode("utf-8")
        except ValueError:  # binascii.Error, UnicodeDecodeError, non-ASCII text
            raise RemoteProtocolError(
                HEADER_MISMATCH, f"{name} header holds invalid =?base64?...?= text"
            ) from None
    return value


_NUMBER: Final = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _header_mirrors(text: str, value: Any) -> bool:
    """Whether header `text` carries argument `value`: strings exactly, booleans as
    `true`/`false`, numbers by value (`042`, `+42` and `42.0` all carry 42, as SEP-2243
    asks); objects, arrays and anything else never."""
    if isinstance(value, bool):
        return text == ("true" if value else "false")
    if isinstance(value, str):
        return text == value
    if isinstance(value, int | float) and _NUMBER.fullmatch(text):
        return decimal.Decimal(text) == value  # exact, also for integers beyond 2**53
    return False
