"""A transport of your own: newline-delimited JSON-RPC over TCP, server and client side.

Run it: `python examples/line_transport.py` serves examples/jobs.py on a loopback port and
calls its `greet` tool through `mcp_tasks.client.Client`. docs/writing-a-transport.md walks
through it. It runs on anyio, so on asyncio (as here) and on trio alike.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

import anyio
import anyio.abc
import msgspec
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectSendStream

from mcp_tasks import TextContent
from mcp_tasks.client import Client
from mcp_tasks.core import internal_error_reply
from mcp_tasks.transports import Connection, MessageHandler, NotificationHandler, TransportError

logger = logging.getLogger("line_transport")

MAX_LINE_BYTES = 1024 * 1024
"""The longest line either side reads; a longer one ends the connection."""
MAX_REQUESTS_IN_FLIGHT = 64
"""Per connection: past it, the server reads no more lines until a request ends."""
_CONNECTION_ENDED = (
    anyio.EndOfStream,  # EOF
    anyio.IncompleteRead,  # EOF inside a line
    anyio.DelimiterNotFound,  # a line past MAX_LINE_BYTES
    anyio.BrokenResourceError,  # a reset
    anyio.ClosedResourceError,  # closed on our side
)


# --- the server side: a driver of the port -------------------------------------------------


async def serve_tcp_lines(
    server: MessageHandler,
    host: str,
    port: int,
    *,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `server` on `host:port` until cancelled; `task_status` gets the port bound."""
    async with await anyio.create_tcp_listener(local_host=host, local_port=port) as listener:
        task_status.started(listener.extra(anyio.abc.SocketAttribute.local_port))
        await listener.serve(partial(_serve_connection, server))


async def _serve_connection(server: MessageHandler, stream: anyio.abc.SocketStream) -> None:
    """One client: read lines, answer each request in a task of its own, until EOF."""
    connection = Connection()  # what `notifications/cancelled` looks requests up in
    lines = BufferedByteReceiveStream(stream)
    room = anyio.Semaphore(MAX_REQUESTS_IN_FLIGHT)
    write_lock = anyio.Lock()  # one whole line at a time: replies never interleave

    async def send(body: bytes) -> None:
        async with write_lock:
            with suppress(*_CONNECTION_ENDED):  # the client is gone: nobody can read it
                await stream.send(body + b"\n")

    async def answer(line: bytes, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            task_status.started()  # handle() runs to its first await before the next line
            reply = await server.handle(line, notify=send, connection=connection)
            if reply is not None and reply.body is not None:
                await send(reply.body)
        except Exception:  # a bug behind handle() costs this request, not the server
            logger.exception("handling a line failed")
            failed = internal_error_reply(line)  # the -32603 every transport sends
            if failed.request_id is not None:  # a notification is answered by nothing
                await send(failed.body)
        finally:
            room.release()

    async with stream, anyio.create_task_group() as requests:
        try:
            while True:
                line = await lines.receive_until(b"\n", MAX_LINE_BYTES)
                if line.strip():
                    await room.acquire()  # full: wait, reading nothing, until one ends
                    await requests.start(answer, line)
        except _CONNECTION_ENDED:
            pass  # EOF, a reset, or a line past MAX_LINE_BYTES: read no more
        connection.closing = True
        server.end_subscriptions(connection)  # its listen streams end; the rest are answered


# --- the client side: a ClientTransport ----------------------------------------------------

_Item = dict[str, Any] | TransportError


class LineClientTransport:
    """A `ClientTransport` over one TCP connection; made by `connect_tcp_lines`."""

    sends_headers = False  # lines have no headers: the client need not learn any

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        self._write_lock = anyio.Lock()
        self._waiting: dict[tuple[type, object], tuple[MemoryObjectSendStream[_Item], bool]] = {}
        self._failure: TransportError | None = None

    async def request(
        self,
        message: bytes,
        *,
        request_id: str | int,
        headers: Mapping[str, str],
        on_notification: NotificationHandler | None = None,
    ) -> dict[str, Any]:
        """Send the request line; its response, once `read_replies` routes it here."""
        key = _key(request_id)
        inbox, replies = anyio.create_memory_object_stream[_Item](math.inf)
        self._waiting[key] = (inbox, on_notification is not None)
        try:
            await self._write(message)
            with replies:
                while True:
                    item = await replies.receive()
                    if isinstance(item, TransportError):
                        raise TransportError(str(item))
                    if "method" not in item:
                        return item
                    if on_notification is not None:
                        await on_notification(item)
        except anyio.get_cancelled_exc_class():
            if key in self._waiting:  # not answered yet: tell the server to stop it
                cancelled = {"requestId": request_id}
                note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled}
                with anyio.move_on_after(5, shield=True):
                    await self._write(msgspec.json.encode(note))
            raise
        finally:
            self._waiting.pop(key, None)

    async def notify(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        """Send the notification line."""
        await self._write(message)

    async def aclose(self) -> None:
        """Close the connection; requests still waiting raise TransportError."""
        await self._stream.aclose()

    async def read_replies(self) -> None:
        """Route each line the server writes to the request it is for, until the end."""
        lines = BufferedByteReceiveStream(self._stream)
        try:
            while True:
                message = msgspec.json.decode(await lines.receive_until(b"\n", MAX_LINE_BYTES))
                if "method" in message:  # a notification: to each request that wants them
                    for inbox, wants in list(self._waiting.values()):
                        if wants:
                            inbox.send_nowait(message)
                elif waiter := self._waiting.pop(_key(message.get("id")), None):
                    waiter[0].send_nowait(message)
        except (*_CONNECTION_ENDED, msgspec.DecodeError) as error:
            self._failure = TransportError(f"the line connection ended: {error!r}")
        for inbox, _ in self._waiting.values():
            inbox.send_nowait(self._failure)

    async def _write(self, message: bytes) -> None:
        if self._failure is not None:
            raise self._failure
        async with self._write_lock:  # one whole line at a time
            try:
                await self._stream.send(message + b"\n")  # encoded JSON holds no raw newline
            except _CONNECTION_ENDED as error:
                raise TransportError(f"cannot send on the line connection: {error!r}") from None


def _key(request_id: object) -> tuple[type, object]:
    """Ids match by type and value: `1` is not `"1"` (as `same_id` has it)."""
    return (type(request_id), request_id)


@asynccontextmanager
async def connect_tcp_lines(host: str, port: int) -> AsyncIterator[LineClientTransport]:
    """A `LineClientTransport` connected to `host:port`, its reader running in the block."""
    transport = LineClientTransport(await anyio.connect_tcp(host, port))
    async with anyio.create_task_group() as reader:
        reader.start_soon(transport.read_replies)
        try:
            yield transport
        finally:
            await transport.aclose()


async def main() -> str:
    """Serve examples/jobs.py on a loopback port and call `greet` over it: the greeting."""
    from jobs import server  # noqa: PLC0415  (examples/jobs.py, beside this file)

    async with server.running(), anyio.create_task_group() as serving:
        port = await serving.start(serve_tcp_lines, server, "127.0.0.1", 0)
        async with connect_tcp_lines("127.0.0.1", port) as transport:
            result = await Client(transport).call_tool("greet", {"name": "TCP"})
        serving.cancel_scope.cancel()
    [greeting] = result.content
    assert isinstance(greeting, TextContent)
    return greeting.text


if __name__ == "__main__":
    print(anyio.run(main))
