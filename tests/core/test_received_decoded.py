"""`Received` with a message a host decoded already answers as the same message's bytes."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from msgspec import UNSET, Raw

from mcp_tasks.core import Step
from mcp_tasks.core.inputs import Received
from mcp_tasks.core.wire import IncomingMessage
from mcp_tasks.journals._codec import unframe

from .harness import T0, Harness, meta
from .test_journal import assert_replays, recording
from .tools import TOOLS


def _message(method: str, params: Any, request_id: Any = 7) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _decoded(message: dict[str, Any]) -> IncomingMessage:
    """The message as a host holds it once its framework parsed it."""
    params = message.get("params")
    raw = UNSET if params is None else Raw(msgspec.json.encode(params))
    return IncomingMessage(message["jsonrpc"], message.get("id", UNSET), message["method"], raw)


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


MESSAGES = {
    "tools/list": _message("tools/list", {"_meta": meta()}),
    "a call": _message("tools/call", {"name": "greet", "arguments": {}, "_meta": meta()}),
    "unknown tool": _message("tools/call", {"name": "nope", "_meta": meta()}),
    "no _meta": _message("tools/list", {}),
    "no params": _message("tools/list", None),
    "tasks/get": _message("tasks/get", {"taskId": "tsk-none", "_meta": meta()}),
    "an unknown method": _message("nope/nope", {"_meta": meta()}),
    "params too deep": _message("tools/call", {"name": "greet", "x": _nested(600)}),
    "id a float": _message("tools/list", {"_meta": meta()}, request_id=1.5),
}


@pytest.mark.parametrize("name", list(MESSAGES))
def test_a_decoded_message_is_answered_as_its_bytes_are(name: str) -> None:
    message = MESSAGES[name]
    as_bytes = Harness(tools=TOOLS).core.handle(Received(json.dumps(message).encode()), T0)
    decoded = Harness(tools=TOOLS).core.handle(Received(_decoded(message)), T0)
    assert type(decoded) is type(as_bytes)
    if isinstance(as_bytes, Step):
        assert isinstance(decoded, Step) and as_bytes.reply is not None
        assert decoded.reply == as_bytes.reply, name
    else:
        assert decoded == as_bytes, name


def test_a_journal_writes_a_decoded_message_as_received_and_replays_it() -> None:
    h = Harness(tools=TOOLS)
    lines = recording(h)
    message = _message(
        "tools/call", {"name": "greet", "arguments": {"name": "Al"}, "_meta": meta()}
    )
    h.core.handle(Received(_decoded(message)), T0)
    [written] = [json.loads(unframe(line)) for line in lines if b'"receive"' in line]
    assert written["in"]["data"] == message
    assert_replays(lines)
