"""Every Python snippet of docs/ runs as a test, imports included: the ones no other test
runs are run here, as written, and do what their page says. A snippet that defines a server
registers its tools and is served on a loopback port; one that ends in `trio.run(main)` has
its `main` run by the test (on a free port instead of 8000), so that the test can call the
server it serves and then stop it. docs/tools.md's snippets are its own tests'."""

from __future__ import annotations

import asyncio
import json
import re
import runpy
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import trio
from client.test_client_eras import Server2025, peer
from doc_snippets import DOCS, Page
from legacy_http import LegacyHttpClient, sse_events, stream_of
from redis_server import free_port

from mcp_tasks import Server, TextContent, ToolContext
from mcp_tasks import client as client_module
from mcp_tasks.client import AuthorizationError, RpcError, connect_http, connect_stdio
from mcp_tasks.core import (
    START_TASK,
    CallToolResult,
    HttpHeaders,
    PromptReference,
    RunTool,
    TaskStatus,
    ToolOutcome,
    WorkingTask,
)
from mcp_tasks.journal import TaskJournal
from mcp_tasks.store import RedisTaskStore
from mcp_tasks.transports import Connection, serve_http

ROOT = DOCS.parent

# Which test runs each snippet: page -> the marker naming each of its snippets. None: every
# snippet of the page is run by that page's own tests (each counts its page's snippets).
RUN_ELSEWHERE: dict[str, list[str] | None] = {
    "sdk.md": None,  # tests/integrations/test_sdk_docs.py
    "embedding.md": None,  # tests/asgi/test_embedding_docs.py
    "operations.md": ["server.use_telemetry", "connect_http"],  # tests/runtime/test_otel.py
    "core.md": ["class AsyncShell"],  # tests/test_docs.py
    "security.md": ["single_use_request_state=True"],  # tests/test_docs.py
    "tools.md": None,  # tests/runtime/test_tools_docs.py
    "testing.md": None,  # tests/test_testing_docs.py
    "oauth.md": None,  # tests/oauth/test_oauth_docs.py
    "auth.md": None,  # tests/auth/test_auth_docs.py
    "replay.md": None,  # tests/test_replay_docs.py
    "coming-from.md": None,  # tests/test_coming_from_docs.py
    "writing-a-transport.md": None,  # tests/test_line_transport.py (the example's own lines)
}
RUN_HERE = {
    "index.md": ["@server.tool", "connect_http"],
    "server.md": ["@server.tool", "await serve_http"],
    "client.md": [
        "confirm_delete",
        "ResumeLog",
        "asyncio.run",
        "reconnect_seconds=120",
        "client.session.version",
    ],
    "core.md": ["core.add_tool"],
    "prompts-and-resources.md": ["@server.prompt"],
    "security.md": ["def authenticate"],
    "stores.md": ["SQLiteTaskStore", "class DictStore"],
    "transports.md": ["nursery.start(serve_http", "ServerOptions", "serve_stdio"],
    "eras.md": ["legacy_sessions=False", "HttpSessionLimits(", "close_stream()"],
}

ENTRY = re.compile(r"^(trio\.run\(main\)|asyncio\.run\(main\(\)\))\n\Z", re.MULTILINE)


def test_every_snippet_of_the_docs_is_run_by_a_test() -> None:
    unrun = []
    for path in sorted(DOCS.glob("*.md")):
        markers = [*RUN_HERE.get(path.name, [])]
        elsewhere = RUN_ELSEWHERE.get(path.name, [])
        if elsewhere is None:
            continue
        markers += elsewhere
        for number, code in enumerate(Page(path.name).snippets, 1):
            named = [marker for marker in markers if marker in code]
            if len(named) != 1:
                unrun.append(f"{path.name}, snippet {number}: markers {named}")
    assert unrun == []


