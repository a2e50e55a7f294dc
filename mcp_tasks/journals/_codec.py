"""How a journal writes down each input the core handled, and reads it back.

A journal is JSON lines. Every line ends with `"crc":N`, the CRC-32 of the line as it
would read without it, so a line changed after it was written is found before anything
is replayed. The kinds of line:

    {"journal":"mcp-tasks","format":1,...}                   the first line of each file
    {"config":{"info":...,"options":...,"catalog":...}}      the core's configuration
    {"n":7,"call":"receive","in":{...},"draws":[...],"out":{...}}   one input handled
    {"gap":3}                                                lines the writer lost

`call` names the input (`Input.journal_name`: the name of the entry point it replaced, so
journals written before inputs were structs read the same); `in` holds its fields by name
and `now`, the time it was handled at; `draws` what the core drew from what it is given
(task ids, the MACs and digests of sealed rounds, the verdicts of argument decoding and of
the poll policy), in order; `out` what it answered (or `raised`). How each field is
written follows from its annotation (`CODECS`).

Secrets stay out: the core never sees credentials (only the MCP headers it checks), the
sealing key is not written (only MACs the client was sent anyway, and verdicts), and the
arguments a tool marks sensitive are written as `REDACTED`, wherever they appear, however
the message spelled them (`_redaction` decides on the decoded message).
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import msgspec
from msgspec import Raw

from ..core import _needs as n
from ..core import _wire as w
from ..core._effects import (
    DeleteTask,
    Effect,
    Notify,
    Reply,
    ResumeTask,
    SaveTask,
    StartTask,
    Step,
)
from ..core._envelope import HttpHeaders
from ..core._outcomes import START_TASK, InputRequired
from ..core._records import TaskRecord, decode_record
from ..core.inputs import INPUTS, Input, TaskFetched
from ._redaction import WHOLLY_REDACTED, Redactor

FORMAT: Final = 2
"""Format 2 (from issue 28): a task run's arguments are decoded by the core as it starts
or resumes the run, one more "decode" draw. Format 1 journals replay: their runs drew none."""
READABLE_FORMATS: Final = frozenset({1, FORMAT})
_CRC_MARK: Final = b',"crc":'


class JournalDamaged(ValueError):
    """A journal line that is not one a journal wrote (edited, cut short, not JSON)."""


# --- framing -----------------------------------------------------------------------------


def frame(body: bytes) -> bytes:
    """`body` (a JSON object) as a journal line: its CRC-32 added as the last member."""
    return body[:-1] + _CRC_MARK + str(zlib.crc32(body)).encode() + b"}\n"


def unframe(line: bytes | bytearray) -> bytes:
    """The JSON object of a journal line, its CRC-32 checked and removed."""
    line = bytes(line).rstrip(b"\r\n")
    head, mark, tail = line.rpartition(_CRC_MARK)
    digits = tail[:-1]
    if not mark or not tail.endswith(b"}") or not digits.isdigit() or len(digits) > 10:
        raise JournalDamaged("it has no checksum: it is not a journal line")
    body = head + b"}"
    if zlib.crc32(body) != int(digits):
        raise JournalDamaged("its checksum does not match: it was changed after it was written")
    return body


# --- the arguments of each entry point ---------------------------------------------------


class Codec(NamedTuple):
    encode: Callable[[Any, Redactor], Any] | None
    """The value as something the journal's encoder writes (None: as it is)."""
    decode: Callable[[bytes], Any]
    """The value back from its JSON."""
    only_redacts: bool = False
    """`encode` changes nothing unless some tool has sensitive arguments."""


def _plain(kind: Any) -> Codec:
    decoder = msgspec.json.Decoder(kind)
    return Codec(None, decoder.decode)


def encode_message(data: bytes | w.IncomingMessage, accepted: bool) -> Any:
    """A message as received: a JSON object the core accepted (it decoded, whole and not
    too deep) as itself, on one line; anything else as a string, or ["base64", ...], or
    ["redacted"] when nothing of it is kept. One a host decoded is written as its JSON."""
    if isinstance(data, w.IncomingMessage):
        data = msgspec.json.encode(data)
    if data is WHOLLY_REDACTED:
        return Raw(data)
    if accepted and data[:1] == b"{" and data.find(b"\n") < 0 and data.find(b"\r") < 0:
        return Raw(data)  # (`find` is quicker than `in` on bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ["base64", base64.b64encode(data).decode("ascii")]


