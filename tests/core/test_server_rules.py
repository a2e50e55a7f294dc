"""The server rules of the core, one test (or table) per rule, with explicit clocks."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from mcp_tasks.core import (
    START_TASK,
    TASKS_EXTENSION,
    CallToolResult,
    ClientCapabilities,
    ElicitParams,
    ElicitRequest,
    ErrorObject,
    HttpHeaders,
    InputRequired,
    RunTool,
    ServerOptions,
    Step,
    TaskOptions,
    TaskStatus,
)

from .harness import ALL_CAPS, T0, TASKS_CAPS, Harness, meta
from .tools import TOOLS, ask_confirm, ask_name

NO_CAPS: dict[str, Any] = {}


@pytest.fixture
def h(make_harness: type[Harness]) -> Harness:
    return make_harness(tools=TOOLS)


def error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" in reply, f"expected an error, got {reply}"
    error: dict[str, Any] = reply["error"]
    return error


def start(h: Harness, name: str = "slow", caps: dict[str, Any] | None = None) -> str:
    reply = h.call(name, {"label": "x"}, caps=ALL_CAPS if caps is None else caps)
    assert reply["result"]["resultType"] == "task", reply
    task_id: str = reply["result"]["taskId"]
    return task_id


# --- validation order (wire doc 1.7) ---------------------------------------------------


def test_parse_error_for_bytes_that_are_not_json(h: Harness) -> None:
    exchange = h.send(b"{not json")
    reply = json.loads(exchange.reply or b"")
    assert reply["error"]["code"] == -32700 and "id" not in reply
    assert exchange.http_status == 400


@pytest.mark.parametrize(
    "message",
    [
        b"[]",
        b"3",
        b'"x"',
        b"null",
        b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":1}',
        b'{"jsonrpc":"2.0","id":1,"method":7}',
        b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}',
    ],
)
def test_invalid_request_for_anything_but_a_jsonrpc_object(h: Harness, message: bytes) -> None:
    reply = json.loads(h.send(message).reply or b"")
    assert reply["error"]["code"] == -32600


def test_invalid_request_echoes_a_readable_id(h: Harness) -> None:
    reply = json.loads(h.send(b'{"jsonrpc":"1.0","id":"a","method":"x"}').reply or b"")
    assert reply["id"] == "a" and reply["error"]["code"] == -32600


@pytest.mark.parametrize(
    ("params", "missing"),
    [
        ({}, "params._meta"),
        ({"_meta": {}}, "io.modelcontextprotocol/protocolVersion"),
        (
            {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
            "io.modelcontextprotocol/clientCapabilities",
        ),
        (
            {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
            "io.modelcontextprotocol/protocolVersion",
        ),
    ],
)
def test_meta_missing_required_key_is_invalid_params(
    h: Harness, params: dict[str, Any], missing: str
) -> None:
    message = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": params}
    exchange = h.send(json.dumps(message).encode())
    reply = json.loads(exchange.reply or b"")
    assert reply["id"] == 5 and reply["error"]["code"] == -32602
    assert missing in reply["error"]["message"]
    assert exchange.http_status == 400


def test_meta_is_checked_before_the_method(h: Harness) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "no/such", "params": {}}
    assert json.loads(h.send(json.dumps(message).encode()).reply or b"")["error"]["code"] == -32602


def test_meta_without_client_info_is_served(h: Harness) -> None:
    m = meta()
    del m["io.modelcontextprotocol/clientInfo"]
    message = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": m}}
    assert "result" in json.loads(h.send(json.dumps(message).encode()).reply or b"")


def _versioned(version: str, method: str = "tools/list") -> bytes:
    m = meta()
    m["io.modelcontextprotocol/protocolVersion"] = version
    return json.dumps(
        {"jsonrpc": "2.0", "id": 9, "method": method, "params": {"_meta": m}}
    ).encode()


ALL_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
"""What a server that serves 2025 sessions (the default) names as supported."""


def modern_only(h: Harness) -> None:
    h.core.use_options(msgspec.structs.replace(h.core.options, legacy_sessions=False))


def test_unsupported_version_names_supported_and_requested(h: Harness) -> None:
    exchange = h.send(_versioned("v999.0.0"))
    error = error_of(json.loads(exchange.reply or b""))
    assert error["code"] == -32022 and exchange.http_status == 400
    assert error["data"] == {"supported": ALL_VERSIONS, "requested": "v999.0.0"}
    modern_only(h)
    error = error_of(json.loads(h.send(_versioned("v999.0.0")).reply or b""))
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "v999.0.0"}


def test_an_initialize_of_an_earlier_revision_is_told_which_versions_are_spoken(
    h: Harness,
) -> None:
    """Clients of the previous era (the TypeScript SDK, the Inspector) open with
    `initialize`: they get -32022 naming the supported versions, not "_meta is required"."""
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x"}}
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    reply = json.loads(h.send(json.dumps(message).encode()).reply or b"")
    assert error_of(reply)["data"] == {"supported": ALL_VERSIONS, "requested": "2025-06-18"}
    assert "and 2025-11-25, 2025-06-18, 2025-03-26 in a session" in error_of(reply)["message"]
    modern_only(h)  # the runtime answers it with a session otherwise
    for headers in (None, HttpHeaders(protocol_version=None, method=None)):  # stdio, HTTP
        exchange = h.send(json.dumps(message).encode(), headers)
        reply = json.loads(exchange.reply or b"")
        assert reply["id"] == 0 and exchange.http_status == 400
        error = error_of(reply)
        assert error["code"] == -32022
        assert error["data"] == {"supported": ["2026-07-28"], "requested": "2025-06-18"}
        assert error["message"].startswith(
            "Unsupported protocol version '2025-06-18': this server speaks MCP 2026-07-28 only"
        )


def test_a_request_of_an_earlier_revision_is_told_which_versions_are_spoken(
    h: Harness,
) -> None:
    """After `initialize`, an earlier-era client sends its version in the header only."""
    modern_only(h)  # the runtime answers it from its session otherwise
    message = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}
    old = HttpHeaders(protocol_version="2025-06-18", method="tools/list")
    exchange = h.send(json.dumps(message).encode(), old)
    error = error_of(json.loads(exchange.reply or b""))
    assert error["code"] == -32022 and exchange.http_status == 400
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2025-06-18"}
    # The current version in the header and no `_meta`: what is missing is `_meta`.
    current = HttpHeaders(protocol_version="2026-07-28", method="tools/list")
    reply = json.loads(h.send(json.dumps(message).encode(), current).reply or b"")
    assert reply["error"]["code"] == -32602


def test_header_mismatch_is_checked_before_the_version(h: Harness) -> None:
    headers = HttpHeaders(protocol_version="2026-07-28", method="tools/list")
    exchange = h.send(_versioned("v999.0.0"), headers)
    assert json.loads(exchange.reply or b"")["error"]["code"] == -32020
    assert exchange.http_status == 400


def test_version_is_checked_before_the_method(h: Harness) -> None:
    reply = json.loads(h.send(_versioned("v999.0.0", "tasks/list")).reply or b"")
    assert reply["error"]["code"] == -32022


@pytest.mark.parametrize(
    "method",
    [
        "tasks/result",
        "tasks/list",
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "unknown/method",
    ],
)
def test_unknown_and_removed_methods_are_method_not_found(h: Harness, method: str) -> None:
    message = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"_meta": meta()}}
    exchange = h.send(json.dumps(message).encode())
    reply = json.loads(exchange.reply or b"")
    assert reply["id"] == 3 and reply["error"]["code"] == -32601
    assert method in reply["error"]["message"] and exchange.http_status == 404


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_capability_gate_comes_before_the_task_lookup(h: Harness, method: str) -> None:
    params = {"taskId": "gate-test", "inputResponses": {}}
    error = error_of(h.request(method, params, caps={"elicitation": {}}))
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_unknown_task_is_invalid_params(h: Harness, method: str) -> None:
    error = error_of(h.request(method, {"taskId": "nope", "inputResponses": {}}))
    assert error["code"] == -32602 and "nope" in error["message"]


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("tasks/get", {}, "taskId"),
        ("tasks/get", {"taskId": 7}, "taskId"),
        ("tasks/update", {"taskId": "t"}, "inputResponses"),
        ("tools/call", {}, "name"),
        ("tools/call", {"name": 3}, "name"),
        ("tools/call", {"name": "greet", "arguments": [1]}, "arguments"),
    ],
)
def test_malformed_params_name_the_field(
    h: Harness, method: str, params: dict[str, Any], field: str
) -> None:
    error = error_of(h.request(method, params))
    assert error["code"] == -32602 and field in error["message"]


@pytest.mark.parametrize(
    ("arguments", "is_object"),
    [(b' \n\t {"name": "W"}', True), (b'"W"', False), (b"7", False), (b"null", False)],
)
def test_call_arguments_are_an_object_whatever_the_space_before_them(
    h: Harness, arguments: bytes, is_object: bool
) -> None:
    params = json.dumps({"name": "greet", "_meta": meta()}).encode()
    params = params[:-1] + b', "arguments":' + arguments + b"}"
    message = b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": ' + params + b"}"
    reply = h.send(message).reply
    assert reply is not None
    decoded = json.loads(reply)
    if is_object:
        assert decoded["result"]["content"][0]["text"] == "Hello, W!"
    else:
        assert error_of(decoded) == {
            "code": -32602,
            "message": "Invalid params: params.arguments must be an object",
        }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"name": "greet"}, "_meta"),  # a call's params checked in their order: _meta first
        ({"name": 3, "_meta": {"io.modelcontextprotocol/protocolVersion": 1}}, "protocolVersion"),
    ],
)
def test_a_call_whose_params_do_not_fit_is_told_the_first_check_that_fails(
    h: Harness, params: dict[str, Any], field: str
) -> None:
    message = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": params}
    reply = h.send(json.dumps(message).encode()).reply
    assert reply is not None
    error = error_of(json.loads(reply))
    assert error["code"] == -32602 and field in error["message"], error


# --- headers (Streamable HTTP) -----------------------------------------------------------


def _headers(task_id: str | None = "t-1", **kw: Any) -> HttpHeaders:
    values = {"protocol_version": "2026-07-28", "method": "tasks/get", "name": task_id} | kw
    return HttpHeaders(**values)


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        (_headers(protocol_version=None), "MCP-Protocol-Version header is missing"),
        (_headers(protocol_version="2025-11-25"), "MCP-Protocol-Version header does not match"),
        (_headers(method=None), "Mcp-Method header is missing"),
        (_headers(method="tasks/cancel"), "Mcp-Method header does not match"),
        (_headers(None), "Mcp-Name header is missing"),
        (_headers("t-2"), "Mcp-Name header does not match params.taskId"),
        (_headers("=?base64?dC0y?="), "Mcp-Name header does not match"),
        (_headers("=?base64?***?="), "invalid =?base64?...?="),
    ],
)
def test_header_that_disagrees_with_the_body_is_header_mismatch(
    h: Harness, headers: HttpHeaders, words: str
) -> None:
    error = error_of(h.request("tasks/get", {"taskId": "t-1"}, headers=headers))
    assert error["code"] == -32020 and words in error["message"]


@pytest.mark.parametrize("name", ["t-1", "  t-1  ", "=?base64?dC0x?="])
def test_header_equal_to_the_body_passes(h: Harness, name: str) -> None:
    error = error_of(h.request("tasks/get", {"taskId": "t-1"}, headers=_headers(name)))
    assert error["code"] == -32602  # got past the headers to the task lookup


def test_missing_task_name_header_is_accepted_only_when_opted_in(
    make_harness: type[Harness],
) -> None:
    lenient = make_harness(tools=TOOLS, options=ServerOptions(accept_missing_task_name_header=True))
    assert (
        error_of(lenient.request("tasks/get", {"taskId": "t-1"}, headers=_headers(None)))["code"]
        == -32602
    )
    assert (
        error_of(lenient.request("tasks/get", {"taskId": "t-1"}, headers=_headers("t-9")))["code"]
        == -32020
    )
    call = HttpHeaders(protocol_version="2026-07-28", method="tools/call")
    assert error_of(lenient.call("greet", {"name": "x"}, headers=call))["code"] == -32020


def test_options_given_later_are_the_ones_answered_under(h: Harness) -> None:
    """`use_options` (what `mcp-tasks serve --accept-missing-task-name` calls) changes the
    header leniency and the cache hints of list results already made."""
    assert (
        error_of(h.request("tasks/get", {"taskId": "t-1"}, headers=_headers(None)))["code"]
        == -32020
    )
    assert h.request("tools/list")["result"]["ttlMs"] == ServerOptions().discover_ttl_ms
    h.core.use_options(ServerOptions(accept_missing_task_name_header=True, discover_ttl_ms=5))
    assert (
        error_of(h.request("tasks/get", {"taskId": "t-1"}, headers=_headers(None)))["code"]
        == -32602
    )
    assert h.request("tools/list")["result"]["ttlMs"] == 5


def test_options_given_later_reach_every_part(h: Harness) -> None:
    """`use_options` and `use_task_options` change what each part of the core answers
    under, not only the core: an input round's `requestState` TTL, the items one listen
    may name, a new task's TTL."""
    h.core.use_options(ServerOptions(request_state_ttl_ms=1000, max_listen_items=1))
    state = _round_one(h)
    h.now += 2
    assert "expired" in error_of(_retry(h, state))["message"]
    listen = {"notifications": {"taskIds": ["t-1", "t-2"]}}
    refused = error_of(h.request("subscriptions/listen", listen, caps=ALL_CAPS))
    assert "names 2 items, at most 1" in refused["message"]
    h.core.use_task_options(TaskOptions(ttl_ms=5000))
    assert h.get(start(h), caps=ALL_CAPS)["result"]["ttlMs"] == 5000


