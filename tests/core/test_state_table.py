"""The task status table: every (status, event) pair, the machine behind it, and a stateful
test that drives real tasks through the ServerCore and checks them against a model.

The expected table below is written out from the rules, not read from the library:

* a task is born `working`;
* need_input: working | input_required -> input_required;
* input_answered: input_required -> working;
* complete / fail / cancel: working | input_required -> completed / failed / cancelled;
* expire: working | input_required -> failed;
* orphan (its process stopped): working | input_required -> failed;
* restart (the same, for a resumable tool): working | input_required -> working;
* nothing leaves a terminal status.
"""

from __future__ import annotations

import itertools
import re
import types
from typing import Any, Final

import msgspec
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from schema_check import check_reply
from transitions import MachineError

from mcp_tasks.core import (
    INITIAL_STATUS,
    INTERNAL_ERROR,
    START_TASK,
    TRANSITIONS,
    CallToolResult,
    CreateMessageParams,
    CreateMessageRequest,
    ErrorObject,
    IllegalTransition,
    InputRequest,
    InputRequired,
    ListRootsRequest,
    LocalProtocolError,
    SamplingMessage,
    TaskEvent,
    TaskLimits,
    TaskOptions,
    TaskRecord,
    TaskStatus,
    ToolOutcome,
    WakeAt,
    can_happen,
    mermaid_diagram,
    next_status,
    transition_table,
)
from mcp_tasks.core._state import MACHINE
from mcp_tasks.core._tasks import RESTARTED_MESSAGE

from .harness import ALL_CAPS, Harness, RecordBook
from .tools import TOOLS, ask_name

W = TaskStatus.WORKING
IR = TaskStatus.INPUT_REQUIRED
C = TaskStatus.COMPLETED
F = TaskStatus.FAILED
X = TaskStatus.CANCELLED

ACTIVE: Final = frozenset({W, IR})
TERMINAL: Final = frozenset({C, F, X})

EXPECTED: Final[dict[tuple[TaskStatus, TaskEvent], TaskStatus]] = {
    (W, TaskEvent.NEED_INPUT): IR,
    (IR, TaskEvent.NEED_INPUT): IR,
    (IR, TaskEvent.INPUT_ANSWERED): W,
    (W, TaskEvent.COMPLETE): C,
    (IR, TaskEvent.COMPLETE): C,
    (W, TaskEvent.FAIL): F,
    (IR, TaskEvent.FAIL): F,
    (W, TaskEvent.CANCEL): X,
    (IR, TaskEvent.CANCEL): X,
    (W, TaskEvent.EXPIRE): F,
    (IR, TaskEvent.EXPIRE): F,
    (W, TaskEvent.ORPHAN): F,
    (IR, TaskEvent.ORPHAN): F,
    (W, TaskEvent.RESTART): W,
    (IR, TaskEvent.RESTART): W,
}

ALL_PAIRS: Final = list(itertools.product(TaskStatus, TaskEvent))


def _pair_id(pair: tuple[TaskStatus, TaskEvent]) -> str:
    return f"{pair[0].value}-{pair[1].value}"


# --- the table, pair by pair ----------------------------------------------------------------


def test_there_are_forty_pairs_and_fifteen_legal_ones() -> None:
    assert len(ALL_PAIRS) == 40 and len(set(ALL_PAIRS)) == 40
    assert len(EXPECTED) == 15


@pytest.mark.parametrize(("status", "event"), ALL_PAIRS, ids=[_pair_id(p) for p in ALL_PAIRS])
def test_every_status_event_pair(status: TaskStatus, event: TaskEvent) -> None:
    expected = EXPECTED.get((status, event))
    assert can_happen(status, event) is (expected is not None)
    if expected is not None:
        assert next_status(status, event) is expected
        return
    message = f"can't {event.value} a task that is {status.value}"
    with pytest.raises(IllegalTransition, match=f"^{re.escape(message)}$") as caught:
        next_status(status, event)
    assert isinstance(caught.value, LocalProtocolError)
    assert caught.value.code == INTERNAL_ERROR


def test_a_task_is_born_working_and_only_three_statuses_are_terminal() -> None:
    assert INITIAL_STATUS is W
    assert {s for s in TaskStatus if s.is_terminal} == TERMINAL
    assert all(not can_happen(s, e) for s in TERMINAL for e in TaskEvent)


