"""The docs say what the code does: the state diagram in docs/core.md is the table's own,
and its async shell serves a real session."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import msgspec

from mcp_tasks.core import (
    PROTOCOL_VERSION,
    START_TASK,
    TASKS_EXTENSION,
    TRANSITIONS,
    CallToolResult,
    ElicitParams,
    ElicitRequest,
    Implementation,
    InputRequired,
    ServerCore,
    ToolCall,
    ToolOutcome,
    ToolSpec,
    mermaid_diagram,
)

DOCS = Path(__file__).parent.parent / "docs"


def test_core_docs_diagram_is_generated_from_the_table() -> None:
    text = (DOCS / "core.md").read_text()
    block = text.split("<!-- state-diagram:start -->")[1].split("<!-- state-diagram:end -->")[0]
    assert block.strip() == f"```mermaid\n{mermaid_diagram()}```"


def test_core_docs_table_lists_every_event() -> None:
    text = (DOCS / "core.md").read_text()
    for event, sources, dest in TRANSITIONS:
        froms = ", ".join(f"`{s.value}`" for s in sources)
        assert f"| `{event.value}` | {froms} | `{dest.value}` |" in text


# --- the async shell of docs/core.md, run on asyncio ----------------------------------------


class DeployArgs(msgspec.Struct):
    env: str


async def deploy(call: ToolCall, args: DeployArgs | None) -> ToolOutcome:
    """Asks before it starts a task, and again inside it."""
    assert isinstance(args, DeployArgs), "the core decoded the arguments"
    if "go" not in call.input_responses:
        return InputRequired(requests={"go": _ask(f"Deploy to {args.env}?")}, state="s1")
    if not call.in_task:
        assert call.handler_state == "s1"
        return START_TASK
    if "approve" not in call.input_responses:
        return InputRequired(requests={"approve": _ask("Approve?")}, status_message="waiting")
    return CallToolResult.text(f"deployed to {args.env}")


def _ask(message: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    return ElicitRequest(params=ElicitParams(message=message, requested_schema=schema))


def _message(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}},
            "extensions": {TASKS_EXTENSION: {}},
        },
    }
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": meta},
    }
    return json.dumps(body).encode()


def _async_shell_class() -> Any:
    text = (DOCS / "core.md").read_text()
    block = text.split("<!-- async-shell:start -->")[1].split("<!-- async-shell:end -->")[0]
    code = block.strip().removeprefix("```python").removesuffix("```")
    assert 40 <= len(code.strip().splitlines()) <= 70, "about sixty lines"
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/core.md", "exec"), namespace)
    return namespace["AsyncShell"]


def test_the_async_shell_of_the_core_docs_serves_tools_tasks_and_input_rounds() -> None:
    core = ServerCore(
        info=Implementation(name="docs", version="1"),
        new_task_id=lambda: "tsk-1",
        state_key=b"k" * 32,
    )
    spec = ToolSpec(name="deploy", task_support="optional", arguments_type=DeployArgs)
    core.add_tool(spec, deploy)
    shell = _async_shell_class()(core)
    accept = {"action": "accept", "content": {"ok": True}}

    async def session() -> None:
        async def ask(request_id: int, method: str, params: dict[str, Any]) -> Any:
            reply = await shell.handle(_message(request_id, method, params))
            return json.loads(reply)

        bad = await ask(1, "tools/call", {"name": "deploy", "arguments": {"env": 5}})
        assert bad["error"]["code"] == -32602 and "arguments.env" in bad["error"]["message"]
        first = await ask(2, "tools/call", {"name": "deploy", "arguments": {"env": "prod"}})
        assert first["result"]["resultType"] == "input_required"
        retry = {
            "name": "deploy",
            "arguments": {"env": "prod"},
            "inputResponses": {"go": accept},
            "requestState": first["result"]["requestState"],
        }
        handle = (await ask(3, "tools/call", retry))["result"]
        assert handle["resultType"] == "task" and handle["taskId"] == "tsk-1"
        await asyncio.wait_for(shell.running["tsk-1"], 5)
        waiting = (await ask(4, "tasks/get", {"taskId": "tsk-1"}))["result"]
        assert waiting["status"] == "input_required" and set(waiting["inputRequests"]) == {
            "approve"
        }
        answered = {"taskId": "tsk-1", "inputResponses": {"approve": accept}}
        assert "error" not in await ask(5, "tasks/update", answered)
        await asyncio.wait_for(shell.running["tsk-1"], 5)
        done = (await ask(6, "tasks/get", {"taskId": "tsk-1"}))["result"]
        assert done["status"] == "completed"
        assert done["result"]["content"] == [{"type": "text", "text": "deployed to prod"}]

    asyncio.run(session())


def test_the_single_use_snippet_of_the_security_docs_registers_such_a_tool() -> None:
    text = (DOCS / "security.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "single_use" in b)
    namespace: dict[str, Any] = {"__name__": "security_snippet"}
    exec(compile(code, "docs/security.md", "exec"), namespace)
    spec = namespace["server"].core.catalog.tools["delete"]
    assert spec.single_use_request_state


def test_every_link_in_the_docs_points_at_a_file_of_the_repository() -> None:
    """Relative links in README.md and docs/ name files that exist here (issue 16, point 6:
    a page pointed at notes that are not in the repository). The project has no public
    address yet, so README.md links relatively too (issue 32, point 6; pyproject.toml says
    what changes once it has one), and nothing links to a made-up address."""
    root = DOCS.parent
    broken = []
    for page in [root / "README.md", *sorted(DOCS.glob("*.md"))]:
        prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.DOTALL | re.MULTILINE)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):  # code blocks hold no links
            if re.match(r"https://(github\.com/mcp-tasks/|mcp-tasks\.github\.io)", target):
                broken.append(f"{page.name}: {target} is a made-up address")
                continue
            path = target.split("#", 1)[0]
            if not path or re.match(r"[a-z]+:", path):
                continue  # an anchor on the page, or a URL elsewhere
            file = page.parent / path
            if not file.resolve().is_relative_to(root) or not file.exists():
                broken.append(f"{page.name}: {target}")
    assert broken == []
