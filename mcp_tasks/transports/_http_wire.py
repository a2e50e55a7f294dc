"""HTTP/1.1 on the built-in server's connections, without I/O: requests read, answers framed.

A request head is parsed by httptools (llhttp, the C parser uvicorn and Node use): it is
handed exactly the head, up to its blank line, once all of it has arrived, so it never
holds bytes of a body or of the next request. The body is framed here, from what the head
says: `Content-Length` bytes, or chunked. Chunked decoding is ours because the limits need
what httptools keeps to itself: the size a chunk declares, refused (413, or 400 past what
HTTP carries) before a byte of it is waited for. Everything the client sent past the
request being read stays in `RequestInput`'s buffer: the next request, pipelined.

What a head may not be, and its status: no blank line within `max_head_bytes` (431);
anything llhttp refuses (400: a malformed request line or header, a bare LF, two
`Content-Length`s, `Content-Length` with `Transfer-Encoding`, a `Transfer-Encoding` that
does not end in chunked); a version other than 1.0 and 1.1 (505). An `Upgrade` is read as
a plain request (the server never switches protocols). Header values lose the spaces and
tabs around them, as RFC 9110 5.5 says.

Answers are written as bytes: a status line, the headers given, and the body, or, for a
stream (`stream_head`), the body in chunks (`chunk`, `LAST_CHUNK`); a client of HTTP/1.0,
which knows no chunks, gets the stream unframed, and the connection closes after it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import httptools

from ._exchange import REASONS
from ._http_rules import (
    PARAM_PREFIX,
    READ_HEADERS,
    Refusal,
    RequestRules,
    add_param,
    mcp_headers_with,
)

if TYPE_CHECKING:
    from ..core import HttpHeaders

__all__ = [
    "LAST_CHUNK",
    "NEED_DATA",
    "RequestHead",
    "RequestInput",
    "chunk",
    "json_answer_bytes",
    "response_bytes",
    "stream_head",
]

Headers = list[tuple[bytes, bytes]]

NEED_DATA: Final = None
"""What a read returns when the bytes so far do not hold what it reads."""
LAST_CHUNK: Final = b"0\r\n\r\n"
_HEAD_END: Final = b"\r\n\r\n"
_MAX_CHUNK_LINE: Final = 4096
"""A chunk-size line (its extensions too) longer than this is malformed (400)."""
_MAX_CHUNK_DIGITS: Final = 16
"""More hex digits than this declare a chunk larger than any length HTTP carries (400)."""
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_WHITESPACE: Final = b" \t"
HEADS_KEPT: Final = 4
"""The heads a connection keeps (the ones it read most recently), to read each again at
no cost: a client that alternates between a few requests (a call, then a poll of its task)
sends the same few heads."""
HEAD_KEPT_BYTES: Final = 2048
"""A head longer than this is read each time it comes (what a connection keeps is small)."""
_PLAIN_FIELD_LINE: Final = re.compile(rb"([^:\r\n]+):([\x20-\x7e\t]*)\r")
"""A header line of visible ASCII, spaces and tabs (what llhttp takes in any value), its name
and value: a line of a head read from a kept one (`_varied`)."""
_READ_BY_PARSER: Final = frozenset(
    {
        b"connection",
        b"content-length",
        b"expect",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""Headers whose values llhttp or the head reads for themselves (framing, keep-alive, an
upgrade, `expects_continue`): a head that differs from a kept one in one of them is parsed."""


