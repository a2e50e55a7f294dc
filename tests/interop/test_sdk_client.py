"""The official SDK's client (`mcp` 2.3.0) against our server, over HTTP and stdio.

peers/sdk_client.py runs every step once per transport, in the peers' own python, against
`mcp-tasks serve tests/interop/fixture.py`; each test here reads one step of its report.
"""

from __future__ import annotations

import pytest

from .processes import Steps, ours, run_peer, serving_ours


@pytest.fixture(scope="module", params=["http", "stdio"])
def sdk_client(request: pytest.FixtureRequest) -> Steps:
    if request.param == "http":
        with serving_ours() as url:
            return run_peer("sdk_client.py", "http", url)
    return run_peer("sdk_client.py", "stdio", *ours("--stdio", "--log-level", "warning"))


def is_http(steps: Steps) -> bool:
    return bool(steps.value("header")["statuses"])


def test_it_connects_by_server_discover(sdk_client: Steps) -> None:
    assert sdk_client.value("connect") == {"protocol_version": "2026-07-28", "server": "jobs"}


def test_it_lists_the_tools(sdk_client: Steps) -> None:
    tools = set(sdk_client.value("tools"))
    assert {"greet", "slow_compute", "test_custom_header_tool", "test_tool_with_progress"} <= tools


def test_it_calls_a_tool_and_sees_a_tool_error(sdk_client: Steps) -> None:
    assert sdk_client.value("greet") == {"is_error": False, "text": ["Hello, Ada!"]}
    error = sdk_client.value("tool_error")
    assert error == {
        "is_error": True,
        "text": ["This tool intentionally returns an error for testing"],
    }


def test_a_task_optional_tool_runs_in_place_for_a_client_without_tasks(sdk_client: Steps) -> None:
    """The plain SDK client declares no tasks extension: no task handle it cannot read."""
    assert sdk_client.value("task_optional_in_place") == {
        "is_error": False,
        "text": ["job done after 0.1s"],
    }


def test_it_answers_input_rounds_of_tools_and_prompts(sdk_client: Steps) -> None:
    assert sdk_client.value("input_round")["text"] == ["Hello, Ada!"]
    assert sdk_client.value("input_rounds_two")["text"] == ["Ada likes blue"]
    assert sdk_client.value("prompt_input_round") == ["Use this context: interop"]


def test_it_mirrors_an_x_mcp_header_argument_which_we_accept(sdk_client: Steps) -> None:
    """Over HTTP the SDK sends `Mcp-Param-Region` (base64 form for a non-ASCII value) and we
    take it at the first try; over stdio there are no headers to send."""
    plain, encoded = sdk_client.value("header"), sdk_client.value("header_base64")
    assert plain["text"] == ["region: eu-west"] and not plain["is_error"]
    assert encoded["text"] == ["region: Zürich"] and not encoded["is_error"]
    if is_http(sdk_client):
        assert plain["statuses"] == [200]
        assert plain["param_headers"] == [{"mcp-param-region": "eu-west"}]
        assert encoded["statuses"] == [200]
        assert encoded["param_headers"] == [{"mcp-param-region": "=?base64?WsO8cmljaA==?="}]


def test_it_lists_and_gets_prompts(sdk_client: Steps) -> None:
    assert {"test_simple_prompt", "test_prompt_with_arguments"} <= set(sdk_client.value("prompts"))
    assert sdk_client.value("prompt") == ["Prompt with arguments: arg1='a', arg2='b'"]


def test_it_lists_and_reads_resources(sdk_client: Steps) -> None:
    assert sdk_client.value("resources") == {
        "resources": ["test://static-binary", "test://static-text", "test://watched-resource"],
        "templates": ["test://template/{id}/data"],
    }
    (text,) = sdk_client.value("read_text")
    assert text["text"] == "This is the content of the static text resource."
    (binary,) = sdk_client.value("read_binary")
    assert binary["mime_type"] == "image/png" and binary["blob"]
    (templated,) = sdk_client.value("read_template")
    assert templated["uri"] == "test://template/42/data" and '"id": "42"' in templated["text"]


def test_it_gets_completions(sdk_client: Steps) -> None:
    assert sdk_client.value("complete") == ["paris", "park", "party"]


def test_it_receives_progress(sdk_client: Steps) -> None:
    progress = sdk_client.value("progress")
    assert progress["text"] == ["Progress reported"]
    assert progress["progress"] == [
        [0, 100, "step 0"],
        [50, 100, "step 50"],
        [100, 100, "step 100"],
    ]


def test_it_listens_for_list_changes(sdk_client: Steps) -> None:
    assert sdk_client.value("listen") == {
        "honored_tools": True,
        "event": "ToolsListChanged",
        "tools_changed": True,
    }


def test_an_old_era_initialize_gets_a_session(sdk_client: Steps) -> None:
    """`Client(mode="legacy")` sends `initialize` for 2025-11-25: over stdio the process
    becomes its session, over HTTP it gets one named by `Mcp-Session-Id`."""
    assert sdk_client.value("legacy_initialize") == {"connected": "2025-11-25"}
    if is_http(sdk_client):
        (http,) = [line["legacy_http"] for line in sdk_client.others if "legacy_http" in line]
        assert http["statuses"][0] == 200


LEGACY_SAME_AS_MODERN = [
    "tools",
    "greet",
    "tool_error",
    "task_optional_in_place",
    "input_round",
    "input_rounds_two",
    "prompts",
    "prompt",
    "prompt_input_round",
    "resources",
    "read_text",
    "read_binary",
    "read_template",
    "complete",
    "progress",
]
"""What the SDK's client sees in a 2025-11-25 session, step for step as in a 2026-07-28 one:
the same tools, prompts and resources; input rounds asked as the server's own requests."""


@pytest.mark.parametrize("name", LEGACY_SAME_AS_MODERN)
def test_a_legacy_session_sees_what_a_modern_client_sees(sdk_client: Steps, name: str) -> None:
    connected = {"protocol_version": "2025-11-25", "server": "jobs"}
    assert sdk_client.value("legacy_connect") == connected
    assert sdk_client.value("legacy_" + name) == sdk_client.value(name)


def test_a_legacy_session_is_told_of_a_resource_it_subscribed_to(sdk_client: Steps) -> None:
    """`resources/subscribe`, then the resource changes: `notifications/resources/updated`
    reaches its message handler (over stdio on stdout, over HTTP on its GET stream)."""
    assert sdk_client.value("legacy_subscription") == {"updated": ["test://static-text"]}
