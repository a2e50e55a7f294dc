"""Clients that log in end to end against our server protected by `mcp_tasks.auth`.

The authorization server is oidc-provider (tests/oauth/provider.mjs), the MCP server ours
protected by its JWT access tokens (realm.py); the user logs in on the provider's
devInteractions pages with no browser. Our client (`mcp_tasks.oauth.OAuth`) calls a tool,
runs a task, and steps up to a scope a tool needs; the official SDK's client (`mcp` 2.3.0,
in the peers' venv: sdk_oauth_client.py) discovers, registers, logs in and calls tools.

Skipped (failed in CI) when the npm peers or, for the SDK, the peers' venv are missing.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
import trio
from interop.processes import (
    CLIENT_SECONDS,
    RUN_SECONDS,
    START_SECONDS,
    peers_python,
    run_to_end,
)
from oauth.realm import DevInteractionsUser
from redis_server import free_port

from mcp_tasks import CallToolResult, Server, TaskOptions, ToolContext
from mcp_tasks.auth import AccessToken, current_access_token
from mcp_tasks.client import RpcError, connect_http
from mcp_tasks.oauth import MemoryTokenStorage, OAuth

from .realm import ProtectedRealm, protected_realm

SDK_CLIENT = Path(__file__).resolve().parent / "sdk_oauth_client.py"


# --- the server ------------------------------------------------------------------------------


class Seen:
    """What the tools saw of their callers: `current_access_token()` at each call."""

    def __init__(self) -> None:
        self.tokens: dict[str, list[AccessToken | None]] = {}
        self.release = trio.Event()
        """Set by the test: lets the task `report` finish."""

    def note(self, tool: str) -> AccessToken:
        token = current_access_token()
        self.tokens.setdefault(tool, []).append(token)
        assert token is not None, f"{tool} ran without an access token"
        return token


def build_server(seen: Seen) -> Server:
    """`whoami` (the resource's scopes), `report` (a task), `publish` (needs mcp:write)."""
    server = Server("guarded", "1.0.0", tasks=TaskOptions(poll_interval_ms=50))

    @server.tool()
    async def whoami(ctx: ToolContext) -> str:
        """Say who called, and with which scopes."""
        token = seen.note("whoami")
        return json.dumps(
            {"subject": token.subject, "principal": token.principal, "scopes": sorted(token.scopes)}
        )

    @server.tool(task_support="required")
    async def report(ctx: ToolContext, label: str) -> str:
        """A task that says who started it, once the test lets it finish."""
        first = seen.note("report")
        await seen.release.wait()
        later = seen.note("report")
        return f"{label} for {first.subject}, still {later.subject}, in a task: {ctx.in_task}"

    @server.tool(scopes=["mcp:write"])
    async def publish(ctx: ToolContext, text: str) -> str:
        """Needs mcp:write beyond the resource's scopes."""
        token = seen.note("publish")
        return f"published {text!r} as {token.subject} with {' '.join(sorted(token.scopes))}"

    return server


# --- helpers ---------------------------------------------------------------------------------


def callback_uri() -> str:
    return f"http://127.0.0.1:{free_port()}/callback"


def text_of(result: CallToolResult) -> str:
    assert not result.is_error, result
    return result.content[0].text  # type: ignore[union-attr]


def scopes_asked(authorization_url: str) -> list[str]:
    """The `scope` of an authorization request, in order."""
    return parse_qs(urlsplit(authorization_url).query)["scope"][0].split()


class Heard(OAuth):
    """Our client's `OAuth`, keeping each refusal it was handed: (status, challenges)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.refusals: list[tuple[int, list[str]]] = []

    async def challenged(
        self, status: int, www_authenticate: list[str], sent: str | None, attempt: int
    ) -> bool:
        self.refusals.append((status, list(www_authenticate)))
        return await super().challenged(status, www_authenticate, sent, attempt)


async def provider_requests(world: ProtectedRealm) -> list[str]:
    """Every request the provider logged so far and not yet read ("METHOD /path").

    A marker request is sent, then waited for in the provider's log: whatever reached the
    provider before it is logged before it."""
    marker = f"/mark-{secrets.token_hex(6)}"
    async with httpx2.AsyncClient(timeout=START_SECONDS) as http:
        await http.get(world.issuer + marker)
    lines = world.provider.lines["stdout"]
    before = len(lines)
    pattern = '"request":"GET ' + re.escape(marker) + '"'
    await trio.to_thread.run_sync(world.provider.wait_for, "stdout", pattern)
    return [json.loads(line)["request"] for line in lines[before:-1] if line.startswith("{")]


# --- our client --------------------------------------------------------------------------------


async def test_our_client_logs_in_calls_a_tool_and_runs_a_task_as_the_user() -> None:
    seen = Seen()
    async with protected_realm(build_server(seen)) as world:
        user = DevInteractionsUser(callback_uri(), login="alice")
        storage = MemoryTokenStorage()
        auth = OAuth(world.url, user_agent=user, storage=storage)
        with trio.fail_after(CLIENT_SECONDS):
            async with connect_http(world.url, auth=auth) as client:
                me = json.loads(text_of(await client.call_tool("whoami")))
                task = await client.call_tool_or_task("report", {"label": "weekly"})
                assert not isinstance(task, CallToolResult), "report should have been a task"
                assert task.status == "working"
                shown = await client.get_task(task.task_id)  # (a request of its own)
                assert shown.status == "working"
                seen.release.set()
                done = text_of(await client.await_task(task))

        login = await storage.load(world.url)
        assert login is not None and login.registration is not None
        client_id = login.registration.client_id
        assert me == {
            "subject": "alice",
            "principal": f"alice via {client_id}",
            "scopes": ["mcp:read"],
        }
        assert done == "weekly for alice, still alice, in a task: True"
        for token in [*seen.tokens["whoami"], *seen.tokens["report"]]:
            assert token is not None
            assert (token.subject, token.client_id, token.issuer) == (
                "alice",
                client_id,
                world.issuer,
            )
            assert token.audience == (world.url,)

        # one login did for the call, the task and its polls
        assert len(user.visited) == 1
        assert scopes_asked(user.visited[0])[0] == "mcp:read"
        requests = await provider_requests(world)
        assert requests.count("GET /auth") == 1
        assert requests.count("POST /reg") == 1


async def test_a_task_is_not_shown_to_another_user() -> None:
    seen = Seen()
    seen.release.set()
    async with protected_realm(build_server(seen)) as world:
        alice = OAuth(world.url, user_agent=DevInteractionsUser(callback_uri(), login="alice"))
        bob = OAuth(world.url, user_agent=DevInteractionsUser(callback_uri(), login="bob"))
        with trio.fail_after(CLIENT_SECONDS):
            async with connect_http(world.url, auth=alice) as client:
                task = await client.call_tool_or_task("report", {"label": "private"})
                assert not isinstance(task, CallToolResult)
                assert text_of(await client.await_task(task)).startswith("private for alice")
            async with connect_http(world.url, auth=bob) as client:
                me = json.loads(text_of(await client.call_tool("whoami")))
                assert me["subject"] == "bob"
                with pytest.raises(RpcError) as refused:
                    await client.get_task(task.task_id)
                assert refused.value.code == -32602  # (as if there were no such task)
                assert "Unknown task" in str(refused.value)
            async with connect_http(world.url, auth=alice) as client:  # (its own, still)
                assert (await client.get_task(task.task_id)).status == "completed"


async def test_our_client_steps_up_to_the_scope_a_tool_needs() -> None:
    seen = Seen()
    async with protected_realm(build_server(seen), scopes=("mcp:read",)) as world:
        await provider_requests(world)  # (the verifier's discovery and keys: not the client's)
        user = DevInteractionsUser(callback_uri(), login="alice")
        auth = Heard(world.url, user_agent=user, storage=MemoryTokenStorage())
        with trio.fail_after(CLIENT_SECONDS):
            async with connect_http(world.url, auth=auth) as client:
                before = json.loads(text_of(await client.call_tool("whoami")))
                published = text_of(await client.call_tool("publish", {"text": "news"}))
                after = json.loads(text_of(await client.call_tool("whoami")))

        assert before["scopes"] == ["mcp:read"]
        assert published == "published 'news' as alice with mcp:read mcp:write"
        assert after["scopes"] == ["mcp:read", "mcp:write"]
        assert len(seen.tokens["publish"]) == 1  # (the refused call never reached the tool)

        # 401 asking for the resource's scope; 403 insufficient_scope naming the tool's too
        [(unauthorized, first_challenges), (forbidden, [challenge])] = auth.refusals
        assert unauthorized == 401
        assert 'scope="mcp:read"' in first_challenges[0]
        assert forbidden == 403
        assert challenge.startswith("Bearer ")
        assert 'error="insufficient_scope"' in challenge
        assert "needs the scope 'mcp:write'" in challenge
        assert 'scope="mcp:read mcp:write"' in challenge
        assert f'resource_metadata="{world.protection.metadata_url}"' in challenge

        # two authorizations: the resource's scope, then the union with the tool's
        first, second = user.visited
        assert "mcp:write" not in scopes_asked(first)
        assert "mcp:read" in scopes_asked(first)
        assert {"mcp:read", "mcp:write"} <= set(scopes_asked(second))
        requests = await provider_requests(world)
        assert requests.count("GET /auth") == 2
        assert requests.count("POST /reg") == 1  # (registered once)
        assert requests.count("POST /token") == 2


async def test_a_step_up_after_a_restart_asks_for_the_stored_logins_scopes_too() -> None:
    """A new `OAuth` on the stored mcp:read login: one visit, for mcp:read and mcp:write."""
    seen = Seen()
    async with protected_realm(build_server(seen), scopes=("mcp:read",)) as world:
        storage = MemoryTokenStorage()
        first = OAuth(world.url, user_agent=DevInteractionsUser(callback_uri()), storage=storage)
        user = DevInteractionsUser(callback_uri())
        again = OAuth(world.url, user_agent=user, storage=storage)
        with trio.fail_after(CLIENT_SECONDS):
            async with connect_http(world.url, auth=first) as client:
                await client.call_tool("whoami")
            async with connect_http(world.url, auth=again) as client:
                published = text_of(await client.call_tool("publish", {"text": "later"}))
        assert published == "published 'later' as alice with mcp:read mcp:write"
        [visited] = user.visited
        assert {"mcp:read", "mcp:write"} <= set(scopes_asked(visited))


# --- the official SDK's client -----------------------------------------------------------------


def run_sdk_client(url: str, login: str) -> dict[str, object]:
    """Run sdk_oauth_client.py in the peers' python; the JSON it printed last."""
    done = run_to_end([peers_python(), str(SDK_CLIENT), url, login, callback_uri()], RUN_SECONDS)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-4000:]}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr[-4000:]
    report: dict[str, object] = json.loads(lines[-1])
    return report