class RequestHead:
    """A request's head, as the client sent it (header names in their own case), and the
    headers the endpoint reads, as `_http_rules.read_headers` gives them (`found`,
    `params`), read as the head is parsed."""

    __slots__ = (
        "_lines",
        "event_stream",
        "expects_continue",
        "found",
        "headers",
        "http_version",
        "keep_alive",
        "mcp",
        "method",
        "params",
        "passed",
        "reader",
        "target",
    )

    def __init__(self) -> None:
        self.method = b""
        self.target = b""
        self.headers: Headers = []
        self.found: dict[bytes, bytes] = {}
        self.params: dict[str, str] = {}
        self.http_version = "1.1"
        self.keep_alive = True
        """The client keeps the connection after this request (HTTP/1.1 without
        `Connection: close`, or HTTP/1.0 with `keep-alive`)."""
        self.expects_continue = False
        # What the connection learnt of the head, kept for a repeat of it (`RequestInput`):
        self.mcp: HttpHeaders | None = None
        """What the core reads of it (`_http_rules.mcp_headers`), once made."""
        self.passed = False
        """The endpoint's rules let it through: a `POST`, no authenticator (a token may
        expire), nothing refused."""
        self.event_stream: bool | None = None
        """Its Accept admits an SSE answer (`RequestRules.allows_event_stream`), once asked."""
        self.reader: httptools.HttpRequestParser | None = None
        """The parser reading it, while it does (`on_headers_complete` asks it)."""
        self._lines: dict[bytes, int] | None = None
        """Each header sent once, lowercased, by its place in `headers` (`lines`)."""

    @property
    def lines(self) -> dict[bytes, int]:
        """Where each header sent once (lowercased) is in `headers`; made when first asked."""
        lines = self._lines
        if lines is None:
            lines = {}
            repeated = set()
            for index, (name, _) in enumerate(self.headers):
                lowered = name.lower()
                if lowered in lines:
                    repeated.add(lowered)
                lines[lowered] = index
            for lowered in repeated:
                del lines[lowered]
            self._lines = lines
        return lines

    def varied(self, index: int, name: bytes, value: bytes) -> RequestHead:
        """This head with the value of `headers[index]` (`name`, lowercased, sent once) now
        `value`: what the endpoint learnt of it is kept unless it reads that header."""
        head = RequestHead.__new__(RequestHead)
        head.method, head.target, head.http_version = self.method, self.target, self.http_version
        head.keep_alive, head.expects_continue = self.keep_alive, self.expects_continue
        head.params, head.reader, head._lines = self.params, None, self._lines
        headers = head.headers = self.headers.copy()
        headers[index] = (headers[index][0], value)
        if name in READ_HEADERS:
            found = head.found = self.found.copy()
            found[name] = value
            mcp = self.mcp
            head.mcp = None if mcp is None else mcp_headers_with(mcp, found, name)
            head.passed = self.passed and name not in RequestRules.RULED
            head.event_stream = None if name == b"accept" else self.event_stream
        else:  # nothing the endpoint reads changed: neither did what it learnt
            head.found, head.mcp, head.passed = self.found, self.mcp, self.passed
            head.event_stream = self.event_stream
        return head

    # httptools' callbacks, while the head is parsed
    def on_url(self, url: bytes) -> None:
        self.target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        value = value.strip(_WHITESPACE)
        self.headers.append((name, value))
        lowered = name.lower()
        if lowered in READ_HEADERS:
            found = self.found
            found[lowered] = found[lowered] + b", " + value if lowered in found else value
        elif lowered == b"expect":
            self.expects_continue = value.lower() == b"100-continue"
        elif lowered.startswith(PARAM_PREFIX):
            add_param(self.params, lowered, value)

    def on_headers_complete(self) -> None:
        # Asked here, not once `feed_data` returns: llhttp forgets a request's `Connection`
        # when its message ends, so a request without a body (`GET`, `Content-Length: 0`)
        # would read as keep-alive whatever it said.
        assert self.reader is not None
        self.keep_alive = self.reader.should_keep_alive()


class _Body:
    """How the body of the request being read is framed, and how far it has come."""

    __slots__ = ("chunked", "in_trailer", "left", "line_due", "trailer_bytes")

    def __init__(self, length: int, *, chunked: bool) -> None:
        self.chunked = chunked
        self.left = length  # bytes of the body (or of the current chunk) still to come
        self.line_due = chunked  # chunked: a chunk-size line comes next
        self.in_trailer = False
        self.trailer_bytes = 0


