"""Writing tools: plain typed parameters, dataclasses and TypedDicts, plain functions in a
worker thread, required tools without START_TASK, output schemas, typed questions."""

from __future__ import annotations

import dataclasses
import enum
import threading
from typing import Annotated, Any, Literal, TypedDict

import anyio
import msgspec
import pytest
from trio.testing import MockClock

from mcp_tasks import (
    START_TASK,
    Accepted,
    Answer,
    Cancelled,
    Declined,
    Server,
    TaskOptions,
    ToolContext,
    sampled_text,
)
from mcp_tasks.core import LocalProtocolError
from mcp_tasks.runtime._answers import form_for

from .helpers import Client, trio_clock


class Forecast(msgspec.Struct):
    city: str
    celsius: float


@dataclasses.dataclass
class Booking:
    room: str
    nights: int = 1


class Note(TypedDict):
    text: str


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Contact(msgspec.Struct):
    name: str
    age: int


def build() -> tuple[Server, dict[str, Any]]:
    server = Server("t", "1", tasks=TaskOptions(ttl_ms=600_000), clock=trio_clock)
    seen: dict[str, Any] = {"runs": []}

    @server.tool()
    async def greet(
        ctx: ToolContext,
        name: str,
        times: Annotated[int, msgspec.Meta(ge=1, le=5, description="How many times")] = 1,
    ) -> str:
        """Greet someone."""
        return " ".join([f"Hello, {name}!"] * times)

    @server.tool()
    async def book(ctx: ToolContext, booking: Booking) -> str:
        return f"{booking.room} for {booking.nights}"

    @server.tool()
    async def remember(ctx: ToolContext, note: Note) -> str:
        return note["text"].upper()

    @server.tool()
    def checksum(ctx: ToolContext, text: str) -> str:
        seen["thread"] = threading.get_ident()
        return str(sum(text.encode()))

    @server.tool()
    async def weather(ctx: ToolContext, city: str) -> Forecast:
        return Forecast(city=city, celsius=21.5)

    @server.tool(task_support="required")
    async def report(ctx: ToolContext, pages: int) -> str:
        seen["runs"].append(ctx.in_task)
        return f"{pages} pages"

    @server.tool(task_support="required")
    async def ask(ctx: ToolContext, kind: str) -> str:
        asked: dict[str, Any] = {
            "bool": bool,
            "int": int,
            "colour": Colour,
            "size": Literal["S", "M", "L"],
            "contact": Contact,
            "schema": {"type": "object", "properties": {"x": {"type": "string"}}},
            "none": None,
        }
        answer: Answer[Any] = await ctx.elicit(f"{kind}?", asked[kind])
        seen["answer"] = answer
        return answer.action

    @server.tool(task_support="required")
    async def summarise(ctx: ToolContext) -> str:
        answer = await ctx.sample("Summarise the report", max_tokens=50)
        roots = await ctx.roots()
        return f"{sampled_text(answer)} in {roots[0].uri}"

    return server, seen


async def tools_by_name(client: Client) -> dict[str, Any]:
    listed = await client.send("tools/list")
    return {tool["name"]: tool for tool in listed["result"]["tools"]}


async def answer_and_wait(client: Client, task_id: str, response: dict[str, Any]) -> Any:
    """Answer the open question; the question, and the task once it ended."""
    request, _ = await answer_and_wait_for(client, task_id, response)
    return request, await client.wait_status(task_id, "completed", "failed")


async def test_plain_parameters_make_the_schema_and_are_passed_by_name(
    autojump_clock: MockClock,
) -> None:
    server, _ = build()
    async with server.running():
        client = Client(server)
        schema = (await tools_by_name(client))["greet"]["inputSchema"]
        assert schema["properties"]["name"] == {"type": "string"}
        times = schema["properties"]["times"]
        assert times["type"] == "integer" and times["default"] == 1
        assert times["minimum"] == 1 and times["description"] == "How many times"
        assert schema["required"] == ["name"]
        reply = await client.call("greet", {"name": "Ada", "times": 2})
        assert reply["result"]["content"][0]["text"] == "Hello, Ada! Hello, Ada!"
        wrong = await client.call("greet", {"name": "Ada", "times": "two"})
        assert wrong["error"]["code"] == -32602
        assert "arguments.times" in wrong["error"]["message"]
        too_many = await client.call("greet", {"name": "Ada", "times": 9})
        assert too_many["error"]["code"] == -32602
        missing = await client.call("greet", {})
        assert "name" in missing["error"]["message"]


