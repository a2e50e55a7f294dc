"""Options of the server core, and what it knows of each tool, prompt and resource."""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType, field

from ._errors import INVALID_PARAMS, RemoteProtocolError
from ._wire import Prompt, PromptArgument, Resource, ResourceTemplate, Tool

TaskSupport = Literal["none", "optional", "required"]
X_MCP_HEADER: Final = "x-mcp-header"
"""The `inputSchema` property annotation naming the `Mcp-Param-*` header of an argument."""
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 token


class TaskOptions(Struct, frozen=True, kw_only=True):
    ttl_ms: int | None = 600_000
    """How long a task's record lives after its creation; None keeps it until restart."""
    poll_interval_ms: int | None = 1000
    """The poll interval the server advises clients to use."""
    max_tasks: int = 1024
    """Tasks held at once (running or finished but not yet expired); one more is -32603."""
    max_stored_bytes: int | None = 256 * 1024 * 1024
    """Bytes of task data held at once (arguments, answers, handler state, results and
    messages of every stored task, `TaskRecord.data_bytes`); a new task past it is -32603
    "Too many tasks", retryable like `max_tasks`. None: no such limit."""
    max_active_per_principal: int | None = None
    """Unfinished tasks (`working`, `input_required`) one principal may have at once; one
    more is -32603. None: no such limit. Without an authenticator every caller is the same
    nobody, and this caps unfinished tasks overall."""
    principal_share: float | None = 0.25
    """The part of `max_tasks` one principal's stored tasks may take, finished ones too
    (they count until they expire): one more is -32603, retryable (HTTP 429 with
    `Retry-After`, when its first stored task expires). With 0.25 (the default) and 1024,
    a caller holds at most 256, so no one caller can fill the server. None: no share.
    Only callers with a principal (an authenticator is set) are held to it: without one,
    every caller is the same nobody."""
    min_poll_fraction: float | None = None
    """Refuse a `tasks/get` of a task that comes sooner than this fraction of its advised
    `pollIntervalMs` after the same principal's previous one (HTTP 429 with `Retry-After`;
    a JSON-RPC error -32000 with `data.retryAfterMs` on stdio). None (the default): polls
    are never refused. 0.5 lets a client poll up to twice as often as advised."""

    def __post_init__(self) -> None:
        if self.ttl_ms is not None and self.ttl_ms <= 0:
            raise ValueError("ttl_ms must be a positive number of milliseconds, or None")
        if self.poll_interval_ms is not None and self.poll_interval_ms <= 0:
            raise ValueError("poll_interval_ms must be a positive number of milliseconds")
        if self.max_tasks < 0:
            raise ValueError("max_tasks must not be negative")
        if self.max_stored_bytes is not None and self.max_stored_bytes < 0:
            raise ValueError("max_stored_bytes must not be negative, or None")
        if self.max_active_per_principal is not None and self.max_active_per_principal < 1:
            raise ValueError("max_active_per_principal must be at least 1, or None")
        if self.principal_share is not None and not 0 < self.principal_share <= 1:
            raise ValueError("principal_share must be in (0, 1], or None")
        if self.min_poll_fraction is not None and not 0 < self.min_poll_fraction <= 1:
            raise ValueError("min_poll_fraction must be in (0, 1], or None")

    @property
    def max_stored_per_principal(self) -> int | None:
        """How many stored tasks one principal may have: `principal_share` of `max_tasks`,
        at least one (None: no share)."""
        if self.principal_share is None:
            return None
        return max(1, int(self.max_tasks * self.principal_share))


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
    max_listen_streams: int = 512
    """`subscriptions/listen` streams open at once, over all callers; one more is -32603,
    retryable (HTTP 503 with `Retry-After`, `data.retryAfterMs`). Each holds a connection
    (a file descriptor) for as long as its client keeps it."""
    max_listen_streams_per_principal: int | None = 64
    """Listen streams one principal may hold open at once; one more is -32603, retryable
    (HTTP 429 with `Retry-After`). None: no such limit. Without an authenticator every
    caller is the same nobody, and this caps streams overall."""
    max_listen_items: int = 256
    """Task ids, and resource uris, one `subscriptions/listen` may name; more is -32602."""
    max_tool_threads: int = 32
    """Worker threads plain-function (`def`) tools may hold at once, counting the threads
    of cancelled calls whose functions have not returned (Python cannot stop a thread).
    With all held, a call waits a quarter of a second for one, then is refused, retryable
    (-32603, HTTP 503 with `Retry-After`, `data.retryAfterMs`); a task's run waits for one.
    Apart from the threads the stores use: tools never starve them."""
    legacy_sessions: bool = True
    """Serve clients of the 2025 revisions too: one that opens with `initialize` gets a
    session (a stdio process), as those revisions say. False: 2026-07-28 only, and an
    `initialize` is -32022."""

    def __post_init__(self) -> None:
        if self.request_state_ttl_ms <= 0:
            raise ValueError("request_state_ttl_ms must be positive")
        if self.discover_ttl_ms < 0:
            raise ValueError("discover_ttl_ms must not be negative")
        if self.max_tool_threads < 1:
            raise ValueError("max_tool_threads must be at least 1")
        if self.max_listen_streams < 0 or self.max_listen_items < 0:
            raise ValueError("max_listen_streams and max_listen_items must not be negative")
        per_principal = self.max_listen_streams_per_principal
        if per_principal is not None and per_principal < 1:
            raise ValueError("max_listen_streams_per_principal must be at least 1, or None")