# --- discover and tools/list ---------------------------------------------------------------


def test_discover_advertises_the_extension_under_extensions_only(h: Harness) -> None:
    result = h.request("server/discover", caps=NO_CAPS)["result"]
    assert result["capabilities"]["extensions"] == {TASKS_EXTENSION: {}}
    assert "tasks" not in result["capabilities"]
    assert result["supportedVersions"] == ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "test-server"


def test_discover_names_the_2025_revisions_only_while_their_sessions_are_served(
    h: Harness,
) -> None:
    h.core.use_options(msgspec.structs.replace(h.core.options, legacy_sessions=False))
    result = h.request("server/discover", caps=NO_CAPS)["result"]
    assert result["supportedVersions"] == ["2026-07-28"]


def test_tools_list_lists_every_tool_without_task_support_on_the_wire(h: Harness) -> None:
    result = h.request("tools/list")["result"]
    assert [t["name"] for t in result["tools"]] == list(TOOLS)
    assert all("execution" not in t and "taskSupport" not in t for t in result["tools"])
    assert result["cacheScope"] == "public" and result["ttlMs"] >= 0


# --- tools/call and per-tool task support -----------------------------------------------------


def test_unknown_tool_is_invalid_params(h: Harness) -> None:
    error = error_of(h.call("nope", {}))
    assert error["code"] == -32602 and "nope" in error["message"]


