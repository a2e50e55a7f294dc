"""`mcp_tasks.asgi` served for real: uvicorn (asyncio), hypercorn's trio worker, and mounted at
/api in a Starlette app under uvicorn, each a process of its own on 127.0.0.1 (processes.py),
serving served.py; the built-in server serves the same `Server` and `HttpConfig` beside them.

The refusals are compared with the built-in server's answers to the same bytes: status,
JSON-RPC body and headers alike. Then a task's whole life with an input round, progress as
SSE, a listen stream with its keep-alive comments, a client that leaves, principals, the
lifespan (drain on SIGTERM into a SQLite file, and what is said when it is off).
Waits are on answers and end-of-file under `fail_after`; nothing sleeps and hopes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
from runtime.helpers import request
from transports import test_http
from transports.test_http import TASKS_CAPS, Response, mcp_headers, rpc

from mcp_tasks import ElicitParams, ElicitResult, TextContent
from mcp_tasks.client import RpcError, Task, connect_http
from mcp_tasks.store import SQLiteTaskStore

from .processes import ASGI_KINDS, Served, serving

VERSION = "2026-07-28"
WAIT = 10


class HttpClient(test_http.HttpClient):
    """test_http's raw client, its paths under the one the app is mounted at (if any)."""

    prefix = ""

    @classmethod
    async def to(cls, served: Served) -> HttpClient:
        client = cls(await trio.open_tcp_stream("127.0.0.1", served.port))
        client.prefix = served.endpoint.removesuffix("/mcp")
        return client

    def encode(self, method: str, headers: Any, body: bytes = b"", target: str = "/mcp") -> bytes:
        return super().encode(method, headers, body, self.prefix + target)


def text_of(result: Any) -> str:
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


async def exchange(served: Served, raw: tuple[str, str, list[Any], bytes]) -> Response:
    """One request on a connection of its own."""
    method, path, headers, body = raw
    client = await HttpClient.to(served)
    try:
        with trio.fail_after(WAIT):
            await client.send(method, headers, body, target=path)
            return await client.response()
    finally:
        await client.aclose()


LIST = request("tools/list", None, caps=TASKS_CAPS)
JSON = ("content-type", "application/json")
GOOD = [JSON, *mcp_headers("tools/list")]
REFUSED: dict[str, tuple[str, str, list[Any], bytes]] = {
    "foreign host": ("POST", "/mcp", [("host", "evil.example"), *GOOD], LIST),
    "foreign origin": ("POST", "/mcp", [("origin", "https://evil.example"), *GOOD], LIST),
    "other path": ("POST", "/other", GOOD, LIST),
    "GET": ("GET", "/mcp", mcp_headers("tools/list"), b""),
    "text body": ("POST", "/mcp", [("content-type", "text/plain"), *mcp_headers("x")], LIST),
    "accepts html": (
        "POST",
        "/mcp",
        [JSON, ("accept", "text/html"), ("mcp-protocol-version", VERSION)],
        LIST,
    ),
    "body too large": ("POST", "/mcp", GOOD, b" " * (64 * 1024 + 1)),
    "unknown token": ("POST", "/mcp", [("authorization", "Bearer nobody"), *GOOD], LIST),
    "Mcp-Method differs": ("POST", "/mcp", [JSON, *mcp_headers("tools/call")], LIST),
    "version differs": ("POST", "/mcp", [JSON, *mcp_headers("tools/list", None, "2099")], LIST),
    "not JSON": ("POST", "/mcp", GOOD, b"{nope"),
    "an earlier era without its session": (
        "POST",
        "/mcp",
        [JSON, ("accept", "application/json"), ("mcp-protocol-version", "2025-06-18")],
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}',
    ),
    "an unknown session": (
        "POST",
        "/mcp",
        [JSON, ("accept", "application/json"), ("mcp-session-id", "gone")],
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}',
    ),
    "a session's stream without its id": ("GET", "/mcp", [("accept", "text/event-stream")], b""),
}  # fmt: skip
COMPARED_HEADERS = ("content-type", "allow", "www-authenticate", "retry-after")


@pytest.mark.parametrize("case", list(REFUSED))
async def test_refusals_are_the_built_in_servers(case: str, asgi: Served, built_in: Served) -> None:
    theirs, ours = await exchange(asgi, REFUSED[case]), await exchange(built_in, REFUSED[case])
    assert ours.status >= 400, ours
    assert (theirs.status, theirs.json()) == (ours.status, ours.json())
    for name in COMPARED_HEADERS:
        assert theirs.headers.get(name) == ours.headers.get(name), name


async def test_a_task_lives_through_an_input_round(asgi: Served) -> None:
    async def answer(params: ElicitParams) -> ElicitResult:
        assert params.message == "Your name?"
        return ElicitResult(action="accept", content={"name": "Ada"})

    with trio.fail_after(WAIT):
        async with connect_http(asgi.url, on_elicit=answer) as client:
            assert text_of(await client.call_tool("greet", {"name": "Bo"})) == "Hello, Bo!"
            task = await client.call_tool_or_task("interview")
            assert isinstance(task, Task)
            assert text_of(await client.await_task(task)) == "Hello, Ada!"
            assert (await client.get_task(task.task_id)).status == "completed"


