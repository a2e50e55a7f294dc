"""The pure client logic with explicit values: poll schedule and clamping, the TTL backstop,
each input key answered once, request building and response reading."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_tasks.core import (
    CallToolResult,
    CancelledTask,
    ClientCapabilities,
    CompletedTask,
    DetailedTask,
    FailedTask,
    Implementation,
    InputRequiredTask,
    ListRootsRequest,
    TaskStatus,
    Tool,
    WorkingTask,
)
from mcp_tasks.core._client import (
    REPEATABLE_METHODS,
    ClientCore,
    InputTracker,
    PollPolicy,
    RetryPolicy,
    RpcError,
    Task,
    ToolHeaders,
    give_up_at,
    names_param_header,
    parse_timestamp,
)
from mcp_tasks.core._envelope import check_param_headers
from mcp_tasks.core._errors import RemoteProtocolError

STAMP = "2026-08-01T12:00:00.000Z"
T0 = 1_785_585_600.0


def task(**kw: object) -> WorkingTask:
    fields: dict[str, object] = {
        "task_id": "t",
        "created_at": STAMP,
        "last_updated_at": STAMP,
        "ttl_ms": 60_000,
    } | kw
    return WorkingTask(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("advised", "seconds"),
    [(None, 1.0), (1, 0.1), (250, 0.25), (5000, 5.0), (10**9, 30.0)],
)
def test_poll_delay_follows_the_server_within_bounds(advised: int | None, seconds: float) -> None:
    t = task() if advised is None else task(poll_interval_ms=advised)
    assert PollPolicy().delay(t) == seconds


def test_poll_policy_bounds_are_settable() -> None:
    policy = PollPolicy(default_interval_ms=200, min_interval_ms=50, max_interval_ms=500)
    assert policy.delay(task()) == 0.2 and policy.delay(task(poll_interval_ms=10)) == 0.05


def test_give_up_at_is_created_at_plus_ttl() -> None:
    assert give_up_at(task()) == T0 + 60
    assert give_up_at(task(ttl_ms=None)) is None
    assert give_up_at(task(created_at="yesterday")) is None
    assert parse_timestamp("2026-08-01T14:00:00+02:00") == T0
    assert parse_timestamp("2026-08-01T12:00:00") == T0


def test_each_input_key_is_answered_once_across_polls() -> None:
    tracker = InputTracker()
    asked = {"a": ListRootsRequest(), "b": ListRootsRequest()}
    assert set(tracker.unanswered(asked)) == {"a", "b"}
    tracker.mark_answered(["a"])
    assert set(tracker.unanswered(asked)) == {"b"}  # a later poll still shows "a": not again
    tracker.mark_answered(["b"])
    assert tracker.unanswered(asked) == {}
    assert InputTracker(frozenset({"a"})).unanswered(asked).keys() == {"b"}


def test_unanswered_of_a_typed_task() -> None:
    waiting = InputRequiredTask(
        task_id="t",
        created_at=STAMP,
        last_updated_at=STAMP,
        ttl_ms=None,
        input_requests={"k": ListRootsRequest()},
    )
    assert list(InputTracker().unanswered(waiting.input_requests)) == ["k"]


def core() -> ClientCore:
    return ClientCore(
        info=Implementation(name="c", version="1"),
        capabilities=ClientCapabilities(extensions={"io.modelcontextprotocol/tasks": {}}),
    )


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "greet"}, "greet"),
        ("tasks/get", {"taskId": "tsk_1"}, "tsk_1"),
        ("tools/call", {"name": "héllo"}, "=?base64?aMOpbGxv?="),
        ("tools/call", {"name": " padded "}, "=?base64?IHBhZGRlZCA=?="),
        ("tools/call", {"name": "=?base64?x?="}, "=?base64?PT9iYXNlNjQ/eD89?="),
        ("tools/list", {}, None),
    ],
)
def test_requests_carry_meta_and_mirroring_headers(
    method: str, params: dict[str, str], name: str | None
) -> None:
    body, headers = core().request(7, method, params)
    message = json.loads(body)
    meta = message["params"]["_meta"]
    assert message["id"] == 7 and message["method"] == method
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"]["extensions"] == {
        "io.modelcontextprotocol/tasks": {}
    }
    assert headers["MCP-Protocol-Version"] == "2026-07-28" and headers["Mcp-Method"] == method
    assert headers.get("Mcp-Name") == name


def test_error_responses_raise_rpc_error_with_code_message_data() -> None:
    with pytest.raises(RpcError) as raised:
        core().result_of(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {"code": -32021, "message": "needs tasks", "data": {"x": 1}},
            },
            1,
        )
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        -32021,
        "needs tasks",
        {"x": 1},
    )


@pytest.mark.parametrize(
    "response",
    [
        {"jsonrpc": "2.0", "id": 2, "result": {}},
        {"jsonrpc": "2.0", "id": 1, "result": []},
        {"jsonrpc": "2.0", "id": 1, "error": "boom"},
    ],
)
def test_malformed_responses_are_remote_protocol_errors(response: dict[str, object]) -> None:
    with pytest.raises(RemoteProtocolError):
        core().result_of(response, 1)  # type: ignore[arg-type]


def test_result_kinds_absent_means_complete_unknown_refused() -> None:
    assert ClientCore.kind_of({}) == "complete"
    assert ClientCore.kind_of({"resultType": "task"}) == "task"
    with pytest.raises(RemoteProtocolError, match="unknown resultType"):
        ClientCore.kind_of({"resultType": "later"})


# --- retrying a busy server ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "retries", "draw", "expected"),
    [
        ({"retryAfterMs": 2000}, 0, 0.0, 2.0),
        ({"retryAfterMs": 2000}, 0, 0.5, 2.2),  # jitter only ever adds: never sooner than asked
        ({"retryAfterMs": 2000}, 4, 0.0, None),  # out of attempts
        ({"retryAfterMs": 31_000}, 0, 0.0, None),  # longer than the policy waits
        ({"retryAfterMs": True}, 0, 0.0, None),
        ({"retryAfterMs": -5}, 0, 0.0, None),
        ({"other": 1}, 0, 0.0, None),
        (None, 0, 0.0, None),
    ],
)
def test_retry_policy_waits_what_the_server_asked_within_its_bounds(
    data: Any, retries: int, draw: float, expected: float | None
) -> None:
    error = RpcError(-32603, "Too many tasks", data)
    wait = RetryPolicy(attempts=4, max_wait_seconds=30, jitter=0.2).delay(error, retries, draw)
    assert wait == (None if expected is None else pytest.approx(expected))


def _reconnect_waits(method: str, *, may_have_arrived: bool, policy: RetryPolicy) -> list[float]:
    waits: list[float] = []
    while (
        wait := policy.reconnect_delay(
            method, may_have_arrived=may_have_arrived, waited=sum(waits), draw=0.0
        )
    ) is not None:
        waits.append(wait)
        assert len(waits) < 100
    return waits


def test_a_server_that_cannot_be_reached_is_tried_again_backing_off_within_the_bound() -> None:
    policy = RetryPolicy(reconnect_seconds=10, reconnect_first_wait=0.25, reconnect_max_wait=4)
    waits = _reconnect_waits("tasks/get", may_have_arrived=True, policy=policy)
    assert waits == [0.25, 0.25, 0.5, 1.0, 2.0, 4.0, 2.0]  # the last one: what is left of 10 s
    assert sum(waits) == 10
    # a refused connection sent nothing: even a tool call goes again
    assert _reconnect_waits("tools/call", may_have_arrived=False, policy=policy) == waits


def test_only_requests_that_change_nothing_twice_go_again_after_a_broken_connection() -> None:
    policy = RetryPolicy()
    for method in ("tools/call", "notifications/cancelled", "subscriptions/listen"):
        assert policy.reconnect_delay(method, may_have_arrived=True, waited=0, draw=0) is None
    for method in ("tasks/get", "tasks/update", "tasks/cancel", "tools/list", "server/discover"):
        assert method in REPEATABLE_METHODS
        assert policy.reconnect_delay(method, may_have_arrived=True, waited=0, draw=0) == 0.25


def test_reconnecting_jitters_upwards_and_can_be_turned_off() -> None:
    policy = RetryPolicy(jitter=0.2)
    assert policy.reconnect_delay("tasks/get", may_have_arrived=False, waited=1, draw=0.5) == (
        pytest.approx(1.1)
    )
    off = RetryPolicy(reconnect_seconds=0)
    assert off.reconnect_delay("tasks/get", may_have_arrived=False, waited=0, draw=0) is None


@pytest.mark.parametrize(
    "options",
    [
        {"reconnect_seconds": -1},
        {"jitter": -0.1},
        {"reconnect_first_wait": 0},
        {"reconnect_first_wait": 5, "reconnect_max_wait": 4},
        {"max_wait_seconds": float("nan")},
    ],
)
def test_a_retry_policy_that_cannot_work_is_refused(options: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(**options)  # type: ignore[arg-type]


# --- Mcp-Param headers -------------------------------------------------------------------------

MARKED = Tool(
    name="put",
    input_schema={
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "loud": {"type": "boolean", "x-mcp-header": "Loud"},
            "plain": {"type": "string"},
        },
    },
)


def test_marks_are_learned_fresh_for_the_ttl_and_forgotten_on_demand() -> None:
    headers = ToolHeaders()
    assert not headers.is_fresh(0.0)
    headers.learn([MARKED], ttl_ms=60_000, now=100.0)
    assert headers.is_fresh(159.9) and not headers.is_fresh(160.0)
    arguments = {"region": "eu", "count": 3, "loud": False, "plain": "y"}
    assert headers.headers_for("put", arguments) == {
        "Mcp-Param-Region": "eu",
        "Mcp-Param-Count": "3",
        "Mcp-Param-Loud": "false",
    }
    assert headers.headers_for("put", {"region": None, "count": [1]}) == {}
    assert headers.headers_for("other", arguments) == {}
    headers.forget()
    assert not headers.is_fresh(100.0)
    headers.learn([MARKED], ttl_ms=0, now=100.0)  # not to be kept: stale at once
    assert not headers.is_fresh(100.0) and headers.headers_for("put", {"count": 1})


def test_a_tools_call_carries_the_param_headers_of_its_marked_arguments() -> None:
    client = core()
    client.tool_headers.learn([MARKED], ttl_ms=1000, now=0.0)
    _, headers = client.request(1, "tools/call", {"name": "put", "arguments": {"region": "zé"}})
    assert headers["Mcp-Param-Region"] == "=?base64?esOp?="
    _, headers = client.request(2, "prompts/get", {"name": "put", "arguments": {"region": "x"}})
    assert not any(name.startswith("Mcp-Param-") for name in headers)


@given(
    st.one_of(
        st.text(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.booleans(),
        st.sampled_from(["=?base64?", "=?base64?x?=", " ", "\t", "true", "042"]),
    )
)
def test_every_header_the_client_writes_is_one_the_server_accepts(value: object) -> None:
    kind = {bool: "boolean", int: "integer", str: "string"}[type(value)]
    tool = Tool(
        name="t",
        input_schema={"type": "object", "properties": {"a": {"type": kind, "x-mcp-header": "A"}}},
    )
    client = core()
    client.tool_headers.learn([tool], ttl_ms=1000, now=0.0)
    body, headers = client.request(1, "tools/call", {"name": "t", "arguments": {"a": value}})
    value_sent = headers["Mcp-Param-A"]
    assert value_sent.isascii() and value_sent.isprintable() and value_sent == value_sent.strip()
    arguments = msgspec.Raw(msgspec.json.encode(msgspec.json.decode(body)["params"]["arguments"]))
    check_param_headers({"a": "A"}, {"a": value_sent}, arguments)  # raises on a mismatch


@pytest.mark.parametrize(
    ("code", "message", "names"),
    [
        (-32020, "Mcp-Param-Zone header is missing (it must carry arguments.region)", True),
        (-32020, "Mcp-Name header does not match params.name", False),
        (-32602, "Mcp-Param-Zone is not an argument", False),
    ],
)
def test_only_a_header_mismatch_naming_an_mcp_param_header_lists_again(
    code: int, message: str, names: bool
) -> None:
    assert names_param_header(RpcError(code, message)) is names


# --- tasks as the client reads them ----------------------------------------------------------


COMMON_TASK = {"taskId": "t", "createdAt": STAMP, "lastUpdatedAt": STAMP, "ttlMs": None}


@pytest.mark.parametrize(
    ("wire", "kind"),
    [
        ({"status": "working"}, WorkingTask),
        ({"status": "input_required", "inputRequests": {}}, InputRequiredTask),
        ({"status": "completed", "result": {"content": []}}, CompletedTask),
        ({"status": "failed", "error": {"code": -32603, "message": "x"}}, FailedTask),
        ({"status": "cancelled"}, CancelledTask),
    ],
)
def test_every_task_has_its_status(wire: dict[str, Any], kind: type) -> None:
    read = ClientCore.task_of(COMMON_TASK | wire)
    assert type(read) is kind and read.status == wire["status"]
    assert read.status is TaskStatus(wire["status"])
    assert isinstance(read, Task) and isinstance(read, DetailedTask)  # both still classes


@pytest.mark.parametrize(("is_error", "read"), [(None, False), (False, False), (True, True)])
def test_a_completed_tasks_result_is_decoded_is_error_false_when_left_out(
    is_error: bool | None, read: bool
) -> None:
    result: dict[str, Any] = {"content": [{"type": "text", "text": "hi"}]}
    if is_error is not None:
        result["isError"] = is_error
    task = ClientCore.task_of(COMMON_TASK | {"status": "completed", "result": result})
    assert isinstance(task, CompletedTask) and isinstance(task.result, CallToolResult)
    assert task.result.is_error is read
    assert ClientCore.call_result_of(result).is_error is read