def test_sync_tool_answers_a_call_tool_result(h: Harness) -> None:
    result = h.call("greet", {"name": "World"})["result"]
    assert result == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "Hello, World!"}],
    }


def test_legacy_task_param_is_ignored(h: Harness) -> None:
    result = h.call("greet", {"name": "W"}, extra={"task": {"ttl": 1000}})["result"]
    assert result["resultType"] == "complete" and "taskId" not in result


@pytest.mark.parametrize(("caps", "expect"), [(TASKS_CAPS, "task"), (NO_CAPS, "complete")])
def test_optional_tool_is_a_task_only_with_the_extension(
    h: Harness, caps: dict[str, Any], expect: str
) -> None:
    result = h.call("slow", {"label": "a"}, caps=caps)["result"]
    assert result["resultType"] == expect
    if expect == "complete":
        assert result["content"][0]["text"] == "done in place: a"
        assert h.store.count() == 0


def test_required_tool_without_the_extension_is_missing_capability(h: Harness) -> None:
    exchange_count = len(h.exchanges)
    error = error_of(h.call("required_job", {}, caps={"elicitation": {}}))
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"]["extensions"] == {TASKS_EXTENSION: {}}
    assert h.exchanges[exchange_count].http_status == 400


def test_extension_declared_on_an_earlier_request_does_not_count(h: Harness) -> None:
    h.call("slow", {}, caps=TASKS_CAPS)
    assert error_of(h.call("required_job", {}, caps=NO_CAPS))["code"] == -32021


