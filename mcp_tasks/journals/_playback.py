"""Playback: a journal's calls, fed through a fresh core, answer as they did when recorded.

Theory of operation
-------------------
Each configuration line builds a fresh `ServerCore` from what it says (no handlers: the
core hands them back untouched, so replay needs none). Each call line is then made on
that core with its recorded arguments, the core drawing the recorded values in place of
the server's injected ones (ids, sealing, argument decoding, the poll policy), and its
answer is written the way the recording wrote it: `Replayed.expected` and
`Replayed.actual` are then the same bytes, or the core has changed its answer. No
handler, store, socket or clock is involved, and calls do not depend on one another, so
a journal with lines lost still replays.
"""

from __future__ import annotations

import base64
from collections import deque
from typing import Any, Final, NamedTuple

import msgspec
from msgspec import Raw

from ..core import _wire as w
from ..core._depth import MAX_DEPTH, nesting_depth
from ..core._errors import RemoteProtocolError
from ..core._needs import FetchTask
from ..core._options import (
    PromptSpec,
    ResourceSpec,
    ResourceTemplateSpec,
    ServerOptions,
    TaskOptions,
    ToolSpec,
)
from ..core._records import TaskRecord
from ..core._server import ServerCore
from ._codec import (
    FORMAT,
    INPUT_NAMED,
    READABLE_FORMATS,
    JournalDamaged,
    decode_inputs,
    output_encoder,
    raised_out,
    unframe,
    write_output,
)
from ._recorder import as_journal_answer, redactor_for
from ._redaction import WHOLLY_REDACTED


class DrawMismatch(Exception):
    """The replayed core drew something the recorded one did not, at this point."""


class _Catalog(msgspec.Struct):
    tools: list[ToolSpec] = []
    prompts: list[PromptSpec] = []
    resources: list[ResourceSpec] = []
    templates: list[ResourceTemplateSpec] = []
    completions: list[tuple[str, str]] = []


class _Config(msgspec.Struct):
    info: w.Implementation
    options: ServerOptions
    tasks: TaskOptions
    poll_policy: bool
    catalog: _Catalog


_line_decoder = msgspec.json.Decoder(dict[str, Raw])
_config_decoder = msgspec.json.Decoder(_Config)


class Replayed(NamedTuple):
    """One call line, replayed."""

    n: int
    call: str
    inputs: dict[str, Any]
    """The call's arguments, as the replayed core was given them."""
    expected: bytes
    """`out` as recorded."""
    actual: bytes
    """`out` as the replayed core answered."""
    problem: str | None
    """What else went wrong (a value drawn that the recording did not draw), or None."""

    @property
    def matches(self) -> bool:
        return self.problem is None and self.expected == self.actual


class Playback:
    """Feed it a journal's lines in order; each call line comes back `Replayed`."""

    def __init__(self) -> None:
        self._core: PlaybackCore | None = None
        self._started = False
        self._format = FORMAT

    @property
    def started(self) -> bool:
        """Whether a journal's header line was fed."""
        return self._started

    def feed(self, line: bytes | bytearray) -> list[Replayed]:
        """Replay one line: the calls on it (none for a header, configuration, gap or blank
        line; two for a `receive` and the `handle_task_request` that answered it). Raises
        `JournalDamaged` for a line that is not one a journal wrote, whatever it holds."""
        if not line.strip():
            return []
        try:
            fields = _fields_of(line)
            if "journal" in fields:
                self._format = _format_of(fields)
                self._started = True
                return []
            if not self._started:
                raise JournalDamaged("the journal does not start with its header line")
            if "config" in fields:
                self._core = _core_of(fields["config"], self._format)
                return []
            if "gap" in fields:
                if msgspec.json.decode(fields["gap"], type=int) < 0:
                    raise JournalDamaged("it says a negative number of lines were lost")
                return []
            first = _call_of(fields)
            then = None
            if "then" in fields:
                then = _call_of(_line_decoder.decode(fields["then"]), first.n)
        except JournalDamaged:
            raise
        except KeyError as missing:
            raise JournalDamaged(f"it lacks {missing.args[0]!r}") from None
        except Exception as error:  # whatever a hostile line makes the decoders raise
            raise JournalDamaged(f"it does not read back ({_short(error)})") from None
        core = self._core
        if core is None:
            raise JournalDamaged("a call comes before any configuration line")
        inputs = _inputs_of(first)
        if first.call == "receive" and inputs.get("data") is WHOLLY_REDACTED:
            return []  # nothing of it was kept: it cannot be replayed (it called no tool)
        answer, actual, problem = core.answer(first.call, inputs, first.draws)
        replayed = [Replayed(first.n, first.call, inputs, first.out, actual, problem)]
        if then is None:
            return replayed
        if first.call != "receive" or then.call != "handle_task_request":
            raise JournalDamaged(f"{then.call} cannot follow {first.call} on one line")
        then_inputs = _inputs_of(then)
        if not isinstance(answer, FetchTask):
            problem = "the replayed receive asked to load no task: nothing to answer"
            replayed.append(Replayed(then.n, then.call, then_inputs, then.out, b"", problem))
            return replayed
        then_inputs["request"] = answer.request
        _, actual, problem = core.answer(then.call, then_inputs, then.draws)
        replayed.append(Replayed(then.n, then.call, then_inputs, then.out, actual, problem))
        return replayed