async def test_the_sdk_client_discovers_registers_logs_in_and_steps_up() -> None:
    peers_python()  # (skips the test, or fails it in CI, when the peers' venv is missing)
    seen = Seen()
    async with protected_realm(build_server(seen), scopes=("mcp:read",)) as world:
        await provider_requests(world)
        report = await trio.to_thread.run_sync(run_sdk_client, world.url, "carol")
        requests = await provider_requests(world)

    assert report["protocol_version"] == "2026-07-28"
    assert report["tools"] == ["publish", "report", "whoami"]
    whoami = json.loads(str(report["whoami"]))
    assert whoami["subject"] == "carol"
    assert whoami["scopes"] == ["mcp:read"]
    assert report["publish"] == "published 'sdk' as carol with mcp:read mcp:write"
    visited = report["visited"]
    assert isinstance(visited, list) and len(visited) == 2
    assert "mcp:write" not in scopes_asked(visited[0])
    assert {"mcp:read", "mcp:write"} <= set(scopes_asked(visited[1]))
    for url in visited:
        assert parse_qs(urlsplit(url).query)["resource"] == [world.url]
    assert requests.count("POST /reg") == 1
    assert requests.count("GET /auth") == 2
    token = seen.tokens["publish"][0]
    assert token is not None and token.subject == "carol"
    assert token.audience == (world.url,)
