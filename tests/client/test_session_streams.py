"""A 2025 session's streams over HTTP, against a scripted server on a loopback socket: the
session's own GET stream, where the server asks its questions, and a response stream cut
before its answer, resumed with `Last-Event-ID` after the server's `retry:` wait."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio

from mcp_tasks.client import ServerUnreachable, connect_http
from mcp_tasks.core import wire as w
from mcp_tasks.transports._sse_reader import EventStream

Seen = tuple[str, dict[str, str], Any]  # method, headers (lower-case), JSON body
Answer = Callable[[Seen, trio.SocketStream], Awaitable[None]]


def head(status: str, **headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", "connection: close"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def json_reply(body: Any, **headers: str) -> bytes:
    data = json.dumps(body).encode()
    length = str(len(data))
    return head("200 OK", content_type="application/json", content_length=length, **headers) + data


def event(data: Any, event_id: str | None = None, retry_ms: int | None = None) -> bytes:
    lines = [] if event_id is None else [f"id: {event_id}"]
    lines += [] if retry_ms is None else [f"retry: {retry_ms}"]
    lines.append("data: " + ("" if data is None else json.dumps(data)))
    return ("\n".join(lines) + "\n\n").encode()


async def read_request(stream: trio.SocketStream) -> Seen:
    received = b""
    while b"\r\n\r\n" not in received:
        received += await stream.receive_some()
    raw_head, _, body = received.partition(b"\r\n\r\n")
    first, *lines = raw_head.decode().split("\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines)
    }
    while len(body) < int(headers.get("content-length", "0")):
        body += await stream.receive_some()
    return first.split()[0], headers, json.loads(body) if body else None


@asynccontextmanager
async def scripted(answer: Answer) -> AsyncIterator[tuple[list[Seen], str]]:
    """A server whose every request goes to `answer` (with its connection), after the
    session is opened here: `initialize` answers 2025-11-25 with session `s1`."""
    seen: list[Seen] = []

    async def handle(stream: trio.SocketStream) -> None:
        request = await read_request(stream)
        seen.append(request)
        method, _, body = request
        if method == "POST" and body.get("method") == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "1"},
            }
            reply = {"jsonrpc": "2.0", "id": body["id"], "result": result}
            await stream.send_all(json_reply(reply, mcp_session_id="s1"))
        elif method == "POST" and "id" not in body:
            await stream.send_all(head("202 Accepted", content_length="0"))
        elif method == "DELETE":
            await stream.send_all(head("200 OK", content_length="0"))
        else:
            await answer(request, stream)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        on_loopback = partial(trio.serve_tcp, host="127.0.0.1")
        listeners = await nursery.start(on_loopback, handle, 0)
        yield seen, f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_a_question_on_the_sessions_own_stream_is_answered_by_the_handler() -> None:
    answered = trio.Event()
    answers: list[Any] = []
    question = {
        "jsonrpc": "2.0",
        "id": "q1",
        "method": "elicitation/create",
        "params": {"message": "Your name?", "requestedSchema": {"type": "object"}},
    }

    async def answer(request: Seen, stream: trio.SocketStream) -> None:
        method, headers, body = request
        if method == "GET":
            await stream.send_all(head("200 OK", content_type="text/event-stream"))
            await stream.send_all(event(question, event_id="g1"))
            await trio.sleep_forever()  # (held open until the test ends)
        elif body.get("id") == "q1":  # the client's answer
            answers.append((headers, body))
            answered.set()
            await stream.send_all(head("202 Accepted", content_length="0"))
        else:  # tools/call: answered once the question is
            await answered.wait()
            name = answers[0][1]["result"]["content"]["name"]
            result = {"content": [{"type": "text", "text": f"hello {name}"}]}
            await stream.send_all(
                json_reply({"jsonrpc": "2.0", "id": body["id"], "result": result})
            )

    async def elicit(params: w.ElicitParams) -> w.ElicitResult:
        assert params.message == "Your name?"
        return w.ElicitResult(action="accept", content={"name": "Ada"})

    async with scripted(answer) as (seen, url):
        with trio.fail_after(10):
            async with connect_http(url, era="legacy", on_elicit=elicit) as client:
                result = await client.call_tool("greet", {})
    assert result.content[0].text == "hello Ada"
    headers, body = answers[0]
    assert body == {
        "jsonrpc": "2.0",
        "id": "q1",
        "result": {"action": "accept", "content": {"name": "Ada"}},
    }
    assert headers["mcp-session-id"] == "s1"
    assert headers["mcp-protocol-version"] == "2025-11-25"
    gets = [headers for method, headers, _ in seen if method == "GET"]
    assert gets and gets[0]["mcp-session-id"] == "s1"


@pytest.mark.trio
async def test_a_response_stream_cut_before_its_answer_is_resumed_with_last_event_id() -> None:
    resumed: list[dict[str, str]] = []
    calls: list[int] = []

    async def answer(request: Seen, stream: trio.SocketStream) -> None:
        method, headers, body = request
        if method == "POST":  # tools/call: a priming event, then the stream ends
            calls.append(body["id"])
            await stream.send_all(head("200 OK", content_type="text/event-stream"))
            await stream.send_all(event(None, event_id="p1", retry_ms=40))
            return
        if "last-event-id" not in headers:  # the session's own stream: none here
            await stream.send_all(head("405 Method Not Allowed", content_length="0"))
            return
        resumed.append(headers)
        result = {"content": [{"type": "text", "text": "after the cut"}]}
        await stream.send_all(head("200 OK", content_type="text/event-stream"))
        await stream.send_all(event({"jsonrpc": "2.0", "id": calls[0], "result": result}, "p2"))

    async with scripted(answer) as (_, url):
        with trio.fail_after(10):
            async with connect_http(url, era="legacy") as client:
                started = trio.current_time()
                result = await client.call_tool("slow", {})
                waited = trio.current_time() - started
    assert result.content[0].text == "after the cut"
    assert [headers["last-event-id"] for headers in resumed] == ["p1"]
    assert resumed[0]["mcp-session-id"] == "s1"
    assert waited >= 0.04  # the server's retry: wait was kept


@pytest.mark.trio
async def test_an_answer_sent_on_the_sessions_own_stream_ends_the_wait() -> None:
    cut = trio.Event()
    calls: list[int] = []
    resumptions: list[str] = []

    async def answer(request: Seen, stream: trio.SocketStream) -> None:
        method, headers, body = request
        if method == "POST":  # the call's stream is cut; the resumption is 5 s away
            calls.append(body["id"])
            await stream.send_all(head("200 OK", content_type="text/event-stream"))
            await stream.send_all(event(None, event_id="p1", retry_ms=5000))
            cut.set()
            return
        if "last-event-id" in headers:
            resumptions.append(headers["last-event-id"])
            await trio.sleep_forever()
        await stream.send_all(head("200 OK", content_type="text/event-stream"))
        await cut.wait()  # the session's own stream carries the answer
        result = {"content": [{"type": "text", "text": "on the session stream"}]}
        await stream.send_all(event({"jsonrpc": "2.0", "id": calls[0], "result": result}, "g1"))
        await trio.sleep_forever()

    async with scripted(answer) as (_, url):
        with trio.fail_after(4):  # (less than the retry wait: the answer did not wait for it)
            async with connect_http(url, era="legacy") as client:
                result = await client.call_tool("slow", {})
    assert result.content[0].text == "on the session stream"
    assert resumptions == []


@pytest.mark.trio
async def test_a_stream_that_never_resumes_is_given_up() -> None:
    async def answer(request: Seen, stream: trio.SocketStream) -> None:
        method, headers, _ = request
        if method == "POST":
            await stream.send_all(head("200 OK", content_type="text/event-stream"))
            await stream.send_all(event(None, event_id="p1", retry_ms=1))
            return
        if "last-event-id" not in headers:
            await stream.send_all(head("405 Method Not Allowed", content_length="0"))
            return
        await stream.send_all(head("200 OK", content_type="text/event-stream"))
        await stream.send_all(event(None, event_id=headers["last-event-id"]))  # and ends

    async with scripted(answer) as (seen, url):
        with trio.fail_after(10):
            async with connect_http(url, era="legacy") as client:
                with pytest.raises(ServerUnreachable, match="ended before the response"):
                    await client.call_tool("slow", {})
    resumptions = [s for s in seen if s[0] == "GET" and "last-event-id" in s[1]]
    assert len(resumptions) == 8  # bounded


def test_the_reader_keeps_the_last_event_id_and_the_retry_wait() -> None:
    events = EventStream(1024)
    assert events.feed(b"id: a1\nretry: 250\ndata:\n\n") == []  # a priming event
    assert (events.last_event_id, events.retry_seconds(default=1.0)) == ("a1", 0.25)
    assert events.feed(b'data: {"x": 1}\n\n') == [b'{"x": 1}']
    assert events.last_event_id == "a1"  # (an id is kept until another comes)
    assert events.feed(b"id: a2\nretry: soon\ndata: 2\n\n") == [b"2"]
    assert (events.last_event_id, events.retry_ms) == ("a2", 250)  # a bad retry is ignored
    events.feed(b"data: half")
    events.restart()
    assert events.feed(b"data: 3\n\n") == [b"3"]  # the half event was dropped
    assert events.feed(b"retry: 999999999\n\n") == []
    assert events.retry_ms == 60_000  # capped at a minute
