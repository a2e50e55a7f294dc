"""Which parts of a journal's lines are secrets: decided on the decoded message, never on
how its bytes spell it.

Theory of operation
-------------------
A tool marks some of its arguments sensitive; their values must never reach a journal, in
any spelling. JSON spells one string many ways (`"tools/call"`, `"tools\\/call"`,
`"\\u0074ools/call"`), keys as much as values, and an object may name a key twice (msgspec,
which the core decodes with, keeps the last). So nothing here searches the bytes for a
method, a tool or an argument: a message is decoded as the core decodes it, and only a
decoded `tools/call` of a tool with sensitive arguments is changed. It is written again as
its members, each kept byte for byte (`Raw`) but `params`, itself written again with its
`arguments` decoded, the sensitive ones `REDACTED`, and encoded anew. A key named twice is
written once, with the value the core read, so a shadowed first spelling of a secret goes
too. The core reads the written message as it read the one received (the same members,
the same values but the redacted ones), so a replay answers the same.

A message with no backslash spells every string as it reads, so one without the bytes
`tools/call` or a sensitive tool's name is no such call, nor names one (the check most
messages take: `tasks/get` and the like). A
message the core could not read as a call (not UTF-8, nesting too deep, not JSON, a
`tools/call` whose params are not an object naming its tool) called no tool, so nothing in
it is an argument. It is kept as it is, unless, read leniently (its escapes undone), it
names a tool with sensitive arguments: then none of it is kept (`WHOLLY_REDACTED`), and a
replay skips it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec
from msgspec import Raw

from ..core._depth import too_deep
from ..core._envelope import HttpHeaders, _decode_header_value
from ..core._errors import ProtocolError
from ..core._needs import ToolCall
from ..core._records import TaskRecord

REDACTED: Final = "[redacted]"
"""What a sensitive argument's value reads as in a journal."""
WHOLLY_REDACTED: Final = b'["redacted"]'
"""How a journal writes a message of which nothing is kept (its `data`, as JSON)."""