def test_transition_table_is_the_expected_table_and_a_copy() -> None:
    table = transition_table()
    assert table == EXPECTED
    table.clear()
    assert transition_table() == EXPECTED


def test_transitions_rows_expand_to_the_expected_table() -> None:
    expanded = {(source, event): dest for event, sources, dest in TRANSITIONS for source in sources}
    assert expanded == EXPECTED


# --- the `transitions` machine ---------------------------------------------------------------


def _machine_table() -> dict[tuple[TaskStatus, TaskEvent], TaskStatus]:
    table: dict[tuple[TaskStatus, TaskEvent], TaskStatus] = {}
    for status in TaskStatus:
        for trigger in MACHINE.get_triggers(status.value):
            (transition,) = MACHINE.get_transitions(trigger=trigger, source=status.value)
            table[status, TaskEvent(trigger)] = TaskStatus(transition.dest)
    return table


def test_dict_table_equals_what_the_machine_holds() -> None:
    assert MACHINE.initial == INITIAL_STATUS.value
    assert set(MACHINE.states) == {s.value for s in TaskStatus}
    assert set(MACHINE.events) == {e.value for e in TaskEvent}  # no auto `to_<state>` triggers
    assert _machine_table() == transition_table() == EXPECTED


@pytest.mark.parametrize(("status", "event"), ALL_PAIRS, ids=[_pair_id(p) for p in ALL_PAIRS])
def test_machine_fires_exactly_the_legal_pairs(status: TaskStatus, event: TaskEvent) -> None:
    probe = types.SimpleNamespace()
    MACHINE.add_model(probe, initial=status.value)
    try:
        expected = EXPECTED.get((status, event))
        if expected is None:
            with pytest.raises(MachineError):
                probe.trigger(event.value)
            assert probe.state == status.value
        else:
            assert probe.trigger(event.value) is True
            assert probe.state == expected.value
    finally:
        MACHINE.remove_model(probe)
    assert probe not in MACHINE.models


def test_mermaid_diagram_has_one_line_per_row() -> None:
    lines = mermaid_diagram().splitlines()
    assert lines[:2] == ["stateDiagram-v2", f"    [*] --> {INITIAL_STATUS.value}"]
    rows = [line for line in lines if ": " in line]
    assert len(rows) == len(EXPECTED) == len(set(rows))
    assert set(rows) == {
        f"    {source.value} --> {dest.value}: {event.value}"
        for (source, event), dest in EXPECTED.items()
    }
    ends = [line for line in lines[2:] if ": " not in line]
    assert ends == [f"    {s.value} --> [*]" for s in TaskStatus if s in TERMINAL]
    assert len(lines) == 2 + len(EXPECTED) + len(TERMINAL)
    assert mermaid_diagram().endswith("\n")


# --- a stateful test through the ServerCore -------------------------------------------------