class RequestInput:
    """The bytes a client sent, read one request at a time: `next_head`, then `next_body`
    until it returns `b""` (the body's end), then `next_head` again."""

    __slots__ = ("_body", "_buffer", "_kept", "_start", "ended", "max_head_bytes")

    def __init__(self, max_head_bytes: int) -> None:
        self.max_head_bytes = max_head_bytes
        self._buffer = b""
        self._start = 0  # where the unread bytes begin in `_buffer`
        self._body: _Body | None = None
        self._kept: dict[bytes, RequestHead] = {}
        """Up to `HEADS_KEPT` heads read here, by their bytes, the most recently read last."""
        self.ended = False
        """The client sent end-of-file: nothing more comes."""

    @property
    def buffered(self) -> int:
        """Bytes received and not yet read."""
        return len(self._buffer) - self._start

    @property
    def reading_body(self) -> bool:
        """A head was read, and not yet all of its body."""
        return self._body is not None

    def whole_body_size(self, limit: int) -> int | None:
        """The size of the request's body when it is framed by `Content-Length`, at most
        `limit`, and all of it has arrived (`take_whole_body` takes it); else None."""
        body = self._body
        if body is None or body.chunked or body.left > limit or body.left > self.buffered:
            return None
        return body.left

    def take_whole_body(self) -> bytes:
        """The body `whole_body_size` found here, read whole."""
        body = self._body
        assert body is not None and not body.chunked, "no Content-Length body to take"
        data = self._take_length(body)
        assert data is not None and not body.left, "not all of it had come"
        self._body = None
        return data

    def end_if_no_body(self) -> bool:
        """True if the request just read has no body (it is then read whole)."""
        body = self._body
        if body is None or body.chunked or body.left:
            return body is None
        self._body = None
        return True

    def receive(self, data: bytes) -> None:
        """Bytes from the client; `b""` is end-of-file."""
        if not data:
            self.ended = True
        elif self._start == len(self._buffer):
            self._buffer, self._start = data, 0
        else:
            self._buffer = self._buffer[self._start :] + data
            self._start = 0

    def next_head(self) -> RequestHead | None:
        """The next request's head, or `NEED_DATA`. A `Refusal` if it is not one."""
        assert self._body is None, "the body of the request before was not read"
        buffer, start = self._buffer, self._start
        end = buffer.find(_HEAD_END, start)
        if end < 0:
            if len(buffer) - start > self.max_head_bytes:
                raise _head_too_large(len(buffer) - start, self.max_head_bytes)
            return NEED_DATA
        end += 4
        if end - start > self.max_head_bytes:
            raise _head_too_large(end - start, self.max_head_bytes)
        data = buffer[start:end]
        kept = self._kept
        known = kept.pop(data, None)
        if known is not None:  # the same head again: a client polling one task sends the
            kept[data] = known  # same bytes each time; read them once
            self._start = end
            self._body = _framing(known)
            return known
        for known_data, known in kept.items():  # a poll of another task: the same but its
            if len(known_data) == len(data):  # `Mcp-Name` (its id is as long)
                head = _varied(known_data, known, data)
                if head is not None:
                    self._start = end
                    self._keep(data, head)
                    return head
        head = RequestHead()
        parser = head.reader = httptools.HttpRequestParser(head)
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # read as a plain request: the server never switches protocols
        except httptools.HttpParserError as error:
            raise _unreadable(data, error) from None
        finally:
            head.reader = None
        self._start = end
        head.method = parser.get_method()
        head.http_version = version = parser.get_http_version()
        if version not in ("1.1", "1.0"):
            message = f"HTTP version not supported: {version}, only 1.0 and 1.1"
            raise Refusal(505, message, reason="bad_request")
        self._keep(data, head)
        return head

    def _keep(self, data: bytes, head: RequestHead) -> None:
        self._body = _framing(head)
        if len(data) <= HEAD_KEPT_BYTES:
            kept = self._kept
            if len(kept) >= HEADS_KEPT:
                del kept[next(iter(kept))]  # the one read least recently
            kept[data] = head

    def next_body(self, so_far: int, limit: int) -> bytes | None:
        """The next bytes of the body: `b""` once it has all been read, or `NEED_DATA`.
        `so_far` bytes of it were read, of `limit` at most: a chunk declared larger than
        the rest is a `Refusal` (413) before its bytes are waited for."""
        body = self._body
        assert body is not None, "no request head was read"
        if not body.chunked:
            return self._take_length(body)
        while True:
            if body.in_trailer:
                if self._trailer_ended(body):
                    self._body = None
                    return b""
                return NEED_DATA
            if body.line_due:
                if not self._chunk_line(body, so_far, limit):
                    return NEED_DATA
                continue
            data = self._take_length(body)
            if data is NEED_DATA or data:
                return data
            if self.buffered < 2:  # the chunk's data is in: its CRLF follows
                return NEED_DATA
            if self._buffer[self._start : self._start + 2] != b"\r\n":
                raise _bad_chunk("no CRLF after a chunk's data")
            self._start += 2
            body.line_due = True

    def _take_length(self, body: _Body) -> bytes | None:
        if body.left == 0:
            if not body.chunked:
                self._body = None
            return b""
        available = self.buffered
        if not available:
            return NEED_DATA
        start = self._start
        taken = min(available, body.left)
        body.left -= taken
        self._start = start + taken
        if start == 0 and taken == len(self._buffer):
            return self._buffer
        return self._buffer[start : start + taken]

    def _chunk_line(self, body: _Body, so_far: int, limit: int) -> bool:
        """Read a chunk-size line if it has arrived: True once read."""
        buffer, start = self._buffer, self._start
        end = buffer.find(b"\r\n", start)
        if end < 0:
            if len(buffer) - start > _MAX_CHUNK_LINE:
                raise _bad_chunk(f"a chunk-size line longer than {_MAX_CHUNK_LINE} bytes")
            return False
        line = buffer[start:end]
        digits = line.split(b";", 1)[0].rstrip(_WHITESPACE)
        if not digits or not _HEX.issuperset(digits) or b"\n" in line or b"\r" in line:
            raise _bad_chunk("not a hexadecimal size")
        if len(digits.lstrip(b"0")) > _MAX_CHUNK_DIGITS:
            raise Refusal(
                400,
                f"Invalid chunk size: {len(digits)} hex digits overflow what HTTP carries",
                reason="bad_request",
            )
        size = int(digits, 16)
        if so_far + size > limit:
            message = f"Request body too large: a chunk of {size} bytes, at most {limit} in all"
            raise Refusal(413, message, reason="too_large")
        self._start = end + 2
        body.line_due = False
        body.left = size
        body.in_trailer = size == 0
        return True

    def _trailer_ended(self, body: _Body) -> bool:
        """Skip the trailer fields after the last chunk: True at its blank line."""
        while True:
            buffer, start = self._buffer, self._start
            end = buffer.find(b"\r\n", start)
            if end < 0:
                if body.trailer_bytes + len(buffer) - start > self.max_head_bytes:
                    raise _head_too_large(body.trailer_bytes, self.max_head_bytes)
                return False
            self._start = end + 2
            if end == start:
                return True
            line = buffer[start:end]
            body.trailer_bytes += end + 2 - start
            if body.trailer_bytes > self.max_head_bytes:
                raise _head_too_large(body.trailer_bytes, self.max_head_bytes)
            name = line.split(b":", 1)[0]
            if b":" not in line or not name or name != name.strip() or b"\n" in line:
                raise _bad_chunk("a malformed trailer field")


