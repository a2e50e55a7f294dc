"""The 2025-11-25 tasks utility in the pure core: the front's routing, the era a record
keeps, and each modern reply turned into the 2025 wire (`core._legacy_tasks`)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import Raw

from mcp_tasks.core import TASKS_EXTENSION, CallToolResult, Reply, Subscription, ToolSpec
from mcp_tasks.core import _legacy_tasks as lt
from mcp_tasks.core._errors import RemoteProtocolError
from mcp_tasks.core._records import ERA_SETTING
from mcp_tasks.core.inputs import TaskChanged
from mcp_tasks.core.legacy import LegacyAnswer, LegacyFront, LegacySession, Translated
from mcp_tasks.core.wire import Implementation, IncomingMessage, RequestMeta, SubscriptionFilter

from .harness import Harness, meta
from .tools import slow

SUPPORT = {"slow": "required", "maybe": "optional", "plain": "none"}
LEGACY_CAPS: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {ERA_SETTING: "2025-11-25"}}}


def front() -> LegacyFront:
    return LegacyFront(
        info=lambda: Implementation(name="s", version="1"),
        capabilities=dict,
        instructions=lambda: None,
        task_support=SUPPORT.get,
    )


def message(method: str, params: dict[str, Any], request_id: Any = 1) -> IncomingMessage:
    return IncomingMessage(
        jsonrpc="2.0", id=request_id, method=method, params=Raw(json.dumps(params).encode())
    )


def error_code(answer: object) -> int:
    assert isinstance(answer, LegacyAnswer) and answer.reply is not None
    return int(json.loads(answer.reply.body)["error"]["code"])


SESSION = LegacySession(version="2025-11-25")


def test_a_call_with_params_task_becomes_the_modern_task_creating_call() -> None:
    call = message(
        "tools/call", {"name": "maybe", "task": {"ttl": 5}, "_meta": {"progressToken": 3}}
    )
    routed = front().route(call, SESSION)
    assert isinstance(routed, Translated) and routed.creates_task
    params = json.loads(bytes(routed.message.params))  # type: ignore[arg-type]
    meta = params["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == LEGACY_CAPS
    assert meta["progressToken"] == 3 and params["name"] == "maybe"


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"name": "plain", "task": {}}, -32601),  # forbidden: the tool runs in place only
        ({"name": "slow", "task": 7}, -32602),
    ],
)
def test_a_call_that_cannot_be_a_task_is_refused(params: dict[str, Any], code: int) -> None:
    assert error_code(front().route(message("tools/call", params), SESSION)) == code


@pytest.mark.parametrize(
    "params",
    [
        {"name": "maybe"},
        {"name": "nobody", "task": {}},  # unknown tool: the core names it
        {"name": "maybe", "arguments": {"task": {}}},  # an argument called task
    ],
)
def test_other_calls_go_on_without_the_extension(params: dict[str, Any]) -> None:
    routed = front().route(message("tools/call", params), SESSION)
    assert isinstance(routed, Translated) and not routed.creates_task
    meta = json.loads(bytes(routed.message.params))["_meta"]  # type: ignore[arg-type]
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {}


def test_tasks_methods_become_queries_for_2025_11_25_only() -> None:
    query = front().route(message("tasks/result", {"taskId": "t"}, 4), SESSION)
    assert query == lt.TaskQuery(request_id=4, method="tasks/result", task_id="t")
    listed = front().route(message("tasks/list", {"cursor": "t5"}), SESSION)
    assert listed == lt.TaskQuery(request_id=1, method="tasks/list", cursor="t5")
    assert error_code(front().route(message("tasks/get", {}), SESSION)) == -32602
    older = LegacySession(version="2025-06-18")
    assert error_code(front().route(message("tasks/get", {"taskId": "t"}), older)) == -32601
    plain = front().route(message("tools/call", {"name": "maybe", "task": {}}), older)
    assert isinstance(plain, Translated) and not plain.creates_task


def test_initialize_declares_tasks_on_2025_11_25() -> None:
    for version, declared in (("2025-11-25", True), ("2025-06-18", False)):
        opened = front().route(message("initialize", {"protocolVersion": version}), None)
        assert isinstance(opened, LegacyAnswer) and opened.reply is not None
        capabilities = json.loads(opened.reply.body)["result"]["capabilities"]
        assert ("tasks" in capabilities) is declared
        if declared:
            assert capabilities["tasks"] == lt.SERVER_CAPABILITY


# --- the era a record keeps ------------------------------------------------------------


def test_a_legacy_task_is_seen_by_its_era_alone() -> None:
    harness = Harness(tools={"slow": (ToolSpec(name="slow", task_support="optional"), slow)})
    legacy = harness.call("slow", {}, caps=LEGACY_CAPS)["result"]
    assert harness.record(legacy["taskId"]).era == "2025-11-25"
    modern = harness.call("slow", {})["result"]  # the handler decides: START_TASK
    assert harness.record(modern["taskId"]).era is msgspec.UNSET
    assert harness.get(legacy["taskId"], caps=LEGACY_CAPS)["result"]["status"] == "working"
    assert harness.get(legacy["taskId"])["error"]["code"] == -32602
    assert harness.get(modern["taskId"], caps=LEGACY_CAPS)["error"]["code"] == -32602
    assert harness.cancel(legacy["taskId"])["error"]["code"] == -32602
    harness.finish(legacy["taskId"], CallToolResult.text("done"))
    assert harness.record(legacy["taskId"]).era == "2025-11-25"  # kept once terminal


# --- replies turned into the 2025 wire --------------------------------------------------

MODERN_TASK = {
    "taskId": "tsk-1",
    "createdAt": "2025-12-01T12:00:00Z",
    "lastUpdatedAt": "2025-12-01T12:00:03Z",
    "ttlMs": 60000,
    "pollIntervalMs": 1000,
    "resultType": "complete",
}


def reply(result: dict[str, Any], request_id: Any = "m-1") -> Reply:
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "result": result})
    return Reply(body=body, request_id=request_id)


def test_create_task_result_is_nested() -> None:
    created, task_id = lt.created_reply(
        reply({**MODERN_TASK, "status": "working", "resultType": "task"}, 7)
    )
    assert task_id == "tsk-1"
    assert json.loads(created.body) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {
            "task": {
                "taskId": "tsk-1",
                "status": "working",
                "createdAt": "2025-12-01T12:00:00Z",
                "lastUpdatedAt": "2025-12-01T12:00:03Z",
                "ttl": 60000,
                "pollInterval": 1000,
            }
        },
    }
    assert lt.created_reply(reply({"content": [], "resultType": "complete"}))[1] is None


@pytest.mark.parametrize(
    ("modern", "shown", "payload"),
    [
        (
            {"status": "completed", "result": {"content": [], "resultType": "complete"}},
            "completed",
            {"result": {"content": [], "_meta": {lt.RELATED_TASK: {"taskId": "tsk-1"}}}},
        ),
        (
            {"status": "completed", "result": {"content": [], "isError": True}},
            "failed",
            {
                "result": {
                    "content": [],
                    "isError": True,
                    "_meta": {lt.RELATED_TASK: {"taskId": "tsk-1"}},
                }
            },
        ),
        (
            {"status": "failed", "error": {"code": -32603, "message": "boom"}},
            "failed",
            {"error": {"code": -32603, "message": "boom"}},
        ),
        (
            {"status": "cancelled"},
            "cancelled",
            {"error": {"code": -32603, "message": "Task 'tsk-1' was cancelled: it has no result"}},
        ),
    ],
)
def test_each_end_is_read_and_paid_out(
    modern: dict[str, Any], shown: str, payload: dict[str, Any]
) -> None:
    read = lt.read_task(reply({**MODERN_TASK, **modern}))
    assert isinstance(read, lt.ReadTask) and read.is_terminal and read.status == shown
    task = msgspec.to_builtins(read.task)
    assert task["status"] == shown and task["ttl"] == 60000 and "ttlMs" not in task
    got = json.loads(lt.payload_reply(9, read).body)
    assert {key: got[key] for key in got if key not in ("jsonrpc", "id")} == payload
    assert got["id"] == 9


def test_questions_are_read_typed_and_not_shown_in_the_task() -> None:
    asked = {
        "input-1": {
            "method": "elicitation/create",
            "params": {"message": "ok?", "requestedSchema": {"type": "object", "properties": {}}},
        }
    }
    read = lt.read_task(reply({**MODERN_TASK, "status": "input_required", "inputRequests": asked}))
    assert isinstance(read, lt.ReadTask) and not read.is_terminal
    assert read.input_requests is not None and set(read.input_requests) == {"input-1"}
    assert "inputRequests" not in msgspec.to_builtins(read.task)


def test_cursors_count_the_sessions_tasks() -> None:
    session = SESSION
    for number in range(lt.MAX_LISTED_TASKS + 10):
        session = session.remembered(f"t{number}")
    assert session.tasks_created == lt.MAX_LISTED_TASKS + 10
    page, after = session.listed(lt.position_of(None))  # the first ten are forgotten
    assert page[0] == "t10" and len(page) == lt.PAGE_SIZE and after == 10 + lt.PAGE_SIZE
    last, none = session.listed(lt.position_of(lt.cursor_at(session.tasks_created - 3)))
    assert last == tuple(f"t{n}" for n in range(lt.MAX_LISTED_TASKS + 7, lt.MAX_LISTED_TASKS + 10))
    assert none is None
    for bad in ("", "x1", "t", "t-1", "t" + "9" * 13):
        with pytest.raises(RemoteProtocolError):
            lt.position_of(bad)


def test_a_status_notification_carries_the_whole_task() -> None:
    read = lt.read_task(reply({**MODERN_TASK, "status": "working", "statusMessage": "Queued"}))
    assert isinstance(read, lt.ReadTask)
    sent = json.loads(lt.status_notification(read))
    assert sent["method"] == "notifications/tasks/status"
    assert sent["params"]["statusMessage"] == "Queued" and sent["params"]["ttl"] == 60000


def test_tools_list_gains_task_support() -> None:
    listed = reply({"tools": [{"name": "slow"}, {"name": "plain"}, {"name": "gone"}]})
    turned = json.loads(lt.listed_with_task_support(listed, SUPPORT.get).body)["result"]
    assert turned["tools"] == [
        {"name": "slow", "execution": {"taskSupport": "required"}},
        {"name": "plain"},
        {"name": "gone"},
    ]


def test_modern_params_of_each_query() -> None:
    assert lt.modern_params("tasks/get", "t") == {"taskId": "t"}
    answers = {"input-1": Raw(b'{"action":"accept"}')}
    assert lt.modern_params("tasks/update", "t", answers) == {
        "taskId": "t",
        "inputResponses": answers,
    }


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    method=st.sampled_from(["tools/call", *sorted(lt.LEGACY_TASK_METHODS)]),
    params=st.dictionaries(
        st.sampled_from(["name", "task", "taskId", "cursor", "arguments", "_meta"]), JSON
    )
    | JSON,
)
def test_any_params_are_routed_or_refused_never_raised(method: str, params: Any) -> None:
    routed = front().route(message(method, params), SESSION)
    assert isinstance(routed, LegacyAnswer | Translated | lt.TaskQuery)
    if isinstance(routed, LegacyAnswer):
        assert error_code(routed) in (-32601, -32602)


def test_a_modern_listen_hears_nothing_of_a_legacy_task() -> None:
    harness = Harness(tools={"slow": (ToolSpec(name="slow", task_support="optional"), slow)})
    task_id = harness.call("slow", {}, caps=LEGACY_CAPS)["result"]["taskId"]
    record = harness.record(task_id)
    for caps, heard in (({"extensions": {TASKS_EXTENSION: {}}}, False), (LEGACY_CAPS, True)):
        subscription = Subscription(
            request_id="listen",
            notifications=SubscriptionFilter(task_ids=[task_id]),
            meta=msgspec.convert(meta(caps), RequestMeta),
        )
        step = harness.core.handle(TaskChanged(subscription, record), harness.now)
        assert bool(step.effects) is heard
