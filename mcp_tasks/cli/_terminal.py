"""The terminal side of `mcp-tasks call`: results printed, a live status line, and
elicitation questions asked from their `requestedSchema`."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TextIO

import anyio
import click
import msgspec

from ..core._client import RpcError, Task
from ..core._wire import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    ElicitParams,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
)
from ..transports import ServerUnreachable

EXIT_ERROR = 1
DECLINE = ":decline"
CANCEL = ":cancel"
_TRUE = ("y", "yes", "true", "1")
_FALSE = ("n", "no", "false", "0")

Ask = Callable[[str], Awaitable[str | None]]


class Answered(Exception):
    """The user declined or cancelled a question instead of answering it."""

    def __init__(self, action: Literal["decline", "cancel"]) -> None:
        super().__init__(action)
        self.action = action


# --- printing results ---------------------------------------------------------------------------


def print_result(result: CallToolResult, output: str) -> int:
    """Print the result: stdout, or stderr for a tool error; the exit code."""
    is_error = result.is_error is True
    if output == "json":
        click.echo(msgspec.json.encode(result).decode())
    else:
        for line in describe_result(result):
            click.echo(line, err=is_error)
    return EXIT_ERROR if is_error else 0


def describe_result(result: CallToolResult) -> list[str]:
    """The result as text: text content as it is, other content summarised in brackets,
    `structuredContent` as JSON."""
    lines = [_describe_content(block) for block in result.content]
    if result.structured_content is not None:
        lines.append(json.dumps(result.structured_content, indent=2, ensure_ascii=False))
    return lines


def _describe_content(block: ContentBlock) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        kind = "image" if isinstance(block, ImageContent) else "audio"
        return f"[{kind}: {block.mime_type}, {_base64_size(block.data)} bytes]"
    if isinstance(block, EmbeddedResource):
        return f"[resource: {block.resource.uri}]"
    return f"[resource link: {block.uri}]"


def _base64_size(data: str) -> int:
    data = data.strip()
    return len(data) * 3 // 4 - data[-2:].count("=")


def retry_reason(why: RpcError | ServerUnreachable) -> str:
    """Why a request is sent again, in a few words."""
    if isinstance(why, RpcError):
        return why.message
    if why.may_have_arrived:
        return "the connection to the server broke"
    return "the server cannot be reached"


# --- the terminal: status line and questions ----------------------------------------------------


class Terminal:
    """Status on stderr, redrawn in place on a terminal (plain lines otherwise), and
    elicitation questions asked there, answers read from stdin in a worker thread."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.clock = clock
        self.started_at = clock()
        self.task: Task | None = None
        self.drawn = False  # a live status line is on screen
        self.asking = False
        self.note = ""  # why the status is stale: a retry under way, until the next status

    def status(self, task: Task) -> None:
        self.task = task
        self.note = ""
        if self.live:
            self._draw()
        else:
            self.stream.write(self._status_text() + "\n")
            self.stream.flush()

    def retrying(self, method: str, seconds: float, why: RpcError | ServerUnreachable) -> None:
        """A request waits before it is sent again: said on the status line while a task is
        shown live, else on a line of its own."""
        self.note = f"{method}: {retry_reason(why)}; trying again in {seconds:.1f} s"
        if self.live and self.task is not None:
            self._draw()
            return
        self.finish()
        self.stream.write(f"mcp-tasks: {self.note}\n")
        self.stream.flush()

    async def tick_every_second(self) -> None:
        while self.live:
            await anyio.sleep(1)
            self._draw()

    def finish(self) -> None:
        """Leave the status line on screen, ending it: what follows starts a new line."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False

    def _draw(self) -> None:
        if self.task is None or self.asking:
            return
        self.stream.write("\r\x1b[K" + self._status_text())
        self.stream.flush()
        self.drawn = True

    def _status_text(self) -> str:
        assert self.task is not None
        task = self.task
        elapsed = self.clock() - self.started_at
        text = f"mcp-tasks: task {task.task_id} {task.status} ({elapsed:.0f}s)"
        if task.status_message is not None:
            text = f"{text}: {task.status_message}"
        return f"{text} [{self.note}]" if self.note else text

    async def elicit(self, params: ElicitParams) -> ElicitResult:
        self.finish()
        self.asking = True
        try:
            return await ask_elicitation(params, self._ask, self._tell)
        finally:
            self.asking = False

    def _tell(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    async def _ask(self, prompt: str) -> str | None:
        """One line from stdin (None at its end), without blocking the event loop."""
        self.stream.write(prompt)
        self.stream.flush()
        line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        return line.rstrip("\r\n") if line else None


async def ask_elicitation(
    params: ElicitParams, ask: Ask, tell: Callable[[str], None]
) -> ElicitResult:
    """Ask an elicitation request with `ask` (a prompt in, a line out, None at EOF).

    URL mode shows the URL and asks to accept or decline. Form mode asks one question per
    property of `requestedSchema`. `:decline` or `:cancel` at any question answers so; the
    end of input cancels.
    """
    tell(f"mcp-tasks: the server asks: {params.message}")
    try:
        if params.effective_mode == "url":
            tell(f"  open: {params.url if params.url is not None else '(no URL given)'}")
            agreed = await _ask_value(
                ask, "  accept", {"type": "boolean"}, required=True, tell=tell
            )
            return ElicitResult(action="accept" if agreed else "decline")
        tell(f"  (answer each field; {DECLINE} declines, {CANCEL} cancels)")
        schema = params.requested_schema if params.requested_schema is not None else {}
        content: dict[str, Any] = {}
        required = set(schema.get("required", []))
        for name, field_schema in schema.get("properties", {}).items():
            label = f"  {field_schema.get('title', name)}"
            if "description" in field_schema:
                tell(f"  {field_schema['description']}")
            value = await _ask_value(ask, label, field_schema, required=name in required, tell=tell)
            if value is not None:
                content[name] = value
        return ElicitResult(action="accept", content=content)
    except Answered as answered:
        return ElicitResult(action=answered.action)


async def _ask_value(
    ask: Ask,
    label: str,
    schema: dict[str, Any],
    *,
    required: bool,
    tell: Callable[[str], None],
) -> Any:
    """Ask until the answer fits `schema`; None for an optional field left empty."""
    choices: list[Any] = list(schema.get("enum", []))
    for number, choice in enumerate(choices, 1):
        tell(f"    {number}. {choice}")
    default = schema.get("default")
    prompt = f"{label} {_hint_for(schema, choices, required, default)}: "
    while True:
        line = await ask(prompt)
        if line is None:
            raise Answered("cancel")
        answer = line.strip()
        if answer in (DECLINE, CANCEL):
            raise Answered("decline" if answer == DECLINE else "cancel")
        if not answer:
            if default is not None:
                return default
            if not required:
                return None
            tell("    an answer is required")
            continue
        try:
            return _convert(answer, schema, choices)
        except ValueError as error:
            tell(f"    {error}")


def _hint_for(schema: dict[str, Any], choices: list[Any], required: bool, default: Any) -> str:
    kind = schema.get("type", "string")
    parts = [f"1-{len(choices)}" if choices else "y/n" if kind == "boolean" else kind]
    if default is not None:
        parts.append(f"default {default}")
    elif not required:
        parts.append("optional")
    return f"[{', '.join(parts)}]"


def _convert(answer: str, schema: dict[str, Any], choices: list[Any]) -> Any:
    if choices:
        if answer.isdigit() and 1 <= int(answer) <= len(choices):
            return choices[int(answer) - 1]
        if answer in [str(choice) for choice in choices]:
            return choices[[str(choice) for choice in choices].index(answer)]
        raise ValueError(f"choose a number from 1 to {len(choices)}")
    kind = schema.get("type", "string")
    if kind == "boolean":
        if answer.lower() in _TRUE + _FALSE:
            return answer.lower() in _TRUE
        raise ValueError("answer y or n")
    if kind == "integer":
        try:
            return int(answer)
        except ValueError:
            raise ValueError("a whole number, please") from None
    if kind == "number":
        try:
            return float(answer)
        except ValueError:
            raise ValueError("a number, please") from None
    return answer