def test_start_task_from_a_none_tool_is_an_internal_error(h: Harness) -> None:
    error = error_of(h.call("none_but_starts", {}))
    assert error["code"] == -32603 and "task_support='none'" in error["message"]
    assert h.store.count() == 0


def test_handler_error_outside_a_task_is_the_reply(h: Harness) -> None:
    assert error_of(h.call("fails", {})) == {"code": -32603, "message": "upstream crashed"}


# --- task creation -------------------------------------------------------------------------


def test_create_task_result_is_flat_and_the_record_exists_first(h: Harness) -> None:
    reply = h.call("slow", {"label": "x"})
    result = reply["result"]
    assert result["resultType"] == "task" and result["status"] == "working"
    assert result["createdAt"] == result["lastUpdatedAt"] == "2026-08-01T12:00:00.000Z"
    assert result["ttlMs"] == 600_000 and result["pollIntervalMs"] == 1000
    for key in ("task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval"):
        assert key not in result
    record = h.record(result["taskId"])
    assert record.status is TaskStatus.WORKING and record.version == 1
    assert h.started[result["taskId"]].in_task
    assert h.get(result["taskId"])["result"]["status"] == "working"


def test_create_task_effects_save_before_start_and_ask_to_wake_at_expiry(h: Harness) -> None:
    step = h.core.receive(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "slow", "_meta": meta()},
            }
        ).encode(),
        T0,
    )
    assert isinstance(step, RunTool)
    run = step
    step = h.core.tool_returned(run.call, TOOLS["slow"][1](run.call), T0)
    assert isinstance(step, Step)
    kinds = [type(e).__name__ for e in step.effects]
    assert kinds == ["SaveTask", "StartTask", "WakeAt"]
    assert step.effects[2].deadline == T0 + 600  # type: ignore[union-attr]


