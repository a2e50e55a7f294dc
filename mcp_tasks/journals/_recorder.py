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

from ..core._catalog import Catalog
from ..core._compat import CompatibleNames, message_of, resume_of
from ..core._effects import Step
from ..core._errors import ProtocolError
from ..core._injected import Injected
from ..core._needs import FetchTask, Need, TaskRequest
from ..core._options import PromptSpec, ToolSpec
from ..core._records import TaskRecord, encode_record
from ..core._server import ServerCore
from ..core.inputs import Input
from ._codec import (
    CODECS,
    FORMAT,
    encode_inputs,
    frame,
    input_encoder,
    output_encoder,
    raised_out,
    write_output,
)
from ._redaction import Redactor

Draw = tuple[str, Any]
"""("id", task id), ("digest", hex), ("mac", base64), ("verify", bool),
("decode", None or the -32602 as {"code","message"}), ("poll", ms or None)."""
_Entry = tuple[str, dict[str, Any], list[Draw], Any, bool]
"""One call: its name, its arguments by name, what it drew, its answer, whether it raised."""

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
        call = input.journal_name
        inputs = {name: getattr(input, name) for name in input.__struct_fields__}
        inputs["now"] = now
        draws: list[Draw] = []
        self._draws = draws
        try:
            out = self.core.handle(input, now)
        except Exception as error:
            self._draws = None
            self._write((call, inputs, draws, error, True))
            raise
        self._draws = None
        self._write((call, inputs, draws, as_journal_answer(call, out), False))
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
        call, inputs, _, out, raised = entry
        if call == "receive" and not raised and isinstance(out, FetchTask):
            # Held until `handle_task_request` answers it: the two go on one line, and the
            # request (the answer of one, the argument of the other) is written once.
            self._held[id(out.request)] = (out.request, entry)
            if len(self._held) > MAX_HELD:
                self._write_now(self._held.pop(next(iter(self._held)))[1])
            return
        if call == "handle_task_request":
            request = inputs["request"]
            held = self._held.pop(id(request), None)
            if held is not None and held[0] is request:
                del inputs["request"]
                self._write_now(held[1], then=entry)
                return
        elif call in ("store_unavailable", "internal_failure"):
            for key, (request, waiting) in list(self._held.items()):
                if request.request_id == inputs["request_id"]:
                    self._write_now(waiting)  # it will never be answered otherwise
                    del self._held[key]
        self._write_now(entry)

    def _write_now(self, entry: _Entry, then: _Entry | None = None) -> None:
        call = entry[0]
        try:
            core = self.core
            if self._revision != core.revision:
                self._revision = core.revision
                self._redactor = redactor_for(core.catalog)
                config = {"config": config_of(core)}
                self._sink(frame(input_encoder.encode(config)))
            self._sequence += 1
            line = bytearray(b"{")
            self._encode_call(entry, line)
            if then is not None:
                line += b',"then":{'
                self._encode_call(then, line)
                line += b"}"
            line += b"}"
            line[-1:] = b',"crc":%d}\n' % zlib.crc32(line)
            self._sink(line)
        except Exception as failure:  # never the call's failure: it answered already
            if self._on_error is not None:
                self._on_error(call, failure)

    def _encode_call(self, entry: _Entry, line: bytearray) -> None:
        """`"call":...,"draws":...,"in":...,"n":...,"out":...` (keys in sorted order)."""
        call, inputs, draws, out, raised = entry
        redactor = self._redactor
        record = inputs.get("record")
        if record is not None and not redactor.sensitive:
            inputs["record"] = self._encoded_record(record)
        line += _CALL_STARTS[call]
        if draws:
            input_encoder.encode_into(draws, line, -1)
        else:
            line += b"[]"
        line += b',"in":'
        accepted = call == "receive" and not _refused(out)
        inputs = encode_inputs(call, inputs, redactor, accepted=accepted)
        input_encoder.encode_into(inputs, line, -1)
        line += b',"n":%d,"out":' % self._sequence
        if raised:
            output_encoder.encode_into(raised_out(out), line, -1)
        else:
            write_output(out, redactor, line)


_CALL_STARTS: Final = {call: b'"call":"%s","draws":' % call.encode() for call in CODECS}


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
