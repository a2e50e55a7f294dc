"""The project's everything-client for the official conformance suite's client half.

    conformance client --command "python conformance/client.py" --scenario tools_call

The runner appends the server's URL and says what to do in the environment:
MCP_CONFORMANCE_SCENARIO (the scenario), MCP_CONFORMANCE_PROTOCOL_VERSION (2025-11-25: an
`initialize` session; 2026-07-28: stateless), MCP_CONFORMANCE_CONTEXT (JSON, where a
scenario gives credentials or the arguments to send).

Everything goes through the library's `Client` and `mcp_tasks.oauth.OAuth`: what a
scenario checks is what a user of the library gets. The mock authorization servers
authorize without a user, so the user agent is `HeadlessAgent` (it follows the redirect
instead of opening a browser). Exit 0 when the scenario's steps ran, 1 with the reason on
stderr when the library refused or failed (some scenarios expect exactly that).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio

from mcp_tasks.client import Client, connect_http
from mcp_tasks.core import wire as w
from mcp_tasks.oauth import HeadlessAgent, OAuth

CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
REDIRECT_URI = "http://localhost:3000/callback"
DEADLINE_SECONDS = 60.0

Steps = Callable[[Client, dict[str, Any]], Awaitable[None]]


def _oauth(url: str, scenario: str, context: dict[str, Any]) -> OAuth:
    """How the client logs in for this scenario: the credentials a scenario gives, else a
    Client ID Metadata Document or dynamic registration."""
    agent = HeadlessAgent(REDIRECT_URI)
    if scenario == "auth/client-credentials-jwt":
        return OAuth(
            url,
            grant="client_credentials",
            client_id=context["client_id"],
            private_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "ES256"),
        )
    if scenario == "auth/client-credentials-basic":
        return OAuth(
            url,
            grant="client_credentials",
            client_id=context["client_id"],
            client_secret=context["client_secret"],
        )
    if "client_id" in context and "client_secret" in context:
        return OAuth(
            url,
            user_agent=agent,
            client_id=context["client_id"],
            client_secret=context["client_secret"],
        )
    return OAuth(url, user_agent=agent, client_metadata_url=CLIENT_METADATA_URL)


def _arguments_for(tool: w.Tool) -> dict[str, Any]:
    """Arguments that fit a tool's input schema: each required property's default, else a
    plain value of its type."""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    properties = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for name in schema.get("required") or []:
        spec = properties.get(name) or {}
        if "default" in spec:
            arguments[name] = spec["default"]
            continue
        kind = spec.get("type")
        arguments[name] = {
            "integer": 1,
            "number": 1,
            "boolean": True,
            "array": [],
            "object": {},
        }.get(kind if isinstance(kind, str) else "string", "test")
    return arguments


async def call_every_tool(client: Client, context: dict[str, Any]) -> None:
    """List the tools and call each one with arguments its schema allows."""
    for tool in await client.list_tools():
        await client.call_tool(tool.name, _arguments_for(tool))


async def add_numbers(client: Client, context: dict[str, Any]) -> None:
    tools = {tool.name for tool in await client.list_tools()}
    if "add_numbers" in tools:
        await client.call_tool("add_numbers", {"a": 5, "b": 3})


async def list_only(client: Client, context: dict[str, Any]) -> None:
    await client.list_tools()


async def named_calls(client: Client, context: dict[str, Any]) -> None:
    """The calls the scenario names in its context (with the values to send)."""
    await client.list_tools()
    for call in context.get("toolCalls") or []:
        await client.call_tool(call["name"], call.get("arguments") or {})


async def standard_headers(client: Client, context: dict[str, Any]) -> None:
    """Every method whose request carries `Mcp-Method` and `Mcp-Name`."""
    await call_every_tool(client, context)
    for resource in await client.list_resources():
        await client.read_resource(resource.uri)
    for prompt in await client.list_prompts():
        await client.get_prompt(prompt.name, {})


async def valid_tools_only(client: Client, context: dict[str, Any]) -> None:
    """The library leaves out tools with bad `x-mcp-header` marks; call what is left."""
    for tool in await client.list_tools():
        await client.call_tool(tool.name, _arguments_for(tool))


async def request_state(client: Client, context: dict[str, Any]) -> None:
    """The SEP-2322 tools, with a call of an unrelated tool between a call and its retry:
    the library echoes `requestState` as it came (an answer to each question)."""
    names = [tool.name for tool in await client.list_tools()]
    for name in ("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_no_result_type"):
        if name in names:
            await client.call_tool(name, {})
    if "test_mrtr_unrelated" in names:
        await client.call_tool("test_mrtr_unrelated", {})


async def echo_schema(client: Client, context: dict[str, Any]) -> None:
    """Echo the focal tool's input schema back, as listed (nothing of it dropped)."""
    tools = {tool.name: tool for tool in await client.list_tools()}
    focal = tools.get("json_schema_2020_12_tool")
    if focal is not None and "json_schema_echo" in tools:
        await client.call_tool("json_schema_echo", {"schema": focal.input_schema})


STEPS: dict[str, Steps] = {
    "tools_call": add_numbers,
    "initialize": list_only,
    "json-schema-ref-no-deref": list_only,
    "http-custom-headers": named_calls,
    "http-standard-headers": standard_headers,
    "http-invalid-tool-headers": valid_tools_only,
    "sep-2322-client-request-state": request_state,
    "json-schema-2020-12-preservation": echo_schema,
}


async def _accept_with_defaults(request: w.ElicitParams) -> w.ElicitResult:
    """Accept every question, each field it leaves out filled from its schema's default."""
    schema = request.requested_schema if isinstance(request.requested_schema, dict) else {}
    properties = schema.get("properties")
    content = {
        name: spec["default"]
        for name, spec in (properties or {}).items()
        if isinstance(spec, dict) and "default" in spec
    }
    return w.ElicitResult(action="accept", content=content)


async def run(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2026-07-28")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    steps = STEPS.get(scenario, call_every_tool)
    auth = _oauth(url, scenario, context) if scenario.startswith("auth/") else None
    with anyio.fail_after(DEADLINE_SECONDS):  # (never outlive the runner, whatever happens)
        await _steps_run(url, version, auth, steps, context)


async def _steps_run(
    url: str, version: str, auth: OAuth | None, steps: Steps, context: dict[str, Any]
) -> None:
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            connect_http(
                url,
                auth=auth,
                era="legacy" if version.startswith("2025") else None,
                on_elicit=_accept_with_defaults,
            )
        )
        await steps(client, context)


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: client.py SERVER_URL", file=sys.stderr)
        return 2
    try:
        anyio.run(run, sys.argv[-1])
    except Exception as error:  # (every failure is the scenario's verdict, said on stderr)
        print(f"client.py: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
