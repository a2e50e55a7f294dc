"""The TypeScript SDK's client (`@modelcontextprotocol/client` 2.4.0) against our server over
stdio and over Streamable HTTP, with its default settings.

peers/ts_client.mjs (run by the node of tests/interop/npm/install) spawns `mcp-tasks serve
tests/interop/fixture.py --stdio` with the SDK's `StdioClientTransport` and connects with no
`versionNegotiation`: the SDK's default, the 2025 sequence (`initialize` for 2025-11-25), so
the process becomes a legacy session. Each test reads one step of its report; where a step is
also one of the Python SDK's (test_sdk_client.py), the expected value is the same.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .processes import Steps, ours, peer_script, run_node, serving_ours


@pytest.fixture(scope="module", params=["stdio", "http"])
def ts_client(request: pytest.FixtureRequest) -> Iterator[Steps]:
    """Its report over stdio (it spawns us), or over Streamable HTTP (a 2025-11-25 session
    on our HTTP endpoint: `Mcp-Session-Id`, its own GET stream, questions on POST streams)."""
    if request.param == "stdio":
        done = run_node([peer_script("ts_client.mjs"), *ours("--stdio", "--log-level", "warning")])
    else:
        with serving_ours() as url:
            done = run_node([peer_script("ts_client.mjs"), "--url", url])
    assert done.returncode == 0, f"ts_client.mjs exited {done.returncode}\n{done.stderr[-3000:]}"
    yield Steps(done.stdout, done.stderr)


def test_its_default_initialize_opens_a_2025_session(ts_client: Steps) -> None:
    assert ts_client.value("initialize") == {"connected": "2025-11-25"}
    assert ts_client.value("connect") == {"protocol_version": "2025-11-25", "server": "jobs"}


def test_it_lists_the_tools_and_prompts(ts_client: Steps) -> None:
    tools = set(ts_client.value("tools"))
    assert {"greet", "slow_compute", "test_error_handling", "test_tool_with_progress"} <= tools
    assert {"test_simple_prompt", "test_prompt_with_arguments"} <= set(ts_client.value("prompts"))


SAME_AS_THE_PYTHON_SDK = {
    "greet": {"is_error": False, "text": ["Hello, Ada!"]},
    "tool_error": {
        "is_error": True,
        "text": ["This tool intentionally returns an error for testing"],
    },
    # a 2025 client without the tasks utility: the tool's result in place, no task handle
    "task_optional_in_place": {"is_error": False, "text": ["job done after 0.1s"]},
    # input rounds reach its elicitation handler as our own `elicitation/create` requests
    "input_round": {"is_error": False, "text": ["Hello, Ada!"]},
    "input_rounds_two": {"is_error": False, "text": ["Ada likes blue"]},
    "prompt_input_round": ["Use this context: interop"],
    "prompt": ["Prompt with arguments: arg1='a', arg2='b'"],
    "resources": {
        "resources": ["test://static-binary", "test://static-text", "test://watched-resource"],
        "templates": ["test://template/{id}/data"],
    },
    "read_text": [
        {
            "uri": "test://static-text",
            "mime_type": "text/plain",
            "text": "This is the content of the static text resource.",
            "blob": False,
        }
    ],
    "read_binary": [
        {"uri": "test://static-binary", "mime_type": "image/png", "text": None, "blob": True}
    ],
    "read_template": [
        {
            "uri": "test://template/42/data",
            "mime_type": "application/json",
            "text": '{"id": "42", "templateTest": true, "data": "Data for ID: 42"}',
            "blob": False,
        }
    ],
    "complete": ["paris", "park", "party"],
    # its onprogress handler sees every notification
    "progress": {
        "text": ["Progress reported"],
        "progress": [[0, 100, "step 0"], [50, 100, "step 50"], [100, 100, "step 100"]],
    },
}
"""What the TS client sees, step by step, where test_sdk_client.py expects the same of the
Python SDK's client."""


@pytest.mark.parametrize("name", SAME_AS_THE_PYTHON_SDK)
def test_it_sees_what_the_python_sdk_client_sees(ts_client: Steps, name: str) -> None:
    assert ts_client.value(name) == SAME_AS_THE_PYTHON_SDK[name]
