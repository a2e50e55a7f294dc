"""The 2025 revisions (2025-11-25, 2025-06-18, 2025-03-26) in front of the core: a client
that opens with `initialize` gets a legacy session, without I/O.

Theory of operation
-------------------
A 2026-07-28 request carries its version in `params._meta` (the "claim") and is served
statelessly, whatever else came before on the connection. A message without the claim is a
legacy one when it is an `initialize`, a `ping`, or comes on a connection whose session is
open. `LegacyFront.route` answers what belongs to the session itself (`initialize`, `ping`,
`logging/setLevel`, `notifications/initialized`) and gives back the session as it is
afterwards; every other legacy request is rewritten as the modern request it stands for:
the session's version, capabilities, client info and log level become the request's
`_meta`, its own `_meta` (a `progressToken`) kept. The core answers that as any other
request (so journals, telemetry, tasks and the tools see one wire), and `legacy_reply`
turns the reply back into the session's wire: no `resultType`, `ttlMs`, `cacheScope` or
server-info `_meta`, JSON-RPC errors with HTTP 200, the codes of that revision.

A claim-less request on a connection with no session, other than `initialize` and
`ping`, is left to the core, which answers it as a 2026-07-28 server does.

A 2025-11-25 session also gets the tasks utility (`_legacy_tasks` says how): a `tools/call`
with `params.task` is rewritten as the modern task-creating call (`Translated.
creates_task`), and `tasks/get|result|list|cancel` become a `TaskQuery` for the runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType, field

from . import _legacy_tasks as lt
from . import _wire as w
from ._effects import Reply
from ._encode import shown
from ._envelope import (
    KNOWN_METHODS,
    LEGACY_VERSIONS,
    TASK_METHODS,
    decode_params,
    is_request_id,
)
from ._errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RemoteProtocolError,
)
from ._legacy_replies import (
    RESOURCE_NOT_FOUND,
    InputRound,
    Question,
    answered,
    error_of,
    input_round,
    legacy_reply,
    plain_reply,
    questions,
    refused,
    result_of,
)

__all__ = [
    "LEGACY_VERSIONS",
    "InputRound",
    "LegacyAnswer",
    "LegacyFront",
    "LegacySession",
    "Question",
    "Translated",
    "answered",
    "has_claim",
    "input_round",
    "legacy_reply",
    "plain_reply",
    "questions",
    "refused",
]

SESSION_METHODS: Final = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
MAX_SUBSCRIPTIONS: Final = 256
"""Resources one session may be subscribed to at once."""
FORWARDED: Final = KNOWN_METHODS - TASK_METHODS - {"server/discover", "subscriptions/listen"}
"""The legacy requests the core answers, rewritten as modern ones."""

_CLAIM: Final = w.META_PROTOCOL_VERSION.encode()
_MODERN: Final = w.PROTOCOL_VERSION


class LegacySession(Struct, frozen=True, kw_only=True):
    """One legacy client's session (a stdio process, or an HTTP `Mcp-Session-Id`): what
    `initialize` negotiated, and the log level `logging/setLevel` chose."""

    version: str
    client_capabilities: w.ClientCapabilities = w.ClientCapabilities()
    client_info: w.Implementation | None = None
    log_level: w.LoggingLevel | None = None
    """None until `logging/setLevel`: no `notifications/message` before it."""
    initialized: bool = False
    """`notifications/initialized` arrived."""
    subscriptions: frozenset[str] = frozenset()
    """The resources `resources/subscribe` named (`notifications/resources/updated`)."""
    task_ids: tuple[str, ...] = ()
    """The tasks the session created, oldest first (the last `MAX_LISTED_TASKS`)."""
    tasks_created: int = 0
    """How many tasks the session created in all (`tasks/list` cursors count them)."""

    @property
    def has_tasks(self) -> bool:
        """The session's revision has the tasks utility (2025-11-25)."""
        return self.version == lt.ERA

    def remembered(self, task_id: str) -> LegacySession:
        """The session once it created `task_id` (listed by its `tasks/list`)."""
        kept = (*self.task_ids, task_id)[-lt.MAX_LISTED_TASKS :]
        return msgspec.structs.replace(self, task_ids=kept, tasks_created=self.tasks_created + 1)

    def listed(self, position: int) -> tuple[tuple[str, ...], int | None]:
        """The ids of one `tasks/list` page from the `position`-th task the session created,
        and the position of the next page (None: the last). Tasks no longer remembered are
        passed over."""
        first = self.tasks_created - len(self.task_ids)
        start = max(position, first) - first
        page = self.task_ids[start : start + lt.PAGE_SIZE]
        after = first + start + len(page)
        return page, (after if after < self.tasks_created else None)