def _decode_message(raw: bytes) -> bytes:
    """A message as `encode_message` wrote it (`WHOLLY_REDACTED` itself for one of which
    nothing was kept)."""
    if raw[:1] == b"{":
        return raw
    value = msgspec.json.decode(raw, type=str | list[str])
    if isinstance(value, str):
        return value.encode("utf-8")
    if value == ["redacted"]:
        return WHOLLY_REDACTED
    if len(value) != 2 or value[0] != "base64":
        raise JournalDamaged("a message is neither JSON, text, base64 nor redacted")
    return base64.b64decode(value[1], validate=True)


class _StoredCall(msgspec.Struct, kw_only=True):
    """A `ToolCall` as JSON: `arguments` read as Raw (JSON null standing for None)."""

    meta: w.RequestMeta
    principal: str | None = None
    input_responses: dict[str, Raw]
    handler_state: str | None = None
    request_id: w.RequestId | None
    tool_name: str
    arguments: Raw
    in_task: bool = False
    task_id: str | None = None


_call_decoder = msgspec.json.Decoder(_StoredCall)


def _tool_call(stored: _StoredCall) -> n.ToolCall:
    fields = msgspec.structs.asdict(stored)
    if bytes(stored.arguments) == b"null":
        fields["arguments"] = None
    return n.ToolCall(**fields)


def _decode_call(raw: bytes) -> n.ToolCall:
    return _tool_call(_call_decoder.decode(raw))


class _StoredRunTool(msgspec.Struct, kw_only=True):
    call: _StoredCall
    use_once: n.UseOnce | None = None
    starts_task: bool = False


_run_tool_decoder = msgspec.json.Decoder(_StoredRunTool)


def _encode_run_tool(need: n.RunTool, redactor: Redactor) -> Any:
    return {
        "call": redactor.call(need.call),
        "use_once": need.use_once,
        "starts_task": need.starts_task,
    }


def _decode_run_tool(raw: bytes) -> n.RunTool:
    stored = _run_tool_decoder.decode(raw)
    return n.RunTool(
        call=_tool_call(stored.call), use_once=stored.use_once, starts_task=stored.starts_task
    )


def _encode_need(need: n.Need, redactor: Redactor) -> Any:
    if isinstance(need, n.RunTool):
        return {"RunTool": _encode_run_tool(need, redactor)}
    return need_out(need, redactor)


_NEED_KINDS: Final[dict[str, Any]] = {
    "GetPrompt": n.PromptCall,
    "ReadResource": n.ResourceRead,
    "Complete": n.CompletionCall,
}


def _decode_need(raw: bytes) -> n.Need:
    ((kind, value),) = msgspec.json.decode(raw, type=dict[str, Raw]).items()
    if kind == "RunTool":
        return _decode_run_tool(value)
    if kind == "FetchTask":
        return msgspec.json.decode(value, type=n.FetchTask)
    if kind == "Listen":
        return msgspec.json.decode(value, type=n.Listen)
    call = msgspec.json.decode(value, type=dict[str, Raw])["call"]
    need_type = {"GetPrompt": n.GetPrompt, "ReadResource": n.ReadResource, "Complete": n.Complete}
    need: n.Need = need_type[kind](call=msgspec.json.decode(call, type=_NEED_KINDS[kind]))
    return need


def _encode_record(record: TaskRecord | None, redactor: Redactor) -> Any:
    return redactor.record(record)  # encoded as `encode_record` does


def _decode_record(raw: bytes) -> TaskRecord | None:
    return None if raw == b"null" else decode_record(raw)


_OUTCOME_KINDS: Final[dict[str, Any]] = {
    "result": w.CallToolResult,
    "prompt": w.GetPromptResult,
    "contents": list[w.ResourceContents],
    "completion": w.Completion,
    "error": w.ErrorObject,
    "input": InputRequired,
}