def test_ttl_none_means_no_expiry_and_ttl_ms_null(make_harness: type[Harness]) -> None:
    h = make_harness(tools=TOOLS, task_options=TaskOptions(ttl_ms=None, poll_interval_ms=None))
    result = h.call("slow", {})["result"]
    assert result["ttlMs"] is None and "pollIntervalMs" not in result
    assert h.wakes == []


def test_max_tasks_refuses_one_more_with_a_message_that_says_so(
    make_harness: type[Harness],
) -> None:
    h = make_harness(tools=TOOLS, task_options=TaskOptions(max_tasks=2))
    start(h)
    start(h)
    error = error_of(h.call("slow", {}))
    assert error["code"] == -32603 and "limit of 2" in error["message"]
    assert h.store.count() == 2


def test_task_ids_come_from_the_injected_factory(h: Harness) -> None:
    assert [start(h), start(h)] == ["tsk-0001", "tsk-0002"]


# --- tasks/get per status -------------------------------------------------------------------


def test_completed_task_carries_the_result(h: Harness) -> None:
    task_id = start(h)
    h.now += 2
    h.finish(task_id, CallToolResult.text("done"))
    result = h.get(task_id)["result"]
    assert result["status"] == "completed" and result["resultType"] == "complete"
    assert result["result"] == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "done"}],
    }
    assert result["lastUpdatedAt"] == "2026-08-01T12:00:02.000Z"
    assert "error" not in result and "inputRequests" not in result


def test_tool_error_is_completed_with_is_error(h: Harness) -> None:
    task_id = start(h)
    h.finish(task_id, CallToolResult.text("bad input", is_error=True))
    result = h.get(task_id)["result"]
    assert result["status"] == "completed" and result["result"]["isError"] is True


def test_protocol_error_is_failed_with_error_and_no_result(h: Harness) -> None:
    task_id = start(h)
    h.finish(task_id, ErrorObject(code=-32603, message="upstream crashed"))
    result = h.get(task_id)["result"]
    assert result["status"] == "failed" and "result" not in result
    assert result["error"] == {"code": -32603, "message": "upstream crashed"}
    assert result["statusMessage"] == "upstream crashed"


def test_related_task_meta_is_stripped_from_the_inlined_result(h: Harness) -> None:
    task_id = start(h)
    h.finish(
        task_id,
        CallToolResult(
            content=[],
            meta={"io.modelcontextprotocol/related-task": {"taskId": task_id}, "keep": 1},
        ),
    )
    assert h.get(task_id)["result"]["result"]["_meta"] == {"keep": 1}


def test_get_never_carries_request_state(h: Harness) -> None:
    task_id = start(h)
    h.finish(task_id, InputRequired(requests={"a": ask_name()}))
    assert "requestState" not in h.get(task_id)["result"]


def test_finished_task_drops_what_only_a_running_task_needs(h: Harness) -> None:
    task_id = start(h)
    assert h.record(task_id).arguments is not None
    h.finish(task_id, CallToolResult.text("done"))
    record = h.record(task_id)
    assert record.arguments is None and record.request_meta is None


# --- input inside a task -------------------------------------------------------------------


def test_need_input_shows_every_outstanding_request(h: Harness) -> None:
    task_id = start(h)
    h.finish(
        task_id,
        InputRequired(
            requests={"a": ask_name(), "b": ask_confirm("sure?")}, status_message="Waiting"
        ),
    )
    result = h.get(task_id)["result"]
    assert result["status"] == "input_required" and result["statusMessage"] == "Waiting"
    assert set(result["inputRequests"]) == {"a", "b"}
    assert result["inputRequests"]["a"]["method"] == "elicitation/create"