_ESCAPE: Final = re.compile(rb"\\(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)
_members: Final = msgspec.json.Decoder(dict[str, Raw])
_encoder: Final = msgspec.json.Encoder()


class Redactor:
    """Writes `REDACTED` for the arguments tools marked sensitive (tool -> argument names),
    and for the `Mcp-Param-*` headers that mirror them (tool -> argument -> header)."""

    def __init__(
        self,
        sensitive: Mapping[str, frozenset[str]],
        header_params: Mapping[str, Mapping[str, str]],
    ) -> None:
        self.sensitive = dict(sensitive)
        self._headers = {
            tool: {header_params.get(tool, {}).get(name, "").lower() for name in names} - {""}
            for tool, names in self.sensitive.items()
        }
        self._names = [tool.encode("utf-8", "surrogatepass") for tool in self.sensitive]

    def arguments(self, tool: str, arguments: Raw | None) -> Raw | None:
        """`arguments` (an object the core accepted) with the sensitive ones `REDACTED`."""
        names = self.sensitive.get(tool)
        if not names or arguments is None:
            return arguments
        try:
            value = msgspec.json.decode(arguments)
        except (msgspec.DecodeError, RecursionError):
            return Raw(_encoder.encode(REDACTED))
        if not isinstance(value, dict):
            return arguments
        return Raw(_encoder.encode(_redacted(value, names)))

    def call(self, call: ToolCall) -> ToolCall:
        if call.tool_name not in self.sensitive or call.arguments is None:
            return call
        arguments = self.arguments(call.tool_name, call.arguments)
        return msgspec.structs.replace(call, arguments=arguments)

    def record(self, record: TaskRecord | None) -> TaskRecord | None:
        if record is None or record.tool_name not in self.sensitive or record.arguments is None:
            return record
        arguments = self.arguments(record.tool_name, record.arguments)
        return msgspec.structs.replace(record, arguments=arguments)

    def message(self, data: bytes) -> tuple[bytes, str | None]:
        """An incoming message with the sensitive arguments of its tool redacted (the rest
        of its members byte for byte), and the tool it calls (None: not a call of such a
        tool). `WHOLLY_REDACTED`: nothing of it can be kept."""
        if not self.sensitive:
            return data, None
        if b"\\" not in data and b"tools/call" not in data and not self._named(data):
            return data, None  # no string here reads tools/call or a sensitive tool
        members = _message(data)
        if members is None or _decoded(members.get("method")) != "tools/call":
            return self._unread(data, members is None), None
        try:
            params = _members.decode(members.get("params", b"{}"))
        except (msgspec.DecodeError, RecursionError):
            return self._unread(data, True), None
        tool = _decoded(params.get("name"))
        if not isinstance(tool, str):
            return self._unread(data, True), None
        if tool not in self.sensitive:
            return data, None
        arguments = params.get("arguments")
        if arguments is not None and bytes(arguments) != b"null":
            redacted = self._arguments_of_call(tool, arguments)
            if redacted is None:
                return WHOLLY_REDACTED, tool
            params["arguments"] = redacted
        members["params"] = Raw(_encoder.encode(params))
        return _encoder.encode(members), tool

    def headers(self, tool: str | None, headers: HttpHeaders | None) -> HttpHeaders | None:
        """`headers` with the `Mcp-Param-*` mirroring a sensitive argument `REDACTED`: of
        `tool`'s, and of the tool `Mcp-Name` names (a mismatched one is refused, but its
        headers are written all the same)."""
        if headers is None or not headers.params:
            return headers
        known = self._headers
        mirrored = known.get(tool or "", set()) | self._named_by_header(headers.name)
        if not mirrored:
            return headers
        params = {
            name: REDACTED if name in mirrored else value for name, value in headers.params.items()
        }
        return msgspec.structs.replace(headers, params=params)

    def _named_by_header(self, name: str | None) -> set[str]:
        """The mirrored headers of the tool `Mcp-Name` names (as the core reads it, plain
        or `=?base64?...?=`); of every tool, if it cannot be read."""
        if name is None:
            return set()
        try:
            tool = _decode_header_value(name)
        except ProtocolError:
            return set().union(*self._headers.values())
        return self._headers.get(tool, set())

    def _arguments_of_call(self, tool: str, arguments: Raw) -> Raw | None:
        """A call's arguments redacted; anything but an object is refused by the core all
        the same (with the same words), so it is not kept at all. None: they do not decode
        (a number past a double): the core's own decoding refuses them, and nothing of the
        message can be kept."""
        try:
            value = msgspec.json.decode(arguments)
        except (msgspec.DecodeError, RecursionError):
            return None
        if not isinstance(value, dict):
            return Raw(_encoder.encode(REDACTED))
        return Raw(_encoder.encode(_redacted(value, self.sensitive[tool])))

    def _unread(self, data: bytes, doubtful: bool) -> bytes:
        """A message that called no tool: kept, unless it could not be read (`doubtful`)
        and, its escapes undone, names a tool with sensitive arguments."""
        if doubtful and self._named(_unescaped(data)):
            return WHOLLY_REDACTED
        return data

    def _named(self, text: bytes) -> bool:
        return any(name in text for name in self._names)


def _message(data: bytes) -> dict[str, Raw] | None:
    """The members of the message the core decodes `data` to, or None: it refuses it
    before reading any (not UTF-8, too deep, not a JSON object)."""
    try:
        data.decode("utf-8")
        if too_deep(data):
            return None
        return _members.decode(data)
    except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):
        return None


def _decoded(raw: Raw | None) -> Any:
    if raw is None:
        return None
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None


def _unescape(match: re.Match[bytes]) -> bytes:
    code, other = match.groups()
    if code is not None:
        return chr(int(code, 16)).encode("utf-8", "surrogatepass")
    return bytes(other)


def _unescaped(data: bytes) -> bytes:
    """`data` with every JSON escape undone, valid JSON or not."""
    return _ESCAPE.sub(_unescape, data) if b"\\" in data else data


def _redacted(arguments: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
    return {key: REDACTED if key in names else value for key, value in arguments.items()}