class LegacyAnswer(Struct, frozen=True, kw_only=True):
    """What the session answered itself: the reply (None for a notification) and the
    session as it is afterwards (the one it was given when nothing changed)."""

    reply: Reply | None
    session: LegacySession | None


class Translated(Struct, frozen=True, kw_only=True):
    """A legacy request as the modern one it stands for: hand `message` to the core, and
    its reply to `legacy_reply`."""

    message: w.IncomingMessage
    method: str
    creates_task: bool = False
    """A 2025-11-25 `tools/call` with `params.task`: its reply is a `CreateTaskResult`."""


class _InitializeParams(Struct):
    protocolVersion: str  # noqa: N815 - the wire's names
    capabilities: w.ClientCapabilities = w.ClientCapabilities()
    clientInfo: w.Implementation | None = None  # noqa: N815


class _CallParams(Struct):
    name: Any = None
    task: Any = UNSET


class _SetLevelParams(Struct):
    level: w.LoggingLevel


class _UriParams(Struct):
    uri: str


class _Meta(Struct):
    meta: dict[str, Any] | UnsetType = field(default=UNSET, name="_meta")


def has_claim(message: w.IncomingMessage) -> bool:
    """`params._meta` names a protocol version: a 2026-07-28 request.

    (Bytes on the way of every request are searched with `find`, not `in`: `in` first
    tries its operand as an integer, an exception raised and cleared each time.)"""
    params = message.params
    if params is UNSET or bytes(params).find(_CLAIM) < 0:  # most messages end here
        return False
    try:
        meta = msgspec.json.decode(params, type=_Meta).meta
    except (msgspec.ValidationError, msgspec.DecodeError):
        return True  # malformed, but it claims: the core's ladder says what is wrong
    return isinstance(meta, dict) and w.META_PROTOCOL_VERSION in meta


def negotiated(requested: str) -> str:
    """The revision a session gets for `requested`: the same one if served, else the
    newest (a counter-offer, as the 2025 lifecycle says, not an error)."""
    return requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]


