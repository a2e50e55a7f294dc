"""Prompts, resources, resource templates and completion in the core: the catalog, the list
methods, prompts/get, resources/read and completion/complete (with input rounds)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_tasks.core import (
    CallToolResult,
    Completion,
    CompletionCall,
    CompletionOutcome,
    ErrorObject,
    GetPrompt,
    GetPromptResult,
    InputRequired,
    PromptArgument,
    PromptCall,
    PromptMessage,
    PromptOutcome,
    PromptSpec,
    ReadResource,
    ResourceContents,
    ResourceOutcome,
    ResourceRead,
    ResourceSpec,
    ResourceTemplateSpec,
    ServerOptions,
    Step,
    ToolCall,
    ToolOutcome,
    ToolSpec,
)

from .harness import (
    ALL_CAPS,
    T0,
    CompletionHandler,
    CompletionTarget,
    Harness,
    PromptHandler,
    ResourceHandler,
    checked_harnesses,
    meta,
)
from .tools import ask_name


@pytest.fixture
def make_harness() -> Iterator[type[Harness]]:
    yield from checked_harnesses()


def error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" in reply, f"expected an error, got {reply}"
    error: dict[str, Any] = reply["error"]
    return error


def _decoded(raw: Any) -> Any:
    return json.loads(bytes(raw))


# --- handlers that show on the wire what they were given -------------------------------------


def echo_prompt(call: PromptCall) -> PromptOutcome:
    seen = {
        "arguments": call.arguments,
        "responses": {key: _decoded(raw) for key, raw in call.input_responses.items()},
        "state": call.handler_state,
    }
    return GetPromptResult(messages=[PromptMessage.user(json.dumps(seen, sort_keys=True))])


def ask_then_prompt(call: PromptCall) -> PromptOutcome:
    if "who" not in call.input_responses:
        return InputRequired(requests={"who": ask_name()}, state="prompt-round-1")
    return echo_prompt(call)


def failing_prompt(call: PromptCall) -> PromptOutcome:
    return ErrorObject(code=-32603, message="prompt store offline")


def echo_resource(read: ResourceRead) -> ResourceOutcome:
    seen = {
        "template": read.template,
        "variables": read.variables,
        "responses": {key: _decoded(raw) for key, raw in read.input_responses.items()},
        "state": read.handler_state,
    }
    return [ResourceContents(uri=read.uri, mime_type="application/json", text=json.dumps(seen))]


def ask_then_read(read: ResourceRead) -> ResourceOutcome:
    if "who" not in read.input_responses:
        return InputRequired(requests={"who": ask_name()}, state="read-round-1")
    return echo_resource(read)


def missing_resource(read: ResourceRead) -> ResourceOutcome:
    return ErrorObject(
        code=-32602, message=f"Resource not found: {read.uri}", data={"uri": read.uri}
    )


def complete_echo(call: CompletionCall) -> CompletionOutcome:
    return Completion(
        values=[call.argument.name, call.argument.value, json.dumps(call.context, sort_keys=True)]
    )


def ask_tool(call: ToolCall) -> ToolOutcome:
    if "who" not in call.input_responses:
        return InputRequired(requests={"who": ask_name()}, state="tool-round-1")
    return CallToolResult.text("hello")


REVIEW = PromptSpec(
    name="review",
    title="Code review",
    description="Review a change",
    arguments=(
        PromptArgument(name="code", required=True),
        PromptArgument(name="language", required=True),
        PromptArgument(name="style", description="house style", required=False),
    ),
)
PROMPTS: dict[str, tuple[PromptSpec, PromptHandler]] = {
    "review": (REVIEW, echo_prompt),
    "hello": (PromptSpec(name="hello"), echo_prompt),
    "ask": (PromptSpec(name="ask"), ask_then_prompt),
    "broken": (PromptSpec(name="broken"), failing_prompt),
}
README = ResourceSpec(
    uri="file:///readme.md", name="readme", mime_type="text/markdown", ttl_ms=5000
)
LOGS = ResourceTemplateSpec(uri_template="file:///logs/{day}.txt", name="logs", ttl_ms=1000)
RESOURCES: dict[str, tuple[ResourceSpec | ResourceTemplateSpec, ResourceHandler]] = {
    README.uri: (README, echo_resource),
    LOGS.uri_template: (LOGS, echo_resource),
    "file:///secret": (ResourceSpec(uri="file:///secret", name="secret"), ask_then_read),
    "file:///gone": (ResourceSpec(uri="file:///gone", name="gone"), missing_resource),
}
COMPLETIONS: dict[CompletionTarget, CompletionHandler] = {
    ("ref/prompt", "review"): complete_echo,
    ("ref/resource", LOGS.uri_template): complete_echo,
}


@pytest.fixture
def h(make_harness: type[Harness]) -> Harness:
    return make_harness(prompts=PROMPTS, resources=RESOURCES, completions=COMPLETIONS)


def get_prompt(h: Harness, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Any:
    params: dict[str, Any] = {"name": name, **kw.pop("extra", {})}
    if arguments is not None:
        params["arguments"] = arguments
    return h.request("prompts/get", params, **kw)


def prompt_text(reply: dict[str, Any]) -> Any:
    return json.loads(reply["result"]["messages"][0]["content"]["text"])


def read(h: Harness, uri: str, **kw: Any) -> Any:
    return h.request("resources/read", {"uri": uri, **kw.pop("extra", {})}, **kw)


def read_text(reply: dict[str, Any]) -> Any:
    return json.loads(reply["result"]["contents"][0]["text"])


def complete(h: Harness, ref: dict[str, str], value: str = "", **params: Any) -> Any:
    return h.request(
        "completion/complete", {"ref": ref, "argument": {"name": "code", "value": value}, **params}
    )


def raw_request(method: str, params: dict[str, Any], request_id: int = 7) -> bytes:
    full = {**params, "_meta": meta()}
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": full}
    ).encode()


# --- registration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("file:///static.txt", "has no {variable}"),
        ("db://{table}/{table}", "repeats a variable"),
        ("file:///{+path}", "only simple {name} variables"),
        ("q://{a,b}", "only simple {name} variables"),
        ("q://{a-b}", "only simple {name} variables"),
        ("q://{open", "only simple {name} variables"),
        ("q://close}", "only simple {name} variables"),
    ],
)
def test_template_with_anything_but_simple_variables_is_refused(template: str, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(template)) + ".*" + re.escape(words)):
        ResourceTemplateSpec(uri_template=template, name="t")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: ResourceSpec(uri="readme.md", name="r"), "has no scheme"),
        (lambda: ResourceSpec(uri="file:///r", name="r", ttl_ms=-1), "ttl_ms"),
        (lambda: ResourceTemplateSpec(uri_template="x://{a}", name="t", ttl_ms=-1), "ttl_ms"),
    ],
)
def test_resource_spec_is_checked_at_construction(make: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        make()


@pytest.mark.parametrize(
    ("register", "words"),
    [
        (lambda c: c.add_prompt(PromptSpec(name="review")), "prompt named 'review'"),
        (lambda c: c.add_resource(ResourceSpec(uri=README.uri, name="x")), "file:///readme.md"),
        (
            lambda c: c.add_template(
                ResourceTemplateSpec(uri_template=LOGS.uri_template, name="x")
            ),
            "file:///logs/{day}.txt",
        ),
        (lambda c: c.add_completion(("ref/prompt", "review")), "already registered"),
        (lambda c: c.add_completion(("ref/prompt", "nope")), "unknown prompt 'nope'"),
        (lambda c: c.add_completion(("ref/resource", "x://{y}")), "unknown uri template"),
        # A fixed resource is not a template: nothing to complete in it.
        (lambda c: c.add_completion(("ref/resource", README.uri)), "unknown uri template"),
    ],
)
def test_a_second_or_dangling_registration_is_refused(
    h: Harness, register: Any, words: str
) -> None:
    catalog = h.core.catalog
    before = (dict(catalog.prompts), dict(catalog.resources), dict(catalog.templates))
    completions = set(catalog.completions)
    with pytest.raises(ValueError, match=re.escape(words)):
        register(catalog)
    assert (catalog.prompts, catalog.resources, catalog.templates) == before
    assert catalog.completions == completions


# --- templates: what a uri names -------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "uri", "variables"),
    [
        ("file:///logs/{day}.txt", "file:///logs/2026-08-01.txt", {"day": "2026-08-01"}),
        ("db://{schema}/{table}", "db://public/users", {"schema": "public", "table": "users"}),
        ("file:///logs/{day}.txt", "file:///logs/a%20b.txt", {"day": "a b"}),
        ("file:///logs/{day}.txt", "file:///logs/caf%C3%A9.txt", {"day": "café"}),
        ("file:///logs/{day}.txt", "file:///logs/a+b.txt", {"day": "a+b"}),  # not a form body
        ("file:///logs/{day}.txt", "file:///logs/100%.txt", {"day": "100%"}),  # no escape: kept
        ("file:///logs/{day}.txt", "file:///logs/a/b.txt", None),  # one segment only
        ("file:///logs/{day}.txt", "file:///logs/a?b.txt", None),
        ("file:///logs/{day}.txt", "file:///logs/a#b.txt", None),
        ("file:///logs/{day}.txt", "file:///logs/.txt", None),  # a variable is never empty
        ("file:///logs/{day}.txt", "file:///logs/2026Xtxt", None),  # "." is literal
        ("file:///logs/{day}.txt", "file:///logs/x.txt.bak", None),  # the whole uri
        ("file:///logs/{day}.txt", "prefix-file:///logs/x.txt", None),
        ("file:///logs/{day}.txt", "file:///other/x.txt", None),
        ("db://{schema}/{table}", "db://public", None),
    ],
)
def test_template_match_reads_percent_decoded_variables(
    template: str, uri: str, variables: dict[str, str] | None
) -> None:
    spec = ResourceTemplateSpec(uri_template=template, name="t")
    assert spec.match(uri) == variables


def test_template_lists_its_variables_in_order() -> None:
    assert ResourceTemplateSpec(uri_template="db://{schema}/{table}", name="t").variables == [
        "schema",
        "table",
    ]


def test_find_resource_prefers_a_registered_uri_to_a_template(h: Harness) -> None:
    h.core.catalog.add_resource(ResourceSpec(uri="file:///logs/today.txt", name="t", ttl_ms=7))
    fixed = h.core.catalog.find_resource("file:///logs/today.txt")
    assert fixed is not None
    assert (fixed.template, fixed.variables, fixed.ttl_ms) == (None, {}, 7)
    templated = h.core.catalog.find_resource("file:///logs/yesterday.txt")
    assert templated is not None
    assert (templated.template, templated.variables, templated.ttl_ms) == (
        LOGS.uri_template,
        {"day": "yesterday"},
        1000,
    )
    assert h.core.catalog.find_resource("file:///nothing") is None


# --- discover and method availability --------------------------------------------------------


def _only(kind: str) -> dict[str, Any]:
    registered: dict[str, dict[str, Any]] = {
        "none": {},
        "prompts": {"prompts": PROMPTS},
        "resources": {"resources": {README.uri: RESOURCES[README.uri]}},
        "templates": {"resources": {LOGS.uri_template: RESOURCES[LOGS.uri_template]}},
        "all": {"prompts": PROMPTS, "resources": RESOURCES, "completions": COMPLETIONS},
    }
    return registered[kind]


@pytest.mark.parametrize(
    ("kind", "declared"),
    [
        ("none", {}),
        ("prompts", {"prompts": {"listChanged": True}}),
        ("resources", {"resources": {"listChanged": True, "subscribe": True}}),
        ("templates", {"resources": {"listChanged": True, "subscribe": True}}),
        (
            "all",
            {
                "prompts": {"listChanged": True},
                "resources": {"listChanged": True, "subscribe": True},
                "completions": {},
            },
        ),
    ],
)
def test_discover_declares_only_what_is_registered(
    make_harness: type[Harness], kind: str, declared: dict[str, Any]
) -> None:
    h = make_harness(**_only(kind))
    capabilities = h.request("server/discover")["result"]["capabilities"]
    for name in ("prompts", "resources", "completions"):
        assert capabilities.get(name) == declared.get(name), name
    assert capabilities["tools"] == {"listChanged": True}
    assert h.core.catalog.capabilities() == declared


PARAMS_OF: dict[str, dict[str, Any]] = {
    "prompts/get": {"name": "review"},
    "resources/read": {"uri": README.uri},
    "completion/complete": {
        "ref": {"type": "ref/prompt", "name": "review"},
        "argument": {"name": "code", "value": ""},
    },
}
_METHODS_OF = {
    "prompts": ["prompts/list", "prompts/get"],
    "resources": ["resources/list", "resources/templates/list", "resources/read"],
    "completions": ["completion/complete"],
}


@pytest.mark.parametrize(
    ("kind", "method"),
    [(kind, method) for kind, methods in _METHODS_OF.items() for method in methods],
)
def test_a_method_of_a_kind_the_server_has_nothing_of_is_method_not_found(
    make_harness: type[Harness], kind: str, method: str
) -> None:
    # Every other kind is offered: only the missing one is refused.
    offered: dict[str, Any] = {"prompts": PROMPTS, "resources": RESOURCES}
    if kind != "completions":
        del offered[kind]
    h = make_harness(**offered)
    params = PARAMS_OF.get(method, {})
    exchange = h.send(raw_request(method, params))
    error = json.loads(exchange.reply or b"")["error"]
    assert error["code"] == -32601 and method in error["message"] and kind in error["message"]
    assert exchange.http_status == 404


def test_a_method_becomes_available_with_its_first_registration(
    make_harness: type[Harness],
) -> None:
    h = make_harness()
    assert error_of(h.request("prompts/list"))["code"] == -32601
    h.core.catalog.add_prompt(PromptSpec(name="late"))
    assert [p["name"] for p in h.request("prompts/list")["result"]["prompts"]] == ["late"]
    assert "prompts" in h.request("server/discover")["result"]["capabilities"]


# --- the list methods ------------------------------------------------------------------------


def test_prompts_list_shows_each_prompt_as_registered(h: Harness) -> None:
    result = h.request("prompts/list")["result"]
    assert [p["name"] for p in result["prompts"]] == list(PROMPTS)
    assert result["prompts"][0] == {
        "name": "review",
        "title": "Code review",
        "description": "Review a change",
        "arguments": [
            {"name": "code", "required": True},
            {"name": "language", "required": True},
            {"name": "style", "description": "house style", "required": False},
        ],
    }
    assert result["prompts"][1] == {"name": "hello"}  # no empty "arguments"


def test_resources_list_has_fixed_uris_and_templates_list_has_templates(h: Harness) -> None:
    resources = h.request("resources/list")["result"]["resources"]
    assert [r["uri"] for r in resources] == [README.uri, "file:///secret", "file:///gone"]
    assert resources[0] == {"uri": README.uri, "name": "readme", "mimeType": "text/markdown"}
    templates = h.request("resources/templates/list")["result"]["resourceTemplates"]
    assert templates == [{"uriTemplate": LOGS.uri_template, "name": "logs"}]


@pytest.mark.parametrize("method", ["prompts/list", "resources/list", "resources/templates/list"])
def test_list_results_carry_the_configured_cache_advice(
    make_harness: type[Harness], method: str
) -> None:
    options = ServerOptions(discover_ttl_ms=1234, cache_scope="private")
    h = make_harness(prompts=PROMPTS, resources=RESOURCES, options=options)
    result = h.request(method)["result"]
    assert (result["ttlMs"], result["cacheScope"]) == (1234, "private")
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "test-server"


@pytest.mark.parametrize(
    ("method", "key", "register", "expect"),
    [
        ("prompts/list", "prompts", lambda c: c.add_prompt(PromptSpec(name="new")), "new"),
        ("prompts/list", "prompts", lambda c: c.remove_prompt("hello"), None),
        (
            "resources/list",
            "resources",
            lambda c: c.add_resource(ResourceSpec(uri="file:///new", name="n")),
            "file:///new",
        ),
        ("resources/list", "resources", lambda c: c.remove_resource(README.uri), None),
        (
            "resources/templates/list",
            "resourceTemplates",
            lambda c: c.add_template(ResourceTemplateSpec(uri_template="n://{x}", name="n")),
            "n://{x}",
        ),
    ],
)
def test_a_cached_list_is_rebuilt_after_a_registration(
    h: Harness, method: str, key: str, register: Any, expect: str | None
) -> None:
    before = h.request(method)["result"][key]
    assert h.request(method)["result"][key] == before
    register(h.core.catalog)
    after = h.request(method)["result"][key]
    if expect is None:
        assert len(after) == len(before) - 1
    else:
        assert after[:-1] == before and expect in after[-1].values()


# --- prompts/get -----------------------------------------------------------------------------


def test_prompts_get_asks_the_shell_to_run_the_handler(h: Harness) -> None:
    step = h.core.receive(
        raw_request(
            "prompts/get", {"name": "review", "arguments": {"code": "x", "language": "py"}}
        ),
        T0,
    )
    assert not isinstance(step, Step)  # no reply yet: a need
    effect = step
    assert isinstance(effect, GetPrompt)
    call = effect.call
    assert (call.request_id, call.prompt_name) == (7, "review")
    assert call.arguments == {"code": "x", "language": "py"}
    assert (call.input_responses, call.handler_state) == ({}, None)
    assert call.client_capabilities.has_tasks


def test_prompts_get_returns_the_handler_messages_with_server_info(h: Harness) -> None:
    reply = get_prompt(h, "review", {"code": "x = 1", "language": "py", "extra": "kept"})
    assert prompt_text(reply) == {
        "arguments": {"code": "x = 1", "language": "py", "extra": "kept"},
        "responses": {},
        "state": None,
    }
    result = reply["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"] == {
        "io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "0.1.0"}
    }


def test_a_prompt_result_keeps_the_meta_its_handler_set(make_harness: type[Harness]) -> None:
    def with_meta(call: PromptCall) -> PromptOutcome:
        return GetPromptResult(messages=[PromptMessage.user("hi")], meta={"mine": 1})

    h = make_harness(prompts={"m": (PromptSpec(name="m"), with_meta)})
    assert get_prompt(h, "m")["result"]["_meta"] == {"mine": 1}


@pytest.mark.parametrize(
    ("name", "arguments", "words"),
    [
        ("nope", {}, "Unknown prompt: 'nope'"),
        ("review", None, "needs the argument(s) 'code', 'language'"),
        ("review", {"code": "x"}, "needs the argument(s) 'language'"),
        ("review", {"language": "py", "style": "pep8"}, "needs the argument(s) 'code'"),
        ("review", {"code": 1, "language": "py"}, "params.arguments"),
    ],
)
def test_prompts_get_refuses_what_the_prompt_cannot_take(
    h: Harness, name: str, arguments: dict[str, Any] | None, words: str
) -> None:
    error = error_of(get_prompt(h, name, arguments))
    assert error["code"] == -32602 and words in error["message"]


def test_an_optional_prompt_argument_may_be_left_out(h: Harness) -> None:
    reply = get_prompt(h, "review", {"code": "x", "language": "py"})
    assert prompt_text(reply)["arguments"] == {"code": "x", "language": "py"}


def test_a_prompt_handler_error_is_the_reply(h: Harness) -> None:
    assert error_of(get_prompt(h, "broken")) == {"code": -32603, "message": "prompt store offline"}


# --- resources/read --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "template", "variables"),
    [
        (README.uri, None, {}),
        ("file:///logs/2026-08-01.txt", LOGS.uri_template, {"day": "2026-08-01"}),
        ("file:///logs/a%20b.txt", LOGS.uri_template, {"day": "a b"}),
    ],
)
def test_resources_read_hands_the_handler_what_the_uri_names(
    h: Harness, uri: str, template: str | None, variables: dict[str, str]
) -> None:
    effect = h.core.receive(raw_request("resources/read", {"uri": uri}), T0)
    assert not isinstance(effect, Step)  # no reply yet: a need
    assert isinstance(effect, ReadResource)
    call = effect.call
    assert (call.request_id, call.uri, call.template, call.variables) == (
        7,
        uri,
        template,
        variables,
    )
    assert (call.input_responses, call.handler_state) == ({}, None)


@pytest.mark.parametrize(
    ("uri", "ttl_ms"), [(README.uri, 5000), ("file:///logs/x.txt", 1000), ("file:///secret", 0)]
)
def test_a_read_result_advises_the_ttl_of_what_was_read(h: Harness, uri: str, ttl_ms: int) -> None:
    # file:///secret asks a question first; an answer given up front lets it be read at once.
    reply = read(h, uri, caps=ALL_CAPS, extra={"inputResponses": {"who": {"action": "decline"}}})
    result = reply["result"]
    assert (result["ttlMs"], result["cacheScope"]) == (ttl_ms, "public")
    assert result["contents"][0]["uri"] == uri
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "test-server"


@pytest.mark.parametrize("uri", ["file:///nothing", "file:///logs/a/b.txt", "file:///logs/"])
def test_reading_a_uri_nothing_names_is_invalid_params_with_the_uri(h: Harness, uri: str) -> None:
    exchange = h.send(raw_request("resources/read", {"uri": uri}))
    error = json.loads(exchange.reply or b"")["error"]
    assert error == {"code": -32602, "message": f"Resource not found: {uri}", "data": {"uri": uri}}
    assert exchange.http_status == 400


def test_a_resource_handler_error_is_the_reply(h: Harness) -> None:
    error = error_of(read(h, "file:///gone"))
    assert error == {
        "code": -32602,
        "message": "Resource not found: file:///gone",
        "data": {"uri": "file:///gone"},
    }


# --- completion/complete ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "context", "values"),
    [
        ({"type": "ref/prompt", "name": "review"}, None, ["code", "pr", "{}"]),
        (
            {"type": "ref/prompt", "name": "review"},
            {"arguments": {"language": "py"}},
            ["code", "pr", '{"language": "py"}'],
        ),
        ({"type": "ref/resource", "uri": LOGS.uri_template}, {}, ["code", "pr", "{}"]),
    ],
)
def test_completion_runs_the_completer_with_argument_and_context(
    h: Harness, ref: dict[str, str], context: dict[str, Any] | None, values: list[str]
) -> None:
    extra = {} if context is None else {"context": context}
    completion = complete(h, ref, "pr", **extra)["result"]["completion"]
    assert completion == {"values": values}


def test_completion_for_a_known_prompt_without_a_completer_is_empty(h: Harness) -> None:
    completion = complete(h, {"type": "ref/prompt", "name": "hello"})["result"]["completion"]
    assert completion == {"values": []}


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        ({"type": "ref/prompt", "name": "nope"}, "Unknown prompt: 'nope'"),
        ({"type": "ref/resource", "uri": "x://{y}"}, "Unknown uri template: 'x://{y}'"),
        ({"type": "ref/resource", "uri": README.uri}, "Unknown uri template"),
        ({"type": "ref/other", "name": "review"}, "params.ref"),
    ],
)
def test_completion_for_an_unknown_target_is_invalid_params(
    h: Harness, ref: dict[str, str], words: str
) -> None:
    error = error_of(complete(h, ref))
    assert error["code"] == -32602 and words in error["message"]


@pytest.mark.parametrize(
    ("given", "expect"),
    [
        (Completion(values=["a", "b"]), {"values": ["a", "b"]}),
        (
            Completion(values=["a"], total=9, has_more=True),
            {"values": ["a"], "total": 9, "hasMore": True},
        ),
        (Completion(values=[str(i) for i in range(100)]), {"values": [str(i) for i in range(100)]}),
        (
            Completion(values=[str(i) for i in range(150)]),
            {"values": [str(i) for i in range(100)], "total": 150, "hasMore": True},
        ),
        (
            Completion(values=[str(i) for i in range(101)], total=5000, has_more=False),
            {"values": [str(i) for i in range(100)], "total": 5000, "hasMore": True},
        ),
    ],
)
def test_completion_values_are_cut_to_one_hundred(
    make_harness: type[Harness], given: Completion, expect: dict[str, Any]
) -> None:
    h = make_harness(prompts=PROMPTS, completions={("ref/prompt", "review"): lambda _: given})
    assert complete(h, {"type": "ref/prompt", "name": "review"})["result"]["completion"] == expect


def test_a_completer_error_is_the_reply(make_harness: type[Harness]) -> None:
    def broken(call: CompletionCall) -> CompletionOutcome:
        return ErrorObject(code=-32603, message="index offline")

    h = make_harness(prompts=PROMPTS, completions={("ref/prompt", "review"): broken})
    error = error_of(complete(h, {"type": "ref/prompt", "name": "review"}))
    assert error == {"code": -32603, "message": "index offline"}


# --- input rounds on prompts/get and resources/read ------------------------------------------

ANSWER = {"who": {"action": "accept", "content": {"name": "Ada"}}}


def _tampered(state: str) -> str:
    return state[:-2] + ("AA" if not state.endswith("AA") else "BB")


def _prompt_round(h: Harness, arguments: dict[str, Any] | None = None) -> str:
    first = get_prompt(h, "ask", {"topic": "t"} if arguments is None else arguments, caps=ALL_CAPS)
    result = first["result"]
    assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["who"]
    state: str = result["requestState"]
    return state


def _prompt_retry(
    h: Harness, state: str, arguments: dict[str, Any] | None = None, name: str = "ask"
) -> Any:
    extra = {"inputResponses": ANSWER, "requestState": state}
    args = {"topic": "t"} if arguments is None else arguments
    return get_prompt(h, name, args, caps=ALL_CAPS, extra=extra)


def _read_round(h: Harness) -> str:
    result = read(h, "file:///secret", caps=ALL_CAPS)["result"]
    assert result["resultType"] == "input_required" and list(result["inputRequests"]) == ["who"]
    state: str = result["requestState"]
    return state


def _read_retry(h: Harness, state: str, uri: str = "file:///secret") -> Any:
    return read(h, uri, caps=ALL_CAPS, extra={"inputResponses": ANSWER, "requestState": state})


def test_prompt_input_round_then_the_handler_sees_answer_and_state(h: Harness) -> None:
    reply = _prompt_retry(h, _prompt_round(h))
    assert prompt_text(reply) == {
        "arguments": {"topic": "t"},
        "responses": ANSWER,
        "state": "prompt-round-1",
    }


def test_resource_input_round_then_the_handler_sees_answer_and_state(h: Harness) -> None:
    reply = _read_retry(h, _read_round(h))
    assert read_text(reply) == {
        "template": None,
        "variables": {},
        "responses": ANSWER,
        "state": "read-round-1",
    }


def test_the_prompt_round_is_bound_to_the_same_arguments_in_any_key_order(h: Harness) -> None:
    state = _prompt_round(h, {"a": "1", "b": "2"})
    assert prompt_text(_prompt_retry(h, state, {"b": "2", "a": "1"}))["state"] == "prompt-round-1"


@pytest.mark.parametrize(
    ("retry", "words"),
    [
        (lambda h, s: _prompt_retry(h, s, {"topic": "other"}), "different request"),
        (lambda h, s: _prompt_retry(h, s, {}), "different request"),
        (lambda h, s: _prompt_retry(h, s, name="hello"), "different request"),
        (_read_retry, "different request"),  # resources/read, same key
        (lambda h, s: _prompt_retry(h, _tampered(s)), "integrity"),
        (lambda h, s: _prompt_retry(h, "v1.e30." + s.rsplit(".", 1)[1]), "integrity"),
        (lambda h, s: _prompt_retry(h, "not-a-state"), "not one this server issued"),
    ],
)
def test_a_prompt_request_state_works_only_for_its_own_request(
    h: Harness, retry: Any, words: str
) -> None:
    error = error_of(retry(h, _prompt_round(h)))
    assert error["code"] == -32602 and words in error["message"]


@pytest.mark.parametrize(
    ("retry", "words"),
    [
        (lambda h, s: _read_retry(h, s, README.uri), "different request"),
        (lambda h, s: _read_retry(h, s, "file:///logs/secret.txt"), "different request"),
        (_prompt_retry, "different request"),  # prompts/get, same key
        (lambda h, s: _read_retry(h, _tampered(s)), "integrity"),
    ],
)
def test_a_read_request_state_works_only_for_its_own_uri(
    h: Harness, retry: Any, words: str
) -> None:
    error = error_of(retry(h, _read_round(h)))
    assert error["code"] == -32602 and words in error["message"]


def test_a_tools_call_request_state_is_refused_for_a_prompt_of_the_same_name(
    make_harness: type[Harness],
) -> None:
    # Same name, same arguments: only the method tells the two requests apart.
    tool = ToolSpec(name="ask", input_schema={"type": "object"})
    h = make_harness(tools={"ask": (tool, ask_tool)}, prompts=PROMPTS)
    first = h.call("ask", {"topic": "t"}, caps=ALL_CAPS)["result"]
    assert first["resultType"] == "input_required"
    error = error_of(_prompt_retry(h, first["requestState"]))
    assert error["code"] == -32602 and "different request" in error["message"]
    # ... and the other way round.
    state = _prompt_round(h)
    extra = {"inputResponses": ANSWER, "requestState": state}
    error = error_of(h.call("ask", {"topic": "t"}, caps=ALL_CAPS, extra=extra))
    assert error["code"] == -32602 and "different request" in error["message"]


def test_a_prompt_request_state_from_another_key_is_refused(make_harness: type[Harness]) -> None:
    other = make_harness(prompts=PROMPTS, state_key=b"o" * 32)
    h = make_harness(prompts=PROMPTS)
    assert "integrity" in error_of(_prompt_retry(h, _prompt_round(other)))["message"]


@pytest.mark.parametrize("which", ["prompt", "read"])
def test_an_expired_round_is_refused(h: Harness, which: str) -> None:
    state = _prompt_round(h) if which == "prompt" else _read_round(h)
    h.now += 300  # ServerOptions.request_state_ttl_ms: 300_000
    error = error_of(_prompt_retry(h, state) if which == "prompt" else _read_retry(h, state))
    assert error["code"] == -32602 and "expired" in error["message"]


def test_a_round_just_before_expiry_is_accepted(h: Harness) -> None:
    state = _prompt_round(h)
    h.now += 299.999
    assert prompt_text(_prompt_retry(h, state))["state"] == "prompt-round-1"


def test_a_malformed_answer_to_an_asked_key_is_refused(h: Harness) -> None:
    extra = {"inputResponses": {"who": {"action": "maybe"}}, "requestState": _read_round(h)}
    error = error_of(read(h, "file:///secret", caps=ALL_CAPS, extra=extra))
    assert error["code"] == -32602 and "inputResponses['who']" in error["message"]


def test_answers_to_keys_not_asked_do_not_reach_the_handler(h: Harness) -> None:
    extra = {
        "inputResponses": {**ANSWER, "zzz": {"anything": 1}},
        "requestState": _prompt_round(h),
    }
    reply = get_prompt(h, "ask", {"topic": "t"}, caps=ALL_CAPS, extra=extra)
    assert prompt_text(reply)["responses"] == ANSWER


@pytest.mark.parametrize("which", ["prompt", "read"])
def test_answers_without_request_state_reach_the_handler_without_its_state(
    h: Harness, which: str
) -> None:
    extra = {"inputResponses": ANSWER}
    if which == "prompt":
        seen = prompt_text(get_prompt(h, "ask", {"topic": "t"}, caps=ALL_CAPS, extra=extra))
    else:
        seen = read_text(read(h, "file:///secret", caps=ALL_CAPS, extra=extra))
    assert (seen["responses"], seen["state"]) == (ANSWER, None)


@pytest.mark.parametrize("which", ["prompt", "read"])
def test_a_round_asks_only_what_the_client_declared(h: Harness, which: str) -> None:
    caps: dict[str, Any] = {"sampling": {}}
    reply = (
        get_prompt(h, "ask", {}, caps=caps)
        if which == "prompt"
        else read(h, "file:///secret", caps=caps)
    )
    error = error_of(reply)
    assert error["code"] == -32021 and error["data"] == {
        "requiredCapabilities": {"elicitation": {}}
    }
    asker = "Prompt 'ask'" if which == "prompt" else "Resource 'file:///secret'"
    assert error["message"].startswith(asker)


def test_a_round_with_no_question_is_an_internal_error(make_harness: type[Harness]) -> None:
    def asks_nothing(call: PromptCall) -> PromptOutcome:
        return InputRequired(requests={})

    h = make_harness(prompts={"empty": (PromptSpec(name="empty"), asks_nothing)})
    error = error_of(get_prompt(h, "empty", caps=ALL_CAPS))
    assert error["code"] == -32603 and "asked for input with no request" in error["message"]


def test_an_unknown_handler_outcome_is_an_internal_error(make_harness: type[Harness]) -> None:
    wrong: Any = CallToolResult.text("a tool's answer")
    h = make_harness(
        prompts={"odd": (PromptSpec(name="odd"), lambda _: wrong)},
        resources={"x://odd": (ResourceSpec(uri="x://odd", name="odd"), lambda _: wrong)},
    )
    assert error_of(get_prompt(h, "odd")) == {
        "code": -32603,
        "message": "Prompt 'odd' returned an unknown outcome",
    }
    assert error_of(read(h, "x://odd")) == {
        "code": -32603,
        "message": "Resource 'x://odd' returned an unknown outcome",
    }


def test_a_resource_unregistered_while_it_was_read_is_advised_stale(
    make_harness: type[Harness],
) -> None:
    def read_then_unregister(call: ResourceRead) -> ResourceOutcome:
        server.core.catalog.remove_resource(call.uri)
        return echo_resource(call)

    spec = ResourceSpec(uri="x://going", name="going", ttl_ms=60_000)
    server = make_harness(resources={spec.uri: (spec, read_then_unregister)})
    assert read(server, spec.uri)["result"]["ttlMs"] == 0
