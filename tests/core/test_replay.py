"""Replay: a recorded exchange, with its clock values, replays to byte-identical output.

`replay/session.jsonl` holds one event per line: a message the server received (`send`,
with the reply it gave), a task handler's outcome (`finish`), or an expiry sweep
(`expire`), each with the clock value `at`. The replay feeds the inputs to a fresh core
and compares every output byte for byte. To re-record after an intended wire change, run
with MCP_TASKS_RERECORD=1 and review the diff of the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
from schema_check import check_reply

from mcp_tasks.core import (
    START_TASK,
    CallToolResult,
    ErrorObject,
    InputRequired,
    TaskOptions,
    ToolOutcome,
)

from .harness import ALL_CAPS, T0, Harness, meta
from .tools import TOOLS, ask_confirm, ask_name

RECORDING = Path(__file__).parent / "replay" / "session.jsonl"


def _outcome_to_json(outcome: ToolOutcome) -> dict[str, Any]:
    if isinstance(outcome, CallToolResult):
        return {"kind": "result", "value": msgspec.to_builtins(outcome)}
    if isinstance(outcome, ErrorObject):
        return {"kind": "error", "value": msgspec.to_builtins(outcome)}
    if isinstance(outcome, InputRequired):
        return {"kind": "input", "value": msgspec.to_builtins(outcome)}
    return {"kind": "start_task"}


def _outcome_from_json(data: dict[str, Any]) -> ToolOutcome:
    kinds: dict[str, type[Any]] = {
        "result": CallToolResult,
        "error": ErrorObject,
        "input": InputRequired,
    }
    if data["kind"] == "start_task":
        return START_TASK
    outcome: ToolOutcome = msgspec.convert(data["value"], kinds[data["kind"]])
    return outcome


def _request(method: str, params: dict[str, Any], request_id: int) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**params, "_meta": meta(ALL_CAPS)},
        }
    )


def _harness() -> Harness:
    return Harness(tools=TOOLS, task_options=TaskOptions(ttl_ms=60_000))


def _record() -> list[dict[str, Any]]:
    """The scenario: discover, a sync call, an MRTR round into a task, input inside the task,
    a cancel, a failure, bad input, and expiry."""
    h = _harness()
    events: list[dict[str, Any]] = []
    ids = iter(range(1, 1000))

    def send(text: str) -> dict[str, Any]:
        exchange = h.send(text.encode())
        reply = None if exchange.reply is None else exchange.reply.decode()
        events.append({"at": h.now, "send": text, "reply": reply})
        return {} if reply is None else dict(json.loads(reply))

    def finish(task_id: str, outcome: ToolOutcome) -> None:
        h.finish(task_id, outcome)
        events.append({"at": h.now, "finish": task_id, "outcome": _outcome_to_json(outcome)})

    send(_request("server/discover", {}, next(ids)))
    send(_request("tools/list", {}, next(ids)))
    send(_request("tools/call", {"name": "greet", "arguments": {"name": "Ada"}}, next(ids)))
    first = send(_request("tools/call", {"name": "ask_then_task", "arguments": {}}, next(ids)))
    h.now += 1.25
    created = send(
        _request(
            "tools/call",
            {
                "name": "ask_then_task",
                "arguments": {},
                "inputResponses": {"who": {"action": "accept", "content": {"name": "Alice"}}},
                "requestState": first["result"]["requestState"],
            },
            next(ids),
        )
    )
    task = created["result"]["taskId"]
    h.now += 0.5
    finish(
        task,
        InputRequired(
            requests={"ok": ask_confirm("Go on?"), "name": ask_name()}, status_message="waiting"
        ),
    )
    send(_request("tasks/get", {"taskId": task}, next(ids)))
    send(
        _request(
            "tasks/update",
            {
                "taskId": task,
                "inputResponses": {
                    "ok": {"action": "accept", "content": {"confirm": True}},
                    "x": 1,
                },
            },
            next(ids),
        )
    )
    h.now += 0.001
    send(
        _request(
            "tasks/update",
            {"taskId": task, "inputResponses": {"name": {"action": "decline"}}},
            next(ids),
        )
    )
    finish(task, CallToolResult.text("all done"))
    send(_request("tasks/get", {"taskId": task}, next(ids)))
    doomed = send(_request("tools/call", {"name": "slow", "arguments": {}}, next(ids)))
    send(_request("tasks/cancel", {"taskId": doomed["result"]["taskId"]}, next(ids)))
    broken = send(_request("tools/call", {"name": "slow", "arguments": {"n": 1}}, next(ids)))
    finish(broken["result"]["taskId"], ErrorObject(code=-32603, message="disk full"))
    send(_request("tasks/get", {"taskId": broken["result"]["taskId"]}, next(ids)))
    send("{oops")
    send(_request("tasks/list", {}, next(ids)))
    h.now = T0 + 62
    h.expire_due()
    events.append({"at": h.now, "expire": True})
    send(_request("tasks/get", {"taskId": task}, next(ids)))
    return events


def _replay(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    h = _harness()
    out: list[dict[str, Any]] = []
    for event in events:
        h.now = event["at"]
        if "send" in event:
            exchange = h.send(event["send"].encode())
            reply = None if exchange.reply is None else exchange.reply.decode()
            out.append({**event, "reply": reply})
        elif "finish" in event:
            h.finish(event["finish"], _outcome_from_json(event["outcome"]))
            out.append(event)
        else:
            h.expire_due()
            out.append(event)
    return out


def test_recorded_session_replays_byte_identical() -> None:
    if os.environ.get("MCP_TASKS_RERECORD") or not RECORDING.exists():
        RECORDING.parent.mkdir(exist_ok=True)
        lines = [json.dumps(event) for event in _record()]
        RECORDING.write_text("\n".join(lines) + "\n")
    events = [json.loads(line) for line in RECORDING.read_text().splitlines()]
    assert sum("send" in e for e in events) >= 15
    replayed = _replay(events)
    for recorded, again in zip(events, replayed, strict=True):
        assert again.get("reply") == recorded.get("reply"), f"differs at {recorded}"


def test_recording_covers_every_kind_of_reply() -> None:
    replies = [
        json.loads(e["reply"])
        for e in map(json.loads, RECORDING.read_text().splitlines())
        if e.get("reply")
    ]
    kinds = {r["result"].get("resultType") for r in replies if "result" in r}
    statuses = {r["result"].get("status") for r in replies if "result" in r}
    codes = {r["error"]["code"] for r in replies if "error" in r}
    assert kinds == {"complete", "input_required", "task"}
    for event in map(json.loads, RECORDING.read_text().splitlines()):
        if event.get("reply"):
            try:
                method = json.loads(event["send"]).get("method")
            except ValueError:
                method = None
            check_reply(method, event["reply"].encode())
    assert {"input_required", "completed", "failed"} <= statuses
    assert {-32700, -32601, -32602} <= codes
