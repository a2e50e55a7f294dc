"""What the core decides that the trio shell used to: exact needs and commands.

In-place input keys (`task_asked`), lease release, progress and log notifications, the
wording of a refused creation, the handler carried by each need, argument decoding, the
injected poll policy, and a core that keeps nothing between calls.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from mcp_tasks.core import (
    INVALID_PARAMS,
    START_TASK,
    AwaitAnswer,
    CallToolResult,
    CancelTask,
    DeleteTask,
    ErrorObject,
    FetchTask,
    Implementation,
    InputRequired,
    LocalProtocolError,
    Notify,
    ProtocolError,
    ReleaseLease,
    RemoteProtocolError,
    RequestMeta,
    RunTool,
    SaveTask,
    ServerCore,
    StartTask,
    Step,
    TaskEvent,
    TaskLimits,
    TaskOptions,
    TaskRecord,
    TaskStatus,
    ToolSpec,
)
from mcp_tasks.core.commands import EndRun
from mcp_tasks.core.inputs import HandlerMissing, LeaseLapsed, Received

from .harness import ALL_CAPS, T0, Harness, meta
from .tools import TOOLS, ask_name


@pytest.fixture
def h(make_harness: type[Harness]) -> Harness:
    return make_harness(tools=TOOLS)


def _call(h: Harness, name: str, arguments: Any = None, caps: Any = None) -> Step | Any:
    params: dict[str, Any] = {"name": name, "_meta": meta(caps)}
    if arguments is not None:
        params["arguments"] = arguments
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return h.core.receive(json.dumps(body).encode(), h.now)


def _started(h: Harness, caps: Any = None) -> TaskRecord:
    task_id = h.call("slow", {}, caps=caps)["result"]["taskId"]
    return h.record(task_id)


def _meta(**extra: Any) -> RequestMeta:
    return msgspec.convert(meta(**extra), RequestMeta)


# --- a tool that runs only as a task -------------------------------------------------------


def _required_call(h: Harness) -> bytes:
    params = {"name": "required_job", "arguments": {}, "_meta": meta(ALL_CAPS)}
    message = {"jsonrpc": "2.0", "id": "r-1", "method": "tools/call", "params": params}
    return json.dumps(message).encode()


def test_a_tool_that_runs_only_as_a_task_becomes_its_task_at_once(
    make_harness: type[Harness],
) -> None:
    """No `RunTool` for the shell to answer with `START_TASK`: the call is the task."""
    h = make_harness(tools=TOOLS)
    answer = h.core.handle(Received(_required_call(h)), h.now)
    assert isinstance(answer, Step)
    save, start, *_ = answer.effects
    assert isinstance(save, SaveTask) and save.expected_version is None and save.take_lease
    assert isinstance(start, StartTask) and start.task_id == save.record.task_id
    assert start.call.in_task and start.call.request_id == "r-1" and not start.claim_lease
    assert answer.reply is not None
    assert json.loads(answer.reply.body)["result"]["taskId"] == save.record.task_id


def test_a_tool_that_runs_only_as_a_task_starts_none_while_the_server_shuts_down(
    make_harness: type[Harness],
) -> None:
    h = make_harness(tools=TOOLS)
    answer = h.core.handle(Received(_required_call(h), closing=True), h.now)
    assert isinstance(answer, Step) and answer.effects == ()
    assert answer.reply is not None
    error = json.loads(answer.reply.body)["error"]
    assert error["code"] == -32603 and "shutting down" in error["message"]


# --- a task asks in place -------------------------------------------------------------------


def test_task_asked_waits_under_the_next_unused_key_before_the_question_is_saved(
    make_harness: type[Harness],
) -> None:
    h = make_harness(tools=TOOLS)
    record = _started(h, ALL_CAPS).replace(issued_keys=frozenset({"input-1", "input-3"}))
    step = h.core.task_asked(record, ask_name(), h.now)
    waiting, save = step.effects
    assert waiting == AwaitAnswer(task_id=record.task_id, key="input-4")
    assert isinstance(save, SaveTask) and save.expected_version == record.version
    assert save.record.status is TaskStatus.INPUT_REQUIRED and save.active
    assert set(save.record.input_requests or {}) == {"input-4"}
    assert save.record.issued_keys == {"input-1", "input-3", "input-4"}


def test_task_asked_what_the_client_cannot_answer_fails_the_task_and_awaits_nothing(
    make_harness: type[Harness],
) -> None:
    h = make_harness(tools=TOOLS)
    record = _started(h)  # tasks only: no elicitation capability
    save, ended = h.core.task_asked(record, ask_name(), h.now).effects
    assert isinstance(save, SaveTask) and not save.active
    assert save.record.status is TaskStatus.FAILED
    assert save.record.error is not None and save.record.error.code == -32021
    assert ended == EndRun(task_id=record.task_id)  # nothing will answer: the run ends


def test_task_asked_of_a_task_that_is_gone_or_over_ends_the_run_and_saves_nothing(
    make_harness: type[Harness],
) -> None:
    h = make_harness(tools=TOOLS)
    record = _started(h, ALL_CAPS)
    h.finish(record.task_id, CallToolResult.text("done"))
    ended = Step(effects=(EndRun(task_id=record.task_id),))
    assert h.core.task_asked(h.record(record.task_id), ask_name(), h.now) == ended
    assert h.core.task_asked(None, ask_name(), h.now) == Step(effects=(EndRun(task_id=None),))


def test_task_asked_of_an_expired_task_removes_it_and_ends_the_run(
    make_harness: type[Harness],
) -> None:
    h = make_harness(tools=TOOLS)
    record = _started(h, ALL_CAPS)
    assert record.expires_at is not None
    *expiry, ended = h.core.task_asked(record, ask_name(), record.expires_at + 1).effects
    assert [type(effect) for effect in expiry] == [CancelTask, DeleteTask]
    assert ended == EndRun(task_id=record.task_id)


def test_a_run_that_finds_no_handler_fails_its_task_saying_so(
    make_harness: type[Harness],
) -> None:
    """The tool was removed while its task waited: the core fails the task (the runtime
    only reports that it found nothing to run)."""
    h = make_harness(tools=TOOLS)
    record = _started(h, ALL_CAPS)
    (save,) = h.core.handle(HandlerMissing(record), h.now).effects
    assert isinstance(save, SaveTask) and not save.active
    assert save.record.status is TaskStatus.FAILED and save.record.error is not None
    assert save.record.error.message == f"Tool {record.tool_name!r} is no longer registered"
    assert h.core.handle(HandlerMissing(None), h.now) == Step()


# --- leases ----------------------------------------------------------------------------------


def test_a_handler_that_returns_its_questions_lets_go_of_the_lease(
    make_harness: type[Harness],
) -> None:
    h = make_harness(tools=TOOLS)
    record = _started(h, ALL_CAPS)
    asked = InputRequired(requests={"who": ask_name()})
    save, release = h.core.task_returned(record, asked, h.now).effects
    assert isinstance(save, SaveTask) and save.active
    assert release == ReleaseLease(task_id=record.task_id)
    (done,) = h.core.task_returned(record, CallToolResult.text("ok"), h.now).effects
    assert isinstance(done, SaveTask) and not done.active  # a terminal save drops it


def test_a_new_task_is_saved_under_the_limits_with_its_lease_and_not_claimed_again(
    make_harness: type[Harness],
) -> None:
    options = TaskOptions(max_tasks=7, max_active_per_principal=3)
    h = make_harness(tools=TOOLS, task_options=options)
    run = _call(h, "slow")
    assert isinstance(run, RunTool)
    step = h.core.tool_returned(run.call, TOOLS["slow"][1](run.call), h.now)
    assert isinstance(step, Step)
    save, start, _ = step.effects
    assert isinstance(save, SaveTask) and save.expected_version is None
    assert save.limits == TaskLimits(
        max_tasks=7, max_bytes=256 * 1024 * 1024, max_active_per_principal=3
    )
    assert save.take_lease and save.active
    assert isinstance(start, StartTask) and not start.claim_lease


def test_a_resumable_task_run_again_after_its_process_stopped_claims_its_lease(
    make_harness: type[Harness],
) -> None:
    spec, handler = TOOLS["slow"]
    tools = {**TOOLS, "slow": (msgspec.structs.replace(spec, resumable=True), handler)}
    h = make_harness(tools=tools)
    record = _started(h)
    save, start = h.core.task_orphaned(record, h.now).effects
    assert isinstance(save, SaveTask) and save.active
    assert isinstance(start, StartTask) and start.claim_lease


# --- the store refused a creation -------------------------------------------------------------


@pytest.mark.parametrize(
    ("per_principal", "words", "status"),
    [
        (False, "Too many tasks: the server holds its limit of 5", 503),
        (True, "at most 2 at once", 500),
    ],
)
def test_task_refused_says_which_limit(
    make_harness: type[Harness], per_principal: bool, words: str, status: int
) -> None:
    h = make_harness(tools=TOOLS, task_options=TaskOptions(max_tasks=5, max_active_per_principal=2))
    run = _call(h, "slow")
    assert isinstance(run, RunTool)
    reply = h.core.task_refused(run.call, per_principal=per_principal).reply
    assert reply is not None and reply.http_status == status
    error = json.loads(reply.body)["error"]
    assert error["code"] == -32603 and words in error["message"]


@pytest.mark.parametrize(
    ("expires_in", "wait_ms", "seconds"), [(90.2, 90_200, 91), (0.3, 1000, 1), (-5.0, 1000, 1)]
)
def test_a_full_server_says_when_to_come_back(
    make_harness: type[Harness], expires_in: float, wait_ms: int, seconds: int
) -> None:
    """Too many tasks is retryable: 503, with the time until the next stored task expires
    (at least a second) in `Retry-After` and, for every transport, `data.retryAfterMs`."""
    h = make_harness(tools=TOOLS, task_options=TaskOptions(max_tasks=5))
    run = _call(h, "slow")
    assert isinstance(run, RunTool)
    step = h.core.task_refused(
        run.call, per_principal=False, next_expiry_at=h.now + expires_in, now=h.now
    )
    reply = step.reply
    assert reply is not None and (reply.http_status, reply.retry_after_seconds) == (503, seconds)
    error = json.loads(reply.body)["error"]
    assert error["code"] == -32603 and error["data"] == {"retryAfterMs": wait_ms}
    assert f"try again in {wait_ms} ms" in error["message"]


# --- notifications to the request's client ------------------------------------------------------


def test_progress_is_a_notification_only_when_the_request_has_a_token(h: Harness) -> None:
    assert h.core.progress(_meta(), 1, 2, "half") == Step()
    (notify,) = h.core.progress(_meta(progressToken="p-1"), 1, 2, "half").effects
    assert isinstance(notify, Notify)
    assert json.loads(notify.message) == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "p-1", "progress": 1, "total": 2, "message": "half"},
    }


def test_log_goes_out_at_the_level_asked_or_above(h: Harness) -> None:
    wants_warnings = _meta(**{"io.modelcontextprotocol/logLevel": "warning"})
    assert h.core.log(_meta(), "error", "boom", None) == Step()
    assert h.core.log(wants_warnings, "info", "chatter", None) == Step()
    (notify,) = h.core.log(wants_warnings, "error", {"x": 1}, "db").effects
    assert isinstance(notify, Notify)
    assert json.loads(notify.message)["params"] == {
        "level": "error",
        "data": {"x": 1},
        "logger": "db",
    }


def test_progress_inside_a_task_is_its_status_message(make_harness: type[Harness]) -> None:
    h = make_harness(tools=TOOLS)
    record = _started(h)
    (save,) = h.core.task_progress(record, 3, 10, "copying", h.now).effects
    assert isinstance(save, SaveTask) and save.record.status_message == "copying (3/10)"


# --- one registry: needs carry the handler; arguments decoded by the core ---------------------


class Args(msgspec.Struct):
    count: int


def test_run_tool_carries_the_registered_handler_and_the_decoded_arguments() -> None:
    core = ServerCore(
        info=Implementation(name="t", version="1"), new_task_id=lambda: "t", state_key=b"k" * 32
    )
    handler = object()
    core.add_tool(ToolSpec(name="count", arguments_type=Args), handler)
    h = Harness()
    h.core = core
    run = _call(h, "count", {"count": 3})
    assert isinstance(run, RunTool) and run.handler is handler and run.arguments == Args(count=3)
    refused = _call(h, "count", {"count": "three"})
    assert isinstance(refused, Step) and refused.reply is not None
    error = json.loads(refused.reply.body)["error"]
    assert error["code"] == INVALID_PARAMS and "arguments.count" in error["message"]
    core.remove_tool("count")
    assert core.catalog.handler("tool", "count") is None


class Renamed(msgspec.Struct):
    total: int


def test_a_task_run_carries_its_arguments_decoded_by_the_core() -> None:
    """`StartTask` and a restart's `StartTask` carry the arguments decoded for the tool as
    registered when the run starts; arguments that no longer fit it are the run's refusal."""
    core = ServerCore(
        info=Implementation(name="t", version="1"), new_task_id=lambda: "t", state_key=b"k" * 32
    )
    core.add_tool(ToolSpec(name="count", arguments_type=Args, task_support="optional"), "v1")
    h = Harness()
    h.core = core
    run = _call(h, "count", {"count": 3})
    assert isinstance(run, RunTool)
    created = core.handle(run.returned(START_TASK), h.now)
    assert isinstance(created, Step)
    [start] = [effect for effect in created.effects if isinstance(effect, StartTask)]
    assert start.arguments == Args(count=3) and start.arguments_refused is None
    assert start.handler == "v1"
    [saved] = [effect for effect in created.effects if isinstance(effect, SaveTask)]
    record = saved.record.replace(request_meta=run.call.meta)
    core.remove_tool("count")  # registered again, with arguments the task's do not fit
    core.add_tool(
        ToolSpec(name="count", arguments_type=Renamed, task_support="optional", resumable=True),
        "v2",
    )
    restarted = core.handle(LeaseLapsed(record), h.now)
    assert isinstance(restarted, Step)
    [again] = [effect for effect in restarted.effects if isinstance(effect, StartTask)]
    assert again.handler == "v2" and again.arguments is None
    assert again.arguments_refused is not None
    assert again.arguments_refused.code == INVALID_PARAMS
    assert "arguments" in again.arguments_refused.message


