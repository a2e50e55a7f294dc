"""Recording: a wrapper of `ServerCore.handle` that writes every input to a journal.

Theory of operation
-------------------
The core keeps nothing between inputs, so what it answers depends only on the input, the
time and what it drew, while it decided, from what the server injected (`core.injected`:
task ids, the digests and MACs of sealed input rounds, the verdicts of the tools' argument
types and of the poll policy). `Recorder` wraps `handle` and the injected object and
writes one line per input (`_codec` says how): its name, its fields and the time, what it
drew, and what the core answered. An input handled from inside another (none today, but
a shell may nest) is part of the outer one's line.

Each line is written on the thread that handled the input, so it is built for speed: the
input is kept as it came (a frozen struct: what it held then, it holds when written) and its
fields are encoded from it in one go (`_codec.PLANS`, made once per input type), not
gathered into a dict first; a `tasks/*` request and the `TaskFetched` that answered it, most
lines of a polled server, are written in a few steps (`_poll_line`), the record they read
encoded once however often it is polled. The bytes are the same either way
(tests/core/journals/lines.jsonl). When a tool has sensitive arguments, every line goes the
slower way of `_codec.encode_inputs`, which redacts.

Writing never fails an input: a line that cannot be encoded is reported to `on_error`, and
the sink (`JournalWriter`) deals with its own failures. `_playback.Playback` is the other
half: it replays the lines through a fresh core.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec.structs import astuple

from ..core._catalog import Catalog
from ..core._compat import CompatibleNames, message_of, resume_of
from ..core._effects import Step
from ..core._errors import ProtocolError
from ..core._injected import Injected
from ..core._needs import FetchTask, Need, TaskRequest
from ..core._options import PromptSpec, ToolSpec
from ..core._records import TaskRecord, encode_record
from ..core._server import ServerCore
from ..core.inputs import Input, Received, ServerFailed, StoreUnreachable, TaskFetched
from ._codec import (
    CODECS,
    DATA,
    FORMAT,
    JOINED_PLAN,
    PLANS,
    RECORD,
    encode_inputs,
    encode_message,
    frame,
    input_encoder,
    output_encoder,
    raised_out,
    write_inputs,
    write_output,
)
from ._redaction import Redactor

Draw = tuple[str, Any]
"""("id", task id), ("digest", hex), ("mac", base64), ("verify", bool),
("decode", None or the -32602 as {"code","message"}), ("poll", ms or None)."""
_Entry = tuple[Input, float, list[Draw], Any, bool]
"""One input: itself (frozen: it is written as it came), the time it was handled at, what
it drew, the core's answer (or what it raised), whether it raised."""

MAX_HELD: Final = 4096
"""`receive` calls held for the answer to their `FetchTask` at most; past it, the oldest is
written down alone."""
MAX_ENCODED_RECORDS: Final = 4096
"""Records whose encoding a recording core keeps, to write a record read again quickly."""
JOURNAL_HEADER: Final = {"journal": "mcp-tasks", "format": FORMAT}


def config_of(core: ServerCore) -> dict[str, Any]:
    """What a fresh core needs to answer as `core` does (handlers and keys aside)."""
    catalog = core.catalog
    return {
        "info": core.info,
        "options": core.options,
        "tasks": core.task_options,
        "poll_policy": core.injected.polls,
        "catalog": {
            "tools": list(catalog.tools.values()),
            "prompts": list(catalog.prompts.values()),
            "resources": list(catalog.resources.values()),
            "templates": list(catalog.templates.values()),
            "completions": sorted(catalog.completions),
        },
    }


def redactor_for(catalog: Catalog) -> Redactor:
    sensitive = {
        name: tool.sensitive_arguments
        for name, tool in catalog.tools.items()
        if tool.sensitive_arguments
    }
    return Redactor(sensitive, catalog.header_params)