def test_update_consumes_only_outstanding_keys_and_partial_sets_keep_waiting(h: Harness) -> None:
    task_id = start(h)
    h.finish(task_id, InputRequired(requests={"a": ask_name(), "b": ask_confirm("sure?")}))
    ack = h.update(
        task_id, {"a": {"action": "accept", "content": {"name": "Ada"}}, "zzz": {"ignored": True}}
    )
    assert ack["result"] == {
        "resultType": "complete",
        "_meta": {
            "io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "0.1.0"}
        },
    }
    result = h.get(task_id)["result"]
    assert result["status"] == "input_required" and list(result["inputRequests"]) == ["b"]
    assert h.resumed == []
    h.update(task_id, {"b": {"action": "accept", "content": {"confirm": True}}})
    assert h.get(task_id)["result"]["status"] == "working"
    (resume,) = h.resumed
    assert set(resume.call.input_responses) == {"a", "b"}
    assert resume.call.in_task and resume.call.task_id == task_id


def test_update_ignores_already_answered_keys(h: Harness) -> None:
    task_id = start(h)
    h.finish(task_id, InputRequired(requests={"a": ask_name()}))
    h.update(task_id, {"a": {"action": "accept", "content": {"name": "Ada"}}})
    version = h.record(task_id).version
    assert "result" in h.update(task_id, {"a": {"action": "decline"}})
    assert h.record(task_id).version == version and len(h.resumed) == 1


@pytest.mark.parametrize("status", ["working", "completed", "cancelled"])
def test_update_on_a_task_not_waiting_is_an_ack_that_changes_nothing(
    h: Harness, status: str
) -> None:
    task_id = start(h)
    if status == "completed":
        h.finish(task_id, CallToolResult.text("x"))
    elif status == "cancelled":
        h.cancel(task_id)
    before = h.record(task_id)
    assert h.update(task_id, {"a": {"action": "accept"}})["result"]["resultType"] == "complete"
    assert h.record(task_id) == before


def test_malformed_answer_to_an_outstanding_key_is_refused_whole(h: Harness) -> None:
    task_id = start(h)
    h.finish(task_id, InputRequired(requests={"a": ask_name(), "b": ask_confirm("?")}))
    error = error_of(h.update(task_id, {"a": {"action": "accept"}, "b": {"action": "maybe"}}))
    assert error["code"] == -32602 and "inputResponses['b']" in error["message"]
    assert set(h.record(task_id).input_requests or {}) == {"a", "b"}


def test_input_keys_are_unique_over_a_task_life(h: Harness) -> None:
    task_id = start(h)
    h.finish(task_id, InputRequired(requests={"a": ask_name()}))
    h.update(task_id, {"a": {"action": "accept", "content": {"name": "x"}}})
    h.finish(task_id, InputRequired(requests={"a": ask_name("again?")}))
    result = h.get(task_id)["result"]
    assert result["status"] == "failed" and "reused input key(s) a" in result["error"]["message"]


