"""The shapes of the callables a `Client` takes (input handlers, retry and status
callbacks), and how it calls them."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from ..core import LocalProtocolError
from ..core import wire as w
from ..core._client import RpcError, Task
from ..transports import ServerUnreachable

ElicitHandler = Callable[[w.ElicitParams], Awaitable[w.ElicitResult]]
SamplingHandler = Callable[[w.CreateMessageParams], Awaitable[w.CreateMessageResult]]
RootsHandler = Callable[[], Awaitable[w.ListRootsResult]]
RetryHandler = Callable[[str, float, RpcError | ServerUnreachable], Awaitable[None] | None]
"""Told `(method, seconds, error)` before each wait for a retry: the server's busy refusal
(`RpcError`), or `ServerUnreachable` while it restarts."""
StatusCallback = Callable[[Task], Awaitable[None] | None]
NotificationCallback = Callable[[dict[str, Any]], Awaitable[None] | None]
"""Told each notification that comes with a request's answer (or on a `listen` stream)."""


class MissingInputHandler(LocalProtocolError):
    """The server asked for a kind of input this client has no handler for."""


def missing_handler(kind: str, handler: str, key: str) -> MissingInputHandler:
    return MissingInputHandler(
        f"the server asked for {kind} (input key {key!r}) but this client has no "
        f"{handler} handler: pass Client({handler}=...)"
    )


async def maybe_await(value: Awaitable[None] | None) -> None:
    if inspect.isawaitable(value):
        await value