# --- no hidden state; poll policy injected --------------------------------------------------------


class CountingPolicy:
    def __init__(self) -> None:
        self.asked: list[tuple[str | None, str]] = []

    def wait_ms(self, principal: str | None, record: TaskRecord, now: float) -> int | None:
        self.asked.append((principal, record.task_id))
        return 1500 if len(self.asked) > 1 else None


def test_the_poll_policy_is_injected_and_told_who_polls() -> None:
    policy = CountingPolicy()
    h = Harness(tools=TOOLS)
    h.core = ServerCore(
        info=Implementation(name="t", version="1"),
        tools=[spec for spec, _ in TOOLS.values()],
        new_task_id=lambda: "tsk-1",
        state_key=b"k" * 32,
        poll_policy=policy,
    )
    task_id = h.call("slow", {})["result"]["taskId"]
    assert h.get(task_id)["result"]["status"] == "working"
    assert h.get(task_id)["error"]["data"] == {"retryAfterMs": 1500}
    assert policy.asked == [(None, task_id), (None, task_id)]


def test_receive_keeps_nothing_between_calls(make_harness: type[Harness]) -> None:
    h = make_harness(tools=TOOLS)
    before = dict(vars(h.core))
    task_id = h.call("slow", {})["result"]["taskId"]
    h.get(task_id)
    h.cancel(task_id)
    fetch = h.core.receive(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tasks/get",
                "params": {"taskId": task_id, "_meta": meta()},
            }
        ).encode(),
        T0,
        principal="alice",
    )
    assert isinstance(fetch, FetchTask) and fetch.request.principal == "alice"
    assert vars(h.core) == before