MAX_LINE_DEPTH: Final = MAX_DEPTH + 256
"""Levels of arrays and objects a journal line may nest: a message the core accepted
(`MAX_DEPTH` at most) and the few levels a line wraps around it, or what a handler
returned. Deeper, a line is refused before it is decoded (msgspec would recurse)."""


def _fields_of(line: bytes | bytearray) -> dict[str, Raw]:
    body = unframe(line)
    if body.count(b"[") + body.count(b"{") > MAX_LINE_DEPTH and (
        nesting_depth(body) > MAX_LINE_DEPTH
    ):
        raise JournalDamaged(f"it nests deeper than {MAX_LINE_DEPTH} levels")
    return _line_decoder.decode(body)


def _format_of(fields: dict[str, Raw]) -> int:
    """The format the header names, if this version reads it."""
    named = bytes(fields.get("format", b""))
    if bytes(fields["journal"]) == b'"mcp-tasks"':
        for known in READABLE_FORMATS:
            if named == b"%d" % known:
                return known
    raise JournalDamaged(
        f"it starts a journal of a format this version cannot read (it reads formats "
        f"{', '.join(map(str, sorted(READABLE_FORMATS)))}; a later mcp_tasks wrote it?)"
    )


def _core_of(config: Raw, format: int = FORMAT) -> PlaybackCore:
    decoded = _config_decoder.decode(config)
    if b'"legacy_sessions"' not in bytes(config):
        # Written before servers served 2025 sessions: their answers were a modern-only
        # server's (-32022 and `server/discover` name 2026-07-28 alone).
        options = msgspec.structs.replace(decoded.options, legacy_sessions=False)
        decoded = msgspec.structs.replace(decoded, options=options)
    try:
        return PlaybackCore(decoded, format)
    except Exception as refused:  # a catalog no server could have had
        raise JournalDamaged(f"its configuration builds no core ({_short(refused)})") from None


def _short(error: BaseException) -> str:
    """What went wrong, in a line a report can show (never a whole hostile value)."""
    text = str(error) or type(error).__name__
    return text if len(text) <= 200 else f"{text[:200]}..."


class _Call(NamedTuple):
    n: int
    call: str
    inputs: bytes
    draws: list[tuple[str, Any]]
    out: bytes


def _call_of(fields: dict[str, Raw], n: int | None = None) -> _Call:
    return _Call(
        n=msgspec.json.decode(fields["n"], type=int) if n is None else n,
        call=msgspec.json.decode(fields["call"], type=str),
        inputs=bytes(fields["in"]),
        draws=msgspec.json.decode(fields["draws"], type=list[tuple[str, Any]]),
        out=bytes(fields["out"]),
    )