def test_task_input_needs_the_capability_of_the_creating_request(h: Harness) -> None:
    task_id = start(h, caps=TASKS_CAPS)
    h.finish(task_id, InputRequired(requests={"a": ask_name()}))
    result = h.get(task_id)["result"]
    assert result["status"] == "failed" and result["error"]["code"] == -32021
    assert result["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}


def test_start_task_inside_a_task_fails_the_task(h: Harness) -> None:
    task_id = start(h)
    h.finish(task_id, START_TASK)
    assert h.get(task_id)["result"]["error"]["code"] == -32603


def test_status_message_shows_progress_without_changing_status(h: Harness) -> None:
    task_id = start(h)
    h.now += 1
    h.perform(h.core.set_status_message(h.record(task_id), "50%", h.now))
    result = h.get(task_id)["result"]
    assert result["statusMessage"] == "50%" and result["status"] == "working"
    assert result["lastUpdatedAt"] == "2026-08-01T12:00:01.000Z"


# --- cancel ---------------------------------------------------------------------------------


def test_cancel_ends_an_active_task_and_cancels_its_handler(h: Harness) -> None:
    task_id = start(h)
    ack = h.cancel(task_id)["result"]
    assert set(ack) == {"resultType", "_meta"} and ack["resultType"] == "complete"
    assert h.get(task_id)["result"]["status"] == "cancelled"
    assert h.cancelled == [task_id]


@pytest.mark.parametrize("ending", ["completed", "failed", "cancelled"])
def test_cancel_on_a_finished_task_is_the_same_ack(h: Harness, ending: str) -> None:
    task_id = start(h)
    outcomes = {
        "completed": CallToolResult.text("x"),
        "failed": ErrorObject(code=-32603, message="x"),
    }
    if ending in outcomes:
        h.finish(task_id, outcomes[ending])
    else:
        h.cancel(task_id)
    before = h.record(task_id)
    assert h.cancel(task_id)["result"]["resultType"] == "complete"
    assert h.record(task_id) == before and h.get(task_id)["result"]["status"] == ending


def test_outcome_after_cancel_is_dropped(h: Harness) -> None:
    task_id = start(h)
    h.cancel(task_id)
    h.finish(task_id, CallToolResult.text("too late"))
    assert h.get(task_id)["result"]["status"] == "cancelled"


# --- TTL ---------------------------------------------------------------------------------------


def test_task_is_readable_until_its_ttl_and_gone_after(make_harness: type[Harness]) -> None:
    h = make_harness(tools=TOOLS, task_options=TaskOptions(ttl_ms=10_000))
    task_id = start(h)
    h.finish(task_id, CallToolResult.text("x"))
    h.now = T0 + 9.999
    h.expire_due()
    assert h.get(task_id)["result"]["status"] == "completed"
    h.now = T0 + 10
    error = error_of(h.get(task_id))
    assert error["code"] == -32602 and "expired" in error["message"]
    assert h.store.get(task_id) is None


def test_expiry_removes_records_and_cancels_running_handlers(make_harness: type[Harness]) -> None:
    h = make_harness(tools=TOOLS, task_options=TaskOptions(ttl_ms=1000))
    running, done = start(h), start(h)
    h.finish(done, CallToolResult.text("x"))
    h.now = T0 + 1
    h.expire_due()
    assert h.store.count() == 0 and h.cancelled == [running]
    assert error_of(h.get(running))["code"] == -32602


def test_expire_before_the_deadline_asks_to_wake_later(h: Harness) -> None:
    task_id = start(h)
    step = h.core.expire_task(h.record(task_id), T0 + 1)
    assert [type(e).__name__ for e in step.effects] == ["WakeAt"]


# --- MRTR before a task --------------------------------------------------------------------------


def test_mrtr_round_then_task_and_the_task_sees_the_answer(h: Harness) -> None:
    first = h.call("ask_then_task", {}, caps=ALL_CAPS)["result"]
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["who"]
    answer = {"who": {"action": "accept", "content": {"name": "Alice"}}}
    second = h.call(
        "ask_then_task",
        {},
        caps=ALL_CAPS,
        extra={"inputResponses": answer, "requestState": first["requestState"]},
    )
    result = second["result"]
    assert result["resultType"] == "task"
    assert "requestState" not in result and "inputRequests" not in result
    call = h.started[result["taskId"]]
    outcome = TOOLS["ask_then_task"][1](call)
    h.finish(result["taskId"], outcome)
    text = h.get(result["taskId"])["result"]["result"]["content"][0]["text"]
    assert text == "Hello, Alice! (round-1)"


def _round_one(h: Harness) -> str:
    state: str = h.call("ask_then_task", {}, caps=ALL_CAPS)["result"]["requestState"]
    return state


def _retry(h: Harness, state: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    answer = {"who": {"action": "accept", "content": {"name": "A"}}}
    return h.call(
        "ask_then_task",
        arguments or {},
        caps=ALL_CAPS,
        extra={"inputResponses": answer, "requestState": state},
    )


@pytest.mark.parametrize(
    ("tamper", "words"),
    [
        (lambda s: s[:-2] + ("AA" if not s.endswith("AA") else "BB"), "integrity"),
        (lambda s: "v1.e30." + s.rsplit(".", 1)[1], "integrity"),
        (lambda s: "garbage", "not one this server issued"),
    ],
)
def test_tampered_request_state_is_invalid_params(h: Harness, tamper: Any, words: str) -> None:
    error = error_of(_retry(h, tamper(_round_one(h))))
    assert error["code"] == -32602 and words in error["message"]


def test_expired_request_state_is_invalid_params(h: Harness) -> None:
    state = _round_one(h)
    h.now += 300
    error = error_of(_retry(h, state))
    assert error["code"] == -32602 and "expired" in error["message"]


def test_request_state_is_bound_to_the_arguments(h: Harness) -> None:
    error = error_of(_retry(h, _round_one(h), {"other": 1}))
    assert error["code"] == -32602 and "different request" in error["message"]


def test_request_state_from_another_key_is_refused(make_harness: type[Harness]) -> None:
    other = make_harness(tools=TOOLS, state_key=b"o" * 32)
    h = make_harness(tools=TOOLS)
    assert "integrity" in error_of(_retry(h, _round_one(other)))["message"]


def test_answers_without_request_state_reach_the_handler_without_its_state(h: Harness) -> None:
    # A client may answer before it is asked (the conformance suite does); with no sealed
    # round there is no handler state, and nothing says which request a key answered.
    answer = {"who": {"action": "accept", "content": {"name": "A"}}}
    result = h.call("greet_after_asking", {}, caps=ALL_CAPS, extra={"inputResponses": answer})
    assert result["result"]["content"][0]["text"] == "Hello, A! (None)"


def test_a_wrong_shaped_unsolicited_answer_is_asked_again(h: Harness) -> None:
    answer = {"who": 12345}
    result = h.call("greet_after_asking", {}, caps=ALL_CAPS, extra={"inputResponses": answer})
    assert result["result"]["resultType"] == "input_required"


@pytest.mark.parametrize(
    ("tool", "caps", "needed"),
    [
        ("ask_then_task", TASKS_CAPS, {"elicitation": {}}),
        ("needs_sampling", {"elicitation": {}}, {"sampling": {}}),
        ("needs_roots", {}, {"roots": {}}),
    ],
)
def test_mrtr_asks_only_what_the_client_declared(
    h: Harness, tool: str, caps: dict[str, Any], needed: dict[str, Any]
) -> None:
    error = error_of(h.call(tool, {}, caps=caps))
    assert error["code"] == -32021 and error["data"] == {"requiredCapabilities": needed}


def test_url_elicitation_needs_the_url_capability() -> None:
    assert ClientCapabilities(elicitation={}).has_elicitation("form")
    assert not ClientCapabilities(elicitation={}).has_elicitation("url")
    assert ClientCapabilities(elicitation={"url": {}}).has_elicitation("url")
    assert not ClientCapabilities(elicitation={"url": {}}).has_elicitation("form")


# --- notifications ------------------------------------------------------------------------------


def test_cancelled_notification_cancels_the_in_flight_request(h: Harness) -> None:
    message = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 12, "reason": "user"},
    }
    assert h.send(json.dumps(message).encode()).reply is None
    assert [(c.request_id, c.reason) for c in h.cancelled_requests] == [(12, "user")]


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "tools/call", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}},
        {"jsonrpc": "2.0", "id": 4, "result": {}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "?"}},
    ],
)
def test_notifications_and_responses_get_no_reply(h: Harness, message: dict[str, Any]) -> None:
    assert h.send(json.dumps(message).encode()).reply is None
    assert h.cancelled_requests == []