class LegacyFront:
    """Routes legacy messages (`route`); `capabilities` and `info` say what `initialize`
    answers with, read at each `initialize`."""

    def __init__(
        self,
        info: Callable[[], w.Implementation],
        capabilities: Callable[[], dict[str, Any]],
        instructions: Callable[[], str | None],
        resource_exists: Callable[[str], bool] = lambda uri: False,
        task_support: Callable[[str], str | None] = lambda name: None,
    ) -> None:
        self._info = info
        self._capabilities = capabilities
        self._instructions = instructions
        self._resource_exists = resource_exists
        self.task_support = task_support
        """A tool's `task_support` ("none", "optional", "required"), None: no such tool."""
        self._encoded_meta: tuple[LegacySession, bytes, bytes] | None = None
        """The `_meta` of the session rewritten last, encoded (sessions are immutable), as
        params open with it before other members, and as params of it alone."""
        self._encoded_task_meta: tuple[LegacySession, bytes] | None = None

    def route(
        self,
        message: w.IncomingMessage,
        session: LegacySession | None,
        *,
        claimless: bool = False,
    ) -> LegacyAnswer | Translated | lt.TaskQuery | None:
        """What becomes of `message` on a connection whose session is `session` (None:
        none open): answered here, handed on rewritten, or None: the core's as it is.
        `claimless`: the caller knows it carries no claim (its bytes lack the key)."""
        method = message.method
        if not isinstance(method, str) or message.jsonrpc != "2.0":
            return None  # the core says what is wrong with it
        if not claimless and has_claim(message):
            return None
        if message.id is UNSET:
            return self._notification(method, session)
        if not is_request_id(message.id):
            return None  # the core says what is wrong with it
        if session is None and method not in ("initialize", "ping"):
            return None
        try:
            if method in FORWARDED:  # most: rewritten for the core
                assert session is not None
                raw = b"{}" if message.params is UNSET else bytes(message.params)
                asks_task = (
                    method == "tools/call" and raw.find(b'"task"') >= 0 and session.has_tasks
                )
                if asks_task and self._asks_task(raw):
                    rewritten = self.task_message(session, message)
                    return Translated(message=rewritten, method=method, creates_task=True)
                return Translated(message=self._rewritten(message, raw, session), method=method)
            if method in SESSION_METHODS:
                return self._session_request(message, method, session)
            assert session is not None
            if method in lt.LEGACY_TASK_METHODS and session.has_tasks:
                params = Raw(b"{}") if message.params is UNSET else message.params
                return lt.task_query(message.id, method, params)
            raise RemoteProtocolError(METHOD_NOT_FOUND, f"Method not found: {shown(method)}")
        except RemoteProtocolError as error:
            return LegacyAnswer(reply=error_of(message.id, error), session=session)

    def _notification(self, method: str, session: LegacySession | None) -> LegacyAnswer | None:
        if session is None:
            return None
        if method == "notifications/initialized":
            opened = msgspec.structs.replace(session, initialized=True)
            return LegacyAnswer(reply=None, session=opened)
        if method == "notifications/cancelled":
            return None  # the core cancels the request it names, as for a modern client
        return LegacyAnswer(reply=None, session=session)  # roots/list_changed, progress: none

    def _session_request(
        self, message: w.IncomingMessage, method: str, session: LegacySession | None
    ) -> LegacyAnswer:
        params = Raw(b"{}") if message.params is UNSET else message.params
        if method == "ping":
            return LegacyAnswer(reply=result_of(message.id, {}), session=session)
        if method == "initialize":
            if session is not None:
                raise RemoteProtocolError(
                    INVALID_REQUEST, "Invalid request: this session is initialized already"
                )
            opened = decode_params(params, _InitializeParams)
            session = LegacySession(
                version=negotiated(opened.protocolVersion),
                client_capabilities=msgspec.structs.replace(opened.capabilities, extensions=UNSET),
                client_info=opened.clientInfo,
            )
            answer = result_of(message.id, self._initialized(session))
            return LegacyAnswer(reply=answer, session=session)
        assert session is not None
        if method == "logging/setLevel":
            level = decode_params(params, _SetLevelParams).level
            changed = msgspec.structs.replace(session, log_level=level)
            return LegacyAnswer(reply=result_of(message.id, {}), session=changed)
        return LegacyAnswer(
            reply=result_of(message.id, {}),
            session=self._subscribed(session, decode_params(params, _UriParams).uri, method),
        )

    def _subscribed(self, session: LegacySession, uri: str, method: str) -> LegacySession:
        """`session` after `resources/subscribe` or `unsubscribe` of `uri`."""
        if "resources" not in self._capabilities():
            raise RemoteProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")
        held = session.subscriptions
        if method == "resources/unsubscribe":
            return msgspec.structs.replace(session, subscriptions=held - {uri})
        if not self._resource_exists(uri):
            message = f"Resource not found: {shown(uri)}"
            raise RemoteProtocolError(RESOURCE_NOT_FOUND, message, {"uri": uri})
        if uri not in held and len(held) >= MAX_SUBSCRIPTIONS:
            raise RemoteProtocolError(
                INVALID_PARAMS,
                f"Invalid params: a session holds {MAX_SUBSCRIPTIONS} subscriptions at most",
            )
        return msgspec.structs.replace(session, subscriptions=held | {uri})

    def _rewritten(
        self, message: w.IncomingMessage, raw: bytes, session: LegacySession
    ) -> w.IncomingMessage:
        """`message` (its params `raw`) with the session's `_meta` in its params, its own
        `_meta` kept. Params that open with a member and have no `_meta` (most), or are
        empty, get the session's encoded once, written in front."""
        cached = self._encoded_meta
        if cached is None or cached[0] is not session:
            meta = b'{"_meta":' + msgspec.json.encode(_session_meta(session, {}))
            cached = self._encoded_meta = (session, meta + b",", meta + b"}")
        if raw[:2] == b'{"' and raw.find(b'"_meta"') < 0:
            params = raw.replace(b"{", cached[1], 1)
        elif raw == b"{}":
            params = cached[2]
        else:  # its own `_meta`, or whitespace: the slow way
            return _with_meta_decoded(message, session)
        return msgspec.structs.replace(message, params=Raw(params))

    def _asks_task(self, raw: bytes) -> bool:
        """The call carries `params.task` for a tool that runs as a task (-32601 for one
        that does not, as 2025-11-25 says; an unknown tool is the core's to name)."""
        try:
            params = msgspec.json.decode(raw, type=_CallParams)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return False  # the core says what is wrong with them
        if params.task is UNSET or params.task is None or not isinstance(params.name, str):
            return False
        if not isinstance(params.task, dict):
            raise RemoteProtocolError(
                INVALID_PARAMS, "Invalid params: params.task must be an object"
            )
        support = self.task_support(params.name)
        if support == "none":
            raise RemoteProtocolError(
                METHOD_NOT_FOUND,
                f"Tool {shown(params.name)!r} does not run as a task (its execution.taskSupport "
                "is forbidden): call it without params.task",
            )
        return support is not None

    def task_message(
        self,
        session: LegacySession,
        message: w.IncomingMessage,
        params: dict[str, Any] | None = None,
    ) -> w.IncomingMessage:
        """`message` as the modern request of a 2025-11-25 task: the session's `_meta`,
        with the tasks extension naming this era. `params` (without `_meta`) replace the
        message's own when given (the runtime's `tasks/get`, `tasks/update`, ...)."""
        if params is None:
            own: Any = {} if message.params is UNSET else msgspec.json.decode(message.params)
            if not isinstance(own, dict):
                raise RemoteProtocolError(
                    INVALID_PARAMS, "Invalid params: params must be an object"
                )
            params = own
        meta = params.get("_meta")
        encoded = self._task_meta(session, meta if isinstance(meta, dict) else None)
        rest = {key: value for key, value in params.items() if key != "_meta"}
        inner = msgspec.json.encode(rest)[1:-1]
        body = b'{"_meta":' + encoded + (b"," + inner if inner else b"") + b"}"
        return w.IncomingMessage(
            jsonrpc="2.0", id=message.id, method=message.method, params=Raw(body)
        )

    def task_id_message(
        self, session: LegacySession, request_id: w.RequestId, method: str, task_id: str
    ) -> w.IncomingMessage:
        """`task_message` of `method` for params of `task_id` alone, the quick way."""
        encoded = self._task_meta(session, None)
        body = b'{"_meta":' + encoded + b',"taskId":' + msgspec.json.encode(task_id) + b"}"
        return w.IncomingMessage(jsonrpc="2.0", id=request_id, method=method, params=Raw(body))

    def _task_meta(self, session: LegacySession, own: dict[str, Any] | None) -> bytes:
        """The encoded `_meta` of a 2025-11-25 task request of `session` (the request's
        `own` keys kept); without keys of its own, encoded once a session."""
        cached = self._encoded_task_meta
        if own is None and cached is not None and cached[0] is session:
            return cached[1]
        full = _session_meta(session, own or {})
        full[w.META_CLIENT_CAPABILITIES] = msgspec.structs.replace(
            session.client_capabilities, extensions=lt.task_settings()
        )
        encoded = msgspec.json.encode(full)
        if own is None:
            self._encoded_task_meta = (session, encoded)
        return encoded

    def _initialized(self, session: LegacySession) -> dict[str, Any]:
        offered = self._capabilities()
        capabilities: dict[str, Any] = {"logging": {}, "tools": {"listChanged": True}}
        if "prompts" in offered:
            capabilities["prompts"] = {"listChanged": True}
        if "resources" in offered:
            capabilities["resources"] = {"subscribe": True, "listChanged": True}
        if "completions" in offered:
            capabilities["completions"] = {}
        if session.has_tasks:
            capabilities["tasks"] = lt.SERVER_CAPABILITY
        result: dict[str, Any] = {
            "protocolVersion": session.version,
            "capabilities": capabilities,
            "serverInfo": msgspec.to_builtins(self._info()),
        }
        instructions = self._instructions()
        if instructions is not None:
            result["instructions"] = instructions
        return result


def _session_meta(session: LegacySession, own: dict[str, Any]) -> dict[str, Any]:
    """`own` (a request's `_meta`) with the session's keys: what a modern request says."""
    meta = dict(own)
    meta[w.META_PROTOCOL_VERSION] = _MODERN
    meta[w.META_CLIENT_CAPABILITIES] = session.client_capabilities
    if session.client_info is not None:
        meta[w.META_CLIENT_INFO] = session.client_info
    if session.log_level is not None:
        meta[w.META_LOG_LEVEL] = session.log_level
    else:
        meta.pop(w.META_LOG_LEVEL, None)
    return meta


def _with_meta_decoded(message: w.IncomingMessage, session: LegacySession) -> w.IncomingMessage:
    params: Any = {} if message.params is UNSET else msgspec.json.decode(message.params)
    if not isinstance(params, dict):
        raise RemoteProtocolError(INVALID_PARAMS, "Invalid params: params must be an object")
    own = params.get("_meta")
    params["_meta"] = _session_meta(session, own if isinstance(own, dict) else {})
    return w.IncomingMessage(
        jsonrpc=message.jsonrpc,
        id=message.id,
        method=message.method,
        params=Raw(msgspec.json.encode(params)),
    )
