"""How deeply a peer's JSON nests, measured before it is decoded.

msgspec decodes nested arrays and objects by recursion, and where it gives up depends on
the interpreter (3.11 stops near the Python recursion limit; 3.13 decodes 5,000 levels and
more) and on how deep the stack below it is. The limit is ours instead: `MAX_DEPTH` levels,
counted over the bytes, the same on every interpreter and at every later decode of a part
of the message.

The count is cheap: a message of no more than `MAX_DEPTH` bytes, or with no more than
`MAX_DEPTH` opening brackets in all, cannot nest deeper than that; its length or two
`bytes.count` calls prove it for nearly every message. Only a message with more brackets
is scanned: its strings are cut out (a bracket inside a string does not nest), all with
bytes methods, and the depth is the highest running sum of +1 for `[`/`{` and -1 for
`]`/`}`.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Final

# Levels of arrays and objects a message may nest, the envelope's own included. The
# largest message this server sends nests 7 levels; a tool's arguments get the rest.
MAX_DEPTH: Final = 512

_NEITHER_BRACKET_NOR_QUOTE: Final = bytes(set(range(256)) - set(b'[]{}"'))
_STEP: Final = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def nesting_depth(data: bytes | bytearray | memoryview) -> int:
    """The deepest level of arrays and objects in the JSON text `data` (0 for a scalar).

    Text that is not JSON gets a number too (brackets outside its strings, closed or not):
    it is for deciding whether to decode, not whether the text is valid."""
    # Escapes first (an escaped backslash, then an escaped quote), so that every quote left
    # opens or closes a string; then only brackets and quotes are kept. Two quotes side by
    # side go (an empty string, or the gap between two strings: no bracket is outside), and
    # what is left between quotes 1 and 2, 3 and 4, ... is inside strings.
    unescaped = bytes(data).replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = unescaped.translate(None, delete=_NEITHER_BRACKET_NOR_QUOTE).replace(b'""', b"")
    brackets = b"".join(kept.split(b'"')[::2]) if b'"' in kept else kept
    return max(accumulate(map(_STEP.__getitem__, brackets), initial=0))


def too_deep(data: bytes | bytearray | memoryview) -> bool:
    """Whether `data` nests more than `MAX_DEPTH` levels: its length or two counts for
    nearly every message, a scan for those with more brackets than that."""
    if len(data) <= MAX_DEPTH:  # too short to open that many (most messages: tasks/get)
        return False
    if isinstance(data, memoryview):
        data = bytes(data)
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return False
    return nesting_depth(data) > MAX_DEPTH
