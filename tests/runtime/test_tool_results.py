"""What tools return, as results and output schemas; pydantic models as arguments and
results; parameter descriptions from `Annotated` and docstrings; return annotations
checked when a tool is registered."""

from __future__ import annotations

import base64
import dataclasses
import logging
import threading
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec
import pydantic
import pytest

from mcp_tasks import (
    ImageContent,
    RequestContext,
    Server,
    TaskOptions,
    ToolContext,
    ToolError,
    audio_content,
    image_content,
    resource_content,
)
from mcp_tasks.core import ErrorObject

from .helpers import Client

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 16


class Forecast(msgspec.Struct):
    city: str
    celsius: float


@dataclasses.dataclass
class Reading:
    sensor: str
    value: float


class Order(pydantic.BaseModel):
    item: str
    quantity: int = pydantic.Field(default=1, ge=1, description="How many to order")


class Scores(pydantic.BaseModel):
    scores: dict[str, int]


class Receipt(pydantic.BaseModel):
    item: str
    total: float


async def listed_and_called(
    server: Server, calls: dict[str, dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tools as listed, and each call's reply (checked against the schema)."""
    async with server.running():
        client = Client(server)
        listed = await client.send("tools/list")
        tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
        replies = {name: await client.call(name, arguments) for name, arguments in calls.items()}
    return tools, replies


async def test_annotated_numbers_and_lists_are_structured_under_result() -> None:
    server = Server("results", "1")

    @server.tool
    async def count() -> int:
        return 3

    @server.tool
    async def cities() -> list[Forecast]:
        return [Forecast("Oslo", -3.0)]

    @server.tool
    async def maybe(present: bool) -> float | None:
        return 0.5 if present else None

    @server.tool
    async def totals() -> dict[str, int]:
        return {"a": 1}

    @server.tool
    async def reading(fail: bool) -> Reading | ErrorObject:
        if fail:
            raise ToolError("the sensor is offline")
        return Reading("t1", 20.5)

    tools, replies = await listed_and_called(
        server,
        {
            "count": {},
            "cities": {},
            "maybe": {"present": False},
            "totals": {},
            "reading": {"fail": False},
        },
    )
    assert tools["count"]["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert replies["count"]["result"]["structuredContent"] == {"result": 3}
    assert replies["count"]["result"]["content"] == [{"type": "text", "text": "3"}]
    listed = tools["cities"]["outputSchema"]
    assert listed["properties"]["result"]["items"] == {"$ref": "#/$defs/Forecast"}
    assert listed["$defs"]["Forecast"]["required"] == ["city", "celsius"]
    assert replies["cities"]["result"]["structuredContent"] == {
        "result": [{"city": "Oslo", "celsius": -3.0}]
    }
    assert replies["maybe"]["result"]["structuredContent"] == {"result": None}
    assert tools["totals"]["outputSchema"]["type"] == "object"  # an object: not wrapped
    assert replies["totals"]["result"]["structuredContent"] == {"a": 1}
    assert tools["reading"]["outputSchema"]["required"] == ["sensor", "value"]
    assert replies["reading"]["result"]["structuredContent"] == {"sensor": "t1", "value": 20.5}


async def test_a_tool_error_is_an_error_result_and_other_failures_are_logged_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server("errors", "1")

    @server.tool
    async def refuse() -> str:
        raise ToolError("no such city: Atlantis")

    @server.tool
    async def crash() -> str:
        raise KeyError("secret-detail-42")

    with caplog.at_level(logging.ERROR, "mcp_tasks.server"):
        _, replies = await listed_and_called(server, {"refuse": {}, "crash": {}})
    assert replies["refuse"]["result"]["isError"] is True
    assert replies["refuse"]["result"]["content"][0]["text"] == "no such city: Atlantis"
    assert replies["crash"]["error"]["code"] == -32603
    assert "secret-detail-42" not in str(replies["crash"])
    assert "secret-detail-42" in caplog.text  # the details are in the log


async def test_pydantic_models_are_arguments_and_results() -> None:
    server = Server("pydantic", "1", tasks=TaskOptions(ttl_ms=60_000))

    @server.tool
    async def place(order: Order) -> Receipt:
        return Receipt(item=order.item, total=order.quantity * 2.5)

    @server.tool(task_support="required")
    async def ship(ctx: ToolContext, order: Order, express: bool = False) -> str:
        return f"{order.quantity} x {order.item}{' (express)' if express else ''}"

    async with server.running():
        client = Client(server)
        listed = await client.send("tools/list")
        tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
        placed = await client.call("place", {"item": "tea", "quantity": 2})
        too_few = await client.call("place", {"item": "tea", "quantity": 0})
        wrong_type = await client.call("ship", {"order": {"item": "tea", "quantity": "x"}})
        task_id = await client.start("ship", {"order": {"item": "tea", "quantity": 3}})
        shipped = await client.wait_status(task_id, "completed", "failed")
    schema = tools["place"]["inputSchema"]
    assert schema["properties"]["quantity"]["description"] == "How many to order"
    assert schema["required"] == ["item"]
    assert tools["place"]["outputSchema"]["required"] == ["item", "total"]
    assert placed["result"]["structuredContent"] == {"item": "tea", "total": 5.0}
    assert too_few["error"]["code"] == -32602
    assert "`arguments.quantity`" in too_few["error"]["message"]
    assert wrong_type["error"]["code"] == -32602  # refused at the call, before any task
    assert "`arguments.order.quantity`" in wrong_type["error"]["message"]
    assert tools["ship"]["inputSchema"]["required"] == ["order"]
    assert shipped["status"] == "completed"
    assert shipped["result"]["content"][0]["text"] == "3 x tea"


async def test_descriptions_come_from_annotated_strings_and_the_docstring() -> None:
    server = Server("described", "1")

    @server.tool
    async def forecast(
        city: Annotated[str, "The city, as its people spell it"],
        days: int = 1,
        unit: Annotated[str, msgspec.Meta(description="C or F")] = "C",
    ) -> str:
        """The weather ahead.

        Args:
            city: Not this one: the annotation says it.
            days: How many days
                ahead, at most 7.
            unit: Not this one either.
        """
        return f"{city} {days} {unit}"

    @server.tool
    async def sphinx(ctx: ToolContext, path: str) -> str:
        """Read a file.

        :param path: Where the file is.
        """
        return path

    tools, replies = await listed_and_called(server, {"forecast": {"city": "Oslo"}})
    properties = tools["forecast"]["inputSchema"]["properties"]
    assert properties["city"]["description"] == "The city, as its people spell it"
    assert properties["days"]["description"] == "How many days ahead, at most 7."
    assert properties["unit"]["description"] == "C or F"
    assert tools["forecast"]["description"] == "The weather ahead."
    assert tools["sphinx"]["inputSchema"]["properties"]["path"]["description"] == (
        "Where the file is."
    )
    assert replies["forecast"]["result"]["content"][0]["text"] == "Oslo 1 C"


async def test_images_audio_and_files_through_the_helpers() -> None:
    server = Server("media", "1")

    @server.tool
    async def picture() -> ImageContent:
        return image_content(PNG)

    @server.tool
    async def media() -> list[Any]:
        return [
            audio_content(WAV),
            resource_content("file:///report.csv", b"a,b\n1,2\n", "text/csv"),
            resource_content("file:///notes.txt", "hello"),
        ]

    @server.tool
    async def raw() -> Any:
        return b"\x00\x01"

    tools, replies = await listed_and_called(server, {"picture": {}, "media": {}, "raw": {}})
    assert "outputSchema" not in tools["picture"]
    assert replies["picture"]["result"]["content"] == [
        {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
    ]
    audio, blob, text = replies["media"]["result"]["content"]
    assert audio["type"] == "audio" and audio["mimeType"] == "audio/wav"
    assert blob["resource"] == {
        "uri": "file:///report.csv",
        "mimeType": "text/csv",
        "blob": base64.b64encode(b"a,b\n1,2\n").decode(),
    }
    assert text["resource"] == {
        "uri": "file:///notes.txt",
        "mimeType": "text/plain",
        "text": "hello",
    }
    assert replies["raw"]["error"]["code"] == -32603


def test_content_helpers_say_when_they_cannot_tell_the_kind() -> None:
    with pytest.raises(ValueError, match="pass its mime_type"):
        image_content(b"not an image")
    assert image_content(b"anything", "image/svg+xml").mime_type == "image/svg+xml"
    assert image_content(b"\xff\xd8\xff\xe0....").mime_type == "image/jpeg"
    assert image_content(b"RIFF\x00\x00\x00\x00WEBPVP8 ").mime_type == "image/webp"
    assert audio_content(b"ID3\x04....").mime_type == "audio/mpeg"
    with pytest.raises(ValueError, match="pass its mime_type"):
        audio_content(PNG)


def test_a_return_annotation_no_value_can_answer_is_refused_when_registered() -> None:
    server = Server("refused", "1")

    async def event() -> threading.Event:
        return threading.Event()

    async def data() -> bytes:
        return b""

    def numbers() -> Iterator[int]:
        yield 1

    with pytest.raises(TypeError, match="tool 'event' is annotated to return Event"):
        server.tool(event)
    with pytest.raises(TypeError, match=r"return image_content\(data\)"):
        server.tool(data)
    with pytest.raises(TypeError, match="tool 'numbers' is annotated to return"):
        server.tool(numbers)
    assert server.core.catalog.tools == {}


async def test_prompts_take_plain_string_parameters_and_the_context_where_annotated() -> None:
    server = Server("prompts", "1")

    @server.prompt
    async def review(code: str, focus: str = "bugs") -> str:
        """Review some code.

        Args:
            code: The code to review.
        """
        return f"Review for {focus}: {code}"

    @server.prompt
    async def greet(name: Annotated[str, "Who to greet"], ctx: RequestContext) -> str:
        return f"Hello {name} ({type(ctx).__name__})"

    async with server.running():
        client = Client(server)
        listed = await client.send("prompts/list")
        reviewed = await client.send("prompts/get", {"name": "review", "arguments": {"code": "x"}})
        greeted = await client.send("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})
        missing = await client.send("prompts/get", {"name": "review", "arguments": {}})
    prompts = {prompt["name"]: prompt for prompt in listed["result"]["prompts"]}
    assert prompts["review"]["arguments"] == [
        {"name": "code", "description": "The code to review.", "required": True},
        {"name": "focus", "required": False},
    ]
    assert prompts["greet"]["arguments"][0]["description"] == "Who to greet"
    assert reviewed["result"]["messages"][0]["content"]["text"] == "Review for bugs: x"
    assert greeted["result"]["messages"][0]["content"]["text"] == "Hello Ada (RequestContext)"
    assert missing["error"]["code"] == -32602


def test_a_prompt_that_cannot_work_is_refused_when_registered() -> None:
    server = Server("refused", "1")

    async def counted(times: int) -> str:
        return ""

    def blocking(code: str) -> str:
        return code

    with pytest.raises(TypeError, match="prompt 'counted': parameter 'times' must be a str"):
        server.prompt(counted)
    with pytest.raises(TypeError, match="prompt 'blocking' must be an async function"):
        server.prompt(blocking)  # type: ignore[arg-type]


async def test_resources_take_the_context_only_if_they_want_it() -> None:
    server = Server("resources", "1")

    @server.resource("config://app")
    async def app_config() -> str:
        return "debug=false"

    @server.resource_template("files://{name}")
    async def file(name: str) -> str:  # a variable, though first and unannotated-looking
        return f"file {name}"

    @server.resource_template("users://{user}/notes")
    async def notes(user: str, context: RequestContext) -> str:
        return f"notes of {user} ({type(context).__name__})"

    async with server.running():
        client = Client(server)
        read = {
            uri: await client.send("resources/read", {"uri": uri})
            for uri in ("config://app", "files://a.txt", "users://ada/notes")
        }
    text = {uri: reply["result"]["contents"][0]["text"] for uri, reply in read.items()}
    assert text == {
        "config://app": "debug=false",
        "files://a.txt": "file a.txt",
        "users://ada/notes": "notes of ada (RequestContext)",
    }


def test_a_resource_that_cannot_work_is_refused_when_registered() -> None:
    server = Server("refused", "1")

    async def wrong_variable(ctx: RequestContext, path: str) -> str:
        return path

    def blocking() -> str:
        return ""

    with pytest.raises(TypeError, match=r"'files://\{name\}' must take name .*not \(ctx, path\)"):
        server.resource_template("files://{name}")(wrong_variable)
    with pytest.raises(TypeError, match="resource 'config://x' must be an async function"):
        server.resource("config://x")(blocking)  # type: ignore[arg-type]


async def test_a_string_of_an_annotated_choice_is_structured_under_its_schema() -> None:
    server = Server("choices", "1")

    @server.tool
    async def verdict(score: int) -> Literal["pass", "fail"]:
        return "pass" if score >= 50 else "fail"

    tools, replies = await listed_and_called(server, {"verdict": {"score": 70}})
    assert tools["verdict"]["outputSchema"]["properties"]["result"] == {"enum": ["fail", "pass"]}
    assert replies["verdict"]["result"]["structuredContent"] == {"result": "pass"}
    assert replies["verdict"]["result"]["content"] == [{"type": "text", "text": "pass"}]


async def test_a_pydantic_refusal_does_not_echo_a_key_the_peer_chose() -> None:
    server = Server("echo", "1")

    @server.tool
    async def total(board: Scores, label: str = "") -> int:
        return sum(board.scores.values())

    key = "k" * 10_000
    _, replies = await listed_and_called(server, {"total": {"board": {"scores": {key: "x"}}}})
    message = replies["total"]["error"]["message"]
    assert replies["total"]["error"]["code"] == -32602
    assert message.endswith("- at `arguments.board.scores[...]`"), message
    assert len(message) < 200
