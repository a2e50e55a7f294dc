"""How a value travels in an MCP request header, as a client writes it (SEP-2243).

`Mcp-Name` and `Mcp-Param-{Name}` headers mirror a string of the body; `header_text` says
which text mirrors an argument (a string as it is, a boolean as `true`/`false`, a number in
decimal), and `encode_header_value` wraps text that is not plain visible ASCII, or that
looks like the wrapping, as `=?base64?<UTF-8, base64>?=`. The server reads them back with
`_envelope.check_headers` and `check_param_headers`, which decode that form and compare.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from ._envelope import BASE64_HEADER_PREFIX, BASE64_HEADER_SUFFIX


def encode_header_value(text: str) -> str:
    """A header-safe copy of `text`: as is when plain visible ASCII, else `=?base64?…?=`."""
    plain = (
        text.isascii()
        and text.isprintable()
        and text == text.strip()
        and not text.startswith(BASE64_HEADER_PREFIX)
    )
    if plain:
        return text
    encoded = base64.b64encode(text.encode()).decode("ascii")
    return BASE64_HEADER_PREFIX + encoded + BASE64_HEADER_SUFFIX


def header_text(value: Any) -> str | None:
    """The text an `Mcp-Param-*` header carries for the argument `value`, before encoding;
    None when no header can carry it (null, an object, an array, a number that is not
    finite): the argument then travels without its header, and the server says so."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return None


def param_header_value(value: Any) -> str | None:
    """The `Mcp-Param-*` header value for the argument `value`, encoded (None: no header)."""
    text = header_text(value)
    return None if text is None else encode_header_value(text)