def _varied(known: bytes, head: RequestHead, data: bytes) -> RequestHead | None:
    """`data` read from `head` (read from `known`, as long): when the two differ only
    within one header's value, that header sent once and not one llhttp reads itself
    (`_READ_BY_PARSER`, nor `Mcp-Param-*`), and its new line is of visible ASCII, spaces
    and tabs. llhttp took the rest of those bytes, and would take this line: the head is
    `head` with that value changed, read at half a parse's cost. Else None (parse it)."""
    size = len(data)
    difference = int.from_bytes(known) ^ int.from_bytes(data)
    first = size - (difference.bit_length() + 7) // 8  # the first byte that differs
    last = size - ((difference & -difference).bit_length() + 7) // 8  # and the last
    line_start = data.rfind(b"\n", 0, first) + 1
    if line_start == 0:
        return None  # the request line differs
    line = _PLAIN_FIELD_LINE.match(data, line_start)
    if line is None or first < line.start(2) or last >= line.end(2):
        return None  # not such a line, or its name differs, or more than it
    name = line.group(1).lower()
    index = head.lines.get(name)
    if index is None or name in _READ_BY_PARSER or name.startswith(PARAM_PREFIX):
        return None
    return head.varied(index, name, line.group(2).strip(_WHITESPACE))