TTL_MS: Final = 10_000
KINDS: Final = ("elicit", "sampling", "roots")
METHOD_OF_KIND: Final = {
    "elicit": "elicitation/create",
    "sampling": "sampling/createMessage",
    "roots": "roots/list",
}
ANSWER_OF_KIND: Final[dict[str, Any]] = {
    "elicit": {"action": "accept", "content": {"name": "Ada"}},
    "sampling": {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
    "roots": {"roots": [{"uri": "file:///tmp"}]},
}
MALFORMED_ANSWER: Final = {"bogus": True}  # not an ElicitResult, CreateMessageResult or roots


def _request_of_kind(kind: str) -> InputRequest:
    if kind == "elicit":
        return ask_name()
    if kind == "sampling":
        message = SamplingMessage(role="user", content={"type": "text", "text": "hi"})
        return CreateMessageRequest(params=CreateMessageParams(messages=[message], max_tokens=5))
    return ListRootsRequest()


_SCHEMA_CHECKED: set[tuple[str | None, bytes]] = set()


def _check_reply_once(method: str | None, body: bytes) -> None:
    """check_reply, skipped for a body already found valid (runs repeat many replies)."""
    if (method, body) not in _SCHEMA_CHECKED:
        check_reply(method, body)
        _SCHEMA_CHECKED.add((method, body))


class CountingStore(RecordBook):
    """A record book that counts writes and checks each one bumps the version."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def save(
        self, record: TaskRecord, expected_version: int | None, limits: TaskLimits | None = None
    ) -> None:
        current = self.get(record.task_id)
        super().save(record, expected_version, limits)
        assert record.version > (0 if current is None else current.version)
        self.writes += 1


class TaskLifecycle(RuleBasedStateMachine):
    """One task at a time, driven by random handler outcomes, client requests and time.

    The model (status, outstanding keys, version, ...) follows the rules in the module
    docstring via EXPECTED; illegal pairs leave the task as it is. An expired task is
    removed by whatever touches it next (its handler cancelled if it was still active).
    """

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(tools=TOOLS, task_options=TaskOptions(ttl_ms=TTL_MS))
        self.store = CountingStore()
        self.h.store = self.store
        self.keys = itertools.count(1)
        self.pairs: set[tuple[TaskStatus, TaskEvent]] = set()
        self.checked = 0  # exchanges already schema-checked
        self.writes_seen = 0
        self.expected_writes = 0
        self.expected_cancels: list[str] = []
        self.expected_resumes = 0
        self.terminal: dict[str, TaskStatus] = {}
        self.last_record: TaskRecord | None = None
        self._start()

    # --- the model -------------------------------------------------------------------

    def _start(self) -> None:
        reply = self.h.call("slow", {"label": "x"}, caps=ALL_CAPS)
        assert reply["result"]["resultType"] == "task" and reply["result"]["status"] == "working"
        self.task_id: str = reply["result"]["taskId"]
        self.status: TaskStatus | None = W  # None: the record is gone
        self.created_at = self.h.now
        self.expires_at = self.created_at + TTL_MS / 1000
        self.version = 1
        self.outstanding: dict[str, str] = {}  # key -> kind
        self.answered: set[str] = set()
        self.issued: set[str] = set()
        self.message: str | None = None  # the status message while active
        self.expected_writes += 1
        self.last_record = self.store.get(self.task_id)
        assert self.h.wakes[-1] == WakeAt(task_id=self.task_id, deadline=self.expires_at)

    @property
    def present(self) -> bool:
        return self.status is not None

    def _expired(self) -> bool:
        return self.present and self.h.now >= self.expires_at

    def _write(self) -> None:
        self.expected_writes += 1
        self.version += 1

    def _event(self, event: TaskEvent) -> bool:
        """Apply `event` to the model; False (and no change) when the pair is illegal."""
        assert self.status is not None
        self.pairs.add((self.status, event))
        after = EXPECTED.get((self.status, event))
        if after is None:
            return False
        self.status = after
        self._write()
        if after in TERMINAL:
            self.outstanding = {}
        return True

    def _expire(self) -> None:
        """The record's TTL has run out and something touched it: it is removed."""
        assert self.status is not None
        self.pairs.add((self.status, TaskEvent.EXPIRE))
        if self.status in ACTIVE:
            self.expected_cancels.append(self.task_id)
        self.status = None
        self.outstanding = {}

    # --- the handler returns ---------------------------------------------------------------

    def _handler_returns(self, outcome: ToolOutcome, event: TaskEvent) -> bool:
        """The task's handler returns `outcome`; True if the model applied `event`."""
        assert self.status is not None
        applied = False
        if self.status in TERMINAL:
            self.pairs.add((self.status, event))  # moot: the outcome is dropped
        elif self._expired():
            self._expire()
        else:
            applied = self._event(event)
            assert applied
        self.h.finish(self.task_id, outcome)
        return applied

    @precondition(lambda self: self.present)
    @rule(
        kind=st.sampled_from(
            ["result", "tool_error", "error_object", "reused_key", "no_requests", "start_task"]
        ),
        pick=st.integers(0, 100),
        with_fresh=st.booleans(),
    )
    def handler_ends(self, kind: str, pick: int, with_fresh: bool) -> None:
        """The handler returns a result (complete), an ErrorObject or breaks its contract:
        asks with a used key, asks nothing, asks for a task inside its task (fail)."""
        outcome: ToolOutcome
        if kind in ("result", "tool_error"):
            outcome = CallToolResult.text("done", is_error=kind == "tool_error")
        elif kind == "error_object":
            outcome = ErrorObject(code=[-32603, -32000, 42][pick % 3], message="boom")
        elif kind == "reused_key" and self.issued:
            issued = sorted(self.issued)
            requests = {issued[pick % len(issued)]: ask_name("again?")}
            if with_fresh:
                requests[f"k{next(self.keys)}"] = ask_name()
            outcome = InputRequired(requests=requests)
        elif kind == "start_task":
            outcome = START_TASK
        else:
            outcome = InputRequired(requests={})
        event = TaskEvent.COMPLETE if kind in ("result", "tool_error") else TaskEvent.FAIL
        if not self._handler_returns(outcome, event):
            return
        record = self.h.record(self.task_id)
        if event is TaskEvent.COMPLETE:
            assert record.result is not None and record.error is None
            return
        assert record.error is not None and record.result is None
        if kind == "error_object":
            assert record.error == outcome and record.status_message == "boom"
        else:
            assert record.error.code == INTERNAL_ERROR
            if isinstance(outcome, InputRequired) and outcome.requests:
                assert "reused input key(s)" in record.error.message

    @precondition(lambda self: self.present)
    @rule(
        kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3),
        message=st.none() | st.sampled_from(["Waiting", "Need more"]),
    )
    def asks_input(self, kinds: list[str], message: str | None) -> None:
        """The handler asks for input under fresh keys (need_input)."""
        fresh = {f"k{next(self.keys)}": kind for kind in kinds}
        outcome = InputRequired(
            requests={key: _request_of_kind(kind) for key, kind in fresh.items()},
            status_message=message,
        )
        if self._handler_returns(outcome, TaskEvent.NEED_INPUT):
            self.outstanding.update(fresh)
            self.issued.update(fresh)
            self.message = message

    @precondition(lambda self: self.present)
    @rule(message=st.none() | st.sampled_from(["10%", "50%"]))
    def reports_progress(self, message: str | None) -> None:
        assert self.status is not None
        if self.status in ACTIVE and message != self.message:
            self._write()
            self.message = message
        record = self.h.record(self.task_id)
        self.h.perform(self.h.core.set_status_message(record, message, self.h.now))

    @precondition(lambda self: self.present)
    @rule(resumable=st.booleans())
    def process_stops(self, resumable: bool) -> None:
        """The process running the handler stops; another (or the same, restarted) takes
        the task over: it fails (orphan), or a resumable tool runs again (restart)."""
        assert self.status is not None
        event = TaskEvent.RESTART if resumable else TaskEvent.ORPHAN
        started = dict(self.h.started)
        applied = False
        if self.status in TERMINAL:
            self.pairs.add((self.status, event))  # over already: nothing to take over
        elif self._expired():
            self._expire()
        elif self._event(event):
            applied = True
            self.outstanding = {}
            self.message = RESTARTED_MESSAGE if resumable else None
        spec = self.h.core.tools["slow"]
        if resumable:
            self.h.core.remove_tool("slow")
            self.h.core.add_tool(msgspec.structs.replace(spec, resumable=True))
        try:
            self.h.perform(self.h.core.task_orphaned(self.h.record(self.task_id), self.h.now))
        finally:
            self.h.core.remove_tool("slow")
            self.h.core.add_tool(msgspec.structs.replace(spec, resumable=False))
        record = self.store.get(self.task_id)
        if applied and resumable:  # runs again, from the start, with its answers
            call = self.h.started[self.task_id]
            assert call is not started.get(self.task_id) and call.in_task
            assert set(call.input_responses) == self.answered
        elif applied:
            assert record is not None and record.error is not None
            assert "stopped before the task finished" in record.error.message
        else:
            assert self.h.started == started

    # --- the client's requests ---------------------------------------------------------------

    def _expect_task_error(self, reply: dict[str, Any], words: str) -> None:
        assert "error" in reply, reply
        assert reply["error"]["code"] == -32602 and words in reply["error"]["message"]

    def _before_request(self) -> str | None:
        """Model the task lookup of a request: the error words expected, or None to go on."""
        if not self.present:
            return "Unknown task"
        if self._expired():
            self._expire()
            return "has expired"
        return None

    @precondition(lambda self: self.present)
    @rule(
        everything=st.booleans(),
        mask=st.integers(0, 2**8 - 1),
        stale=st.booleans(),
        unknown=st.booleans(),
        malformed=st.sampled_from([False, False, True]),
    )
    def answers(
        self, everything: bool, mask: int, stale: bool, unknown: bool, malformed: bool
    ) -> None:
        """tasks/update with some or all outstanding keys, maybe stale, unknown or bad ones."""
        keys = sorted(self.outstanding)
        chosen = [k for i, k in enumerate(keys) if everything or mask >> (i % 8) & 1]
        responses: dict[str, Any] = {k: ANSWER_OF_KIND[self.outstanding[k]] for k in chosen}
        if stale and self.answered:
            responses[min(self.answered)] = MALFORMED_ANSWER  # answered before: ignored
        if unknown:
            responses["nobody-asked"] = {"action": "accept"}
        if malformed:
            responses[chosen[0] if chosen else "unasked"] = MALFORMED_ANSWER
        refused = False
        words = self._before_request()
        if words is None:
            assert self.status is not None
            if self.status is not IR:
                self.pairs.add((self.status, TaskEvent.INPUT_ANSWERED))  # an ack, no change
            elif chosen and malformed:
                refused = True  # a bad answer to an outstanding key refuses the whole set
            elif chosen:
                for key in chosen:
                    del self.outstanding[key]
                self.answered.update(chosen)
                if self.outstanding:
                    self._write()  # a partial set is recorded; the task keeps waiting
                else:
                    assert self._event(TaskEvent.INPUT_ANSWERED)
                    self.message = None
                    self.expected_resumes += 1
            # else: no outstanding key in the set, an ack that changes nothing
        resumed = len(self.h.resumed)
        reply = self.h.update(self.task_id, responses)
        if words is not None:
            self._expect_task_error(reply, words)
        elif refused:
            self._expect_task_error(reply, "Invalid params")
        else:
            assert reply["result"]["resultType"] == "complete", reply
        if len(self.h.resumed) > resumed:  # the handler runs again with every answer so far
            (resume,) = self.h.resumed[resumed:]
            assert resume.task_id == resume.call.task_id == self.task_id and resume.call.in_task
            assert set(resume.call.input_responses) == self.answered

    @precondition(lambda self: self.present)
    @rule()
    def cancels(self) -> None:
        words = self._before_request()
        if words is None:
            assert self.status is not None
            if self._event(TaskEvent.CANCEL):
                self.expected_cancels.append(self.task_id)
        reply = self.h.cancel(self.task_id)
        if words is None:
            assert reply["result"]["resultType"] == "complete", reply
        else:
            self._expect_task_error(reply, words)

    @precondition(lambda self: self.present)
    @rule()
    def gets(self) -> None:
        words = self._before_request()
        reply = self.h.get(self.task_id)
        if words is None:
            assert reply["result"]["status"] == self.status
        else:
            self._expect_task_error(reply, words)

    # --- time ----------------------------------------------------------------------------------

    @rule(ms=st.integers(0, 4000))
    def time_passes(self, ms: int) -> None:
        self.h.now += ms / 1000

    @precondition(lambda self: self.present)
    @rule()
    def time_reaches_the_ttl(self) -> None:
        self.h.now = max(self.h.now, self.expires_at)

    @rule()
    def wake_up(self) -> None:
        if self._expired():
            self._expire()
        self.h.expire_due()

    @precondition(lambda self: self.status is None or self.status in TERMINAL)
    @rule()
    def new_task(self) -> None:
        """Follow a new task from here on (a finished one is left to expire on its own)."""
        self._start()

    # --- checked after every step -------------------------------------------------------------

    @invariant()
    def matches_the_model(self) -> None:
        record = self.store.get(self.task_id)
        writes = self.store.writes - self.writes_seen
        self.writes_seen = self.store.writes
        assert writes == self.expected_writes, "a write the model did not expect, or none"
        self.expected_writes = 0
        if writes == 0 and record is not None:
            assert record is self.last_record, "the record changed without a write"
        self.last_record = record
        assert self.h.cancelled == self.expected_cancels
        assert len(self.h.resumed) == self.expected_resumes
        if record is None:
            assert self.status is None
        else:
            assert self.status is not None
            assert record.status is self.status and record.version == self.version
            assert set(record.input_requests or {}) == set(self.outstanding)
            if record.status in TERMINAL:
                assert self.terminal.setdefault(record.task_id, record.status) is record.status
        if not self._expired():  # a lookup of an expired record would remove it
            self._check_get()
        for exchange in self.h.exchanges[self.checked :]:
            if exchange.reply is not None:
                _check_reply_once(exchange.method, exchange.reply)
        self.checked = len(self.h.exchanges)

    def _check_get(self) -> None:
        reply = self.h.get(self.task_id)
        if self.status is None:
            self._expect_task_error(reply, "Unknown task")
            return
        result = reply["result"]
        assert result["taskId"] == self.task_id and result["status"] == self.status.value
        requests = result.get("inputRequests")
        if self.status is IR:
            assert requests is not None and set(requests) == set(self.outstanding)
            assert {k: r["method"] for k, r in requests.items()} == {
                k: METHOD_OF_KIND[kind] for k, kind in self.outstanding.items()
            }
        else:
            assert requests is None and not self.outstanding
        if self.status in ACTIVE:
            assert result.get("statusMessage") == self.message
        assert ("result" in result) is (self.status is C)
        assert ("error" in result) is (self.status is F)
        assert "requestState" not in result


