"""Wire types: tolerant decoding, encoding that keeps what the wire requires, and every
content type and task variant valid against the official schemas."""

from __future__ import annotations

import datetime
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from schema_check import CORE, TASKS, check

from mcp_tasks.core import (
    AudioContent,
    CallToolResult,
    CancelledTask,
    CompletedTask,
    CreateMessageParams,
    CreateMessageRequest,
    CreateTaskResult,
    DetailedTask,
    ElicitParams,
    ElicitRequest,
    ElicitResult,
    EmbeddedResource,
    ErrorObject,
    FailedTask,
    ImageContent,
    InputRequiredTask,
    ListRootsRequest,
    RequestMeta,
    ResourceContents,
    ResourceLink,
    SamplingMessage,
    TextContent,
    WorkingTask,
    decode_result_type,
    iso_utc,
)
from mcp_tasks.core._encode import Encoder
from mcp_tasks.core._records import TaskRecord
from mcp_tasks.core._state import TaskStatus
from mcp_tasks.core._wire import Implementation

STAMP = "2026-08-01T12:00:00.000Z"
COMMON: dict[str, Any] = {
    "task_id": "t",
    "created_at": STAMP,
    "last_updated_at": STAMP,
    "ttl_ms": None,
}


def as_json(value: Any) -> Any:
    return json.loads(msgspec.json.encode(value))


def test_missing_result_type_from_a_peer_reads_as_complete() -> None:
    result = msgspec.json.decode(b'{"content": []}', type=CallToolResult)
    assert result.result_type == "complete"
    assert decode_result_type({"content": []}) == "complete"
    assert decode_result_type({"resultType": "task"}) == "task"


def test_unknown_fields_are_tolerated() -> None:
    data = b'{"content": [{"type": "text", "text": "x", "future": 1}], "novel": {"a": 1}}'
    assert msgspec.json.decode(data, type=CallToolResult).content == [TextContent(text="x")]


def test_required_fields_are_always_encoded() -> None:
    handle = as_json(
        CreateTaskResult(
            task_id="t", status="working", created_at=STAMP, last_updated_at=STAMP, ttl_ms=None
        )
    )
    assert handle["ttlMs"] is None and handle["resultType"] == "task"
    assert "pollIntervalMs" not in handle and "statusMessage" not in handle
    assert as_json(CallToolResult(content=[]))["resultType"] == "complete"


@pytest.mark.parametrize(
    "block",
    [
        TextContent(text="hi", annotations={"priority": 0.5}),
        ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
        AudioContent(data="UklGRg==", mime_type="audio/wav"),
        EmbeddedResource(
            resource=ResourceContents(uri="file:///a.txt", mime_type="text/plain", text="body")
        ),
        EmbeddedResource(resource=ResourceContents(uri="file:///a.bin", blob="AAEC")),
        ResourceLink(uri="file:///a.txt", name="a", mime_type="text/plain", size=4),
    ],
)
def test_every_content_type_is_schema_valid_and_round_trips(block: Any) -> None:
    result = CallToolResult(content=[block], structured_content={"n": 1}, is_error=False)
    encoded = as_json(result)
    check(CORE, "CallToolResult", encoded)
    assert msgspec.json.decode(msgspec.json.encode(result), type=CallToolResult) == result


@pytest.mark.parametrize(
    "request_",
    [
        ElicitRequest(
            params=ElicitParams(
                message="m",
                requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
            )
        ),
        ElicitRequest(params=ElicitParams(message="m", mode="url", url="https://example.com/x")),
        CreateMessageRequest(
            params=CreateMessageParams(
                messages=[SamplingMessage(role="user", content={"type": "text", "text": "q"})],
                max_tokens=5,
                system_prompt="be brief",
            )
        ),
        ListRootsRequest(),
    ],
)
def test_input_requests_are_schema_valid_and_decode_by_method(request_: Any) -> None:
    encoded = as_json(request_)
    check(CORE, "InputRequest", encoded)
    decoded = msgspec.json.decode(
        msgspec.json.encode(request_), type=ElicitRequest | CreateMessageRequest | ListRootsRequest
    )
    assert decoded == request_


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "accept", "content": {"name": "Ada", "n": 3, "ok": True, "tags": ["a"]}},
        {"action": "decline"},
    ],
)
def test_elicit_results_decode(answer: dict[str, Any]) -> None:
    check(CORE, "ElicitResult", answer)
    assert msgspec.convert(answer, ElicitResult).action == answer["action"]


@pytest.mark.parametrize(
    "task",
    [
        WorkingTask(**COMMON, poll_interval_ms=500, status_message="50%"),
        InputRequiredTask(**COMMON, input_requests={"k": ListRootsRequest()}),
        CompletedTask(**COMMON, result=msgspec.Raw(b'{"resultType":"complete","content":[]}')),
        FailedTask(**COMMON, error=ErrorObject(code=-32603, message="boom")),
        CancelledTask(**COMMON),
    ],
)
def test_each_detailed_task_variant_is_schema_valid_and_decodes_by_status(task: Any) -> None:
    encoded = as_json(task)
    check(TASKS, "GetTaskResult", encoded)
    check(TASKS, "DetailedTask", encoded)
    decoded = msgspec.json.decode(msgspec.json.encode(task), type=DetailedTask)
    assert type(decoded) is type(task) and decoded.task_id == "t"


def test_request_meta_reads_the_namespaced_keys() -> None:
    meta = msgspec.convert(
        {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": {"io.modelcontextprotocol/tasks": {}}
            },
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            "progressToken": "p-1",
        },
        RequestMeta,
    )
    assert meta.client_capabilities.has_tasks and meta.progress_token == "p-1"
    assert meta.client_info.name == "c"  # type: ignore[union-attr]


@given(st.floats(min_value=-1e9, max_value=4e9, allow_nan=False))
def test_iso_utc_matches_datetime_to_the_millisecond(when: float) -> None:
    stamp = datetime.datetime.fromtimestamp(when, datetime.UTC)
    assert iso_utc(when) == stamp.isoformat(timespec="milliseconds")[:-6] + "Z"


def test_a_polled_task_is_encoded_once_a_version_and_shown_as_it_is() -> None:
    encoder = Encoder(Implementation(name="s", version="1"))
    working = TaskRecord(
        task_id="t1",
        version=1,
        tool_name="x",
        status=TaskStatus.WORKING,
        created_at=0.0,
        last_updated_at=0.0,
        ttl_ms=None,
        poll_interval_ms=None,
    )

    def shown(record: TaskRecord) -> dict[str, Any]:
        raw = encoder.shown_task(record)
        assert bytes(raw) == msgspec.json.encode(encoder.detailed_task(record))
        return json.loads(bytes(raw))

    assert encoder.shown_task(working) is encoder.shown_task(working)  # kept
    assert shown(working)["status"] == "working"
    said = working.replace(status_message="half way", last_updated_at=1.0)
    assert shown(said)["statusMessage"] == "half way"
    bypassed = msgspec.structs.replace(working, status=TaskStatus.CANCELLED)  # same version
    assert shown(bypassed)["status"] == "cancelled"
    large = said.replace(
        status=TaskStatus.COMPLETED, result=msgspec.Raw(b'"' + b"x" * 20_000 + b'"')
    )
    assert encoder.shown_task(large) is not encoder.shown_task(large)  # too large to keep
    for version in range(1000):  # what is kept is bounded
        encoder.shown_task(msgspec.structs.replace(working, version=version))
    assert len(encoder._shown) <= 256
    encoder.use_info(Implementation(name="renamed", version="2"))
    assert shown(working)["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "renamed"
