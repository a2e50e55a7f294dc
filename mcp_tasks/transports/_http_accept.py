"""The accept loop of `serve_http`: new connections, and patience when out of descriptors.

A listener is closed when serving stops (no new connection is taken while the server
drains). Out of file descriptors (or memory), `accept` waits and tries again, longer each
time up to a second, and says so once per `_LOG_SECONDS`: not a traceback ten times a
second.
"""

from __future__ import annotations

import errno
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Final

import trio

__all__ = ["accept"]

logger = logging.getLogger("mcp_tasks.transports.http")

_OUT_OF_RESOURCES: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_BACKOFF_SECONDS: Final = 0.01
_BACKOFF_MAX_SECONDS: Final = 1.0
_LOG_SECONDS: Final = 10.0


async def accept(
    listener: trio.SocketListener,
    serve: Callable[[trio.SocketStream], Awaitable[None]],
    connections: trio.Nursery,
) -> None:
    """Accept connections into `connections` (each served by `serve`) until cancelled."""
    async with listener:  # closed when serving stops: no new connection is taken
        await _accept_until_cancelled(listener, serve, connections)


async def _accept_until_cancelled(
    listener: trio.SocketListener,
    serve: Callable[[trio.SocketStream], Awaitable[None]],
    connections: trio.Nursery,
) -> None:
    backoff = _BACKOFF_SECONDS
    logged_at = -math.inf
    while True:
        try:
            stream = await listener.accept()
        except OSError as error:
            if error.errno not in _OUT_OF_RESOURCES:
                raise
            now = trio.current_time()
            if now - logged_at >= _LOG_SECONDS:
                logged_at = now
                logger.warning(
                    "cannot accept connections: %s; new ones wait (trying again every %g s "
                    "at most; raise the open-file limit, or serve fewer connections)",
                    error.strerror or error,
                    _BACKOFF_MAX_SECONDS,
                )
            await trio.sleep(backoff)
            backoff = min(2 * backoff, _BACKOFF_MAX_SECONDS)
            continue
        backoff = _BACKOFF_SECONDS
        connections.start_soon(serve, stream)
