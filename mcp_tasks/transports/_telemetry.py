"""What the server, its transports and the client report as they work: the hooks.

`Telemetry` is the interface and its own no-op: a server or client given none reports
nothing and pays one attribute read (`enabled`) on its busy paths. `mcp_tasks.otel`
implements it with OpenTelemetry (the `otel` extra). Log lines are not telemetry: they are
written whatever is configured here (`mcp_tasks.runtime` and the transports).

Who calls what:

    Server.handle           request(data, principal) around each message
    the interpreter         task_saved / task_removed after the store took the write
    the task runner         task_context(...) around each run of a handler
    the HTTP transports     refused(reason) for a request HTTP refuses by itself
    listen streams          listen_changed(+1 / -1)
    Server.running          wrap_store(store): a store that times its operations
    Client.request          client_request(method) around each request it sends
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from ..core import (
        Reply,
        TaskEvent,
        TaskRecord,
    )
    from ..core.wire import (
        IncomingMessage,
        RequestMeta,
    )
    from ..store import TaskStore

__all__ = ["NO_TELEMETRY", "ClientRequest", "RequestObservation", "Telemetry"]


class RequestObservation(Protocol):
    """One incoming message being handled (a server span)."""

    def finish(self, reply: Reply | None) -> None:
        """The answer (None: a notification, or a request its client cancelled)."""


class ClientRequest(Protocol):
    """One request a client sends (a client span)."""

    meta: dict[str, str]
    """Keys to add to the request's `_meta` (W3C `traceparent` and `tracestate`)."""

    def failed(self, code: int, message: str) -> None:
        """The server answered with a JSON-RPC error."""


class Telemetry:
    """Hooks called as requests are answered and tasks change; this base records nothing.

    Subclasses set `enabled = True`; callers skip the hooks whose arguments cost something
    to prepare when it is False.

    What the hooks are given is partly a peer's (the message in `request`, its method,
    tool name and ids): a subclass bounds it before it is kept, never lets a value a
    peer chose become a metric attribute (a series each, for the life of the process),
    and never reports the principal as one (`mcp_tasks.otel` shows how)."""

    enabled: ClassVar[bool] = False

    @contextlib.contextmanager
    def request(
        self, data: bytes | IncomingMessage, principal: str | None
    ) -> Iterator[RequestObservation]:
        """Around the handling of one incoming message (`data` as received: its bytes, or
        the message a host decoded)."""
        yield _NO_REQUEST

    def task_saved(
        self, record: TaskRecord, event: TaskEvent | None, *, created: bool, now: float
    ) -> None:
        """The store took `record`: created, or changed by `event` (None: no status
        change, e.g. a status message or some of the answers)."""

    def task_removed(self, record: TaskRecord | None, *, expired: bool, now: float) -> None:
        """A record is deleted: its TTL ran out (`expired`: while still active)."""

    @contextlib.contextmanager
    def task_context(self, task_id: str, tool_name: str, meta: RequestMeta) -> Iterator[None]:
        """Around one run of the handler of task `task_id`; `meta` is the `_meta` of the
        `tools/call` that created it (its W3C trace context, if the client sent one)."""
        yield

    def refused(self, reason: str) -> None:
        """A request was refused before it reached the server (HTTP) or by it (JSON-RPC);
        `reason` is a short fixed word: "host", "origin", "too_large", "rate", "-32602"..."""

    def listen_changed(self, delta: int) -> None:
        """A `subscriptions/listen` stream opened (+1) or closed (-1)."""

    def wrap_store(self, store: TaskStore) -> TaskStore:
        """The store the server uses: `store`, or one that times each operation."""
        return store

    @contextlib.contextmanager
    def client_request(self, method: str, params: dict[str, Any] | None) -> Iterator[ClientRequest]:
        """Around one request a client sends, answers and retries included."""
        yield _NoClientRequest()


class _NoRequest:
    __slots__ = ()

    def finish(self, reply: Reply | None) -> None:
        pass


class _NoClientRequest:
    __slots__ = ("meta",)

    def __init__(self) -> None:
        self.meta: dict[str, str] = {}

    def failed(self, code: int, message: str) -> None:
        pass


_NO_REQUEST = _NoRequest()

NO_TELEMETRY = Telemetry()
"""The default: nothing recorded."""