# --- errors: one abstract base, Local or Remote --------------------------------------------------


def test_protocol_error_is_abstract_and_its_old_spelling_makes_a_remote_one() -> None:
    error = ProtocolError(-32602, "no sunny day", {"weather": "rain"})
    assert type(error) is RemoteProtocolError
    assert (error.code, error.message, error.data) == (-32602, "no sunny day", {"weather": "rain"})
    assert isinstance(LocalProtocolError("misused"), ProtocolError)


def test_a_shell_that_counts_its_tasks_itself_still_gets_the_refusal(
    make_harness: type[Harness],
) -> None:
    h = make_harness(tools=TOOLS, task_options=TaskOptions(max_tasks=2))
    run = _call(h, "slow")
    assert isinstance(run, RunTool)
    outcome = TOOLS["slow"][1](run.call)
    refused = h.core.tool_returned(run.call, outcome, h.now, stored_tasks=2)
    assert isinstance(refused, Step) and refused.effects == () and refused.reply is not None
    assert "limit of 2" in json.loads(refused.reply.body)["error"]["message"]
    created = h.core.tool_returned(run.call, outcome, h.now, stored_tasks=1)
    assert isinstance(created, Step) and isinstance(created.effects[0], SaveTask)


# --- each save says which event of the status table it records -----------------------------


