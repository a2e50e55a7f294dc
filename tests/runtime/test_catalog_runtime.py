"""Prompts, resources, resource templates and completions through `Server.handle`, with real
handlers: what each return shape becomes, input rounds on `prompts/get` and `resources/read`,
failures, and what registration refuses. Every reply and notification is schema-checked by
the helpers."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import trio
from trio.testing import MockClock

from mcp_tasks import (
    Completion,
    CompletionArgument,
    ElicitParams,
    ElicitRequest,
    GetPromptResult,
    InputRequired,
    PromptMessage,
    ProtocolError,
    RequestContext,
    ResourceContents,
    ResourceNotFound,
    Server,
    TextContent,
    ToolContext,
)

from .helpers import Client, request
from .test_jobs_example import load_jobs

TOPICS = ["trio", "triangles", "trees", "tasks"]


class ReviewArgs(msgspec.Struct):
    topic: str
    tone: str = "plain"
    max_words: str = msgspec.field(default="100", name="maxWords")
    note: str | None = None


class TopicArgs(msgspec.Struct):
    topic: str


def _ask(message: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    return ElicitRequest(params=ElicitParams(message=message, requested_schema=schema))


def build() -> tuple[Server, dict[str, Any]]:
    server = Server("catalog", "1.0")
    seen: dict[str, Any] = {"runs": 0, "resource_runs": 0, "resolved": None, "cancelled": 0}

    @server.tool()
    async def noop(ctx: ToolContext) -> str:
        return "ok"

    _add_prompts(server, seen)
    _add_resources(server, seen)
    _add_completions(server, seen)
    return server, seen


def _add_prompts(server: Server, seen: dict[str, Any]) -> None:
    @server.prompt(title="Review")
    async def review(ctx: RequestContext, args: ReviewArgs) -> str:
        """Review a topic.

        Only the first paragraph is the description."""
        return f"review {args.topic} in a {args.tone} tone, {args.max_words} words, {args.note}"

    @server.prompt(description="Two turns")
    async def conversation(ctx: RequestContext) -> list[PromptMessage]:
        return [
            PromptMessage.user("hello"),
            PromptMessage(role="assistant", content=TextContent(text="hi, how can I help?")),
        ]

    @server.prompt()
    async def described(ctx: RequestContext) -> GetPromptResult:
        return GetPromptResult(messages=[PromptMessage.user("x")], description="as given")

    @server.prompt()
    async def ask_context(ctx: RequestContext, args: TopicArgs) -> Any:
        """Asks for context before it writes the prompt."""
        seen["runs"] += 1
        answer = ctx.elicit_response("context")
        if answer is None:
            return InputRequired(requests={"context": _ask("context?")}, state=f"on {args.topic}")
        given = (answer.content or {}).get("answer")
        return f"{args.topic} with {given} ({ctx.handler_state})"

    @server.prompt()
    async def broken(ctx: RequestContext) -> str:
        raise RuntimeError("secret detail /etc/passwd")

    @server.prompt()
    async def wrong_type(ctx: RequestContext) -> Any:
        return 42

    @server.prompt()
    async def refuses(ctx: RequestContext) -> str:
        raise ProtocolError(-32602, "that prompt needs a sunny day", {"weather": "rain"})

    @server.prompt()
    async def chatty(ctx: RequestContext) -> str:
        await ctx.report_progress(1, 2, "thinking")
        await ctx.log("info", {"said": "info"}, logger="chatty")
        await ctx.log("error", {"said": "error"}, logger="chatty")
        await ctx.report_progress(2, 2)
        return "done"

    @server.prompt()
    async def hang(ctx: RequestContext) -> str:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            seen["cancelled"] += 1
            raise
        raise AssertionError


def _add_resources(server: Server, seen: dict[str, Any]) -> None:
    @server.resource("memo://text", mime_type="text/plain", ttl_ms=5000)
    async def text_memo(ctx: RequestContext) -> str:
        """A short text."""
        return "some text"

    @server.resource("memo://blob", name="blob", mime_type="application/octet-stream")
    async def blob_memo(ctx: RequestContext) -> bytes:
        return b"\x00\xffbinary"

    @server.resource("memo://many")
    async def many_memo(ctx: RequestContext) -> list[ResourceContents]:
        return [
            ResourceContents(uri="memo://many#1", mime_type="text/markdown", text="# one"),
            ResourceContents(uri="memo://many#2", blob=base64.b64encode(b"two").decode()),
        ]

    @server.resource("memo://asks")
    async def asking_memo(ctx: RequestContext) -> Any:
        seen["resource_runs"] += 1
        answer = ctx.elicit_response("which")
        if answer is None:
            return InputRequired(requests={"which": _ask("which version?")}, state="v")
        return f"version {(answer.content or {}).get('answer')} ({ctx.handler_state})"

    @server.resource("memo://broken")
    async def broken_memo(ctx: RequestContext) -> str:
        raise RuntimeError("secret detail /etc/shadow")

    @server.resource("memo://wrong")
    async def wrong_memo(ctx: RequestContext) -> Any:
        return {"not": "contents"}

    @server.resource("memo://progress")
    async def progress_memo(ctx: RequestContext) -> str:
        await ctx.report_progress(1, None, "reading")
        await ctx.log("warning", "slow disk")
        return "read"

    @server.resource("files://docs/readme", mime_type="text/plain")
    async def readme(ctx: RequestContext) -> str:
        return "the fixed readme"

    @server.resource_template("files://{folder}/{name}", mime_type="text/plain", ttl_ms=250)
    async def file(ctx: RequestContext, name: str, folder: str) -> str:
        """A file in a folder."""
        if name == "missing":
            raise ResourceNotFound(name)
        return f"folder={folder} name={name}"


def _add_completions(server: Server, seen: dict[str, Any]) -> None:
    @server.completion(prompt="review")
    async def complete_topic(argument: CompletionArgument, resolved: dict[str, str]) -> list[str]:
        seen["resolved"] = (argument.name, resolved)
        return [topic for topic in TOPICS if topic.startswith(argument.value)]

    @server.completion(uri_template="files://{folder}/{name}")
    async def complete_file(argument: CompletionArgument, resolved: dict[str, str]) -> Completion:
        if argument.value == "boom":
            raise RuntimeError("secret detail in a completion")
        if argument.value == "many":
            return Completion(values=[f"f{index}" for index in range(150)])
        return Completion(values=["a.txt"], total=7, has_more=True)


@pytest.fixture
async def env() -> AsyncIterator[tuple[Server, Client, dict[str, Any]]]:
    server, seen = build()
    async with server.running():
        yield server, Client(server), seen


Env = tuple[Server, Client, dict[str, Any]]


async def get_prompt(
    client: Client,
    name: str,
    *,
    caps: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    **params: Any,
) -> dict[str, Any]:
    """`prompts/get`; `params` go in the params, `meta` in their `_meta`."""
    return await client.send("prompts/get", {"name": name, **params}, caps=caps, **(meta or {}))


async def read(
    client: Client, uri: str, *, meta: dict[str, Any] | None = None, **params: Any
) -> dict[str, Any]:
    return await client.send("resources/read", {"uri": uri, **params}, **(meta or {}))


async def complete(
    client: Client, ref: dict[str, str], name: str, value: str, **context: str
) -> dict[str, Any]:
    params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
    if context:
        params["context"] = {"arguments": context}
    return await client.send("completion/complete", params)


def texts(reply: dict[str, Any]) -> list[str]:
    return [message["content"]["text"] for message in reply["result"]["messages"]]


# --- discover and the lists ----------------------------------------------------------------


async def test_discover_declares_only_what_is_registered(autojump_clock: MockClock) -> None:
    server = Server("bare", "1")

    @server.tool()
    async def noop(ctx: ToolContext) -> str:
        return "ok"

    async with server.running():
        client = Client(server)

        async def capabilities() -> dict[str, Any]:
            declared: dict[str, Any] = (await client.send("server/discover"))["result"][
                "capabilities"
            ]
            return declared

        assert set(await capabilities()) == {"tools", "logging", "extensions"}
        for method in ("prompts/list", "resources/read", "completion/complete"):
            error = (await client.send(method, {}))["error"]
            assert error["code"] == -32601 and method in error["message"]

        @server.prompt()
        async def hello(ctx: RequestContext, args: TopicArgs) -> str:
            return "hello"

        assert (await capabilities())["prompts"] == {"listChanged": True}
        assert "resources" not in await capabilities()

        @server.resource_template("notes://{id}")
        async def note(ctx: RequestContext, id: str) -> str:
            return id

        assert (await capabilities())["resources"] == {"listChanged": True, "subscribe": True}
        assert "completions" not in await capabilities()

        @server.completion(prompt="hello")
        async def topics(argument: CompletionArgument, resolved: dict[str, str]) -> list[str]:
            return ["x"]

        assert (await capabilities())["completions"] == {}
        server.remove_prompt("hello")
        declared = await capabilities()
        assert "prompts" not in declared and "completions" not in declared
        assert (await get_prompt(client, "hello"))["error"]["code"] == -32601


async def test_prompts_list_shows_the_struct_fields_as_arguments(env: Env) -> None:
    _, client, _ = env
    prompts = {p["name"]: p for p in (await client.send("prompts/list"))["result"]["prompts"]}
    assert prompts["review"] == {
        "name": "review",
        "title": "Review",
        "description": "Review a topic.",
        "arguments": [
            {"name": "topic", "required": True},
            {"name": "tone", "required": False},
            {"name": "maxWords", "required": False},
            {"name": "note", "required": False},
        ],
    }
    assert prompts["conversation"] == {"name": "conversation", "description": "Two turns"}


async def test_resource_lists_show_resources_and_templates(env: Env) -> None:
    _, client, _ = env
    resources = (await client.send("resources/list"))["result"]["resources"]
    by_uri = {r["uri"]: r for r in resources}
    assert by_uri["memo://text"] == {
        "uri": "memo://text",
        "name": "text_memo",
        "description": "A short text.",
        "mimeType": "text/plain",
    }
    assert by_uri["memo://blob"]["name"] == "blob"
    templates = (await client.send("resources/templates/list"))["result"]["resourceTemplates"]
    assert templates == [
        {
            "uriTemplate": "files://{folder}/{name}",
            "name": "file",
            "description": "A file in a folder.",
            "mimeType": "text/plain",
        }
    ]


# --- prompts/get ---------------------------------------------------------------------------


async def test_prompt_arguments_arrive_decoded_with_their_wire_names(env: Env) -> None:
    _, client, _ = env
    reply = await get_prompt(client, "review", arguments={"topic": "trio", "maxWords": "5"})
    assert reply["result"]["resultType"] == "complete"
    assert reply["result"]["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "review trio in a plain tone, 5 words, None"},
        }
    ]
    reply = await get_prompt(
        client, "review", arguments={"topic": "t", "tone": "dry", "note": "n", "unknown": "x"}
    )
    assert texts(reply) == ["review t in a dry tone, 100 words, n"]


async def test_each_return_shape_of_a_prompt_becomes_its_messages(env: Env) -> None:
    _, client, _ = env
    reply = await get_prompt(client, "conversation")
    assert [m["role"] for m in reply["result"]["messages"]] == ["user", "assistant"]
    assert texts(reply) == ["hello", "hi, how can I help?"]
    reply = await get_prompt(client, "described")
    assert reply["result"]["description"] == "as given" and texts(reply) == ["x"]
    assert reply["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "catalog"


@pytest.mark.parametrize(
    ("name", "arguments", "words"),
    [
        ("review", {}, ["'topic'"]),
        ("review", {"tone": "dry"}, ["'topic'"]),
        ("review", {"topic": 5}, ["str", "arguments"]),
        ("nothing", {}, ["Unknown prompt", "'nothing'"]),
    ],
)
async def test_prompt_arguments_are_checked_before_the_handler_runs(
    env: Env, name: str, arguments: dict[str, Any], words: list[str]
) -> None:
    _, client, _ = env
    error = (await get_prompt(client, name, arguments=arguments))["error"]
    assert error["code"] == -32602
    for word in words:
        assert word in error["message"], error


async def test_a_prompt_input_round_runs_the_handler_again_with_the_answer(env: Env) -> None:
    _, client, seen = env
    first = (await get_prompt(client, "ask_context", arguments={"topic": "trio"}))["result"]
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["context"]
    assert first["inputRequests"]["context"]["method"] == "elicitation/create"
    assert "on trio" not in json.dumps(first)  # the handler state travels sealed
    answer = {"context": {"action": "accept", "content": {"answer": "nurseries"}}}
    second = await get_prompt(
        client,
        "ask_context",
        arguments={"topic": "trio"},
        inputResponses=answer,
        requestState=first["requestState"],
    )
    assert texts(second) == ["trio with nurseries (on trio)"]
    assert seen["runs"] == 2


async def test_a_prompt_round_state_is_bound_to_its_arguments(env: Env) -> None:
    _, client, seen = env
    first = (await get_prompt(client, "ask_context", arguments={"topic": "trio"}))["result"]
    answer = {"context": {"action": "accept", "content": {"answer": "x"}}}
    error = (
        await get_prompt(
            client,
            "ask_context",
            arguments={"topic": "asyncio"},
            inputResponses=answer,
            requestState=first["requestState"],
        )
    )["error"]
    assert error["code"] == -32602 and "requestState" in error["message"]
    error = (
        await get_prompt(
            client, "review", arguments={"topic": "trio"}, requestState=first["requestState"]
        )
    )["error"]
    assert error["code"] == -32602 and "requestState" in error["message"]
    assert seen["runs"] == 1  # neither reached the handler


async def test_a_prompt_that_asks_a_client_without_the_capability_is_refused(env: Env) -> None:
    _, client, _ = env
    error = (await get_prompt(client, "ask_context", arguments={"topic": "t"}, caps={}))["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"elicitation": {}}}


async def test_a_prompt_failure_is_an_internal_error_without_details(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    _, client, _ = env
    error = (await get_prompt(client, "broken"))["error"]
    assert error == {"code": -32603, "message": "Prompt 'broken' failed with an internal error"}
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert logged and logged[0].exc_info is not None  # the details go to the log only
    assert "secret" in str(logged[0].exc_info[1])
    error = (await get_prompt(client, "wrong_type"))["error"]
    assert error["code"] == -32603 and "wrong_type" in error["message"]
    assert "returned" not in error["message"]


async def test_a_protocol_error_raised_by_a_prompt_keeps_its_code_and_data(env: Env) -> None:
    _, client, _ = env
    error = (await get_prompt(client, "refuses"))["error"]
    assert error == {
        "code": -32602,
        "message": "that prompt needs a sunny day",
        "data": {"weather": "rain"},
    }


async def test_prompt_and_resource_handlers_send_progress_and_logs_when_asked(
    env: Env,
) -> None:
    _, client, _ = env
    assert texts(await get_prompt(client, "chatty")) == ["done"]
    assert client.notifications == []  # asked for neither
    meta: dict[str, Any] = {"progressToken": "p", "io.modelcontextprotocol/logLevel": "warning"}
    assert texts(await get_prompt(client, "chatty", meta=meta)) == ["done"]
    assert [(n["method"], n["params"]) for n in client.notifications] == [
        (
            "notifications/progress",
            {"progressToken": "p", "progress": 1, "total": 2, "message": "thinking"},
        ),
        (
            "notifications/message",
            {"level": "error", "data": {"said": "error"}, "logger": "chatty"},
        ),
        ("notifications/progress", {"progressToken": "p", "progress": 2, "total": 2}),
    ]
    client.notifications.clear()
    meta = {"progressToken": 9, "io.modelcontextprotocol/logLevel": "debug"}
    reply = await read(client, "memo://progress", meta=meta)
    assert reply["result"]["contents"][0]["text"] == "read"
    assert [(n["method"], n["params"]) for n in client.notifications] == [
        ("notifications/progress", {"progressToken": 9, "progress": 1, "message": "reading"}),
        ("notifications/message", {"level": "warning", "data": "slow disk"}),
    ]


async def test_cancelled_notification_stops_a_prompt_and_no_reply_is_sent(
    env: Env, autojump_clock: MockClock
) -> None:
    server, client, seen = env
    replies: list[Any] = []

    async def get_hang() -> None:
        data = request("prompts/get", {"name": "hang"}, request_id="slow-prompt")
        replies.append(await server.handle(data, connection=client.connection))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(get_hang)
        await trio.sleep(1)
        assert replies == []
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "slow-prompt"},
        }
        assert await server.handle(json.dumps(note).encode(), connection=client.connection) is None
    assert replies == [None] and seen["cancelled"] == 1
    assert client.connection.in_flight == {}


# --- resources/read ------------------------------------------------------------------------


async def test_text_bytes_and_contents_become_resource_contents(env: Env) -> None:
    _, client, _ = env
    result = (await read(client, "memo://text"))["result"]
    assert result["contents"] == [
        {"uri": "memo://text", "mimeType": "text/plain", "text": "some text"}
    ]
    assert result["ttlMs"] == 5000 and result["resultType"] == "complete"
    result = (await read(client, "memo://blob"))["result"]
    (blob,) = result["contents"]
    assert blob["mimeType"] == "application/octet-stream" and "text" not in blob
    assert base64.b64decode(blob["blob"]) == b"\x00\xffbinary"
    assert result["ttlMs"] == 0
    contents = (await read(client, "memo://many"))["result"]["contents"]
    assert contents == [
        {"uri": "memo://many#1", "mimeType": "text/markdown", "text": "# one"},
        {"uri": "memo://many#2", "blob": base64.b64encode(b"two").decode()},
    ]


async def test_a_template_read_passes_its_variables_by_name_percent_decoded(env: Env) -> None:
    _, client, _ = env
    result = (await read(client, "files://notes/a%20b.txt"))["result"]
    assert result["contents"] == [
        {
            "uri": "files://notes/a%20b.txt",
            "mimeType": "text/plain",
            "text": "folder=notes name=a b.txt",
        }
    ]
    assert result["ttlMs"] == 250
    fixed = (await read(client, "files://docs/readme"))["result"]
    assert fixed["contents"][0]["text"] == "the fixed readme"  # a fixed uri wins over a template


@pytest.mark.parametrize(
    "uri", ["files://notes/missing", "files://too/many/segments", "other://x", "memo://text/"]
)
async def test_a_uri_that_names_nothing_is_resource_not_found(env: Env, uri: str) -> None:
    _, client, _ = env
    error = (await read(client, uri))["error"]
    assert error == {"code": -32602, "message": f"Resource not found: {uri}", "data": {"uri": uri}}


async def test_a_resource_input_round_runs_the_handler_again_with_the_answer(env: Env) -> None:
    _, client, seen = env
    first = (await read(client, "memo://asks"))["result"]
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["which"]
    answer = {"which": {"action": "accept", "content": {"answer": "2"}}}
    second = await read(
        client, "memo://asks", inputResponses=answer, requestState=first["requestState"]
    )
    assert second["result"]["contents"][0]["text"] == "version 2 (v)"
    assert seen["resource_runs"] == 2
    error = (
        await read(client, "memo://text", inputResponses=answer, requestState=first["requestState"])
    )["error"]
    assert error["code"] == -32602 and "requestState" in error["message"]


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("memo://broken", "Resource 'memo://broken' failed with an internal error"),
        ("memo://wrong", "Resource 'memo://wrong' failed with an internal error"),
    ],
)
async def test_a_resource_failure_is_an_internal_error_without_details(
    env: Env, uri: str, message: str
) -> None:
    _, client, _ = env
    error = (await read(client, uri))["error"]
    assert error == {"code": -32603, "message": message}


async def test_a_removed_resource_is_not_found_and_no_longer_listed(env: Env) -> None:
    server, client, _ = env
    server.remove_resource("memo://text")
    error = (await read(client, "memo://text"))["error"]
    assert error["code"] == -32602 and error["data"] == {"uri": "memo://text"}
    listed = (await client.send("resources/list"))["result"]["resources"]
    assert "memo://text" not in {r["uri"] for r in listed}
    with pytest.raises(KeyError):
        server.remove_resource("memo://text")


# --- completion/complete -------------------------------------------------------------------


async def test_completion_for_a_prompt_argument_sees_the_resolved_ones(env: Env) -> None:
    _, client, seen = env
    ref = {"type": "ref/prompt", "name": "review"}
    reply = await complete(client, ref, "topic", "tr", tone="dry")
    assert reply["result"]["completion"] == {"values": ["trio", "triangles", "trees"]}
    assert seen["resolved"] == ("topic", {"tone": "dry"})
    reply = await complete(client, ref, "topic", "zzz")
    assert reply["result"]["completion"] == {"values": []}
    assert seen["resolved"] == ("topic", {})


async def test_completion_for_a_template_variable(env: Env) -> None:
    _, client, _ = env
    ref = {"type": "ref/resource", "uri": "files://{folder}/{name}"}
    reply = await complete(client, ref, "name", "a")
    assert reply["result"]["completion"] == {"values": ["a.txt"], "total": 7, "hasMore": True}
    many = (await complete(client, ref, "name", "many"))["result"]["completion"]
    assert many["values"] == [f"f{index}" for index in range(100)]
    assert many["total"] == 150 and many["hasMore"] is True
    error = (await complete(client, ref, "name", "boom"))["error"]
    assert error["code"] == -32603 and "secret" not in error["message"]


async def test_completion_refs_must_name_something_registered(env: Env) -> None:
    _, client, _ = env
    no_completion = {"type": "ref/prompt", "name": "conversation"}
    reply = await complete(client, no_completion, "x", "")
    assert reply["result"]["completion"] == {"values": []}
    for ref in (
        {"type": "ref/prompt", "name": "nothing"},
        {"type": "ref/resource", "uri": "files://{other}"},
    ):
        error = (await complete(client, ref, "x", ""))["error"]
        assert error["code"] == -32602, ref


async def test_removing_a_prompt_removes_its_completion(env: Env) -> None:
    server, client, seen = env
    server.remove_prompt("review")

    @server.prompt()
    async def review(ctx: RequestContext, args: TopicArgs) -> str:
        return args.topic

    reply = await complete(client, {"type": "ref/prompt", "name": "review"}, "topic", "tr")
    assert reply["result"]["completion"] == {"values": []}
    assert seen["resolved"] is None  # the old completion handler did not run
    assert texts(await get_prompt(client, "review", arguments={"topic": "new"})) == ["new"]


# --- registration --------------------------------------------------------------------------


class NumberArgs(msgspec.Struct):
    count: int


def _registrations() -> list[tuple[str, Any]]:
    async def ctx_only(ctx: RequestContext) -> str:
        return ""

    async def three(ctx: RequestContext, a: TopicArgs, b: TopicArgs) -> str:
        return ""

    async def numbers(ctx: RequestContext, args: NumberArgs) -> str:
        return ""

    async def plain_dict(ctx: RequestContext, args: dict[str, str]) -> str:
        return ""

    async def with_args(ctx: RequestContext, args: TopicArgs) -> str:
        return ""

    async def name_only(ctx: RequestContext, name: str) -> str:
        return ""

    async def wrong_name(ctx: RequestContext, folder: str, title: str) -> str:
        return ""

    async def extra(ctx: RequestContext, folder: str, name: str, more: str) -> str:
        return ""

    def not_async(ctx: RequestContext) -> str:
        return ""

    def not_async_completion(argument: CompletionArgument, resolved: dict[str, str]) -> list[str]:
        return []

    template = "files://{folder}/{name}"
    return [
        ("prompt not async", lambda s: s.prompt()(not_async)),
        ("prompt (ctx, a, b)", lambda s: s.prompt()(three)),
        ("prompt int argument", lambda s: s.prompt()(numbers)),
        ("prompt dict arguments", lambda s: s.prompt()(plain_dict)),
        ("resource not async", lambda s: s.resource("x://a")(not_async)),
        ("resource (ctx, args)", lambda s: s.resource("x://a")(with_args)),
        ("template not async", lambda s: s.resource_template(template)(not_async)),
        ("template missing a variable", lambda s: s.resource_template(template)(name_only)),
        ("template wrong variable", lambda s: s.resource_template(template)(wrong_name)),
        ("template extra parameter", lambda s: s.resource_template(template)(extra)),
        ("template (ctx) only", lambda s: s.resource_template(template)(ctx_only)),
        ("completion not async", lambda s: s.completion(prompt="p")(not_async_completion)),
        ("completion of both", lambda s: s.completion(prompt="p", uri_template=template)),
        ("completion of neither", lambda s: s.completion()),
    ]


REGISTRATIONS = _registrations()


@pytest.mark.parametrize(
    "register", [r for _, r in REGISTRATIONS], ids=[case for case, _ in REGISTRATIONS]
)
async def test_registration_refuses_a_handler_of_the_wrong_shape(
    register: Any, autojump_clock: MockClock
) -> None:
    server = Server("t", "1")

    @server.prompt()
    async def p(ctx: RequestContext) -> str:
        return ""

    async with server.running():
        client = Client(server)
        before = (await client.send("server/discover"))["result"]["capabilities"]
        with pytest.raises(TypeError):
            register(server)
        after = (await client.send("server/discover"))["result"]["capabilities"]
        assert after == before  # nothing half-registered
        listed = (await client.send("prompts/list"))["result"]["prompts"]
        assert [prompt["name"] for prompt in listed] == ["p"]


def test_registering_twice_or_completing_the_unknown_is_a_value_error() -> None:
    server, _ = build()

    async def again(ctx: RequestContext) -> str:
        return ""

    async def file(ctx: RequestContext, folder: str, name: str) -> str:
        return ""

    async def values(argument: CompletionArgument, resolved: dict[str, str]) -> list[str]:
        return []

    with pytest.raises(ValueError, match="already registered"):
        server.prompt("review")(again)
    with pytest.raises(ValueError, match="already registered"):
        server.resource("memo://text")(again)
    with pytest.raises(ValueError, match="already registered"):
        server.resource_template("files://{folder}/{name}")(file)
    with pytest.raises(ValueError, match="already registered"):
        server.completion(prompt="review")(values)
    with pytest.raises(ValueError, match="unknown prompt"):
        server.completion(prompt="nothing")(values)
    with pytest.raises(ValueError, match="unknown uri template"):
        server.completion(uri_template="files://{x}")(values)
    with pytest.raises(ValueError, match="variable"):
        server.resource_template("files://plain")(again)


def test_a_prompt_whose_args_have_no_annotation_is_refused() -> None:
    server = Server("t", "1")

    async def unannotated(ctx, args):  # type: ignore[no-untyped-def]
        return "fine"

    with pytest.raises(TypeError, match="annotate 'args'"):
        server.prompt()(unannotated)


# --- examples/jobs.py ----------------------------------------------------------------------


async def test_jobs_greet_without_arguments_greets_the_world(autojump_clock: MockClock) -> None:
    server = load_jobs()
    async with server.running():
        client = Client(server)
        for params in ({"name": "greet"}, {"name": "greet", "arguments": {}}):
            reply = await client.send("tools/call", params)
            assert reply["result"]["content"] == [{"type": "text", "text": "Hello, world!"}]
        reply = await client.call("greet", {"name": "Ada"})
        assert reply["result"]["content"][0]["text"] == "Hello, Ada!"
