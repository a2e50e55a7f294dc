"""subscriptions/listen in the core: what a listen request may ask, what the server agrees to,
and each message of the stream, checked against the official schemas."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_tasks.core import (
    TASKS_EXTENSION,
    CallToolResult,
    ErrorObject,
    GetPromptResult,
    InputRequired,
    Listen,
    PromptCall,
    PromptOutcome,
    PromptSpec,
    RequestId,
    ResourceContents,
    ResourceOutcome,
    ResourceRead,
    ResourceSpec,
    ResourceTemplateSpec,
    ServerOptions,
    Step,
    Subscription,
)
from mcp_tasks.core._listen import MAX_SUBSCRIBED_ITEMS

from .harness import (
    ALL_CAPS,
    CORE,
    TASKS,
    Harness,
    check_any_reply,
    check_schema,
    checked_harnesses,
    meta,
)
from .tools import TOOLS, ask_name

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
NO_CAPS: dict[str, Any] = {}


def no_messages(call: PromptCall) -> PromptOutcome:
    return GetPromptResult(messages=[])


def no_contents(read: ResourceRead) -> ResourceOutcome:
    return [ResourceContents(uri=read.uri, text="")]


README = ResourceSpec(uri="file:///readme.md", name="readme")
LOGS = ResourceTemplateSpec(uri_template="file:///logs/{day}.txt", name="logs")
CATALOG: dict[str, Any] = {
    "prompts": {"hello": (PromptSpec(name="hello"), no_messages)},
    "resources": {README.uri: (README, no_contents), LOGS.uri_template: (LOGS, no_contents)},
}


@pytest.fixture
def make_harness() -> Iterator[type[Harness]]:
    yield from checked_harnesses()


@pytest.fixture
def h(make_harness: type[Harness]) -> Harness:
    return make_harness(tools=TOOLS, **CATALOG)


@pytest.fixture
def bare(make_harness: type[Harness]) -> Harness:
    """A server with tools only: no prompts, no resources."""
    return make_harness(tools=TOOLS)


def _listen_message(
    notifications: Any, caps: dict[str, Any] | None, request_id: RequestId
) -> bytes:
    params = {"notifications": notifications, "_meta": meta(caps)}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen"}
    return json.dumps({**message, "params": params}).encode()


def listen(
    h: Harness,
    notifications: dict[str, Any],
    caps: dict[str, Any] | None = None,
    request_id: RequestId = 1,
) -> Subscription:
    """Open a stream; the core answers nothing yet, it asks the shell to `Listen`."""
    before = len(h.subscriptions)
    assert h.send(_listen_message(notifications, caps, request_id)).reply is None
    assert len(h.subscriptions) == before + 1
    return h.subscriptions[-1]


def refused(h: Harness, notifications: Any, caps: dict[str, Any] | None = None) -> dict[str, Any]:
    exchange = h.send(_listen_message(notifications, caps, 9))
    assert exchange.reply is not None and h.subscriptions == []
    assert exchange.http_status == 400
    error: dict[str, Any] = json.loads(exchange.reply)["error"]
    return error


def agreed(h: Harness, notifications: dict[str, Any], caps: dict[str, Any] | None = None) -> Any:
    """What the acknowledgement says the stream will carry."""
    ack = json.loads(h.core.subscription_acknowledged(listen(h, notifications, caps)))
    check_schema(CORE, "SubscriptionsAcknowledgedNotification", ack)
    return ack["params"]["notifications"]


def start_task(h: Harness) -> str:
    result = h.call("slow", {"label": "x"}, caps=ALL_CAPS)["result"]
    assert result["resultType"] == "task"
    task_id: str = result["taskId"]
    return task_id


EVERYTHING: dict[str, Any] = {
    "toolsListChanged": True,
    "promptsListChanged": True,
    "resourcesListChanged": True,
}


# --- what a listen request may ask ------------------------------------------------------------


def test_listen_opens_a_stream_and_replies_nothing_yet(h: Harness) -> None:
    effect = h.core.receive(_listen_message(EVERYTHING, None, 4), h.now)
    assert not isinstance(effect, Step)  # no reply yet: a need
    assert type(effect).__name__ == "Listen"


def test_listen_is_served_by_a_server_with_tools_only(bare: Harness) -> None:
    assert agreed(bare, {"toolsListChanged": True}) == {"toolsListChanged": True}


@pytest.mark.parametrize("caps", [NO_CAPS, {"elicitation": {}}, {"extensions": {}}])
def test_task_ids_need_the_tasks_extension(h: Harness, caps: dict[str, Any]) -> None:
    error = refused(h, {"taskIds": ["tsk-0001"]}, caps)
    assert error["code"] == -32021 and "taskIds" in error["message"]
    assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


def test_listening_without_task_ids_needs_no_extension(h: Harness) -> None:
    assert agreed(h, EVERYTHING, NO_CAPS) == EVERYTHING


@pytest.mark.parametrize("field", ["taskIds", "resourceSubscriptions"])
def test_more_items_than_the_limit_are_invalid_params(h: Harness, field: str) -> None:
    too_many = [README.uri] * (MAX_SUBSCRIBED_ITEMS + 1)  # counted as sent, duplicates too
    error = refused(h, {field: too_many})
    assert error["code"] == -32602
    assert f"params.notifications.{field}" in error["message"]
    assert f"{MAX_SUBSCRIBED_ITEMS + 1} items, at most {MAX_SUBSCRIBED_ITEMS}" in error["message"]


def test_the_limit_itself_is_allowed(h: Harness) -> None:
    task_ids = [f"tsk-{n}" for n in range(MAX_SUBSCRIBED_ITEMS)]
    uris = [f"file:///logs/{n}.txt" for n in range(MAX_SUBSCRIBED_ITEMS)]
    wanted = agreed(h, {"taskIds": task_ids, "resourceSubscriptions": uris})
    assert wanted == {"taskIds": task_ids, "resourceSubscriptions": uris}


@pytest.mark.parametrize(
    ("notifications", "words"),
    [
        (None, "params.notifications"),
        ("all", "params.notifications"),
        ({"toolsListChanged": "yes"}, "params.notifications.toolsListChanged"),
        ({"taskIds": "tsk-0001"}, "params.notifications.taskIds"),
        ({"resourceSubscriptions": [1]}, "params.notifications.resourceSubscriptions"),
    ],
)
def test_a_malformed_filter_is_invalid_params(h: Harness, notifications: Any, words: str) -> None:
    error = refused(h, notifications)
    assert error["code"] == -32602 and words in error["message"]


def test_a_listen_without_notifications_is_invalid_params(h: Harness) -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "subscriptions/listen",
        "params": {"_meta": meta()},
    }
    reply = json.loads(h.send(json.dumps(message).encode()).reply or b"")
    assert reply["error"]["code"] == -32602 and "notifications" in reply["error"]["message"]


# --- what the server agrees to --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "wanted", "expect"),
    [
        ("full", {}, {}),
        ("full", EVERYTHING, EVERYTHING),
        ("bare", EVERYTHING, {"toolsListChanged": True}),
        ("bare", {"promptsListChanged": True}, {}),
        (
            "full",
            {"toolsListChanged": False, "promptsListChanged": False, "resourcesListChanged": True},
            {"resourcesListChanged": True},
        ),
        (
            "full",
            {
                "resourceSubscriptions": [
                    "file:///logs/b.txt",
                    README.uri,
                    "file:///unknown",
                    "file:///logs/a/b.txt",
                    "file:///logs/b.txt",
                ]
            },
            {"resourceSubscriptions": ["file:///logs/b.txt", README.uri]},
        ),
        ("full", {"resourceSubscriptions": ["file:///unknown"]}, {}),
        ("full", {"resourceSubscriptions": []}, {}),
        ("bare", {"resourceSubscriptions": [README.uri]}, {}),
        # Task ids are not looked up (the core has no store): only duplicates go.
        ("full", {"taskIds": ["b", "a", "b", "zzz"]}, {"taskIds": ["b", "a", "zzz"]}),
        ("full", {"taskIds": []}, {}),
    ],
)
def test_the_agreed_filter_keeps_only_what_the_server_can_send(
    h: Harness, bare: Harness, server: str, wanted: dict[str, Any], expect: dict[str, Any]
) -> None:
    notifications = agreed(h if server == "full" else bare, wanted)
    assert notifications == expect
    check_schema(TASKS, "TaskSubscriptionAcknowledgedNotifications", notifications)


def test_the_subscription_carries_the_agreed_filter_and_the_request(h: Harness) -> None:
    sub = listen(h, {"toolsListChanged": True, "taskIds": ["t"]}, request_id="sub-7")
    assert sub.request_id == "sub-7"
    assert sub.notifications.tools_list_changed is True
    assert sub.notifications.task_ids == ["t"]
    assert sub.meta.client_capabilities.has_tasks


# --- the messages of the stream ------------------------------------------------------------


@pytest.mark.parametrize("request_id", [1, "sub-a"])
def test_the_acknowledgement_names_the_subscription(h: Harness, request_id: RequestId) -> None:
    sub = listen(h, EVERYTHING, request_id=request_id)
    ack = json.loads(h.core.subscription_acknowledged(sub))
    check_schema(CORE, "SubscriptionsAcknowledgedNotification", ack)
    assert ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {SUBSCRIPTION_ID: request_id}, "notifications": EVERYTHING},
    }


_LIST_CHANGED = {
    "tools": ("toolsListChanged", "ToolListChangedNotification"),
    "prompts": ("promptsListChanged", "PromptListChangedNotification"),
    "resources": ("resourcesListChanged", "ResourceListChangedNotification"),
}


@pytest.mark.parametrize("kind", list(_LIST_CHANGED))
def test_list_changed_goes_only_to_a_stream_that_asked(h: Harness, kind: str) -> None:
    flag, definition = _LIST_CHANGED[kind]
    asked = listen(h, {flag: True}, request_id=5)
    others = listen(h, {f: True for f, _ in _LIST_CHANGED.values() if f != flag}, request_id=6)
    message = h.core.list_changed(asked, kind)
    assert message is not None
    decoded = json.loads(message)
    check_schema(CORE, definition, decoded)
    assert decoded == {
        "jsonrpc": "2.0",
        "method": f"notifications/{kind}/list_changed",
        "params": {"_meta": {SUBSCRIPTION_ID: 5}},
    }
    assert h.core.list_changed(others, kind) is None


@pytest.mark.parametrize("kind", ["prompts", "resources"])
def test_list_changed_of_a_kind_the_server_lacks_is_never_sent(bare: Harness, kind: str) -> None:
    sub = listen(bare, EVERYTHING)
    assert bare.core.list_changed(sub, kind) is None
    assert bare.core.list_changed(sub, "tools") is not None


@pytest.mark.parametrize("uri", [README.uri, "file:///logs/2026-08-01.txt"])
def test_resource_updated_goes_only_for_a_subscribed_uri(h: Harness, uri: str) -> None:
    sub = listen(h, {"resourceSubscriptions": [uri]}, request_id="r")
    message = h.core.resource_updated(sub, uri)
    assert message is not None
    decoded = json.loads(message)
    check_schema(CORE, "ResourceUpdatedNotification", decoded)
    assert decoded == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"_meta": {SUBSCRIPTION_ID: "r"}, "uri": uri},
    }
    # Another uri the same template fits was not subscribed to.
    assert h.core.resource_updated(sub, "file:///logs/2026-08-02.txt") is None


def test_resource_updated_for_a_stream_without_subscriptions_is_none(h: Harness) -> None:
    assert h.core.resource_updated(listen(h, EVERYTHING), README.uri) is None


def _to_status(h: Harness, task_id: str, status: str) -> None:
    if status == "input_required":
        h.finish(task_id, InputRequired(requests={"a": ask_name()}, status_message="Name?"))
    elif status == "completed":
        h.finish(task_id, CallToolResult.text("done"))
    elif status == "failed":
        h.finish(task_id, ErrorObject(code=-32603, message="crashed"))
    elif status == "cancelled":
        h.cancel(task_id)


@pytest.mark.parametrize(
    "status",
    [
        "working",
        "input_required",
        "completed",  # its stored result is raw JSON: once raised TypeError here
        "failed",
        "cancelled",
    ],
)
def test_task_changed_shows_the_task_as_tasks_get_does(h: Harness, status: str) -> None:
    task_id = start_task(h)
    h.now += 1.5
    _to_status(h, task_id, status)
    sub = listen(h, {"taskIds": [task_id]}, request_id="tasks-1")
    message = h.core.task_changed(sub, h.record(task_id))
    assert message is not None
    decoded = json.loads(message)
    check_schema(TASKS, "TaskStatusNotification", decoded)
    assert decoded["method"] == "notifications/tasks"
    params = decoded["params"]
    assert params["_meta"] == {SUBSCRIPTION_ID: "tasks-1"}
    shown = h.get(task_id)["result"]
    assert shown["status"] == status
    del shown["resultType"], shown["_meta"]
    del params["_meta"]
    assert params == shown


def test_task_changed_goes_only_for_a_subscribed_task(h: Harness) -> None:
    watched, other = start_task(h), start_task(h)
    sub = listen(h, {"taskIds": [watched]})
    assert h.core.task_changed(sub, h.record(other)) is None
    assert h.core.task_changed(listen(h, EVERYTHING), h.record(watched)) is None


@pytest.mark.parametrize("request_id", [3, "sub-b"])
def test_the_ending_response_closes_the_stream_by_its_id(h: Harness, request_id: RequestId) -> None:
    sub = listen(h, EVERYTHING, request_id=request_id)
    reply = h.core.subscription_ended(sub)
    assert reply.request_id == request_id and reply.http_status == 200
    decoded = json.loads(reply.body)
    check_schema(CORE, "SubscriptionsListenResultResponse", decoded)
    assert decoded == {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {
            "resultType": "complete",
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "0.1.0"},
                SUBSCRIPTION_ID: request_id,
            },
        },
    }


# --- how many streams, and how large ------------------------------------------------------------


def _listen_need(h: Harness, request_id: RequestId = 5) -> Listen:
    need = h.core.receive(_listen_message({"taskIds": ["t"]}, None, request_id), h.now, None, "ann")
    assert isinstance(need, Listen)
    return need


def test_listen_carries_the_stream_limits_for_the_shell_to_count(
    make_harness: type[Harness],
) -> None:
    default = _listen_need(make_harness(tools=TOOLS))
    assert (default.max_streams, default.max_streams_per_principal) == (512, 64)
    options = ServerOptions(max_listen_streams=7, max_listen_streams_per_principal=None)
    need = _listen_need(make_harness(tools=TOOLS, options=options))
    assert (need.max_streams, need.max_streams_per_principal) == (7, None)
    assert need.subscription.principal == "ann"


@pytest.mark.parametrize(
    ("per_principal", "status", "words"),
    [
        (False, 503, "Too many listen streams: the server carries its limit of 7; try again later"),
        (True, 429, "Too many listen streams for this caller: at most 2 open at once"),
    ],
)
def test_a_stream_past_a_limit_is_refused_and_may_be_tried_again(
    make_harness: type[Harness], per_principal: bool, status: int, words: str
) -> None:
    options = ServerOptions(max_listen_streams=7, max_listen_streams_per_principal=2)
    h = make_harness(tools=TOOLS, options=options)
    reply = h.core.listen_refused(_listen_need(h, "L-9"), per_principal=per_principal)
    assert reply.request_id == "L-9"
    assert (reply.http_status, reply.retry_after_seconds) == (status, 5)
    check_any_reply("subscriptions/listen", reply.body)
    error = json.loads(reply.body)["error"]
    assert error["code"] == -32603 and words in error["message"]
    assert error["data"] == {"retryAfterMs": 5000}


@pytest.mark.parametrize("field", ["taskIds", "resourceSubscriptions"])
def test_the_item_limit_is_an_option(make_harness: type[Harness], field: str) -> None:
    h = make_harness(tools=TOOLS, options=ServerOptions(max_listen_items=3), **CATALOG)
    items = [f"file:///logs/{n}.txt" for n in range(4)]
    error = refused(h, {field: items})
    assert error["code"] == -32602
    assert f"params.notifications.{field} names 4 items, at most 3" in error["message"]
    assert agreed(h, {field: items[:3]}) == {field: items[:3]}


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"max_listen_streams": -1}, "max_listen_streams"),
        ({"max_listen_items": -1}, "max_listen_items"),
        ({"max_listen_streams_per_principal": 0}, "max_listen_streams_per_principal"),
    ],
)
def test_listen_limits_must_make_sense(options: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ServerOptions(**options)