LIFECYCLE_SETTINGS: Final = settings(
    max_examples=200,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_task_lifecycle_through_the_core() -> None:
    run_state_machine_as_test(TaskLifecycle, settings=LIFECYCLE_SETTINGS)


# --- every pair is reachable through the core by the rules above -----------------------------


def _drive_to(machine: TaskLifecycle, status: TaskStatus) -> None:
    if status is IR:
        machine.asks_input(["elicit", "roots"], "Waiting")
    elif status is C:
        machine.handler_ends("result", 0, False)
    elif status is F:
        machine.handler_ends("error_object", 0, False)
    elif status is X:
        machine.cancels()
    machine.matches_the_model()
    assert machine.status is status


def _apply(machine: TaskLifecycle, event: TaskEvent) -> None:
    if event is TaskEvent.NEED_INPUT:
        machine.asks_input(["sampling"], None)
    elif event is TaskEvent.INPUT_ANSWERED:
        machine.answers(everything=True, mask=0, stale=False, unknown=True, malformed=False)
    elif event is TaskEvent.COMPLETE:
        machine.handler_ends("tool_error", 0, False)
    elif event is TaskEvent.FAIL:
        machine.handler_ends("reused_key", 0, True)
    elif event is TaskEvent.CANCEL:
        machine.cancels()
    elif event in (TaskEvent.ORPHAN, TaskEvent.RESTART):
        machine.process_stops(event is TaskEvent.RESTART)
    else:
        machine.time_reaches_the_ttl()
        machine.wake_up()


@pytest.mark.parametrize(("status", "event"), ALL_PAIRS, ids=[_pair_id(p) for p in ALL_PAIRS])
def test_every_pair_is_reachable_through_the_core(status: TaskStatus, event: TaskEvent) -> None:
    machine = TaskLifecycle()
    machine.matches_the_model()
    _drive_to(machine, status)
    cancelled = len(machine.h.cancelled)
    _apply(machine, event)
    machine.matches_the_model()
    assert (status, event) in machine.pairs
    if event is TaskEvent.EXPIRE:
        assert machine.status is None and machine.store.get(machine.task_id) is None
        assert len(machine.h.cancelled) - cancelled == (1 if status in ACTIVE else 0)
    else:
        assert machine.status is EXPECTED.get((status, event), status)
    machine.teardown()


# --- found by the stateful test ----------------------------------------------------------------


@pytest.mark.parametrize("answer", [{"bogus": True}, {"content": {}}, 5, None, []])
def test_refused_answer_names_its_key(make_harness: type[Harness], answer: Any) -> None:
    h = make_harness(tools=TOOLS)
    reply = h.call("slow", {}, caps=ALL_CAPS)
    task_id: str = reply["result"]["taskId"]
    h.finish(task_id, InputRequired(requests={"a": ask_name(), "b": ask_name("and you?")}))
    ok = ANSWER_OF_KIND["elicit"]
    error = h.update(task_id, {"a": ok, "b": answer})["error"]
    assert error["code"] == -32602
    assert set(h.record(task_id).input_requests or {}) == {"a", "b"}  # refused whole
    assert "inputResponses['b']" in error["message"], error["message"]
