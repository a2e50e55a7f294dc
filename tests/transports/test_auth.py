"""The HTTP authenticator: 401 before the body is read, with the challenge; the principal
it names owns the tasks it creates; a broken authenticator lets nobody in."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from runtime.helpers import request
from test_http import HttpClient, Response, mcp_headers, serving

from mcp_tasks import START_TASK, CallToolResult, Server, TaskOptions, ToolContext, ToolOutcome
from mcp_tasks.transports import Unauthorized

TOKENS = {"t-alice": "alice", "t-bob": "bob"}


@pytest.fixture(autouse=True)
def no_errors_logged() -> Iterator[None]:
    """Overrides test_http's: a broken authenticator is logged as an error, on purpose."""
    yield


def build() -> Server:
    server = Server("owned", "1", tasks=TaskOptions(ttl_ms=600_000))

    @server.tool(task_support="required")
    async def job(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        return CallToolResult.text("done")

    return server


def authenticate(headers: Mapping[str, str]) -> str:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or token not in TOKENS:
        raise Unauthorized("a known bearer token is required", challenge='Bearer realm="t"')
    return TOKENS[token]


async def post(client: HttpClient, body: bytes, token: str | None) -> Response:
    params = json.loads(body).get("params", {})
    method = json.loads(body)["method"]
    headers = mcp_headers(method, params.get("name") or params.get("taskId"))
    if token is not None:
        headers.append(("authorization", f"Bearer {token}"))
    return await client.post(body, headers)


async def test_http_refuses_without_credentials_and_binds_tasks_to_the_token() -> None:
    async with serving(build(), authenticate=authenticate) as port:
        client = await HttpClient.connect(port)
        call = request("tools/call", {"name": "job", "arguments": {}})
        for token in (None, "t-mallory"):
            refused = await post(client, call, token)
            assert refused.status == 401
            assert refused.headers["www-authenticate"] == 'Bearer realm="t"'
            error = refused.json()["error"]
            assert error["message"] == "Unauthorized: a known bearer token is required"
        created = (await post(client, call, "t-alice")).json()
        task_id = created["result"]["taskId"]
        get = request("tasks/get", {"taskId": task_id})
        assert (await post(client, get, "t-bob")).json()["error"]["code"] == -32602
        assert (await post(client, get, "t-alice")).json()["result"]["taskId"] == task_id
        await client.aclose()


@pytest.mark.parametrize("broken", ["raises", "empty", "async"])
async def test_a_broken_authenticator_lets_nobody_in(
    broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def later(headers: Mapping[str, str]) -> str:
        raise RuntimeError("the token service is down")

    def authenticate(headers: Mapping[str, str]) -> Any:
        if broken == "raises":
            raise RuntimeError("the token service is down")
        return "" if broken == "empty" else later(headers)

    with caplog.at_level(logging.ERROR):
        async with serving(build(), authenticate=authenticate) as port:
            client = await HttpClient.connect(port)
            answer = await post(client, request("server/discover"), "t")
            await client.aclose()
    assert answer.status == 401
    assert "could not be checked" in answer.json()["error"]["message"]
    assert caplog.records  # the reason is logged for the operator, not told to the caller


async def test_an_async_authenticator_is_awaited() -> None:
    async def authenticate(headers: Mapping[str, str]) -> str:
        return "someone" if headers.get("authorization") == "Bearer ok" else "other"

    async with serving(build(), authenticate=authenticate) as port:
        client = await HttpClient.connect(port)
        created = (await post(client, request("tools/call", {"name": "job"}), "ok")).json()
        get = request("tasks/get", {"taskId": created["result"]["taskId"]})
        assert (await post(client, get, "nope")).json()["error"]["code"] == -32602
        assert "result" in (await post(client, get, "ok")).json()
        await client.aclose()


async def test_a_repeated_head_is_authenticated_again_each_time() -> None:
    """The server reads a head that repeats the one before on its connection only once;
    its credentials are still checked for each request: a token revoked in between is
    refused at once."""
    tokens = dict(TOKENS)
    asked: list[str] = []

    def revocable(headers: Mapping[str, str]) -> str:
        asked.append(headers.get("authorization", ""))
        principal = tokens.get(headers.get("authorization", "").removeprefix("Bearer "))
        if principal is None:
            raise Unauthorized("a known bearer token is required", challenge='Bearer realm="t"')
        return principal

    async with serving(build(), authenticate=revocable) as port:
        client = await HttpClient.connect(port)
        created = (await post(client, request("tools/call", {"name": "job"}), "t-alice")).json()
        poll = request("tasks/get", {"taskId": created["result"]["taskId"]})
        assert "result" in (await post(client, poll, "t-alice")).json()
        del tokens["t-alice"]
        refused = await post(client, poll, "t-alice")  # the same bytes as the poll before
        assert refused.status == 401 and asked == ["Bearer t-alice"] * 3
        await client.aclose()


async def test_a_poll_too_soon_is_429_with_retry_after() -> None:
    server = Server("polled", "1", tasks=TaskOptions(poll_interval_ms=60_000, min_poll_fraction=1))

    @server.tool(task_support="required")
    async def waits(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        await ctx.elicit("x?", {"type": "object"})
        return CallToolResult.text("done")

    async with serving(server) as port:
        client = await HttpClient.connect(port)
        created = (await post(client, request("tools/call", {"name": "waits"}), None)).json()
        get = request("tasks/get", {"taskId": created["result"]["taskId"]})
        assert (await post(client, get, None)).status == 200
        again = await post(client, get, None)
        assert again.status == 429 and again.headers["retry-after"] == "60"
        assert again.json()["error"]["code"] == -32000
        await client.aclose()


async def test_one_principal_cannot_fill_the_server_with_finished_tasks() -> None:
    """Finished tasks count against their creator until they expire: bob gets his share
    (a quarter of `max_tasks` by default), then 429 with `Retry-After`; alice still gets in
    (issue 15, point 6)."""
    server = Server("shared", "1", tasks=TaskOptions(ttl_ms=600_000, max_tasks=16))

    @server.tool(task_support="required")
    async def job(ctx: ToolContext) -> ToolOutcome:
        if not ctx.in_task:
            return START_TASK
        return CallToolResult.text("done")

    async with serving(server, authenticate=authenticate) as port:
        client = await HttpClient.connect(port)
        call = request("tools/call", {"name": "job", "arguments": {}})
        created = 0
        for _ in range(16):  # as many as the whole server holds
            answer = await post(client, call, "t-bob")
            if answer.status != 200:
                break
            created += 1
        assert created == 4
        assert answer.status == 429
        wait = int(answer.headers["retry-after"])
        assert 590 <= wait <= 600  # when bob's first task expires: 10 min after it began
        error = answer.json()["error"]
        assert error["code"] == -32603 and 590_000 <= error["data"]["retryAfterMs"] <= 600_000
        assert error["message"].startswith(
            "Too many tasks for this caller: at most 4 stored at once, finished ones "
            "included until they expire; try again in "
        )
        for _ in range(4):
            assert (await post(client, call, "t-alice")).status == 200
        await client.aclose()
