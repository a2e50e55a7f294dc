"""The task record: everything the server knows about one task, immutable.

A record changes only by the core returning a new one with `version + 1`; stores write it
with compare-and-set on `version`, so two processes never overwrite each other's changes.
Records encode to JSON with msgspec (`encode_record` / `decode_record`), which is what the
durable stores keep.

When a task ends, the core drops what only a running task needs (arguments, answers,
request metadata), so a finished task costs little more than its result.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from ._state import TaskStatus
from ._wire import TASKS_EXTENSION, ErrorObject, InputRequest, RequestMeta

ERA_SETTING: Final = "mcp-tasks/era"
"""The key, in the settings a request gives the tasks extension, naming the era of the
tasks it creates and sees (`task_era`); the 2025 sessions' front writes it."""


class TaskRecord(Struct, kw_only=True, frozen=True):
    task_id: str
    version: int
    tool_name: str
    status: TaskStatus
    created_at: float
    """Seconds since the Unix epoch (UTC), as the shell's wall clock gave it."""
    last_updated_at: float
    ttl_ms: int | None
    poll_interval_ms: int | None
    status_message: str | None = None
    arguments: Raw | None = None
    """The tool arguments as the client sent them (a JSON object); dropped once terminal."""
    request_meta: RequestMeta | None = None
    """`_meta` of the `tools/call` that created the task (its client capabilities decide
    what the task may ask); dropped once terminal."""
    prior_responses: dict[str, Raw] | None = None
    """Answers gathered by input rounds before the task existed (their own key space)."""
    handler_state: str | None = None
    """Opaque state the handler carried through those rounds."""
    input_requests: dict[str, InputRequest] | None = None
    """Outstanding input requests, by key."""
    input_responses: dict[str, Raw] | None = None
    """Answers to the task's own input requests, by key."""
    issued_keys: frozenset[str] = frozenset()
    """Every input key the task ever used: keys are unique over a task's whole life."""
    result: Raw | None = None
    """The encoded CallToolResult of a completed task."""
    error: ErrorObject | None = None
    """The JSON-RPC error of a failed task."""
    principal: str | None = None
    """Who created the task: only they may read, answer or cancel it (None: nobody known,
    for a server without an authenticator)."""
    era: str | UnsetType = UNSET
    """The protocol era whose requests made the task and alone see it: "2025-11-25" for a
    task of the 2025 tasks utility (a legacy session's), unset for the extension's."""

    @property
    def expires_at(self) -> float | None:
        """When the record may be removed: `created_at + ttl_ms`, or never."""
        if self.ttl_ms is None:
            return None
        return self.created_at + self.ttl_ms / 1000

    @property
    def data_bytes(self) -> int:
        """The bytes of what clients and handlers put in the record (arguments, answers,
        handler state, result, messages): what a store's byte budget counts."""
        size = len(self.arguments or b"") + len(self.result or b"")
        if self.prior_responses:  # most records have no answers (no generator made)
            size += sum(map(len, self.prior_responses.values()))
        if self.input_responses:
            size += sum(map(len, self.input_responses.values()))
        size += len(self.handler_state or "") + len(self.status_message or "")
        if self.error is not None:
            size += len(self.error.message)
        return size

    def is_expired(self, now: float) -> bool:
        expires_at = self.expires_at
        return expires_at is not None and now >= expires_at

    def replace(self, **changes: Any) -> TaskRecord:
        """A copy with `changes` applied and the version bumped."""
        return msgspec.structs.replace(self, version=self.version + 1, **changes)


def task_era(meta: RequestMeta | None) -> str | UnsetType:
    """The era a request's tasks belong to (`TaskRecord.era`): what its tasks extension
    settings name under `ERA_SETTING`, unset for a 2026-07-28 client's."""
    if meta is None or meta.client_capabilities.extensions is UNSET:
        return UNSET
    era = meta.client_capabilities.extensions.get(TASKS_EXTENSION, {}).get(ERA_SETTING)
    return era if isinstance(era, str) else UNSET


_RAW_OR_NONE = ("arguments", "result")
"""Fields typed `Raw | None`: msgspec decodes a Raw only on its own, never in a union, so
the stored form reads them as Raw, JSON `null` standing for None."""

_StoredRecord = msgspec.defstruct(
    "_StoredRecord",
    [
        (f.name, Raw, f.default) if f.name in _RAW_OR_NONE else (f.name, f.type, f.default)
        for f in msgspec.structs.fields(TaskRecord)
    ],
    kw_only=True,
)
_record_encoder = msgspec.json.Encoder()
_record_decoder = msgspec.json.Decoder(_StoredRecord)
_NULL = b"null"


def encode_record(record: TaskRecord) -> bytes:
    return _record_encoder.encode(record)


def decode_record(data: bytes) -> TaskRecord:
    """The record `encode_record` wrote, exactly (raw JSON fields byte for byte)."""
    stored = _record_decoder.decode(data)
    fields = msgspec.structs.asdict(stored)
    for name in _RAW_OR_NONE:
        if bytes(fields[name]) == _NULL:
            fields[name] = None
    return TaskRecord(**fields)