def _encode_outcome(outcome: Any, redactor: Redactor) -> Any:
    if outcome is START_TASK:
        return "start_task"
    if isinstance(outcome, w.CallToolResult):
        return {"result": outcome}
    if isinstance(outcome, w.GetPromptResult):
        return {"prompt": outcome}
    if isinstance(outcome, list):
        return {"contents": outcome}
    if isinstance(outcome, w.Completion):
        return {"completion": outcome}
    if isinstance(outcome, w.ErrorObject):
        return {"error": outcome}
    return {"input": outcome}


def _decode_outcome(raw: bytes) -> Any:
    if raw == b'"start_task"':
        return START_TASK
    ((kind, value),) = msgspec.json.decode(raw, type=dict[str, Raw]).items()
    return msgspec.json.decode(value, type=_OUTCOME_KINDS[kind])


DATA = Codec(None, _decode_message)  # `encode_inputs` writes it: see `encode_message`
CALL = Codec(lambda call, redactor: redactor.call(call), _decode_call, only_redacts=True)
RUN_TOOL = Codec(_encode_run_tool, _decode_run_tool)
NEED = Codec(_encode_need, _decode_need)
RECORD = Codec(_encode_record, _decode_record, only_redacts=True)
OUTCOME = Codec(_encode_outcome, _decode_outcome)
NUMBER = _plain(int | float | None)  # an int stays one: it is encoded as the handler gave it
TEXT = _plain(str | None)
FLAG = _plain(bool)
COUNT = _plain(int | None)
META = _plain(w.RequestMeta)
SUBSCRIPTION = _plain(n.Subscription)
REQUEST_ID = _plain(w.RequestId)
ANY = _plain(Any)

_CODEC_OF: Final[dict[str, Codec]] = {
    "bytes": DATA,
    "bytes | IncomingMessage": DATA,
    "HttpHeaders | None": _plain(HttpHeaders | None),
    "str": TEXT,
    "str | None": TEXT,
    "bool": FLAG,
    "float": NUMBER,
    "float | None": NUMBER,
    "Any": ANY,
    "ToolCall": CALL,
    "RunTool": RUN_TOOL,
    "Need": NEED,
    "PromptCall": _plain(n.PromptCall),
    "ResourceRead": _plain(n.ResourceRead),
    "CompletionCall": _plain(n.CompletionCall),
    "TaskRequest": _plain(n.TaskRequest),
    "TaskRecord": RECORD,
    "TaskRecord | None": RECORD,
    "ToolOutcome": OUTCOME,
    "PromptOutcome": OUTCOME,
    "ResourceOutcome": OUTCOME,
    "CompletionOutcome": OUTCOME,
    "InputRequest": _plain(w.InputRequest),
    "RequestMeta": META,
    "LoggingLevel": _plain(w.LoggingLevel),
    "Subscription": SUBSCRIPTION,
    "Listen": _plain(n.Listen),
    "RequestId": REQUEST_ID,
}
"""How a value of each type an input's field holds is written (by the field's annotation)."""


def _fields_of(kind: type[Input]) -> dict[str, Codec]:
    annotations: dict[str, str] = {}
    for klass in reversed(kind.__mro__):
        annotations.update(getattr(klass, "__annotations__", {}))
    codecs = {name: _CODEC_OF[annotations[name]] for name in kind.__struct_fields__}
    codecs["now"] = NUMBER  # the time it was handled at
    return codecs


INPUT_NAMED: Final[dict[str, type[Input]]] = {kind.journal_name: kind for kind in INPUTS}
"""Each input by the name its journal lines give it."""
CODECS: Final[dict[str, dict[str, Codec]]] = {
    name: _fields_of(kind) for name, kind in INPUT_NAMED.items()
}
"""How each input's fields (and the time) are written, by the input's name: made from the
inputs' own annotations."""
ENTRY_POINTS = CODECS
"""The name of `CODECS` when lines named the core's entry points: kept one release."""

_REDACTING: Final = {
    call: [(name, codec) for name, codec in codecs.items() if codec.encode is not None]
    for call, codecs in CODECS.items()
}
"""The arguments of each call written otherwise than as they are, when a tool has
sensitive arguments; `_PLAIN`, when none has."""
_PLAIN: Final = {
    call: [(name, codec) for name, codec in encoded if not codec.only_redacts]
    for call, encoded in _REDACTING.items()
}