async def test_a_task_is_its_principals_only(asgi: Served) -> None:
    with trio.fail_after(WAIT):
        async with connect_http(asgi.url, headers={"Authorization": "Bearer alice-token"}) as alice:
            task = await alice.call_tool_or_task("job", {"seconds": 0})
            assert isinstance(task, Task)
            task_id = task.task_id
            async with connect_http(asgi.url, headers={"Authorization": "Bearer bob-token"}) as bob:
                with pytest.raises(RpcError) as refused:
                    await bob.get_task(task_id)
                assert refused.value.code == -32602
            assert (await alice.get_task(task_id)).task_id == task_id


async def test_progress_turns_the_answer_into_sse(asgi: Served) -> None:
    client = await HttpClient.to(asgi)
    body = request("tools/call", {"name": "steps", "arguments": {"count": 3}}, progressToken="p")
    with trio.fail_after(WAIT):
        response = await client.post(body, mcp_headers("tools/call", "steps"))
    assert response.status == 200
    assert response.headers["cache-control"] == "no-cache"
    *notes, last = response.events()
    assert [note["params"]["progress"] for note in notes] == [1, 2, 3]
    assert last["result"]["content"][0]["text"] == "3 steps"
    with trio.fail_after(WAIT):  # the connection is kept for the next request
        assert (await rpc(client, "tools/list")).status == 200
    await client.aclose()


async def test_a_listen_stream_hears_its_task_and_keeps_alive(asgi: Served) -> None:
    listener, caller = await HttpClient.to(asgi), await HttpClient.to(asgi)
    with trio.fail_after(WAIT):
        created = await rpc(caller, "tools/call", {"name": "job", "arguments": {"seconds": 1}})
    task_id = created.json()["result"]["taskId"]
    body = request(
        "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, caps=TASKS_CAPS
    )
    comments, statuses = 0, []
    with trio.fail_after(WAIT):
        await listener.send("POST", [JSON, *mcp_headers("subscriptions/listen")], body)
        head = await listener.head()
        assert (head.status_code, dict(head.headers)[b"content-type"]) == (
            200,
            b"text/event-stream",
        )
        buffer = b""
        while "completed" not in statuses:  # comments every 0.3 s while the task runs (1 s)
            event = await listener.next_event()
            assert isinstance(event, h11.Data), event
            buffer += event.data
            while b"\n\n" in buffer:
                block, _, buffer = buffer.partition(b"\n\n")
                if block == b": keep-alive":
                    comments += 1
                    continue
                message = json.loads(block.removeprefix(b"data: "))
                statuses.append(message["params"].get("status"))
    assert statuses[0] is None  # the acknowledgement
    assert comments >= 1
    await listener.aclose()
    await caller.aclose()


async def test_a_client_that_leaves_cancels_its_request(asgi: Served) -> None:
    async def cancelled_so_far(client: HttpClient) -> int:
        response = await rpc(client, "tools/call", {"name": "cancellations", "arguments": {}})
        return int(response.json()["result"]["content"][0]["text"])

    checker = await HttpClient.to(asgi)
    with trio.fail_after(WAIT):
        before = await cancelled_so_far(checker)
        leaver = await HttpClient.to(asgi)
        body = request("tools/call", {"name": "hold", "arguments": {}}, progressToken="h")
        await leaver.send("POST", [JSON, *mcp_headers("tools/call", "hold")], body)
        assert (await leaver.head()).status_code == 200  # the tool runs: its progress came
        await leaver.aclose()
        while await cancelled_so_far(checker) == before:  # the server notices the close
            await trio.sleep(0.05)
    await checker.aclose()


@pytest.mark.parametrize("kind", ASGI_KINDS)
async def test_shutdown_lets_a_running_task_finish_into_the_store(
    kind: str, tmp_path: Path
) -> None:
    database = tmp_path / "tasks.db"
    with serving(kind, env={"ASGI_TEST_STORE": f"sqlite:///{database}"}) as served:
        with trio.fail_after(WAIT):
            async with connect_http(served.url) as client:
                task = await client.call_tool_or_task("job", {"seconds": 1.5})
        assert isinstance(task, Task) and task.status == "working"
        code = await trio.to_thread.run_sync(served.stop)
        assert code in (0, -15), served.log  # uvicorn ends by raising the signal again
    assert "Traceback" not in served.log, served.log
    store = SQLiteTaskStore(database)
    try:
        record = await store.get(task.task_id)
    finally:
        await store.aclose()
    assert record is not None and record.status == "completed", record


async def test_without_lifespan_it_says_what_is_missing() -> None:
    command_kind = "uvicorn"
    with serving(command_kind, env={"UVICORN_LIFESPAN": "off"}) as served:
        client = await HttpClient.to(served)
        with trio.fail_after(WAIT):
            response = await client.post(LIST, GOOD[1:])
        await client.aclose()
    assert response.status == 503
    assert "lifespan" in response.json()["error"]["message"]