def _inputs_of(call: _Call) -> dict[str, Any]:
    try:
        return decode_inputs(call.call, call.inputs)
    except JournalDamaged:
        raise
    except Exception as error:  # the stored types' own checks raise what they raise
        why = f"the arguments of {call.call} do not read back ({_short(error)})"
        raise JournalDamaged(why) from None


class PlaybackCore:
    """A core configured as a journal says, drawing what the journal recorded."""

    def __init__(self, config: _Config, format: int = FORMAT) -> None:
        self._played = _Played(config.poll_policy, runs_decode=format >= 2)
        self.core = core = ServerCore(
            info=config.info,
            new_task_id=self._played.new_task_id,
            state_key=bytes(32),  # never used: sealing is played back
            tasks=config.tasks,
            options=config.options,
            injected=self._played,
        )
        catalog = core.catalog
        for tool in config.catalog.tools:
            catalog.add_tool(tool)
        for prompt in config.catalog.prompts:
            catalog.add_prompt(prompt)
        for resource in config.catalog.resources:
            catalog.add_resource(resource)
        for template in config.catalog.templates:
            catalog.add_template(template)
        for kind, name in config.catalog.completions:
            catalog.add_completion((kind, name))  # type: ignore[arg-type]
        self._redactor = redactor_for(catalog)

    def answer(
        self, call: str, inputs: dict[str, Any], draws: list[tuple[str, Any]]
    ) -> tuple[Any, bytes, str | None]:
        """What the input named `call` answers now (with `inputs`, its fields and `now`),
        that written as a journal writes `out`, and what else went wrong (None: nothing)."""
        played = self._played
        played.draws = deque(draws)
        problem = answer = None
        try:
            fields = dict(inputs)
            now = fields.pop("now", None)
            handled = INPUT_NAMED[call](**fields)
            answer = self.core.handle(handled, 0.0 if now is None else now)
            written = bytearray()
            write_output(as_journal_answer(call, answer), self._redactor, written)
            out = msgspec.Raw(bytes(written))
        except DrawMismatch as mismatch:
            out, problem = raised_out(mismatch), str(mismatch)
        except Exception as error:
            out = raised_out(error)
        if problem is None and played.draws:
            kinds = ", ".join(kind for kind, _ in played.draws)
            problem = f"the recorded call drew more than the replayed one: {kinds}"
        return answer, output_encoder.encode(out), problem


class _Played:
    """What the core draws (`Injected`), each value the one the journal recorded."""

    __slots__ = ("draws", "polls", "runs_decode")

    def __init__(self, polls: bool, *, runs_decode: bool = True) -> None:
        self.polls = polls
        self.runs_decode = runs_decode
        """False for a journal of format 1: a task run's arguments drew no "decode" then."""
        self.draws: deque[tuple[str, Any]] = deque()

    def take(self, kind: str) -> Any:
        if not self.draws:
            raise DrawMismatch(f"the replayed call drew a {kind} the recorded one did not")
        recorded, value = self.draws.popleft()
        if recorded != kind:
            raise DrawMismatch(
                f"the replayed call drew a {kind} where the recorded drew a {recorded}"
            )
        return value

    def new_task_id(self) -> str:
        task_id: str = self.take("id")
        return task_id

    def digest(self, method: str, name: str, arguments: bytes | None, principal: str | None) -> str:
        digest: str = self.take("digest")
        return digest

    def mac(self, signed: str) -> bytes:
        return base64.b64decode(self.take("mac"))

    def verify(self, signed: str, mac: bytes) -> bool:
        return bool(self.take("verify"))

    def decode_arguments(self, spec: ToolSpec | PromptSpec, arguments: Any) -> Any:
        if not self.runs_decode and (not self.draws or self.draws[0][0] != "decode"):
            return None  # a format 1 journal: the run's arguments were decoded by the run
        refused = self.take("decode")
        if refused is not None:
            raise RemoteProtocolError(refused["code"], refused["message"])
        return None

    def poll_wait_ms(self, principal: str | None, record: TaskRecord, now: float) -> int | None:
        wait_ms: int | None = self.take("poll")
        return wait_ms
