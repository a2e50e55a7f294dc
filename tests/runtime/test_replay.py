"""Replayed answers (issue 15, point 16): a tool registered with
`single_use_request_state=True` accepts each input round's `requestState` once, on every
store, so one "yes" confirms one action; without it, the same round may be sent again
while its state is valid (what docs/security.md says holds then)."""

from __future__ import annotations

import json
from typing import Any

from mcp_tasks import (
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    InputRequired,
    Server,
    ToolContext,
    ToolOutcome,
)
from mcp_tasks.server import Connection
from mcp_tasks.store import TaskStore

from .helpers import request

CONFIRM = {"type": "object", "properties": {"sure": {"type": "boolean"}}}
YES = {"confirm": {"action": "accept", "content": {"sure": True}}}


def build(store: TaskStore, *, single_use: bool) -> tuple[Server, list[str]]:
    server = Server("replay", "1", store=store)
    deleted: list[str] = []

    @server.tool(single_use_request_state=single_use)
    async def delete(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        answer = ctx.elicit_response("confirm")
        if answer is None:
            ask = ElicitParams(message=f"Delete {args['what']}?", requested_schema=CONFIRM)
            return InputRequired(requests={"confirm": ElicitRequest(params=ask)})
        deleted.append(args["what"])
        return CallToolResult.text(f"deleted {args['what']}")

    return server, deleted


async def send(server: Server, params: dict[str, Any]) -> dict[str, Any]:
    reply = await server.handle(request("tools/call", params), connection=Connection())
    assert reply is not None
    answer: dict[str, Any] = json.loads(reply.body)
    return answer


async def test_a_confirmed_action_runs_once_however_often_its_answer_is_sent(
    any_store: TaskStore,
) -> None:
    server, deleted = build(any_store, single_use=True)
    call = {"name": "delete", "arguments": {"what": "prod"}}
    async with server.running():
        asked = await send(server, call)
        state = asked["result"]["requestState"]
        answered = {**call, "inputResponses": YES, "requestState": state}
        first = await send(server, answered)
        assert first["result"]["content"][0]["text"] == "deleted prod"
        for _ in range(2):
            again = await send(server, answered)
            assert again["error"]["code"] == -32602
            assert again["error"]["message"] == (
                "requestState was used already: tool 'delete' accepts each input round's "
                "answers once; call it again without requestState to start anew"
            )
        assert deleted == ["prod"]
        # A new round (asked anew) is a new state: it is accepted, once.
        fresh = (await send(server, call))["result"]["requestState"]
        assert fresh != state
        confirmed = await send(server, {**answered, "requestState": fresh})
        assert "result" in confirmed
    assert deleted == ["prod", "prod"]


async def test_without_single_use_a_round_may_be_answered_again(any_store: TaskStore) -> None:
    server, deleted = build(any_store, single_use=False)
    call = {"name": "delete", "arguments": {"what": "tmp"}}
    async with server.running():
        state = (await send(server, call))["result"]["requestState"]
        answered = {**call, "inputResponses": YES, "requestState": state}
        for _ in range(3):
            assert "result" in await send(server, answered)
    assert deleted == ["tmp", "tmp", "tmp"]