class ToolSpec(Struct, frozen=True, kw_only=True):
    """A tool as the core sees it: its wire description and how it relates to tasks."""

    name: str
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    task_support: TaskSupport = "none"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    output_schema: dict[str, Any] | UnsetType = UNSET
    annotations: dict[str, Any] | UnsetType = UNSET
    resumable: bool = False
    """Safe to run again from the start: a task whose server stopped mid-run restarts
    (keeping the answers it was given) instead of failing."""
    single_use_request_state: bool = False
    """Accept each `requestState` this tool issued once: the store remembers it until it
    expires, and a second call with it is -32602 (a confirmed action cannot be replayed).
    False: a round's answers may be sent again while the state is valid."""
    input_before_task: bool = False
    """A `task_support="required"` tool whose handler asks for input (`InputRequired`)
    before it starts its task: it runs outside the task first. Otherwise such a tool's task
    starts at once, and its handler runs only inside it."""
    arguments_type: Any = None
    """What the arguments decode to before the handler runs (a msgspec Struct, or dict);
    arguments that do not fit are refused with -32602 naming the field. None: not decoded."""
    sensitive_arguments: frozenset[str] = frozenset()
    """Arguments a journal (`--record`) writes as "[redacted]" wherever they appear (the
    call, the task's record, the `Mcp-Param-*` headers mirroring them)."""
    arguments_decoder: Callable[[bytes], Any] | None = None
    """Decodes the arguments' JSON to `arguments_type` in place of msgspec (a pydantic
    model's validation), raising `msgspec.ValidationError` when they do not fit."""

    def decode_arguments(self, arguments: Raw | None) -> Any:
        """The arguments as `arguments_type` (None without one), or -32602."""
        arguments_type = self.arguments_type
        if arguments_type is None:
            return None
        data = b"{}" if arguments is None else arguments
        decode = self.arguments_decoder or _decoder(arguments_type).decode
        return _decoded("tool", self.name, lambda: decode(data))

    def __post_init__(self) -> None:
        if self.task_support not in ("none", "optional", "required"):
            raise ValueError(
                f"task_support must be 'none', 'optional' or 'required', not {self.task_support!r}"
            )
        if self.input_schema.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: input_schema must have type 'object'")
        self.header_params()  # refuses a malformed x-mcp-header annotation now

    def header_params(self) -> dict[str, str]:
        """Argument name -> the `Mcp-Param-{Name}` header that mirrors it over HTTP, from
        the `x-mcp-header` annotations on the top-level properties of `input_schema`."""
        properties = self.input_schema.get("properties")
        if not isinstance(properties, dict):
            return {}
        found: dict[str, str] = {}
        for argument, schema in properties.items():
            if not isinstance(schema, dict) or X_MCP_HEADER not in schema:
                continue
            header = schema[X_MCP_HEADER]
            where = f"tool {self.name!r}, argument {argument!r}"
            if not isinstance(header, str) or not _TOKEN.fullmatch(header):
                raise ValueError(f"{where}: x-mcp-header must be an HTTP token, not {header!r}")
            if schema.get("type") not in ("string", "integer", "boolean"):
                raise ValueError(f"{where}: x-mcp-header needs type string, integer or boolean")
            if header.lower() in (known.lower() for known in found.values()):
                raise ValueError(f"{where}: x-mcp-header {header!r} is used twice")
            found[argument] = header
        return found

    def to_wire(self) -> Tool:
        return Tool(
            name=self.name,
            input_schema=self.input_schema,
            title=_none(self.title),
            description=_none(self.description),
            output_schema=_none(self.output_schema),
            annotations=_none(self.annotations),
        )


