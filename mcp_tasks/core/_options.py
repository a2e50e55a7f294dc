"""Options of the server core and the registration record of a tool."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, Struct, UnsetType, field

from ._wire import Tool

TaskSupport = Literal["none", "optional", "required"]


class TaskOptions(Struct, frozen=True, kw_only=True):
    ttl_ms: int | None = 600_000
    """How long a task's record lives after its creation; None keeps it until restart."""
    poll_interval_ms: int | None = 1000
    """The poll interval the server advises clients to use."""
    max_tasks: int = 1024
    """Tasks held at once (running or finished but not yet expired); one more is -32603."""

    def __post_init__(self) -> None:
        if self.ttl_ms is not None and self.ttl_ms <= 0:
            raise ValueError("ttl_ms must be a positive number of milliseconds, or None")
        if self.poll_interval_ms is not None and self.poll_interval_ms <= 0:
            raise ValueError("poll_interval_ms must be a positive number of milliseconds")
        if self.max_tasks < 0:
            raise ValueError("max_tasks must not be negative")


class ServerOptions(Struct, frozen=True, kw_only=True):
    request_state_ttl_ms: int = 300_000
    """How long an input round's sealed `requestState` stays valid."""
    discover_ttl_ms: int = 60_000
    """Cache freshness advised on `server/discover` and `tools/list` results."""
    cache_scope: Literal["public", "private"] = "public"
    instructions: str | None = None
    accept_missing_task_name_header: bool = False
    """HTTP only. Accept `tasks/*` requests that lack the `Mcp-Name` header (some clients
    omit it). A *mismatched* header is refused all the same."""

    def __post_init__(self) -> None:
        if self.request_state_ttl_ms <= 0:
            raise ValueError("request_state_ttl_ms must be positive")
        if self.discover_ttl_ms < 0:
            raise ValueError("discover_ttl_ms must not be negative")


class ToolSpec(Struct, frozen=True, kw_only=True):
    """A tool as the core sees it: its wire description and how it relates to tasks."""

    name: str
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    task_support: TaskSupport = "none"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    output_schema: dict[str, Any] | UnsetType = UNSET
    annotations: dict[str, Any] | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.task_support not in ("none", "optional", "required"):
            raise ValueError(
                f"task_support must be 'none', 'optional' or 'required', not {self.task_support!r}"
            )
        if self.input_schema.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: input_schema must have type 'object'")

    def to_wire(self) -> Tool:
        return Tool(
            name=self.name,
            input_schema=self.input_schema,
            title=self.title,
            description=self.description,
            output_schema=self.output_schema,
            annotations=self.annotations,
        )