def snippet(
    page: str,
    marker: str,
    *,
    port: int | None = None,
    names: dict[str, Any] | None = None,
    replace: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run the snippet of `page` that contains `marker`, without its last line when that
    line runs `main` (the test runs it); the names it made. `port` takes the place of the
    page's 8000; `names` are there before it runs (those an earlier snippet made)."""
    [code] = [text for text in Page(page).snippets if marker in text]
    code = ENTRY.sub("", code)
    if port is not None:
        assert "8000" in code
        code = code.replace("8000", str(port))
    for old, new in (replace or {}).items():
        assert old in code
        code = code.replace(old, new)
    namespace: dict[str, Any] = {"__name__": f"snippet_of_{page}", **(names or {})}
    exec(compile(code, str(DOCS / page), "exec"), namespace)
    return namespace


def ends_by_running_main(page: str, marker: str) -> bool:
    [code] = [text for text in Page(page).snippets if marker in text]
    return ENTRY.search(code) is not None


@asynccontextmanager
async def serving(server: Server) -> AsyncIterator[str]:
    """`server` on a loopback port of its own: its URL."""
    async with server.running(), trio.open_nursery() as nursery:
        port = await nursery.start(serve_http, server, "127.0.0.1", 0)
        yield f"http://127.0.0.1:{port}/mcp"
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def running_main(main: Callable[[], Awaitable[None]], port: int) -> AsyncIterator[str]:
    """A snippet's `main`, serving on `port` until the block ends: its URL."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(main)
        with trio.fail_after(20):
            while True:
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:
                    await trio.sleep(0.02)
                else:
                    await stream.aclose()
                    break
        yield f"http://127.0.0.1:{port}/mcp"
        nursery.cancel_scope.cancel()


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def server_name(discovered: dict[str, Any]) -> str:
    name = discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
    assert isinstance(name, str)
    return name


def jobs_server() -> Server:
    server = runpy.run_path(str(ROOT / "examples/jobs.py"))["server"]
    assert isinstance(server, Server)
    return server


def answering(text: str) -> Callable[[str], str]:
    """`input` for a snippet that asks in the terminal: answers `text`."""
    return lambda prompt: text


# --- index.md ------------------------------------------------------------------------------


async def test_the_landing_page_server_runs_a_task_its_client_sees_through(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = snippet("index.md", "@server.tool")["server"]
    assert set(server.core.catalog.tools) == {"slow_compute"}
    assert ends_by_running_main("index.md", "connect_http")
    with trio.fail_after(30):
        async with serving(server) as url:
            port = int(url.split(":")[2].split("/")[0])
            await snippet("index.md", "connect_http", port=port)["main"]()
    assert "text='done'" in capsys.readouterr().out


# --- server.md -----------------------------------------------------------------------------


async def test_the_server_page_tool_shows_its_progress_as_the_status_message() -> None:
    server = snippet("server.md", "@server.tool")["server"]
    assert server.core.catalog.tools["slow_compute"].task_support == "optional"
    with trio.fail_after(30):
        async with serving(server) as url, connect_http(url) as client:
            task = await client.call_tool_or_task("slow_compute", {"seconds": 2, "label": "x"})
            assert isinstance(task, WorkingTask)
            seen = set()
            while (now := await client.get_task(task.task_id)).status == TaskStatus.WORKING:
                seen.add(now.status_message)
                await trio.sleep(0.05)
            assert text_of(await client.await_task(task.task_id)) == "x done"
    progress = seen - {None}
    assert progress and all(re.fullmatch(r"\d/10", str(message)) for message in progress)


async def test_the_server_page_serves_its_server_from_trio_code() -> None:
    names = snippet("server.md", "@server.tool")
    port = free_port()
    names = snippet("server.md", "await serve_http", port=port, names=names)
    assert ends_by_running_main("server.md", "await serve_http")
    with trio.fail_after(30):
        async with running_main(names["main"], port) as url, connect_http(url) as client:
            result = await client.call_tool("slow_compute", {"seconds": 0.1, "label": "served"})
            assert text_of(result) == "served done"


def progress_section() -> str:
    text = (DOCS / "server.md").read_text()
    return text.split("## Progress inside a task", 1)[1].split("\n## ", 1)[0]


async def test_progress_inside_a_task_is_the_status_message_the_page_shows() -> None:
    """Each row of the page's table, and each number it says how it writes, is the
    `statusMessage` a real `tasks/get` answers; and the page's example answer has the
    fields a real one has."""
    section = progress_section()
    rows = re.findall(r"^\| `(report_progress\(.*\))` \| `(.*)` \|$", section, re.MULTILINE)
    assert len(rows) == 4
    numbers = [("report_progress(3.0)", "3"), ("report_progress(2.5)", "2.5")]
    numbers.append(("report_progress(1234567)", "1.23457e+06"))
    for number, written in numbers:
        assert f"`{number.split('(')[1].rstrip(')')}`" in section
        assert f"`{written}`" in section
    calls = [*rows, *numbers]
    server = Server("progress", "1.0")
    shown = trio.Event()
    go_on = trio.Event()

    @server.tool(task_support="required")
    async def report(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        for call, _ in calls:
            await eval(f"ctx.{call}", {"ctx": ctx})
            shown.set()
            await go_on.wait()
        return CallToolResult.text("reported")

    example = json.loads(re.findall(r"```json\n(.*?)```", section, re.DOTALL)[0])
    with trio.fail_after(30):
        async with serving(server) as url, connect_http(url) as client:
            task = await client.call_tool_or_task("report")
            assert isinstance(task, WorkingTask)
            for call, expected in calls:
                await shown.wait()
                shown = trio.Event()
                answer = await client.request("tasks/get", {"taskId": task.task_id})
                assert answer["statusMessage"] == expected, call
                if expected == example["statusMessage"]:
                    assert set(answer) - {"_meta"} == set(example)
                    assert answer["status"] == example["status"]
                go_on.set()
                go_on = trio.Event()


# --- client.md -----------------------------------------------------------------------------


async def test_the_client_page_answers_the_confirmation_in_the_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ends_by_running_main("client.md", "confirm_delete")
    with trio.fail_after(30):
        async with serving(jobs_server()) as url:
            port = int(url.split(":")[2].split("/")[0])
            names = snippet("client.md", "confirm_delete", port=port)
            names["input"] = answering("yes")  # what the person at the terminal types
            await names["main"]()
    assert "text='Deleted report.txt'" in capsys.readouterr().out


async def test_the_client_page_resumes_the_tasks_its_journal_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert ends_by_running_main("client.md", "ResumeLog")
    with trio.fail_after(30):
        async with serving(jobs_server()) as url:
            # An earlier run started a task and stopped before its end.
            port = int(url.split(":")[2].split("/")[0])
            names = snippet("client.md", "ResumeLog", port=port)
            names["input"] = answering("yes")
            journal = TaskJournal("tasks.jsonl")
            options = {"on_elicit": names["ask_human"], "cancel_on_exit": False}
            async with connect_http(url, journal=journal, **options) as client:
                task = await client.call_tool_or_task("confirm_delete", {"filename": "a.txt"})
                assert isinstance(task, WorkingTask)
            assert [entry.task_id for entry in journal.pending()] == [task.task_id]
            await names["main"]()  # the next run
    assert "confirm_delete [TextContent(" in capsys.readouterr().out
    assert TaskJournal(tmp_path / "tasks.jsonl").pending() == []


def test_the_client_page_runs_on_asyncio_over_stdio(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `asyncio.run`, as the page ends, from the repository's root; `python` is this
    interpreter."""
    monkeypatch.chdir(ROOT)
    [code] = [text for text in Page("client.md").snippets if "asyncio.run" in text]
    assert code.endswith("\nasyncio.run(main())\n")
    names = snippet("client.md", "asyncio.run", replace={'["python"': f"[{sys.executable!r}"})
    asyncio.run(names["main"]())
    out = capsys.readouterr().out
    assert "text='Hello, asyncio!'" in out
    assert "gave up waiting; the task was cancelled on the server too" in out


async def test_the_client_page_waits_for_a_server_that_is_not_up_yet(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's patient client is started first; the server comes up once the client has
    been refused; the call goes through."""
    refused = trio.Event()

    def noting_refusals(*args: Any, **options: Any) -> Any:
        return connect_http(*args, on_retry=lambda *_: refused.set(), **options)

    monkeypatch.setattr(client_module, "connect_http", noting_refusals)
    port = free_port()
    quick = {'"seconds": 30': '"seconds": 0.1'}
    names = snippet("client.md", "reconnect_seconds=120", port=port, replace=quick)
    done = trio.Event()

    async def run_main() -> None:
        await names["main"]()
        done.set()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_main)
            await refused.wait()
            server = jobs_server()
            async with server.running():
                await nursery.start(serve_http, server, "127.0.0.1", port)
                await done.wait()
                nursery.cancel_scope.cancel()
    assert "job done after 0.1s" in capsys.readouterr().out


async def test_the_client_page_opens_a_session_with_a_2025_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Against the scripted 2025 server of the client tests, the page's client opens a
    session, goes on in it, and ends it."""
    old = Server2025()
    with trio.fail_after(30):
        async with peer(old) as (_, url):
            port = url.split(":")[2].split("/")[0]
            names = snippet("client.md", "client.session.version", replace={"3000": port})
            await names["main"]()
    assert capsys.readouterr().out == "['echo']\nlegacy 2025-06-18\n"
    assert old.sessions == ["s1"] and old.live == set()


# --- core.md -------------------------------------------------------------------------------


async def test_the_core_page_entry_points_build_a_core_with_its_tool() -> None:
    names = snippet("core.md", "core.add_tool")
    core = names["core"]
    spec = core.catalog.tools["slow_compute"]
    assert spec.task_support == "optional" and spec.arguments_type is names["Args"]
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "slow_compute",
            "arguments": {"seconds": 2},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    need = core.receive(json.dumps(body).encode(), 1_000.0)
    assert isinstance(need, RunTool) and need.handler is names["handler"]
    outcome = await need.handler(need.call, need.arguments)
    assert text_of(outcome) == "waited 2.0s"


# --- prompts-and-resources.md --------------------------------------------------------------


async def test_the_prompts_page_server_serves_its_prompt_completion_and_resources() -> None:
    server = snippet("prompts-and-resources.md", "@server.prompt")["server"]
    with trio.fail_after(30):
        async with serving(server) as url, connect_http(url) as client:
            prompt = await client.get_prompt("review", {"language": "rust"})
            message = prompt.messages[0].content
            assert isinstance(message, TextContent)
            assert message.text == "Review this rust code for correctness."
            completion = await client.complete(PromptReference(name="review"), "language", "py")
            assert completion.values == ["python"]
            config = await client.read_resource("config://app")
            assert config.contents[0].text == '{"debug": false}'
            notes = await client.read_resource("files://notes.txt")
            assert notes.contents[0].text == "remember the milk"
            with pytest.raises(RpcError) as missing:
                await client.read_resource("files://nope.txt")
            assert missing.value.code == -32602


# --- security.md ---------------------------------------------------------------------------


async def test_the_security_page_authenticator_lets_in_only_a_known_bearer_token() -> None:
    port = free_port()
    names = snippet("security.md", "def authenticate", port=port)
    assert ends_by_running_main("security.md", "def authenticate")
    token = next(iter(names["TOKENS"]))
    with trio.fail_after(30):
        async with running_main(names["main"], port) as url:
            credentials = {"Authorization": f"Bearer {token}"}
            async with connect_http(url, headers=credentials) as client:
                assert "supportedVersions" in await client.discover()
            for wrong in ({}, {"Authorization": "Bearer not-a-token"}):
                async with connect_http(url, headers=wrong) as client:
                    with pytest.raises(AuthorizationError, match="send a valid bearer token"):
                        await client.discover()
    assert names["lookup"](token) == "alice" and names["lookup"]("") is None


# --- stores.md -----------------------------------------------------------------------------


def test_the_stores_page_gives_a_server_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    names = snippet("stores.md", "SQLiteTaskStore")
    assert (tmp_path / "tasks.db").exists()
    store = names["server"].store
    assert isinstance(store, RedisTaskStore) and store.prefix == "jobs"
    assert store.url == "redis://127.0.0.1:6379/0"


async def test_the_stores_page_custom_store_serves_a_task() -> None:
    names = snippet("stores.md", "class DictStore")
    server: Server = names["server"]

    @server.tool(task_support="required")
    async def slow(ctx: ToolContext) -> ToolOutcome:
        return START_TASK if not ctx.in_task else CallToolResult.text("done")

    with trio.fail_after(30):
        async with serving(server) as url, connect_http(url) as client:
            assert text_of(await client.call_tool("slow")) == "done"
    store = server.store
    assert isinstance(store, names["DictStore"]) and len(store.records) == 1
    (record,) = store.records.values()
    assert record.status is TaskStatus.COMPLETED


# --- transports.md -------------------------------------------------------------------------


async def test_the_transports_page_serves_http_until_the_nursery_is_cancelled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    names = snippet("transports.md", "nursery.start(serve_http", port=port)
    assert ends_by_running_main("transports.md", "nursery.start(serve_http")
    with trio.fail_after(30):
        async with running_main(names["main"], port) as url, connect_http(url) as client:
            assert server_name(await client.discover()) == "jobs"
    assert f"serving on port {port}" in capsys.readouterr().out
    assert not names["server"].is_running  # cancelled: the server drained and stopped


def test_the_transports_page_accepts_a_missing_task_name_header() -> None:
    server = snippet("transports.md", "ServerOptions")["server"]
    assert server.core.options.accept_missing_task_name_header


async def test_the_eras_page_server_refuses_a_2025_initialize_on_stdio() -> None:
    server = snippet("eras.md", "legacy_sessions=False")["server"]
    opening = {"protocolVersion": "2025-11-25", "capabilities": {}}
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": opening}
    connection = Connection(carries_sessions=True)  # as stdio's: a 2025 session could open
    async with server.running():
        reply = await server.handle(json.dumps(message).encode(), connection=connection)
    assert reply is not None and json.loads(reply.body)["error"]["code"] == -32022
    assert connection.session is None


async def test_the_eras_page_caps_a_principals_sessions() -> None:
    server = snippet("eras.md", "HttpSessionLimits(")["server"]
    opening = {"protocolVersion": "2025-11-25", "capabilities": {}}
    message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": opening})
    headers = HttpHeaders()
    async with server.running():
        statuses = [
            (await server.handle(message.encode(), headers=headers)).http_status  # type: ignore[union-attr]
            for _ in range(9)
        ]
    assert statuses == [200] * 8 + [429]


async def test_the_eras_page_tool_closes_its_stream_and_the_client_resumes() -> None:
    server = snippet("eras.md", "close_stream()")["server"]
    async with serving(server) as url, httpx.AsyncClient(timeout=10) as http:
        client = LegacyHttpClient(http, url)
        await client.initialize()
        message = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "long_report", "_meta": {"progressToken": 1}},
        }
        with trio.fail_after(10):
            async with http.stream("POST", url, json=message, headers=client.headers()) as post:
                on_post = [event async for event in sse_events(post)]  # ended mid-call
            assert [bool(event["data"]) for event in on_post] == [False, True]  # + progress
            async with stream_of(client, **{"last-event-id": on_post[-1]["id"]}) as resumed:
                [result] = [json.loads(event["data"]) async for event in sse_events(resumed)]
    assert result["result"]["content"] == [{"type": "text", "text": "the report"}]


async def test_the_transports_page_serves_stdio_to_a_client_that_spawns_it(
    tmp_path: Path,
) -> None:
    [code] = [text for text in Page("transports.md").snippets if "serve_stdio" in text]
    script = tmp_path / "stdio_server.py"
    script.write_text(code)  # as written, its own trio.run(main) included
    with trio.fail_after(30):
        async with connect_stdio([sys.executable, str(script)], stderr="capture") as client:
            assert server_name(await client.discover()) == "jobs"
            assert await client.list_tools() == []