def _framing(head: RequestHead) -> _Body:
    """The body's framing, from the head llhttp accepted: one `Content-Length` of digits,
    or a `Transfer-Encoding` ending in chunked, never both."""
    if head.http_version == "1.0":
        head.expects_continue = False  # HTTP/1.0 has no interim answers
    found = head.found
    if b"transfer-encoding" in found:
        return _Body(0, chunked=True)
    length = found.get(b"content-length")
    return _Body(0 if length is None else int(length), chunked=False)


def _unreadable(head: bytes, error: Exception) -> Refusal:
    """What a head llhttp refuses is answered: 501 for a transfer coding other than
    chunked (RFC 9112 6.1), 400 for a body framed two ways, else 400 in llhttp's words."""
    lowered = head.lower()
    coding = _field(lowered, b"transfer-encoding")
    if coding is not None:
        if coding.rsplit(b",", 1)[-1].strip(_WHITESPACE) != b"chunked":
            named = coding[:64].decode("latin-1")
            message = f"Transfer-Encoding not implemented: {named}; only chunked is"
            return Refusal(501, message, reason="bad_request")
        if _field(lowered, b"content-length") is not None:
            message = "Invalid HTTP request: Content-Length and Transfer-Encoding both frame it"
            return Refusal(400, message, reason="bad_request")
    return Refusal(400, f"Invalid HTTP request: {error}", reason="bad_request")


def _field(head: bytes, name: bytes) -> bytes | None:
    """The value of the first field `name` in a lowercased head, or None."""
    found = head.find(b"\r\n" + name + b":")
    if found < 0:
        return None
    start = found + len(name) + 3
    return head[start : head.find(b"\r\n", start)].strip(_WHITESPACE)


def _head_too_large(size: int, limit: int) -> Refusal:
    message = f"Request head too large: {size} bytes, at most {limit}"
    return Refusal(431, message, reason="head_too_large")


def _bad_chunk(what: str) -> Refusal:
    return Refusal(400, f"Invalid chunked body: {what}", reason="bad_request")


# --- answers ---------------------------------------------------------------------------------


def response_bytes(status: int, headers: Headers, body: bytes, *, head_only: bool = False) -> bytes:
    """An answer with its body (framed by the caller's `Content-Length`), or only its
    head (a HEAD request, or an interim 100)."""
    parts = [_STATUS_LINES.get(status) or _status_line(status)]
    for name, value in headers:
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    if not head_only:
        parts.append(body)
    return b"".join(parts)


_STATUS_LINES: dict[int, bytes] = {}  # few: the statuses are the server's own


def json_answer_bytes(status: int, body: bytes) -> bytes:
    """`response_bytes` of a JSON `body` with no other header: the answer to nearly every
    request, its head made once a status."""
    start = _JSON_HEADS.get(status)
    if start is None:
        start = _JSON_HEADS[status] = (
            _STATUS_LINES.get(status) or _status_line(status)
        ) + b"content-type: application/json\r\ncontent-length: "
    return b"%s%d\r\n\r\n%s" % (start, len(body), body)


_JSON_HEADS: dict[int, bytes] = {}


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES[status] = b"HTTP/1.1 %d %s\r\n" % (status, REASONS.get(status, b""))
    return line


def stream_head(status: int, headers: Headers, *, chunked: bool) -> bytes:
    """The head of an answer whose length is not known (an SSE stream): chunked, or
    (`chunked` False: an HTTP/1.0 client) ended by closing the connection, which the
    headers given say (`Connection: close`)."""
    if chunked:
        headers = [*headers, (b"transfer-encoding", b"chunked")]
    return response_bytes(status, headers, b"", head_only=True)


def chunk(data: bytes) -> bytes:
    """`data` as one chunk of a chunked answer (nothing for no data: that would end it)."""
    if not data:
        return b""
    return b"%x\r\n%s\r\n" % (len(data), data)