def test_json_nested_too_deeply_is_refused_not_raised(h: Harness) -> None:
    deep = b"[" * 5000 + b"]" * 5000
    reply = json.loads(
        h.send(b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + deep + b"}").reply or b""
    )
    assert reply["error"]["code"] == -32600 and "nested" in reply["error"]["message"]


@pytest.mark.parametrize(
    ("params", "missing"),
    [
        (ElicitParams(message="go", mode="url"), "url"),
        (ElicitParams(message="go"), "requested_schema"),
    ],
)
def test_elicitation_without_its_mode_field_fails_the_task(
    h: Harness, params: ElicitParams, missing: str
) -> None:
    task_id = start(h)
    h.finish(task_id, InputRequired(requests={"a": ElicitRequest(params=params)}))
    error = h.get(task_id)["result"]["error"]
    assert error["code"] == -32603 and f"without {missing}" in error["message"]


@pytest.mark.parametrize("ending", ["complete", "cancel"])
def test_a_finished_task_drops_its_waiting_message(h: Harness, ending: str) -> None:
    task_id = start(h)
    h.finish(task_id, InputRequired(requests={"a": ask_name()}, status_message="Your name?"))
    if ending == "complete":
        h.finish(task_id, CallToolResult.text("did without"))
    else:
        h.cancel(task_id)
    assert "statusMessage" not in h.get(task_id)["result"]


def test_an_unknown_log_level_in_meta_is_invalid_params(h: Harness) -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"_meta": meta(**{"io.modelcontextprotocol/logLevel": "verbose"})},
    }
    reply = json.loads(h.send(json.dumps(message).encode()).reply or b"")
    assert reply["error"]["code"] == -32602 and "logLevel" in reply["error"]["message"]