def encode_inputs(
    call: str, inputs: dict[str, Any], redactor: Redactor, *, accepted: bool = False
) -> dict[str, Any]:
    """`inputs` (changed in place) as `in` says them. `accepted`: the message `receive`
    was given decoded."""
    redacting = bool(redactor.sensitive)
    for name, codec in (_REDACTING if redacting else _PLAIN)[call]:
        if name in inputs:
            inputs[name] = codec.encode(inputs[name], redactor)  # type: ignore[misc]
    if call == "receive":
        data = inputs["data"]
        if isinstance(data, w.IncomingMessage):  # a host decoded it: written as received
            data = msgspec.json.encode(data)
        if redacting:
            data, tool = redactor.message(data)
            inputs["headers"] = redactor.headers(tool, inputs.get("headers"))
        inputs["data"] = encode_message(data, accepted)
    return inputs


class Plan(NamedTuple):
    """How `write_inputs` writes an input's `in` when nothing is redacted: as one struct."""

    written: type[msgspec.Struct]
    """Its fields (from the `skip`-th) and `now`, in order: encoded as `in` says them."""
    skip: int
    changed: tuple[tuple[int, Codec], ...]
    """The fields written otherwise than as they are (`DATA`, `RECORD`, ...), by position."""


def _changes(codec: Codec) -> bool:
    return codec is DATA or codec is RECORD or not (codec.encode is None or codec.only_redacts)


def _plan(kind: type[Input], skip: int = 0) -> Plan:
    codecs = list(CODECS[kind.journal_name].items())[skip:]  # `now` is the last
    fields = [(name, Any) for name, _ in codecs]
    written = msgspec.defstruct(f"{kind.__name__}Written", fields)
    changed = tuple((at, codec) for at, (_, codec) in enumerate(codecs[:-1]) if _changes(codec))
    return Plan(written, skip, changed)


PLANS: Final = {kind: _plan(kind) for kind in INPUTS}
"""Each input's `in` as `write_inputs` writes it, by the input's type: made once."""
JOINED_PLAN: Final = _plan(TaskFetched, skip=1)
"""A `TaskFetched` on the line of the `Received` that asked for it: its request, that
one's answer, is written once, there."""


def write_inputs(
    input: Input,
    now: float,
    plan: Plan,
    line: bytearray,
    *,
    accepted: bool,
    record: Callable[[TaskRecord], Raw],
    redactor: Redactor,
) -> None:
    """`in` as `encode_inputs` says it when `redactor` has nothing to redact, appended to
    `line` straight from `input` (no dict built, one encoding): `plan` says which fields
    and how (`PLANS`), `record` encodes a record (`RECORD`)."""
    values = msgspec.structs.astuple(input)
    if plan.skip:
        values = values[plan.skip :]
    if plan.changed:
        changed = list(values)
        for at, codec in plan.changed:
            value = changed[at]
            if codec is RECORD:
                changed[at] = None if value is None else record(value)
            elif codec is DATA:
                changed[at] = encode_message(value, accepted)
            else:
                changed[at] = codec.encode(value, redactor)  # type: ignore[misc]
        values = tuple(changed)
    input_encoder.encode_into(plan.written(*values, now), line, -1)


def decode_inputs(call: str, raw: bytes) -> dict[str, Any]:
    codecs = CODECS.get(call)
    if codecs is None:
        raise JournalDamaged(f"it names no entry point (input) of the core: {call!r}")
    fields = msgspec.json.decode(raw, type=dict[str, Raw])
    unknown = set(fields) - set(codecs)
    if unknown:
        raise JournalDamaged(f"{call} has no parameter {sorted(unknown)[0]!r}")
    return {name: codecs[name].decode(bytes(value)) for name, value in fields.items()}


# --- what came out -------------------------------------------------------------------------


def _no_handler(obj: Any) -> None:
    """Handlers and the tools' own argument types are not written (replay has neither)."""
    return None


output_encoder: Final = msgspec.json.Encoder(enc_hook=_no_handler, order="deterministic")
"""Writes `out`: sets sorted, so the same answer reads the same in every process."""
input_encoder: Final = msgspec.json.Encoder(enc_hook=_no_handler)
"""Writes `in` as given (dict order kept: the core answers in it)."""


