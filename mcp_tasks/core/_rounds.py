"""Input rounds before a task exists (MRTR): questions out, answers back in.

A handler of `tools/call`, `prompts/get` or `resources/read` may answer `InputRequired`:
the reply is an `InputRequiredResult` whose `requestState` seals which keys were asked,
the handler's own state and a digest of the request, bound to the caller. The client
sends the request again with `inputResponses` and that `requestState`; `open_round` checks
the seal and the answers before the handler runs again.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import msgspec
from msgspec import UNSET, Raw

from . import _wire as w
from ._effects import Reply
from ._envelope import TOO_DEEP, invalid_params
from ._errors import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    LocalProtocolError,
    RemoteProtocolError,
)
from ._options import error_path
from ._outcomes import InputRequired
from ._parts import Parts
from ._sealing import RoundState, open_sealed, seal

RoundParams = w.CallToolParams | w.GetPromptParams | w.ReadResourceParams


class OpenedRound(NamedTuple):
    responses: dict[str, Raw]
    handler_state: str | None
    sealed: str | None
    """A digest naming the `requestState` that opened it (None: none was given)."""
    expires_at: float | None
    """When that state stops being accepted anyway."""


class Rounds:
    """Opens the input rounds a request carries and asks new ones: sealed with
    `parts.injected`, good for the `requestState` TTL of `parts.options`."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts

    def open(
        self,
        method: str,
        name: str,
        arguments: Raw | bytes | None,
        params: RoundParams,
        *,
        principal: str | None,
        now: float,
    ) -> OpenedRound:
        """The answers and handler state an input round carries.

        With a `requestState` (a round this server asked), the answers are those to the
        keys it asked, each checked against its request. Without one, answers are taken as
        given (a client may answer before it is asked): the handler's typed reading
        (`ctx.elicit_response(key)`) still refuses an answer of the wrong shape."""
        given = {} if params.input_responses is UNSET else params.input_responses
        if params.request_state is UNSET:
            answers = {key: answer.copy() for key, answer in given.items()}
            return OpenedRound(answers, None, None, None)
        raw = None if arguments is None else bytes(arguments)
        digest = self._parts.injected.digest(method, name, raw, principal)
        round_state = open_sealed(
            self._parts.injected, params.request_state, method=method, digest=digest, now=now
        )
        sealed = hashlib.sha256(params.request_state.encode()).hexdigest()
        return OpenedRound(
            checked_responses(given, round_state.asked),
            round_state.handler_state,
            sealed,
            round_state.expires_at,
        )

    def ask(
        self,
        request_id: w.RequestId,
        outcome: InputRequired,
        *,
        method: str,
        name: str,
        arguments: bytes | None,
        principal: str | None,
        what: str,
        capabilities: w.ClientCapabilities,
        now: float,
    ) -> Reply:
        """The `InputRequiredResult` of an input round, its state sealed for the next."""
        check_input_requests(what, outcome.requests, capabilities)
        state = RoundState(
            method=method,
            params_digest=self._parts.injected.digest(method, name, arguments, principal),
            expires_at=now + self._parts.options.request_state_ttl_ms / 1000,
            asked={key: method_of(request) for key, request in outcome.requests.items()},
            handler_state=outcome.state,
        )
        result = w.InputRequiredResult(
            input_requests=outcome.requests,
            request_state=seal(self._parts.injected, state),
            meta=self._parts.encode.result_meta,
        )
        return self._parts.encode.result(request_id, result)


def method_of(request: w.InputRequest) -> str:
    return type(request).__struct_config__.tag  # type: ignore[return-value]


def check_input_requests(
    what: str, requests: dict[str, w.InputRequest], capabilities: w.ClientCapabilities
) -> None:
    """A server may only ask what this request's client declared it can answer.

    `what` names the asker, e.g. "Tool 'deploy'" or "Prompt 'review'"."""
    if not requests:
        raise LocalProtocolError(f"{what} asked for input with no request")
    for request in requests.values():
        if isinstance(request, w.ElicitRequest):
            mode = request.params.effective_mode
            needs = "url" if mode == "url" else "requested_schema"
            if getattr(request.params, needs) is None:
                raise LocalProtocolError(f"{what} asked a {mode}-mode elicitation without {needs}")
            if not capabilities.has_elicitation(mode):
                needed: dict[str, Any] = {"elicitation": {} if mode == "form" else {mode: {}}}
                raise _missing_capability(what, f"elicitation ({mode} mode)", needed)
        elif isinstance(request, w.CreateMessageRequest):
            if not capabilities.has_sampling:
                raise _missing_capability(what, "sampling", {"sampling": {}})
        elif not capabilities.has_roots:
            raise _missing_capability(what, "roots", {"roots": {}})


def _missing_capability(asker: str, what: str, needed: dict[str, Any]) -> RemoteProtocolError:
    return RemoteProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{asker} needs the client capability {what}, which this request lacks",
        {"requiredCapabilities": needed},
    )


def needs_tasks_extension(what: str) -> RemoteProtocolError:
    return RemoteProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} the {w.TASKS_EXTENSION} extension in this request's client capabilities",
        {"requiredCapabilities": {"extensions": {w.TASKS_EXTENSION: {}}}},
    )


def checked_responses(given: dict[str, Raw], asked: dict[str, str]) -> dict[str, Raw]:
    """The answers to the keys in `asked`, each checked against its request's answer type.

    Keys not asked are ignored without a look at their values. A malformed answer to an
    asked key refuses the whole set (-32602), so nothing is half-applied.
    """
    checked: dict[str, Raw] = {}
    for key, method in asked.items():
        answer = given.get(key)
        if answer is None:
            continue
        try:
            msgspec.json.decode(answer, type=w.RESPONSE_TYPE_FOR_METHOD[method])
        except msgspec.ValidationError as error:
            raise invalid_params(
                f"Invalid params: {error_path(error, f'params.inputResponses[{key!r}]')}"
            ) from None
        except RecursionError:
            raise invalid_params(
                f"Invalid params: params.inputResponses[{key!r}]: {TOO_DEEP}"
            ) from None
        checked[key] = answer.copy()
    return checked
