"""Which era a server speaks, seen from the client, and the requests of a 2025 session;
no I/O.

A dual-era client opens with a 2026-07-28 request. A server of the 2025 revisions answers
it with an error it would give any request outside a session: HTTP 400 and a JSON-RPC
error without an id, whose code is none of the modern ones. That answer (`falls_back`)
means "open a session": `initialize` (`LegacySession.initialize_request`), the version the
server accepts checked (`LegacySession.accept`), `notifications/initialized`, and then each
request without the modern `_meta`, with `MCP-Protocol-Version` (2025-06-18 on). A modern
error code (-32020, -32021, -32022, -32601) says the server is modern: never fall back on
it, fix the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from ._client import ClientCore, Task
from ._envelope import LEGACY_VERSIONS
from ._errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    RemoteProtocolError,
)
from ._wire import PROTOCOL_VERSION, ClientCapabilities, Implementation, RequestId

Era = Literal["modern", "legacy"]
MODERN_CODES: Final = frozenset(
    {HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
    | {METHOD_NOT_FOUND}
)
"""Error codes by which a server shows it knows 2026-07-28: the request is to be fixed."""
_NO_VERSION_HEADER: Final = "2025-03-26"
"""The one legacy revision without the `MCP-Protocol-Version` header."""


def falls_back(response: Mapping[str, Any]) -> bool:
    """Whether `response`, the answer to a 2026-07-28 request, is a 2025 server's refusal of
    anything outside a session: an error without an id whose code is not a modern one."""
    error = response.get("error")
    if response.get("id") is not None or not isinstance(error, dict):
        return False
    return error.get("code") not in MODERN_CODES


def after_version_refusal(error: RemoteProtocolError, era: Era | None) -> Era | None:
    """What to do when the server refuses a request's protocol version (-32022), by the
    versions it lists in `data.supported`: send it again as it was ("modern": it lists
    2026-07-28), open a 2025 session ("legacy": it lists a 2025 revision only, and none is
    open yet), or nothing (None: the error is the caller's)."""
    if getattr(error, "code", None) != UNSUPPORTED_PROTOCOL_VERSION:
        return None
    data = getattr(error, "data", None)
    supported = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(supported, list):
        return None
    if era != "legacy" and PROTOCOL_VERSION in supported:
        return "modern"
    if era is None and any(version in LEGACY_VERSIONS for version in supported):
        return "legacy"
    return None


class LegacySession:
    """The client's side of one 2025 session: its version, once accepted, and how its
    requests are written."""

    def __init__(self, *, info: Implementation, capabilities: ClientCapabilities) -> None:
        self.info = info
        self.capabilities = capabilities
        self.version: str | None = None
        self.server_info: dict[str, Any] = {}
        self.server_capabilities: dict[str, Any] = {}
        self.instructions: str | None = None

    def initialize_request(self, request_id: RequestId) -> tuple[bytes, dict[str, str]]:
        """`initialize`, offering the newest legacy revision."""
        capabilities = msgspec.to_builtins(self.capabilities)
        capabilities.pop("extensions", None)  # (a 2026-07-28 field)
        params = {
            "protocolVersion": LEGACY_VERSIONS[0],
            "capabilities": capabilities,
            "clientInfo": msgspec.to_builtins(self.info),
        }
        body = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
        return msgspec.json.encode(body), {}

    def accept(self, result: Mapping[str, Any]) -> str:
        """Take the server's `initialize` result: the version it chose, if this client
        speaks it (else `RemoteProtocolError`: the client must not go on)."""
        version = result.get("protocolVersion")
        if version not in LEGACY_VERSIONS:
            raise RemoteProtocolError(
                INTERNAL_ERROR,
                f"the server chose protocol version {version!r}, which this client does not "
                f"speak (it speaks {', '.join(LEGACY_VERSIONS)})",
            )
        assert isinstance(version, str)
        self.version = version
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else {}
        capabilities = result.get("capabilities")
        self.server_capabilities = capabilities if isinstance(capabilities, dict) else {}
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        return version

    def initialized(self) -> tuple[bytes, dict[str, str]]:
        """`notifications/initialized`, sent once the version is accepted."""
        body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        return msgspec.json.encode(body), self.headers()

    def request(
        self, request_id: RequestId, method: str, params: Mapping[str, Any] | None
    ) -> tuple[bytes, dict[str, str]]:
        """A request of this session: no modern `_meta` (a `_meta` of the caller's, a
        `progressToken` say, is kept)."""
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            body["params"] = dict(params)
        return msgspec.json.encode(body), self.headers()

    def answer(self, request_id: Any, result: Any) -> bytes:
        """The response to a request the server sent (elicitation, sampling, roots, ping)."""
        return msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "result": result})

    def refuse(self, request_id: Any, code: int, message: str) -> bytes:
        error = {"code": code, "message": message}
        return msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "error": error})

    def headers(self) -> dict[str, str]:
        if self.version is None or self.version == _NO_VERSION_HEADER:
            return {}
        return {"MCP-Protocol-Version": self.version}

    def discover_result(self) -> dict[str, Any]:
        """What `server/discover` would say, from the `initialize` result."""
        shown: dict[str, Any] = {
            "supportedVersions": [self.version],
            "capabilities": self.server_capabilities,
            "serverInfo": self.server_info,
        }
        if self.instructions is not None:
            shown["instructions"] = self.instructions
        return shown


_LEGACY_FIELDS: Final = {"ttl": "ttlMs", "pollInterval": "pollIntervalMs"}


def legacy_task(data: Mapping[str, Any], *, result: Any = None) -> Task:
    """A 2025-11-25 `Task` (from `CreateTaskResult.task`, `tasks/get`, `tasks/cancel`) as
    the client's `Task` classes: `ttl` and `pollInterval` renamed; an `input_required` one
    has no input requests (they come as the server's requests, on `tasks/result`); a
    `completed` one carries `result` (the `CallToolResult` `tasks/result` gave)."""
    fields = {_LEGACY_FIELDS.get(key, key): value for key, value in data.items()}
    fields.pop("resultType", None)
    fields.setdefault("lastUpdatedAt", fields.get("createdAt", ""))
    fields.setdefault("ttlMs", None)  # (required, but `mcp` 1.30.0 leaves out a null one)
    if fields.get("status") == "input_required":
        fields["inputRequests"] = {}
    if fields.get("status") == "completed":
        fields["result"] = result if result is not None else {"content": []}
    if fields.get("status") == "failed":
        message = fields.get("statusMessage")
        fields["error"] = {"code": INTERNAL_ERROR, "message": str(message or "the task failed")}
    return ClientCore.task_of(fields)


def augments(server_capabilities: Mapping[str, Any], task_support: str | None) -> bool:
    """Whether a 2025-11-25 tool call is sent as a task: the server runs tool calls as tasks
    (`tasks.requests.tools.call`) and the tool allows it (`execution.taskSupport` optional
    or required; absent means forbidden)."""
    tasks = server_capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    served = isinstance(tools, dict) and isinstance(tools.get("call"), dict)
    return served and task_support in ("optional", "required")
