"""The client side of the protocol, without I/O: requests out, results read, polls planned.

`ClientCore` builds each request with the 2026-07-28 `_meta` and the HTTP headers that must
mirror it, reads responses (a JSON-RPC error becomes `RpcError`; a result is classified by
its `resultType`, absent meaning `"complete"`), and plans the waiting for a task:
`PollPolicy.delay` clamps the server's `pollIntervalMs`, `give_up_at` is the TTL backstop,
and `InputTracker` makes sure each input request key is answered once.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, Struct

from ._envelope import BASE64_HEADER_PREFIX, BASE64_HEADER_SUFFIX, MCP_NAME_PARAM
from ._errors import INTERNAL_ERROR, RemoteProtocolError
from ._state import TaskStatus
from ._wire import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    ClientCapabilities,
    DetailedTask,
    Implementation,
    InputRequest,
    RequestId,
)

ResultKind = Literal["complete", "input_required", "task"]
_KINDS: Final = frozenset({"complete", "input_required", "task"})


class RpcError(RemoteProtocolError):
    """The server answered with a JSON-RPC error: `code`, `message` and `data` are its own."""

    @property
    def retry_after_ms(self) -> int | None:
        """The wait the server asked for before a retry (`data.retryAfterMs`: it was busy,
        or polled too fast), or None: retrying will not help."""
        data = self.data
        wait = data.get("retryAfterMs") if isinstance(data, dict) else None
        valid = isinstance(wait, int) and not isinstance(wait, bool) and wait >= 0
        return wait if valid else None


class TaskFailed(RpcError):
    """The task ended `failed`; its JSON-RPC error is this exception's code, message, data."""

    def __init__(self, task_id: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.task_id = task_id


class TaskCancelled(Exception):
    """The task ended `cancelled`."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} was cancelled")
        self.task_id = task_id


class TaskExpired(Exception):
    """The task's TTL ran out (createdAt + ttlMs) before it finished."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} outlived its TTL without finishing")
        self.task_id = task_id


class RetryPolicy(Struct, frozen=True, kw_only=True):
    """When to send a request again that the server refused as busy (HTTP 503 or 429 with
    `data.retryAfterMs`): after the wait it asked for and up to `jitter` of it more (so that
    clients refused together do not come back together), at most `attempts` times, and
    never when it asks for longer than `max_wait_seconds` (then the error is raised)."""

    attempts: int = 4
    max_wait_seconds: float = 30.0
    jitter: float = 0.2

    def delay(self, error: RpcError, retries_so_far: int, draw: float) -> float | None:
        """Seconds to wait before retrying after `error`, or None to give up. `draw` is a
        random number in [0, 1), injected."""
        wait_ms = error.retry_after_ms
        if wait_ms is None or retries_so_far >= self.attempts:
            return None
        seconds = wait_ms / 1000
        if seconds > self.max_wait_seconds:
            return None
        return seconds * (1 + self.jitter * draw)


class PollPolicy(Struct, frozen=True, kw_only=True):
    """How often to poll: the server's `pollIntervalMs`, clamped; a default when absent."""

    default_interval_ms: int = 1000
    min_interval_ms: int = 100
    max_interval_ms: int = 30_000

    def delay(self, task: DetailedTask) -> float:
        """Seconds to wait before the next `tasks/get` of `task`."""
        advised = task.poll_interval_ms
        interval = self.default_interval_ms if advised is UNSET else advised
        return min(max(interval, self.min_interval_ms), self.max_interval_ms) / 1000


def parse_timestamp(text: str) -> float | None:
    """Seconds since the epoch of an ISO 8601 stamp (`Z` or an offset); None if unreadable."""
    try:
        stamp = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return stamp.timestamp()


def give_up_at(task: DetailedTask) -> float | None:
    """When waiting for `task` stops: `createdAt + ttlMs`; None for no limit (or no way to
    tell, when `createdAt` cannot be read)."""
    if task.ttl_ms is None:
        return None
    created = parse_timestamp(task.created_at)
    return None if created is None else created + task.ttl_ms / 1000


class InputTracker:
    """The keys of a task's input requests already answered: each question is asked once,
    however many polls still show it before the server has taken the answer."""

    def __init__(self, answered: frozenset[str] = frozenset()) -> None:
        self.answered: set[str] = set(answered)

    def unanswered(self, requests: dict[str, InputRequest]) -> dict[str, InputRequest]:
        return {key: request for key, request in requests.items() if key not in self.answered}

    def mark_answered(self, keys: Any) -> None:
        self.answered.update(keys)


def _header_value(value: str) -> str:
    """A header-safe copy of `value`: as is when plain visible ASCII, else `=?base64?…?=`."""
    plain = (
        value.isascii()
        and value.isprintable()
        and value == value.strip()
        and not value.startswith(BASE64_HEADER_PREFIX)
    )
    if plain:
        return value
    encoded = base64.b64encode(value.encode()).decode("ascii")
    return BASE64_HEADER_PREFIX + encoded + BASE64_HEADER_SUFFIX


_task_decoder: Final = msgspec.json.Decoder(DetailedTask)


class ClientCore:
    """Builds requests and reads responses for one client identity."""

    def __init__(self, *, info: Implementation, capabilities: ClientCapabilities) -> None:
        self.info = info
        self.capabilities = capabilities
        self._meta = {
            META_PROTOCOL_VERSION: PROTOCOL_VERSION,
            META_CLIENT_INFO: msgspec.to_builtins(info),
            META_CLIENT_CAPABILITIES: msgspec.to_builtins(capabilities),
        }

    def request(
        self, request_id: RequestId, method: str, params: dict[str, Any] | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """The encoded request, and the HTTP headers that mirror it."""
        full = {**(params or {}), "_meta": self._meta}
        body = msgspec.json.encode(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": full}
        )
        headers = {"MCP-Protocol-Version": PROTOCOL_VERSION, "Mcp-Method": method}
        named = MCP_NAME_PARAM.get(method)
        if named is not None and isinstance(full.get(named), str):
            headers["Mcp-Name"] = _header_value(full[named])
        return body, headers

    def result_of(self, response: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
        """The result of `response`; `RpcError` for an error response."""
        if response.get("id") != request_id and "error" not in response:
            raise RemoteProtocolError(INTERNAL_ERROR, "response id does not match the request")
        if "error" in response:
            error = response["error"]
            if not isinstance(error, dict):
                raise RemoteProtocolError(INTERNAL_ERROR, "malformed JSON-RPC error response")
            raise RpcError(
                int(error.get("code", INTERNAL_ERROR)),
                str(error.get("message", "")),
                error.get("data"),
            )
        result = response.get("result")
        if not isinstance(result, dict):
            raise RemoteProtocolError(INTERNAL_ERROR, "a JSON-RPC result must be an object")
        return result

    @staticmethod
    def kind_of(result: dict[str, Any]) -> ResultKind:
        """`resultType`, `"complete"` when absent; an unknown one is a protocol error."""
        kind = result.get("resultType", "complete")
        if kind not in _KINDS:
            raise RemoteProtocolError(INTERNAL_ERROR, f"unknown resultType {kind!r}")
        return kind  # type: ignore[no-any-return]

    @staticmethod
    def task_of(result: dict[str, Any]) -> DetailedTask:
        """A `tasks/get` result (or a `CreateTaskResult`) as a typed task."""
        try:
            return _task_decoder.decode(msgspec.json.encode(result))
        except msgspec.ValidationError as error:
            raise RemoteProtocolError(INTERNAL_ERROR, f"malformed task: {error}") from None


def task_status(task: DetailedTask) -> TaskStatus:
    """The status a task read from a server is in (`task_status(t).is_terminal`: it ended)."""
    return TaskStatus(str(type(task).__struct_config__.tag))
