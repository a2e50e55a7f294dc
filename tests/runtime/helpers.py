"""Drive a `Server` in-process: build requests, send them through `Server.handle`."""

from __future__ import annotations

import itertools
import json
from typing import Any

import anyio
import trio
from schema_check import CORE, TASKS, check, check_reply

from mcp_tasks import TASKS_EXTENSION, Server
from mcp_tasks.server import Connection

T0 = 1_785_585_600.0
ALL_CAPS: dict[str, Any] = {
    "elicitation": {},
    "sampling": {},
    "roots": {},
    "extensions": {TASKS_EXTENSION: {}},
}
_ids = itertools.count(1)
_RESPONSE_DEF_FOR_METHOD = {
    "prompts/list": "ListPromptsResultResponse",
    "prompts/get": "GetPromptResultResponse",
    "resources/list": "ListResourcesResultResponse",
    "resources/templates/list": "ListResourceTemplatesResultResponse",
    "resources/read": "ReadResourceResultResponse",
    "completion/complete": "CompleteResultResponse",
    "subscriptions/listen": "SubscriptionsListenResultResponse",
}
_NOTIFICATION_DEF_FOR_METHOD = {
    "notifications/progress": (CORE, "ProgressNotification"),
    "notifications/message": (CORE, "LoggingMessageNotification"),
    "notifications/subscriptions/acknowledged": (CORE, "SubscriptionsAcknowledgedNotification"),
    "notifications/tools/list_changed": (CORE, "ToolListChangedNotification"),
    "notifications/prompts/list_changed": (CORE, "PromptListChangedNotification"),
    "notifications/resources/list_changed": (CORE, "ResourceListChangedNotification"),
    "notifications/resources/updated": (CORE, "ResourceUpdatedNotification"),
    "notifications/tasks": (TASKS, "TaskStatusNotification"),
}


def trio_clock() -> float:
    """Wall time that follows trio's (autojump) clock, so TTLs work under virtual time."""
    return T0 + trio.current_time()


def check_message(method: str | None, body: bytes) -> None:
    """`check_reply`, and the catalog and listen methods it does not know (their results,
    and their input rounds)."""
    message = json.loads(body)
    definition = _RESPONSE_DEF_FOR_METHOD.get(method or "")
    if definition is None or "result" not in message:
        check_reply(method, body)
    elif message["result"].get("resultType") == "input_required":
        check(CORE, "InputRequiredResult", message["result"])
        for input_request in message["result"]["inputRequests"].values():
            check(CORE, "InputRequest", input_request)
    else:
        check(CORE, definition, message)


def check_notification(message: dict[str, Any]) -> None:
    """A notification the server sent, against the schema of its method."""
    filename, definition = _NOTIFICATION_DEF_FOR_METHOD[message["method"]]
    check(filename, definition, message)


def request(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    caps: dict[str, Any] | None = None,
    request_id: int | str | None = None,
    **meta: Any,
) -> bytes:
    full = {
        **(params or {}),
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": ALL_CAPS if caps is None else caps,
            **meta,
        },
    }
    rid = next(_ids) if request_id is None else request_id
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": full}).encode()


class Client:
    """Sends requests to a running server and checks every reply against the schemas."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.connection = Connection()
        self.notifications: list[dict[str, Any]] = []

    async def notify(self, body: bytes) -> None:
        message = json.loads(body)
        check_notification(message)
        self.notifications.append(message)

    async def send(
        self, method: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> dict[str, Any]:
        data = request(method, params, **kw)
        reply = await self.server.handle(data, notify=self.notify, connection=self.connection)
        assert reply is not None, f"no reply to {method}"
        check_message(method, reply.body)
        decoded: dict[str, Any] = json.loads(reply.body)
        return decoded

    async def call(
        self, name: str, arguments: dict[str, Any] | None = None, **kw: Any
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        params.update(kw.pop("extra", {}))
        return await self.send("tools/call", params, **kw)

    async def start(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        reply = await self.call(name, arguments)
        assert reply["result"]["resultType"] == "task", reply
        task_id: str = reply["result"]["taskId"]
        return task_id

    async def get(self, task_id: str) -> dict[str, Any]:
        reply = await self.send("tasks/get", {"taskId": task_id})
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    async def wait_status(self, task_id: str, *statuses: str, poll: float = 0.05) -> dict[str, Any]:
        """Poll until the task shows one of `statuses` (under autojump this costs nothing;
        under asyncio too, it is anyio's)."""
        with anyio.fail_after(60):
            while True:
                task = await self.get(task_id)
                if task["status"] in statuses:
                    return task
                await anyio.sleep(poll)