class Recorder(CompatibleNames):
    """`core`, answering exactly as before, writing each input it handles to `sink` as a
    line: a wrapper of `core.handle` (every other name is `core`'s own).

    It wraps what `core` draws from outside itself (`core.injected`) to write that down
    too. `on_error` hears of an input that could not be written down. A `Received` that
    asks to load a task waits for the `TaskFetched` that answers it, to share its line:
    `flush()` writes down any still waiting."""

    def __init__(
        self,
        core: ServerCore,
        sink: Callable[[bytes | bytearray], None],
        *,
        on_error: Callable[[str, Exception], None] | None = None,
    ) -> None:
        self.core = core
        self._sink = sink
        self._on_error = on_error
        self._held: dict[int, tuple[TaskRequest, _Entry]] = {}
        self._draws: list[Draw] | None = None
        self._sequence = 0
        self._revision = -1
        self._redactor = redactor_for(core.catalog)
        self._records: dict[int, tuple[TaskRecord, msgspec.Raw]] = {}
        core.use_injected(_Drawing(core.injected, self))
        self._sink(frame(input_encoder.encode(JOURNAL_HEADER)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.core, name)  # configuration, the catalog, the options...

    def _draw(self, kind: str, value: Any) -> None:
        if self._draws is not None:
            self._draws.append((kind, value))

    # --- the one entry, recorded ------------------------------------------------------------

    def handle(self, input: Input, now: float) -> Step | Need:
        """`ServerCore.handle`, written down as the call of the entry point it replaced
        (journals of format 1 name calls: `Input.journal_name`)."""
        if self._draws is not None:  # handled from inside another: part of its line
            return self.core.handle(input, now)
        draws: list[Draw] = []
        self._draws = draws
        try:
            out = self.core.handle(input, now)
        except Exception as error:
            self._draws = None
            self._write((input, now, draws, error, True))
            raise
        self._draws = None
        self._write((input, now, draws, out, False))
        return out

    # --- writing -------------------------------------------------------------------------

    def _encoded_record(self, record: TaskRecord) -> msgspec.Raw:
        """`record` as `encode_record` writes it, once per record: a task polled again and
        again is read as the same (immutable) record from a memory store."""
        known = self._records.get(id(record))
        if known is not None and known[0] is record:
            return known[1]
        encoded = msgspec.Raw(encode_record(record))
        if len(self._records) >= MAX_ENCODED_RECORDS:
            self._records.clear()
        self._records[id(record)] = (record, encoded)
        return encoded

    def flush(self) -> None:
        """Write down the `receive` calls held for the call that answers their `FetchTask`
        (a server calls it every second, and when it stops)."""
        held, self._held = self._held, {}
        for _, entry in held.values():
            self._write_now(entry)

    def _write(self, entry: _Entry) -> None:
        input, _, _, out, raised = entry
        kind = type(input)
        if kind is Received and not raised and isinstance(out, FetchTask):
            # Held until `handle_task_request` answers it: the two go on one line, and the
            # request (the answer of one, the argument of the other) is written once.
            self._held[id(out.request)] = (out.request, entry)
            if len(self._held) > MAX_HELD:
                self._write_now(self._held.pop(next(iter(self._held)))[1])
            return
        if kind is TaskFetched:
            request = input.request  # type: ignore[attr-defined]
            held = self._held.pop(id(request), None)
            if held is not None and held[0] is request:
                self._write_now(held[1], then=entry)
                return
        elif kind is StoreUnreachable or kind is ServerFailed:
            for key, (request, waiting) in list(self._held.items()):
                if request.request_id == input.request_id:  # type: ignore[attr-defined]
                    self._write_now(waiting)  # it will never be answered otherwise
                    del self._held[key]
        self._write_now(entry)

    def _write_now(self, entry: _Entry, then: _Entry | None = None) -> None:
        try:
            core = self.core
            if self._revision != core.revision:
                self._revision = core.revision
                self._redactor = redactor_for(core.catalog)
                config = {"config": config_of(core)}
                self._sink(frame(input_encoder.encode(config)))
            self._sequence += 1
            line = None if then is None else self._poll_line(entry, then)
            if line is None:
                line = bytearray(b"{")
                self._encode_call(entry, line)
                if then is not None:
                    line += b',"then":{'
                    self._encode_call(then, line, joined=True)
                    line += b"}"
                line += b"}"
            line[-1:] = b',"crc":%d}\n' % zlib.crc32(line)
            self._sink(line)
        except Exception as failure:  # never the call's failure: it answered already
            if self._on_error is not None:
                self._on_error(entry[0].journal_name, failure)

    def _poll_line(self, asked: _Entry, answered: _Entry) -> bytearray | None:
        """The line `_encode_call` writes for a `Received` (a `tasks/*` request) and the
        `TaskFetched` that answered it, when neither drew and nothing is redacted: most
        lines (every poll), so written in the fewest steps. None: not that case."""
        received, now, draws, fetch, _ = asked
        fetched, answered_at, answer_draws, step, raised = answered
        redactor = self._redactor
        if draws or answer_draws or raised or redactor.sensitive:
            return None
        fields = astuple(received)  # the message first, the rest as they are (`PLANS`)
        message = encode_message(fields[0], True)  # the core accepted it: it asked a task
        line = bytearray(_POLL_START)
        input_encoder.encode_into(_RECEIVED_IN(message, *fields[1:], now), line, -1)
        line += b',"n":%d,"out":{"need":{"FetchTask":' % self._sequence
        output_encoder.encode_into(fetch, line, -1)
        line += _POLL_THEN
        record = fetched.record  # type: ignore[attr-defined]
        encoded = None if record is None else self._encoded_record(record)
        input_encoder.encode_into(_FETCHED_IN(encoded, answered_at), line, -1)
        line += b',"n":%d,"out":' % self._sequence
        write_output(step, redactor, line)
        line += b"}}"
        return line

    def _encode_call(self, entry: _Entry, line: bytearray, *, joined: bool = False) -> None:
        """`"call":...,"draws":...,"in":...,"n":...,"out":...` (keys in sorted order).
        `joined`: a `TaskFetched` on the line of the `Received` it answers."""
        input, now, draws, out, raised = entry
        call = input.journal_name
        if draws:
            line += _CALL_STARTS[call]
            input_encoder.encode_into(draws, line, -1)
            line += b',"in":'
        else:
            line += _UNDRAWN_STARTS[call]
        accepted = call == "receive" and not _refused(out)
        redactor = self._redactor
        if redactor.sensitive:
            inputs = {name: getattr(input, name) for name in input.__struct_fields__}
            inputs["now"] = now
            if joined:
                del inputs["request"]
            inputs = encode_inputs(call, inputs, redactor, accepted=accepted)
            input_encoder.encode_into(inputs, line, -1)
        else:
            plan = JOINED_PLAN if joined else PLANS[type(input)]
            record = self._encoded_record
            write_inputs(
                input, now, plan, line, accepted=accepted, record=record, redactor=redactor
            )
        line += b',"n":%d,"out":' % self._sequence
        if raised:
            output_encoder.encode_into(raised_out(out), line, -1)
        else:
            write_output(as_journal_answer(call, out), redactor, line)


_CALL_STARTS: Final = {call: b'"call":"%s","draws":' % call.encode() for call in CODECS}
_UNDRAWN_STARTS: Final = {call: start + b'[],"in":' for call, start in _CALL_STARTS.items()}
"""A call's start when it drew nothing (most): one append."""
_POLL_START: Final = b"{" + _UNDRAWN_STARTS["receive"]
_POLL_THEN: Final = b'}},"then":{' + _UNDRAWN_STARTS["handle_task_request"]
_RECEIVED_IN: Final = PLANS[Received].written
_FETCHED_IN: Final = JOINED_PLAN.written
if PLANS[Received].changed != ((0, DATA),) or JOINED_PLAN.changed != ((0, RECORD),):
    raise AssertionError("`_poll_line` writes a message first, then the rest as it is")


def as_journal_answer(call: str, out: Any) -> Any:
    """`out` as the entry point `call` answered before `handle` (journals of format 1
    hold those answers): a listen stream's message, a reply, a `ResumeTask`."""
    shape = _OLD_SHAPES.get(call)
    return out if shape is None else shape(out)


def _reply_of(step: Step) -> Any:
    return step.reply


_OLD_SHAPES: Final[dict[str, Callable[[Step], Any]]] = {
    "task_resumed": resume_of,
    "subscription_acknowledged": message_of,
    "list_changed": message_of,
    "resource_updated": message_of,
    "task_changed": message_of,
    "subscription_ended": _reply_of,
    "listen_refused": _reply_of,
    "store_unavailable": _reply_of,
    "internal_failure": _reply_of,
}


def _refused(out: Any) -> bool:
    """`receive` answered with an error (the message may not even be JSON)."""
    reply = out.reply if isinstance(out, Step) else None
    return reply is not None and reply.error_code is not None


class _Drawing:
    """What the core draws (`Injected`), each value written down as the input's draw."""

    __slots__ = ("_inner", "_recorder")

    def __init__(self, inner: Injected, recorder: Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    @property
    def polls(self) -> bool:
        return self._inner.polls

    def new_task_id(self) -> str:
        task_id = self._inner.new_task_id()
        self._recorder._draw("id", task_id)
        return task_id

    def digest(self, method: str, name: str, arguments: bytes | None, principal: str | None) -> str:
        digest = self._inner.digest(method, name, arguments, principal)
        self._recorder._draw("digest", digest)
        return digest

    def mac(self, signed: str) -> bytes:
        mac = self._inner.mac(signed)
        self._recorder._draw("mac", base64.b64encode(mac).decode("ascii"))
        return mac

    def verify(self, signed: str, mac: bytes) -> bool:
        verdict = self._inner.verify(signed, mac)
        self._recorder._draw("verify", verdict)
        return verdict

    def decode_arguments(self, spec: ToolSpec | PromptSpec, arguments: Any) -> Any:
        try:
            decoded = self._inner.decode_arguments(spec, arguments)
        except ProtocolError as refused:
            self._recorder._draw("decode", {"code": refused.code, "message": refused.message})
            raise
        self._recorder._draw("decode", None)
        return decoded

    def poll_wait_ms(self, principal: str | None, record: TaskRecord, now: float) -> int | None:
        wait_ms = self._inner.poll_wait_ms(principal, record, now)
        self._recorder._draw("poll", wait_ms)
        return wait_ms


RecordingCore = Recorder
"""The name of `Recorder` before it wrapped the core (it was a subclass): kept one release."""
