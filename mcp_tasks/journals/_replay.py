"""Replaying a journal: `replay(path)`, `timeline(path, task_id)`, `mcp-tasks replay`.

`replay` feeds every line of a journal `Server.record` wrote through a fresh core, with
the recorded clock, ids and fetched data (no handler, store or socket), and compares
each answer with the recorded one byte for byte. At the first difference it raises
`ReplayFailed`, whose report shows the message the call belonged to, the recorded and
the replayed answer as a diff, and the life of the task concerned up to there.
`timeline` tells one task's life from a journal, line by line.

A journal may come from anywhere (a bug report, a colleague), so reading one is as careful
as serving a client: a line longer than `max_line_bytes` is refused having read no more
than that of it (not a 3 GiB line, nor `/dev/zero`, is ever held whole), and every line that
is not one a journal wrote (cut short, nesting too deep, a wrong type anywhere, no header
first) fails the replay with a `ReplayFailed` naming its line, never another exception.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NamedTuple

from ..core import TaskRequest
from ._codec import JournalDamaged
from ._playback import Playback, Replayed

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "ReplayFailed",
    "ReplayResult",
    "TimelineEvent",
    "format_timeline",
    "replay",
    "timeline",
]

MAX_SHOWN_CHARS = 4000
"""An inbound message longer than this is shown cut, with its length."""
MAX_DIFF_LINES = 400
"""A report shows this many lines of a diff at most (a hostile journal's answer may be
millions of lines long), and says how many more there were."""
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
"""A journal line longer than this is refused unread: sixteen times the largest body the
HTTP server takes by default (4 MiB), for the message, the call it makes and its answer on
one line. Raise it (`max_line_bytes=`, `--max-line-bytes`) for a server taking more."""


class ReplayFailed(AssertionError):
    """A journal that does not replay: a line answered differently, or is not a journal
    line. `report` says where and how; `path` and `line` (1-based) locate it."""

    def __init__(self, report: str, *, path: Path, line: int) -> None:
        super().__init__(report)
        self.report = report
        self.path = path
        self.line = line


class ReplayResult(NamedTuple):
    path: Path
    lines: int
    calls: int
    """Calls replayed, every one answering as recorded."""
    tasks: frozenset[str]
    """The ids of the tasks the journal saw."""


class TimelineEvent(NamedTuple):
    at: float | None
    """The core's clock at the call (seconds since the epoch), if the call was given one."""
    line: int
    text: str
    repeats: int = 1
    """How many calls in a row said the same (polls)."""