def _events(step: Step) -> list[tuple[bool, TaskEvent | None, TaskStatus]]:
    return [
        (effect.created, effect.event, effect.record.status)
        for effect in step.effects
        if isinstance(effect, SaveTask)
    ]


def test_every_save_names_the_event_that_changed_the_status(
    make_harness: type[Harness],
) -> None:
    h = make_harness(tools=TOOLS)
    run = _call(h, "slow", caps=ALL_CAPS)
    created = h.core.tool_returned(run.call, TOOLS["slow"][1](run.call), h.now)
    assert _events(created) == [(True, None, TaskStatus.WORKING)]
    record = _started(h, ALL_CAPS)
    asked = h.core.task_returned(record, InputRequired(requests={"who": ask_name()}), h.now)
    assert _events(asked) == [(False, TaskEvent.NEED_INPUT, TaskStatus.INPUT_REQUIRED)]
    in_place = h.core.task_asked(record, ask_name(), h.now)
    assert _events(in_place) == [(False, TaskEvent.NEED_INPUT, TaskStatus.INPUT_REQUIRED)]
    done = h.core.task_returned(record, CallToolResult.text("ok"), h.now)
    assert _events(done) == [(False, TaskEvent.COMPLETE, TaskStatus.COMPLETED)]
    error = ErrorObject(code=-32603, message="upstream")
    assert _events(h.core.task_returned(record, error, h.now)) == [
        (False, TaskEvent.FAIL, TaskStatus.FAILED)
    ]
    assert _events(h.core.task_orphaned(record, h.now)) == [
        (False, TaskEvent.ORPHAN, TaskStatus.FAILED)
    ]
    assert _events(h.core.task_outcome_lost(record, 60.0, h.now)) == [
        (False, TaskEvent.ORPHAN, TaskStatus.FAILED)
    ]
    progress = h.core.set_status_message(record, "half way", h.now)
    assert _events(progress) == [(False, None, TaskStatus.WORKING)]


def test_expiry_deletes_with_the_record_and_says_whether_it_was_unfinished(
    make_harness: type[Harness],
) -> None:
    h = make_harness(tools=TOOLS)
    record = _started(h)
    assert record.expires_at is not None
    cancel, delete = h.core.expire_task(record, record.expires_at).effects
    assert cancel == CancelTask(task_id=record.task_id)
    assert isinstance(delete, DeleteTask) and delete.expired and delete.record == record
    finished = record.replace(status=TaskStatus.COMPLETED)
    (gone,) = h.core.expire_task(finished, record.expires_at).effects
    assert isinstance(gone, DeleteTask) and not gone.expired and gone.record == finished
