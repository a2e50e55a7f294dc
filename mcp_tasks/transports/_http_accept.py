"""The listeners and accept loop of `serve_http`: new connections, and patience when out of
descriptors. On asyncio a connection is a `ProtocolStream` (`_asyncio_stream` says why), on
trio anyio's stream inside a `BatchedStream` (`_trio_stream`).

`listen` binds; `adopt` takes sockets bound and listening already (a supervisor's, shared by
the worker processes of `mcp-tasks serve --workers N`: one accept queue, whichever worker is
free takes the next connection). A listener is closed when serving stops (no new connection
is taken while the server drains). Out of file descriptors (or memory), `accept` waits and
tries again, longer each time up to a second, and says so once per `_LOG_SECONDS`: not a
traceback ten times a second.
"""

from __future__ import annotations

import errno
import logging
import math
import socket
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from typing import Any, Final

import anyio
import anyio.abc
import trio

from ._asyncio_stream import accept_on_asyncio
from ._trio_stream import BatchedStream

__all__ = ["accept", "adopt", "listen"]

logger = logging.getLogger("mcp_tasks.transports.http")

_OUT_OF_RESOURCES: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_BACKOFF_SECONDS: Final = 0.01
_BACKOFF_MAX_SECONDS: Final = 1.0
_LOG_SECONDS: Final = 10.0


async def accept(
    listener: anyio.abc.SocketListener,
    serve: Callable[[anyio.abc.SocketStream], Coroutine[Any, Any, None]],
    connections: anyio.abc.TaskGroup,
) -> None:
    """Accept connections into `connections` (each served by `serve`) until cancelled."""
    async with listener:  # closed when serving stops: no new connection is taken
        if trio.lowlevel.in_trio_task():
            await _accept_until_cancelled(partial(_accept_batched, listener), serve, connections)
        else:
            await _accept_until_cancelled(partial(accept_on_asyncio, listener), serve, connections)


async def _accept_batched(listener: anyio.abc.SocketListener) -> anyio.abc.SocketStream:
    return BatchedStream(await listener.accept())


async def _accept_until_cancelled(
    next_connection: Callable[[], Awaitable[anyio.abc.SocketStream]],
    serve: Callable[[anyio.abc.SocketStream], Coroutine[Any, Any, None]],
    connections: anyio.abc.TaskGroup,
) -> None:
    backoff = _BACKOFF_SECONDS
    logged_at = -math.inf
    while True:
        try:
            stream = await next_connection()
        except OSError as error:
            if error.errno not in _OUT_OF_RESOURCES:
                raise
            now = anyio.current_time()
            if now - logged_at >= _LOG_SECONDS:
                logged_at = now
                logger.warning(
                    "cannot accept connections: %s; new ones wait (trying again every %g s "
                    "at most; raise the open-file limit, or serve fewer connections)",
                    error.strerror or error,
                    _BACKOFF_MAX_SECONDS,
                )
            await anyio.sleep(backoff)
            backoff = min(2 * backoff, _BACKOFF_MAX_SECONDS)
            continue
        backoff = _BACKOFF_SECONDS
        connections.start_soon(serve, stream)


async def listen(host: str, port: int) -> list[anyio.abc.SocketListener]:
    """A listener per address `host` resolves to (IPv4 and IPv6 for a name)."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    if isinstance(listener, anyio.abc.SocketListener):
        return [listener]
    return [part for part in listener.listeners if isinstance(part, anyio.abc.SocketListener)]


async def adopt(sockets: Sequence[socket.socket]) -> list[anyio.abc.SocketListener]:
    """A listener on each of `sockets`, bound and listening already; each is closed with its
    listener (the descriptor is this process's own: other processes' copies stay open)."""
    listeners = []
    for listening in sockets:
        listening.setblocking(False)
        listeners.append(await anyio.abc.SocketListener.from_socket(listening))
    return listeners
