"""The TypeScript SDK's client (`@modelcontextprotocol/client` 2.4.0) against our server over
stdio, with its default settings.

peers/ts_client.mjs (run by the node of tests/interop/npm/install) spawns `mcp-tasks serve
tests/interop/fixture.py --stdio` with the SDK's `StdioClientTransport` and connects with no
`versionNegotiation`: the SDK's default, the 2025 sequence (`initialize` for 2025-11-25), so
the process becomes a legacy session. Each test reads one step of its report; where a step is
also one of the Python SDK's (test_sdk_client.py), the expected value is the same.
"""

from __future__ import annotations

import pytest

from .processes import Steps, ours, peer_script, run_node


@pytest.fixture(scope="module")
def ts_client() -> Steps:
    done = run_node([peer_script("ts_client.mjs"), *ours("--stdio", "--log-level", "warning")])
    assert done.returncode == 0, f"ts_client.mjs exited {done.returncode}\n{done.stderr[-3000:]}"
    return Steps(done.stdout, done.stderr)


def test_its_default_initialize_opens_a_2025_session(ts_client: Steps) -> None:
    assert ts_client.value("initialize") == {"connected": "2025-11-25"}
    assert ts_client.value("connect") == {"protocol_version": "2025-11-25", "server": "jobs"}


def test_it_lists_the_tools(ts_client: Steps) -> None:
    tools = set(ts_client.value("tools"))
    assert {"greet", "slow_compute", "test_error_handling", "test_tool_with_progress"} <= tools


def test_it_calls_a_tool_and_sees_a_tool_error(ts_client: Steps) -> None:
    assert ts_client.value("greet") == {"is_error": False, "text": ["Hello, Ada!"]}
    assert ts_client.value("tool_error") == {
        "is_error": True,
        "text": ["This tool intentionally returns an error for testing"],
    }


def test_a_task_optional_tool_runs_in_place(ts_client: Steps) -> None:
    """A 2025 client without the tasks utility gets the tool's result in place."""
    assert ts_client.value("task_optional_in_place") == {
        "is_error": False,
        "text": ["job done after 0.1s"],
    }


def test_its_elicitation_handler_answers_input_rounds(ts_client: Steps) -> None:
    """Each input round reaches it as our own `elicitation/create` request."""
    assert ts_client.value("input_round") == {"is_error": False, "text": ["Hello, Ada!"]}
    assert ts_client.value("input_rounds_two")["text"] == ["Ada likes blue"]
    assert ts_client.value("prompt_input_round") == ["Use this context: interop"]


def test_it_lists_and_gets_prompts(ts_client: Steps) -> None:
    assert {"test_simple_prompt", "test_prompt_with_arguments"} <= set(ts_client.value("prompts"))
    assert ts_client.value("prompt") == ["Prompt with arguments: arg1='a', arg2='b'"]


def test_it_lists_and_reads_resources(ts_client: Steps) -> None:
    assert ts_client.value("resources") == {
        "resources": ["test://static-binary", "test://static-text"],
        "templates": ["test://template/{id}/data"],
    }
    (text,) = ts_client.value("read_text")
    assert text["text"] == "This is the content of the static text resource."
    (binary,) = ts_client.value("read_binary")
    assert binary["mime_type"] == "image/png" and binary["blob"]
    (templated,) = ts_client.value("read_template")
    assert templated["uri"] == "test://template/42/data" and '"id": "42"' in templated["text"]


def test_it_gets_completions(ts_client: Steps) -> None:
    assert ts_client.value("complete") == ["paris", "park", "party"]


def test_its_progress_handler_sees_every_notification(ts_client: Steps) -> None:
    progress = ts_client.value("progress")
    assert progress["text"] == ["Progress reported"]
    assert progress["progress"] == [
        [0, 100, "step 0"],
        [50, 100, "step 50"],
        [100, 100, "step 100"],
    ]