class PromptSpec(Struct, frozen=True, kw_only=True):
    """A prompt as the core sees it: its wire description. Required arguments missing from
    `prompts/get` are refused (-32602) before the handler runs."""

    name: str
    arguments: tuple[PromptArgument, ...] = ()
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    arguments_type: Any = None
    """The msgspec Struct (of `str` fields) the arguments decode to before the handler
    runs; arguments that do not fit are refused with -32602. None: not decoded."""

    def decode_arguments(self, arguments: dict[str, str]) -> Any:
        """The arguments as `arguments_type` (None without one), or -32602."""
        arguments_type = self.arguments_type
        if arguments_type is None:
            return None
        return _decoded("prompt", self.name, lambda: msgspec.convert(arguments, arguments_type))

    def to_wire(self) -> Prompt:
        return Prompt(
            name=self.name,
            title=_none(self.title),
            description=_none(self.description),
            arguments=list(self.arguments) if self.arguments else None,
        )


class _Listed(Struct, frozen=True, kw_only=True):
    """How a resource or a resource template is listed, and the cache freshness advised
    on its `resources/read` result."""

    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    ttl_ms: int = 0
    """Cache freshness advised on its `resources/read` result (0: read it again each time)."""

    def __post_init__(self) -> None:
        if self.ttl_ms < 0:
            raise ValueError("ttl_ms must not be negative")

    def _listing(self) -> dict[str, Any]:
        """The wire listing's fields beside the uri (or uri template)."""
        return {
            "name": self.name,
            "title": _none(self.title),
            "description": _none(self.description),
            "mime_type": _none(self.mime_type),
        }


class ResourceSpec(_Listed, frozen=True, kw_only=True):
    """A resource with a fixed `uri`, listed by `resources/list`."""

    uri: str

    def __post_init__(self) -> None:
        if ":" not in self.uri:
            raise ValueError(f"resource uri {self.uri!r} has no scheme")
        super().__post_init__()

    def to_wire(self) -> Resource:
        return Resource(uri=self.uri, **self._listing())


_TEMPLATE_VARIABLE: Final = re.compile(r"\{([A-Za-z0-9_]+)\}")


class ResourceTemplateSpec(_Listed, frozen=True, kw_only=True):
    """Resources whose uris fit `uri_template`, listed by `resources/templates/list`.

    Templates use simple RFC 6570 expansions only: `{name}` stands for one path segment
    (no `/`, `?` or `#`), percent-decoded when matched.
    """

    uri_template: str

    def __post_init__(self) -> None:
        leftover = _TEMPLATE_VARIABLE.sub("", self.uri_template)
        if "{" in leftover or "}" in leftover:
            raise ValueError(
                f"uri template {self.uri_template!r}: only simple {{name}} variables are supported"
            )
        if not self.variables:
            raise ValueError(f"uri template {self.uri_template!r} has no {{variable}}")
        if len(set(self.variables)) != len(self.variables):
            raise ValueError(f"uri template {self.uri_template!r} repeats a variable")
        super().__post_init__()

    @property
    def variables(self) -> list[str]:
        return _TEMPLATE_VARIABLE.findall(self.uri_template)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables that make `uri` from this template, or None if it does not fit."""
        found = _template_pattern(self.uri_template).fullmatch(uri)
        if found is None:
            return None
        return {name: urllib.parse.unquote(value) for name, value in found.groupdict().items()}

    def to_wire(self) -> ResourceTemplate:
        return ResourceTemplate(uri_template=self.uri_template, **self._listing())


@functools.lru_cache(maxsize=256)
def _template_pattern(template: str) -> re.Pattern[str]:
    parts: list[str] = []
    position = 0
    for variable in _TEMPLATE_VARIABLE.finditer(template):
        parts.append(re.escape(template[position : variable.start()]))
        parts.append(f"(?P<{variable.group(1)}>[^/?#]+)")
        position = variable.end()
    parts.append(re.escape(template[position:]))
    return re.compile("".join(parts))


def _decoded(kind: str, name: str, decode: Callable[[], Any]) -> Any:
    """What `decode()` gives: a tool's or prompt's arguments as its `arguments_type`; one
    that does not fit is refused with -32602, naming the `kind` and `name` and where."""
    try:
        return decode()
    except msgspec.ValidationError as error:
        where = error_path(error, "arguments")
        raise RemoteProtocolError(
            INVALID_PARAMS, f"Invalid arguments for {kind} {name!r}: {where}"
        ) from None


@functools.cache  # one per arguments type: as many as the tools registered
def _decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(kind)


def error_path(error: msgspec.ValidationError, root: str) -> str:
    """msgspec's message with its `$` root renamed to what the reader knows, e.g. params."""
    message = str(error)
    if "`$" not in message:
        return f"{message} - at `{root}`"  # wrong at the root itself: msgspec names no path
    return message.replace("`$", f"`{root}")


T = TypeVar("T")


def _none(value: T | UnsetType) -> T | None:
    """A spec's unset field as the wire type holds it: `None`."""
    return None if value is UNSET else value