async def test_a_dataclass_or_a_typed_dict_takes_the_arguments(autojump_clock: MockClock) -> None:
    server, _ = build()
    async with server.running():
        client = Client(server)
        tools = await tools_by_name(client)
        assert tools["book"]["inputSchema"]["required"] == ["room"]
        assert tools["remember"]["inputSchema"]["properties"]["text"] == {"type": "string"}
        booked = await client.call("book", {"room": "12", "nights": 3})
        assert booked["result"]["content"][0]["text"] == "12 for 3"
        noted = await client.call("remember", {"text": "milk"})
        assert noted["result"]["content"][0]["text"] == "MILK"
        bad = await client.call("book", {"nights": 3})
        assert bad["error"]["code"] == -32602 and "room" in bad["error"]["message"]


async def test_a_plain_function_runs_in_a_worker_thread() -> None:
    server, seen = build()
    async with server.running():
        reply = await Client(server).call("checksum", {"text": "ab"})
    assert reply["result"]["content"][0]["text"] == str(ord("a") + ord("b"))
    assert seen["thread"] != threading.get_ident()


async def test_a_returned_struct_is_structured_content_under_the_output_schema(
    autojump_clock: MockClock,
) -> None:
    server, _ = build()
    async with server.running():
        client = Client(server)
        tools = await tools_by_name(client)
        output = tools["weather"]["outputSchema"]
        assert output["type"] == "object" and set(output["properties"]) == {"city", "celsius"}
        assert "outputSchema" not in tools["greet"]  # -> str: no structured output
        result = (await client.call("weather", {"city": "Oslo"}))["result"]
    assert result["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    assert msgspec.json.decode(result["content"][0]["text"]) == result["structuredContent"]


async def test_a_required_tool_starts_its_task_and_runs_only_inside_it(
    autojump_clock: MockClock,
) -> None:
    server, seen = build()
    async with server.running():
        client = Client(server)
        task_id = await client.start("report", {"pages": 3})
        done = await client.wait_status(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "3 pages"
    assert seen["runs"] == [True]  # once, inside the task; never before it


@pytest.mark.parametrize(
    ("kind", "content", "value", "field"),
    [
        ("bool", {"value": True}, True, {"type": "boolean", "title": "bool?"}),
        ("int", {"value": 7}, 7, {"type": "integer", "title": "int?"}),
        ("colour", {"value": "blue"}, Colour.BLUE, None),
        ("size", {"value": "M"}, "M", None),
        ("contact", {"name": "Ada", "age": 36}, Contact(name="Ada", age=36), None),
        ("schema", {"x": "y"}, {"x": "y"}, None),
        ("none", {}, {}, None),
    ],
)
async def test_elicit_asks_for_a_type_and_answers_a_value_of_it(
    kind: str, content: dict[str, Any], value: Any, field: Any, autojump_clock: MockClock
) -> None:
    server, seen = build()
    async with server.running():
        client = Client(server)
        task_id = await client.start("ask", {"kind": kind})
        response = {"action": "accept", "content": content}
        request, done = await answer_and_wait(client, task_id, response)
    assert done["status"] == "completed", done
    answer = seen["answer"]
    assert isinstance(answer, Accepted) and answer.value == value
    assert answer.action == "accept" and answer.content == content  # reads as ElicitResult
    schema = request["params"]["requestedSchema"]
    assert schema["type"] == "object"
    if field is not None:
        assert schema["properties"] == {"value": field} and schema["required"] == ["value"]


@pytest.mark.parametrize(("action", "kind"), [("decline", Declined), ("cancel", Cancelled)])
async def test_elicit_says_declined_or_cancelled(
    action: str, kind: type, autojump_clock: MockClock
) -> None:
    server, seen = build()
    async with server.running():
        client = Client(server)
        task_id = await client.start("ask", {"kind": "bool"})
        _, done = await answer_and_wait(client, task_id, {"action": action})
    answer = seen["answer"]
    assert isinstance(answer, kind)
    assert isinstance(answer, Declined | Cancelled) and answer.action == action
    assert done["result"]["content"][0]["text"] == action


async def test_an_answer_that_does_not_fit_fails_the_task_saying_so(
    autojump_clock: MockClock,
) -> None:
    server, _ = build()
    async with server.running():
        client = Client(server)
        task_id = await client.start("ask", {"kind": "contact"})
        wrong = {"action": "accept", "content": {"name": "Ada", "age": "old"}}
        _, done = await answer_and_wait(client, task_id, wrong)
    assert done["status"] == "failed"
    assert done["error"]["code"] == -32602
    assert "does not fit the form" in done["error"]["message"]


def test_a_nested_type_is_no_form() -> None:
    class Outer(msgspec.Struct):
        inner: Contact

    with pytest.raises(LocalProtocolError, match="flat"):
        form_for(Outer, "?")


async def test_input_before_task_keeps_rounds_before_a_required_tools_task(
    autojump_clock: MockClock,
) -> None:
    server = Server("t", "1", clock=trio_clock)
    ran: list[bool] = []

    @server.tool(task_support="required", input_before_task=True)
    async def careful(ctx: ToolContext) -> Any:
        ran.append(ctx.in_task)
        if not ctx.in_task:
            return START_TASK  # (here it could ask first, with InputRequired)
        return "done"

    async with server.running():
        client = Client(server)
        task_id = await client.start("careful")
        await client.wait_status(task_id, "completed")
    assert ran == [False, True]


async def test_sample_takes_a_prompt_and_roots_are_a_list(autojump_clock: MockClock) -> None:
    server, _ = build()
    async with server.running():
        client = Client(server)
        task_id = await client.start("summarise")
        sampled = {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m"}
        request, _ = await answer_and_wait_for(client, task_id, sampled)
        assert request["params"]["messages"] == [
            {"role": "user", "content": {"type": "text", "text": "Summarise the report"}}
        ]
        await answer_and_wait_for(client, task_id, {"roots": [{"uri": "file:///r"}]})
        done = await client.wait_status(task_id, "completed", "failed")
    assert done["result"]["content"][0]["text"] == "short in file:///r"


async def answer_and_wait_for(client: Client, task_id: str, response: dict[str, Any]) -> Any:
    """Answer the question open now; the task once it has moved on."""
    asking = await client.wait_status(task_id, "input_required")
    (key, request), *_ = asking["inputRequests"].items()
    await client.send("tasks/update", {"taskId": task_id, "inputResponses": {key: response}})
    with anyio.fail_after(60):
        while True:
            task = await client.get(task_id)
            if task["status"] != "input_required" or key not in task.get("inputRequests", {}):
                return request, task
            await anyio.sleep(0.05)


async def test_the_decorators_work_without_parentheses_too() -> None:
    server = Server("bare", "1")

    @server.tool
    async def shout(ctx: ToolContext, text: str) -> str:
        """Say it louder."""
        return text.upper()

    @server.prompt
    async def hello(ctx: ToolContext) -> str:
        return "Say hello."

    async with server.running():
        client = Client(server)
        tools = await tools_by_name(client)
        assert tools["shout"]["description"] == "Say it louder."
        reply = await client.call("shout", {"text": "hi"})
        assert reply["result"]["content"][0]["text"] == "HI"
        prompt = await client.send("prompts/get", {"name": "hello"})
        assert prompt["result"]["messages"][0]["content"]["text"] == "Say hello."
    assert callable(shout) and shout.__name__ == "shout"  # the function itself, kept


def test_a_decorator_used_wrongly_says_how_to_use_it() -> None:
    server = Server("wrong", "1")

    async def notes(ctx: ToolContext) -> str:
        return ""

    with pytest.raises(TypeError, match=r"needs the uri: @server.resource\('notes://today'\)"):
        server.resource(notes)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs the uri template"):
        server.resource_template(notes)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a tool's name is a string"):
        server.tool(42)  # type: ignore[call-overload]


async def test_the_context_is_found_by_its_annotation_wherever_it_stands() -> None:
    server = Server("anywhere", "1")
    seen: list[str] = []

    @server.tool
    async def add(a: int, b: int = 2) -> str:
        """No context at all."""
        return str(a + b)

    @server.tool
    async def tag(text: str, ctx: ToolContext) -> str:
        """The context last."""
        seen.append(type(ctx).__name__)
        return f"#{text}"

    @server.tool
    def count(words: list[str], *, context: ToolContext) -> str:
        """A plain function, the context by keyword."""
        seen.append(type(context).__name__)
        return str(len(words))

    @server.tool
    async def late(text: str, ctx):  # type: ignore[no-untyped-def]
        """Unannotated, named ctx, last."""
        seen.append(type(ctx).__name__)
        return text[::-1]

    async with server.running():
        client = Client(server)
        tools = await tools_by_name(client)
        assert list(tools["late"]["inputSchema"]["properties"]) == ["text"]
        assert (await client.call("late", {"text": "ab"}))["result"]["content"][0]["text"] == "ba"
        assert sorted(tools["add"]["inputSchema"]["properties"]) == ["a", "b"]
        assert list(tools["tag"]["inputSchema"]["properties"]) == ["text"]
        assert list(tools["count"]["inputSchema"]["properties"]) == ["words"]
        assert (await client.call("add", {"a": 1}))["result"]["content"][0]["text"] == "3"
        assert (await client.call("tag", {"text": "x"}))["result"]["content"][0]["text"] == "#x"
        counted = await client.call("count", {"words": ["a", "b"]})
        assert counted["result"]["content"][0]["text"] == "2"
    assert seen == ["ToolContext", "ToolContext", "ToolContext"]


def test_a_handler_that_cannot_work_is_refused_when_registered() -> None:
    server = Server("refused", "1")

    async def two_contexts(ctx: ToolContext, other: ToolContext) -> str:
        return ""

    async def unjsonable(ctx: ToolContext, when: threading.Event) -> str:
        return ""

    with pytest.raises(TypeError, match="one parameter takes the context, not ctx, other"):
        server.tool(two_contexts)
    with pytest.raises(TypeError, match="tool 'unjsonable': parameter 'when' has the type Event"):
        server.tool(unjsonable)
    assert server.core.catalog.tools == {}


def returning(value: Any) -> Any:
    """A tool without arguments nor context that returns `value`."""

    async def tool() -> Any:
        return value

    return tool


async def test_numbers_booleans_lists_dicts_and_none_are_results() -> None:
    server = Server("returns", "1")
    answers: dict[str, Any] = {
        "number": 42,
        "ratio": 0.5,
        "flag": True,
        "items": ["a", 1],
        "mapping": {"city": "Oslo", "celsius": -3},
        "nothing": None,
        "unjsonable": {"when": threading.Event()},
    }
    for name, value in answers.items():
        server.tool(name)(returning(value))
    async with server.running():
        client = Client(server)
        results = {name: (await client.call(name, {})) for name in answers}
    text = {
        name: reply["result"]["content"] for name, reply in results.items() if "result" in reply
    }
    assert text["number"] == [{"type": "text", "text": "42"}]
    assert text["ratio"] == [{"type": "text", "text": "0.5"}]
    assert text["flag"] == [{"type": "text", "text": "true"}]
    assert text["items"] == [{"type": "text", "text": '["a",1]'}]
    assert text["nothing"] == []
    mapping = results["mapping"]["result"]
    assert mapping["structuredContent"] == {"city": "Oslo", "celsius": -3}
    # structuredContent must be an object: a list goes under "result"
    assert results["items"]["result"]["structuredContent"] == {"result": ["a", 1]}
    assert "structuredContent" not in results["number"]["result"]  # not annotated: text
    assert results["unjsonable"]["error"]["code"] == -32603  # the tool's bug: details logged