def replay(
    path: str | os.PathLike[str], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> ReplayResult:
    """Replay the journal at `path`; raise `ReplayFailed` at its first difference, or at
    its first line that is not one a journal wrote (or is longer than `max_line_bytes`)."""
    path = Path(path)
    story = _Story()
    lines = calls = 0
    for number, held in _replayed(path, story, max_line_bytes):
        lines = number
        calls += held
    return ReplayResult(path, lines, calls, frozenset(story.events))


def timeline(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    task_id: str,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> list[TimelineEvent]:
    """The life of task `task_id` as the journal(s) at `paths` tell it (in order), replayed
    as it goes: a journal that does not replay raises `ReplayFailed`."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    events: list[TimelineEvent] = []
    for name in paths:
        story = _Story(only=task_id)
        for _ in _replayed(Path(name), story, max_line_bytes):
            pass
        events += story.events.get(task_id, [])
    return events


def _replayed(path: Path, story: _Story, max_line_bytes: int) -> Iterator[tuple[int, int]]:
    """Each line of the journal at `path`, replayed, told to `story`: (its number, how many
    calls it held)."""
    if max_line_bytes < 1:
        raise ValueError("max_line_bytes must be positive")
    playback = Playback()
    with path.open("rb") as file:
        for number, line in enumerate(_lines(file, max_line_bytes), 1):
            try:
                if len(line) > max_line_bytes:
                    raise JournalDamaged(f"it is longer than {max_line_bytes} bytes: not read")
                calls = playback.feed(line)
            except JournalDamaged as damaged:
                report = f"{path}, line {number}: {damaged}"
                raise ReplayFailed(report, path=path, line=number) from None
            for replayed in calls:
                if not replayed.matches:
                    report = story.report(path, number, line, replayed)
                    raise ReplayFailed(report, path=path, line=number)
                story.add(number, replayed)
            yield number, len(calls)
    if not playback.started:  # empty, or blank lines only
        report = f"{path}, line 1: it is empty: not a journal"
        raise ReplayFailed(report, path=path, line=1)


def _lines(file: IO[bytes], max_line_bytes: int) -> Iterator[bytes]:
    """The lines of `file`, each read up to `max_line_bytes` and one byte more: a longer
    one comes out cut there (and is refused), the rest of it never read."""
    while line := file.readline(max_line_bytes + 1):
        yield line


def format_timeline(task_id: str, events: list[TimelineEvent]) -> str:
    """`events` as lines: time since the first, the UTC time, the journal line, what happened."""
    if not events:
        return f"task {task_id}: not in the journal"
    start = next((event.at for event in events if event.at is not None), None)
    shown = [f"task {task_id}:"]
    for event in events:
        if event.at is None or start is None:
            when = f"{'':>10}  {'':24}"
        else:
            stamp = datetime.fromtimestamp(event.at, UTC).isoformat(timespec="milliseconds")
            since = f"+{event.at - start:.3f}s"
            when = f"{since:>10}  {stamp.replace('+00:00', 'Z'):24}"
        times = f" (x{event.repeats})" if event.repeats > 1 else ""
        shown.append(f"  {when}  line {event.line:<6} {event.text}{times}")
    return "\n".join(shown)


# --- what happened to each task ---------------------------------------------------------


class _Story:
    """What the replayed calls tell: the messages received, and each task's events."""

    def __init__(self, only: str | None = None) -> None:
        self.only = only
        self.events: dict[str, list[TimelineEvent]] = {}
        self.messages: list[tuple[int, Any, str]] = []
        """(line, request id, the message's text) of recent messages received."""
        self.now: float | None = None

    def add(self, number: int, replayed: Replayed) -> None:
        inputs = replayed.inputs
        now = inputs.get("now")
        if isinstance(now, float | int):
            self.now = float(now)
        out = json.loads(replayed.expected) if replayed.expected != b"null" else None
        if replayed.call == "receive":
            self._received(number, inputs["data"], out)
        for task_id, text in _told(replayed.call, inputs, out):
            if self.only is None or task_id == self.only:
                self._event(task_id, number, text)

    def _received(self, number: int, data: bytes, out: Any) -> None:
        text = data.decode("utf-8", "replace")
        try:
            message = json.loads(text)
        except ValueError:
            message = None
        request_id = message.get("id") if isinstance(message, dict) else None
        self.messages.append((number, request_id, text))
        del self.messages[:-1000]

    def _event(self, task_id: str, number: int, text: str) -> None:
        events = self.events.setdefault(task_id, [])
        if events and events[-1].text == text:
            events[-1] = events[-1]._replace(repeats=events[-1].repeats + 1)
        else:
            events.append(TimelineEvent(self.now, number, text))

    def report(self, path: Path, number: int, line: bytes, replayed: Replayed) -> str:
        why = f": {replayed.problem}" if replayed.problem else ""
        parts = [f"{path}, line {number}: {replayed.call} answered differently on replay{why}"]
        message = self._message_for(replayed, line)
        if message is not None:
            at, text = message
            if len(text) > MAX_SHOWN_CHARS:
                text = f"{text[:MAX_SHOWN_CHARS]}... ({len(text)} characters)"
            parts.append(f"The message it answers (line {at}):\n  {text}")
        parts.append(_diff(replayed.expected, replayed.actual, number))
        for task_id, events in self.events.items():
            if task_id.encode() in line:
                parts.append("Up to here, " + format_timeline(task_id, events))
        return "\n\n".join(parts)

    def _message_for(self, replayed: Replayed, line: bytes) -> tuple[int, str] | None:
        if replayed.call == "receive":
            return (
                None
                if replayed.inputs.get("data") is None
                else (0, replayed.inputs["data"].decode("utf-8", "replace"))
            )
        request_id = _request_id(replayed.inputs)
        for at, known_id, text in reversed(self.messages):
            if request_id is not None and known_id == request_id:
                return at, text
        for at, _, text in reversed(self.messages):
            if any(task_id in text for task_id in self.events if task_id.encode() in line):
                return at, text
        return None


def _request_id(inputs: dict[str, Any]) -> Any:
    if "request_id" in inputs:
        return inputs["request_id"]
    for value in inputs.values():
        request_id = getattr(value, "request_id", None)
        if request_id is not None:
            return request_id
    return None


def _diff(expected: bytes, actual: bytes, number: int) -> str:
    def pretty(data: bytes) -> list[str]:
        try:
            return json.dumps(json.loads(data), indent=2).splitlines()
        except ValueError:
            return [data.decode("utf-8", "replace")]

    lines = list(
        difflib.unified_diff(
            pretty(expected),
            pretty(actual),
            fromfile=f"recorded (line {number})",
            tofile="replayed",
            lineterm="",
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        more = len(lines) - MAX_DIFF_LINES
        lines[MAX_DIFF_LINES:] = [f"... ({more} more lines of the diff)"]
    return "\n".join(lines)


def _task_request_text(request: TaskRequest, out: Any) -> str:
    """What a `tasks/*` request asked, and what it was answered."""
    method = request.method
    reply = ((out or {}).get("step") or {}).get("reply") or {}
    body = reply.get("body") or {}
    if "error" in body:
        error = body["error"]
        return f"{method} refused: {error.get('code')} {error.get('message')}"
    if method == "tasks/update":
        keys = sorted(request.input_responses or {})
        return f"tasks/update answered {', '.join(keys) or 'nothing'}"
    if method == "tasks/get":
        return f"tasks/get: {(body.get('result') or {}).get('status')}"
    return method


def _told(call: str, inputs: dict[str, Any], out: Any) -> Iterator[tuple[str, str]]:
    """(task id, what happened) for each thing this call did to a task."""
    record = inputs.get("record")
    if call == "handle_task_request":
        yield inputs["request"].task_id, _task_request_text(inputs["request"], out)
    if call == "task_returned" and record is not None:
        yield record.task_id, f"handler returned {_outcome_text(inputs.get('outcome'))}"
    effects = ((out or {}).get("step") or {}).get("effects") or []
    if out is not None and "effect" in out:
        effects = [out["effect"]]
    for effect in effects:
        ((kind, value),) = effect.items()
        told = _effect_text(kind, value)
        if told is not None:
            yield told


def _outcome_text(outcome: Any) -> str:
    name = type(outcome).__name__
    if name == "CallToolResult":
        return "a result (an error result)" if getattr(outcome, "is_error", False) else "a result"
    if name == "ErrorObject":
        return f"error {outcome.code}: {outcome.message}"
    if name == "InputRequired":
        return f"InputRequired ({', '.join(outcome.requests)})"
    return str(outcome)


_EVENTS = {
    "need_input": "input_required, asking {asked}",
    "input_answered": "working again: every question answered",
    "complete": "completed",
    "fail": "failed: {error}",
    "cancel": "cancelled",
    "expire": "expired (failed)",
    "orphan": "orphaned: its process stopped (failed)",
    "restart": "restarted: its process stopped, runs again",
}


def _effect_text(kind: str, value: dict[str, Any]) -> tuple[str, str] | None:
    if kind == "SaveTask":
        record = value["record"]
        task_id = record["task_id"]
        if value.get("expected_version") is None:
            return task_id, f"created by tools/call {record['tool_name']}: {record['status']}"
        event = value.get("event")
        if event is None:
            message = record.get("status_message")
            return task_id, f"status message: {message!r}" if message else "answers noted"
        error = (record.get("error") or {}).get("message")
        asked = ", ".join(sorted(record.get("input_requests") or {}))
        return task_id, _EVENTS.get(event, event).format(asked=asked, error=error)
    if kind == "DeleteTask":
        if value.get("expired"):
            return value["task_id"], "removed (its TTL ran out while it was unfinished)"
        return value["task_id"], "removed: its TTL ran out"
    texts = {
        "StartTask": "handler started",
        "ResumeTask": "handler resumed with the answers",
        "CancelTask": "handler cancelled",
        "AwaitAnswer": "handler waits in place for {key}",
    }
    if kind in texts:
        return value["task_id"], texts[kind].format(key=value.get("key"))
    return None