def reply_out(reply: Reply | None) -> Any:
    if reply is None:
        return None
    return {
        "body": Raw(reply.body),
        "http_status": reply.http_status,
        "request_id": reply.request_id,
        "error_code": reply.error_code,
        "retry_after_seconds": reply.retry_after_seconds,
    }


class _StartTaskOut(msgspec.Struct, omit_defaults=True):
    """A `StartTask` as a line writes it: no handler, no decoded arguments (they follow
    from `call` and the tool; the verdict of decoding them is a draw), the refusal only
    when there is one (lines written before it existed read the same)."""

    task_id: str
    call: n.ToolCall
    handler: None
    claim_lease: bool
    arguments_refused: w.ErrorObject | None = None


class _ResumeTaskOut(msgspec.Struct, omit_defaults=True):
    """A `ResumeTask` as a line writes it, as `_StartTaskOut`."""

    task_id: str
    call: n.ToolCall
    handler: None
    arguments_refused: w.ErrorObject | None = None


def effect_out(effect: Effect, redactor: Redactor) -> Any:
    if isinstance(effect, StartTask):
        call = redactor.call(effect.call)
        refused = effect.arguments_refused
        return {"StartTask": _StartTaskOut(effect.task_id, call, None, effect.claim_lease, refused)}
    if isinstance(effect, ResumeTask):
        call = redactor.call(effect.call)
        refused = effect.arguments_refused
        return {"ResumeTask": _ResumeTaskOut(effect.task_id, call, None, refused)}
    if isinstance(effect, SaveTask) or (
        isinstance(effect, DeleteTask) and effect.record is not None
    ):
        effect = msgspec.structs.replace(effect, record=redactor.record(effect.record))
    elif isinstance(effect, Notify):
        return {"Notify": {"message": Raw(effect.message)}}
    return {type(effect).__name__: effect}


def need_out(need: n.Need, redactor: Redactor) -> Any:
    if isinstance(need, n.RunTool):
        return {"RunTool": _encode_run_tool(need, redactor)}
    if isinstance(need, n.FetchTask | n.Listen):
        return {type(need).__name__: need}
    return {type(need).__name__: {"call": need.call}}


def encode_output(answer: Any, redactor: Redactor) -> Any:
    """What an entry point returned, as `out` says it."""
    if answer is None:
        return None
    if isinstance(answer, Step):
        effects = [effect_out(effect, redactor) for effect in answer.effects]
        return {"step": {"reply": reply_out(answer.reply), "effects": effects}}
    if isinstance(answer, Reply):
        return {"reply": reply_out(answer)}
    if isinstance(answer, bytes):
        return {"message": Raw(answer)}
    if isinstance(answer, ResumeTask):
        return {"effect": effect_out(answer, redactor)}
    return {"need": need_out(answer, redactor)}


def write_output(answer: Any, redactor: Redactor, line: bytearray) -> None:
    """`encode_output(answer)` as `output_encoder` writes it, appended to `line`: the
    answers of every `tasks/*` request (a `FetchTask`, then a reply alone) without building
    anything first."""
    kind = type(answer)
    if kind is Step and not answer.effects:
        reply = answer.reply
        if reply is None:
            line += b'{"step":{"effects":[],"reply":null}}'
            return
        line += b'{"step":{"effects":[],"reply":'
        written = _ReplyWritten(
            Raw(reply.body),
            reply.error_code,
            reply.http_status,
            reply.request_id,
            reply.retry_after_seconds,
        )
        output_encoder.encode_into(written, line, -1)
        line += b"}}"
    elif kind is n.FetchTask:
        line += b'{"need":{"FetchTask":'
        output_encoder.encode_into(answer, line, -1)
        line += b"}}"
    else:
        output_encoder.encode_into(encode_output(answer, redactor), line, -1)


class _ReplyWritten(msgspec.Struct):
    """A reply as `reply_out` says it (its members in sorted order), encoded at once."""

    body: Raw
    error_code: int | None
    http_status: int
    request_id: w.RequestId | None
    retry_after_seconds: int | None


def raised_out(error: Exception) -> Any:
    return {"raised": f"{type(error).__name__}: {error}" if str(error) else repr(error)}
