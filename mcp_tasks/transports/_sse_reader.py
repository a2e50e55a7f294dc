"""Reading a server-sent event stream on the client (no I/O).

`EventStream` cuts the bytes into the data of `message` events: lines end with LF or CRLF
(a lone CR, which SSE also allows, is not a line end here), `data:` fields are joined with
newlines, comments are skipped, events of another type are ignored, and an event with no
data is none (a priming event). It keeps what resuming the stream needs: the last event id
(`id:`, kept from the event that carried it, a priming event's included) and the wait the
server asked for before reconnecting (`retry:`, milliseconds). No line or event is held past
`max_event_bytes` (ValueError).
"""

from __future__ import annotations

from typing import Final

__all__ = ["EventStream"]

_MAX_ID_BYTES: Final = 1024
_MAX_RETRY_MS: Final = 60_000
"""A server's `retry:` beyond a minute is taken as a minute."""


class EventStream:
    def __init__(self, max_event_bytes: int) -> None:
        self.max_event_bytes = max_event_bytes
        self.last_event_id: str | None = None
        """The id of the last event dispatched (what `Last-Event-ID` sends to resume)."""
        self.retry_ms: int | None = None
        """The server's reconnection wait, when it gave one."""
        self._partial = bytearray()
        self._data: list[bytes] = []
        self._size = 0
        self._event_type = b""
        self._id: bytes | None = None

    def restart(self) -> None:
        """A new connection: what was half read of the last one is dropped; the last event
        id and the retry wait are kept."""
        self._partial.clear()
        self._data, self._size, self._event_type, self._id = [], 0, b"", None

    def retry_seconds(self, default: float) -> float:
        return default if self.retry_ms is None else self.retry_ms / 1000

    def feed(self, chunk: bytes) -> list[bytes]:
        datas: list[bytes] = []
        self._partial += chunk
        start = 0
        while (end := self._partial.find(b"\n", start)) != -1:
            line = bytes(self._partial[start:end]).removesuffix(b"\r")
            start = end + 1
            data = self._line(line)
            if data is not None:
                datas.append(data)
        del self._partial[:start]
        if self._size + len(self._partial) > self.max_event_bytes:
            raise ValueError(f"an SSE event is larger than {self.max_event_bytes} bytes")
        return datas

    def _line(self, line: bytes) -> bytes | None:
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None  # a comment (keep-alive)
        name, colon, value = line.partition(b":")
        value = value.removeprefix(b" ") if colon else b""
        if name == b"data":
            self._data.append(value)
            self._size += len(value) + 1
            if self._size > self.max_event_bytes:
                raise ValueError(f"an SSE event is larger than {self.max_event_bytes} bytes")
        elif name == b"event":
            self._event_type = value
        elif name == b"id" and b"\0" not in value and len(value) <= _MAX_ID_BYTES:
            self._id = value
        elif name == b"retry" and value.isdigit():
            self.retry_ms = min(int(value), _MAX_RETRY_MS)
        return None

    def _dispatch(self) -> bytes | None:
        data, event_type = self._data, self._event_type
        self._data, self._size, self._event_type = [], 0, b""
        if self._id is not None:
            self.last_event_id = self._id.decode("utf-8", "replace")
        joined = b"\n".join(data)
        if not joined or event_type not in (b"", b"message"):
            return None  # (an empty data buffer is no event: a priming event, SEP-1699)
        return joined
