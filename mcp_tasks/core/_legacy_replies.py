"""A 2025 session's replies (`core.legacy`): the core's reply to a `Translated` request
turned back into the session's wire (`plain_reply`, `legacy_reply`), and the input rounds
a reply asks turned into the server's own requests to the client (`input_round`,
`questions`, `answered`, `refused`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct

from . import _legacy_tasks as lt
from . import _wire as w
from ._effects import Reply
from ._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    RemoteProtocolError,
)

if TYPE_CHECKING:
    from .legacy import LegacySession

RESOURCE_NOT_FOUND: Final = -32002
"""The 2025 revisions' code for a resource nothing on the server names (2026: -32602)."""
_STRIPPED: Final = ("resultType", "ttlMs", "cacheScope")
_COMPLETE_LAST: Final = b',"resultType":"complete"},"jsonrpc":"2.0"}'
_RESULT_END: Final = b'},"jsonrpc":"2.0"}'
_CUT: Final = -len(_COMPLETE_LAST)
_CACHEABLE: Final = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)
"""Methods whose results carry `ttlMs` and `cacheScope` (written before `resultType`)."""


def plain_reply(reply: Reply | None, method: str) -> Reply | None:
    """The core's `reply` to a `Translated` request of `method` in the 2025 wire when it
    is a complete result of a method whose results have no `ttlMs` or `cacheScope` (most):
    `resultType` cut from its end. None: `legacy_reply` says (an error, an input round, a
    task, a cacheable result, or no reply).

    Every result type writes `resultType` after its other members but `_meta` (their
    fields' order), so a result that ends with it has no `_meta` of its own to strip."""
    if reply is None or reply.error_code is not None or method in _CACHEABLE:
        return None
    body = reply.body
    if not body.endswith(_COMPLETE_LAST):
        return None
    return Reply(body=body[:_CUT] + _RESULT_END, request_id=reply.request_id)


def legacy_reply(reply: Reply | None, method: str) -> Reply | None:
    """The core's `reply` to a `Translated` request of `method`, as the session's wire
    says it: the modern-only fields gone, an error with HTTP 200 and the 2025 code."""
    plain = plain_reply(reply, method)
    if plain is not None or reply is None:
        return plain
    body = msgspec.json.decode(reply.body)
    if not isinstance(body, dict):
        return reply
    result = body.get("result")
    if isinstance(result, dict):
        _strip(result)
    error = body.get("error")
    code = reply.error_code
    if isinstance(error, dict) and error.get("code") == MISSING_REQUIRED_CLIENT_CAPABILITY:
        error["code"] = code = METHOD_NOT_FOUND  # a task-only tool, called without a task
    elif (
        method == "resources/read"
        and isinstance(error, dict)
        and error.get("code") == INVALID_PARAMS
        and isinstance(error.get("data"), dict)
        and "uri" in error["data"]
    ):
        error["code"] = code = RESOURCE_NOT_FOUND  # 2026-07-28 made it -32602
    encoded = msgspec.json.encode(body)
    return msgspec.structs.replace(reply, body=encoded, http_status=200, error_code=code)


def _strip(result: dict[str, Any]) -> None:
    for key in _STRIPPED:
        result.pop(key, None)
    meta = result.get("_meta")
    if isinstance(meta, dict):
        meta.pop(w.META_SERVER_INFO, None)
        if not meta:
            del result["_meta"]


class InputRound(Struct, frozen=True, kw_only=True):
    """The questions a reply asks (an `InputRequiredResult`): each to be sent to a legacy
    client as a request of its own, the answers then handed back with `request_state`."""

    requests: dict[str, w.InputRequest]
    request_state: str | None


class Question(Struct, frozen=True, kw_only=True):
    """One server-to-client request of a round: `message` to send, `key` its answer's."""

    key: str
    request_id: str
    message: bytes


def input_round(reply: Reply | None) -> InputRound | None:
    """The round `reply` asks, or None: it answers (the reply is the request's)."""
    if reply is None or reply.error_code is not None:
        return None
    body = reply.body
    if body.endswith(_COMPLETE_LAST) or b'"input_required"' not in body:
        return None
    try:
        found = msgspec.json.decode(reply.body, type=_Asked).result
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    if found.result_type != "input_required" or found.input_requests is None:
        return None
    state = found.request_state
    return InputRound(requests=found.input_requests, request_state=state)


class _Asked(Struct):
    result: w.InputRequiredResult


def questions(
    round: InputRound,
    session: LegacySession,
    ids: Iterator[str],
    related_task: str | None = None,
) -> list[Question]:
    """The requests that ask `round` of a client of `session`'s revision (ids from `ids`),
    tagged with `related_task` when a task asks; -32603 naming what that revision cannot
    carry."""
    asked = []
    for key, request in round.requests.items():
        request_id = next(ids)
        wire: dict[str, Any] = msgspec.to_builtins(request)  # {"method": ..., "params": ...}
        params = wire.get("params", {})
        if wire["method"] == "elicitation/create":
            params = _elicitation_for(params, session.version, request_id)
        if related_task is not None:
            params = {
                **params,
                "_meta": {**params.get("_meta", {}), **lt.related_meta(related_task)},
            }
        message = {"jsonrpc": "2.0", "id": request_id, "method": wire["method"], "params": params}
        asked.append(Question(key=key, request_id=request_id, message=msgspec.json.encode(message)))
    return asked


def _elicitation_for(params: dict[str, Any], version: str, request_id: str) -> dict[str, Any]:
    if version == "2025-03-26":
        raise RemoteProtocolError(
            INTERNAL_ERROR, "The server asks the user (elicitation), which 2025-03-26 lacks"
        )
    if params.get("mode") == "url":
        if version == "2025-06-18":
            raise RemoteProtocolError(
                INTERNAL_ERROR, "The server asks the user to open a URL, which 2025-06-18 lacks"
            )
        params.setdefault("elicitationId", request_id)
    elif version == "2025-06-18":
        params.pop("mode", None)
    return params


def answered(
    message: w.IncomingMessage, answers: dict[str, Raw], request_state: str | None
) -> w.IncomingMessage:
    """`message` (a `Translated` one) sent again with the round's answers."""
    params = msgspec.json.decode(message.params) if message.params is not UNSET else {}
    params["inputResponses"] = answers
    if request_state is None:
        params.pop("requestState", None)
    else:
        params["requestState"] = request_state
    return msgspec.structs.replace(message, params=Raw(msgspec.json.encode(params)))


def refused(request_id: Any, method: str, asked: str, why: str) -> Reply:
    """The reply to a request whose round the client did not answer (`why` says how)."""
    text = f"The client did not answer {asked}: {why}"
    if method == "tools/call":
        content = [msgspec.to_builtins(w.TextContent(text=text))]
        return result_of(request_id, {"content": content, "isError": True})
    return error_of(request_id, RemoteProtocolError(INTERNAL_ERROR, text))


def result_of(request_id: Any, result: Any) -> Reply:
    return lt.result_reply(request_id, result)


def error_of(request_id: Any, error: RemoteProtocolError) -> Reply:
    data = UNSET if error.data is None else error.data
    return lt.error_reply(request_id, error.code, error.message, data)
