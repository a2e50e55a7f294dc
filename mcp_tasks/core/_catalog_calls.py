"""`prompts/get`, `resources/read` and `completion/complete`: checked, run, answered.

Each request becomes a `Need` (run this handler) after its params and any input round
are checked; the handler's outcome comes back to `*_returned`, which answers it: the
result, the handler's error, or (prompts and resources) another input round.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import UNSET, Raw

from . import _wire as w
from ._effects import Step
from ._encode import shown
from ._envelope import decode_params, invalid_params
from ._errors import LocalProtocolError, ProtocolError
from ._needs import (
    Complete,
    CompletionCall,
    GetPrompt,
    PromptCall,
    ReadResource,
    ResourceRead,
)
from ._outcomes import (
    CompletionOutcome,
    InputRequired,
    PromptOutcome,
    ResourceOutcome,
    resource_not_found,
)
from ._parts import Parts
from ._rounds import Rounds

MAX_COMPLETION_VALUES: Final = 100
"""The most values one `completion/complete` result may carry (the schema's limit)."""


class CatalogCalls:
    def __init__(self, parts: Parts, rounds: Rounds) -> None:
        self._parts = parts
        self._rounds = rounds

    # --- prompts/get ---------------------------------------------------------------------

    def get_prompt(
        self,
        request_id: w.RequestId,
        raw_params: Raw,
        meta: w.RequestMeta,
        principal: str | None,
        now: float,
    ) -> GetPrompt:
        params = decode_params(raw_params, w.GetPromptParams)
        prompt = self._parts.catalog.prompts.get(params.name)
        if prompt is None:
            raise invalid_params(f"Unknown prompt: {shown(params.name)!r}")
        arguments = {} if params.arguments is UNSET else params.arguments
        missing = [
            argument.name
            for argument in prompt.arguments
            if argument.required is True and argument.name not in arguments
        ]
        if missing:
            raise invalid_params(
                f"Prompt {prompt.name!r} needs the argument(s) {', '.join(map(repr, missing))}"
            )
        responses, handler_state, *_ = self._rounds.open(
            "prompts/get", prompt.name, _encoded(arguments), params, principal=principal, now=now
        )
        call = PromptCall(
            request_id=request_id,
            prompt_name=prompt.name,
            arguments=arguments,
            meta=meta,
            principal=principal,
            input_responses=responses,
            handler_state=handler_state,
        )
        return GetPrompt(
            call=call,
            handler=self._parts.catalog.handler("prompt", prompt.name),
            arguments=self._parts.catalog.decode_arguments(prompt, arguments),
        )

    def prompt_returned(self, call: PromptCall, outcome: PromptOutcome, now: float) -> Step:
        if isinstance(outcome, w.GetPromptResult):
            if outcome.meta is None:
                outcome = msgspec.structs.replace(outcome, meta=self._parts.encode.meta_dict)
            return Step(reply=self._parts.encode.result(call.request_id, outcome))
        return self._error_or_round(
            call,
            outcome,
            method="prompts/get",
            name=call.prompt_name,
            arguments=_encoded(call.arguments),
            what=f"Prompt {call.prompt_name!r}",
            now=now,
        )

    # --- resources/read ------------------------------------------------------------------

    def read_resource(
        self,
        request_id: w.RequestId,
        raw_params: Raw,
        meta: w.RequestMeta,
        principal: str | None,
        now: float,
    ) -> ReadResource:
        params = decode_params(raw_params, w.ReadResourceParams)
        found = self._parts.catalog.find_resource(params.uri)
        if found is None:
            raise resource_not_found(params.uri)
        responses, handler_state, *_ = self._rounds.open(
            "resources/read", params.uri, None, params, principal=principal, now=now
        )
        call = ResourceRead(
            request_id=request_id,
            uri=params.uri,
            template=found.template,
            variables=found.variables,
            meta=meta,
            principal=principal,
            input_responses=responses,
            handler_state=handler_state,
        )
        return ReadResource(call=call, handler=found.handler)

    def resource_returned(self, call: ResourceRead, outcome: ResourceOutcome, now: float) -> Step:
        if isinstance(outcome, list):
            found = self._parts.catalog.find_resource(call.uri)
            ttl_ms = 0 if found is None else found.ttl_ms  # unregistered while it ran
            result = self._parts.catalog.read_result(
                outcome, ttl_ms, self._parts.encode.result_meta
            )
            return Step(reply=self._parts.encode.result(call.request_id, result))
        return self._error_or_round(
            call,
            outcome,
            method="resources/read",
            name=call.uri,
            arguments=None,
            what=f"Resource {call.uri!r}",
            now=now,
        )

    def _error_or_round(
        self,
        call: PromptCall | ResourceRead,
        outcome: object,
        *,
        method: str,
        name: str,
        arguments: bytes | None,
        what: str,
        now: float,
    ) -> Step:
        """The reply to a prompt or resource handler's error or `InputRequired`."""
        try:
            if isinstance(outcome, w.ErrorObject):
                return Step(reply=self._parts.encode.error_object(call.request_id, outcome))
            if isinstance(outcome, InputRequired):
                reply = self._rounds.ask(
                    call.request_id,
                    outcome,
                    method=method,
                    name=name,
                    arguments=arguments,
                    principal=call.principal,
                    what=what,
                    capabilities=call.client_capabilities,
                    now=now,
                )
                return Step(reply=reply)
            raise LocalProtocolError(f"{what} returned an unknown outcome")
        except ProtocolError as error:
            return Step(reply=self._parts.encode.error(call.request_id, error))

    # --- completion/complete --------------------------------------------------------------

    def complete(
        self, request_id: w.RequestId, raw_params: Raw, meta: w.RequestMeta
    ) -> Complete | Step:
        params = decode_params(raw_params, w.CompleteParams)
        ref = params.ref
        if isinstance(ref, w.PromptReference):
            if ref.name not in self._parts.catalog.prompts:
                raise invalid_params(f"Unknown prompt: {shown(ref.name)!r}")
            target = ("ref/prompt", ref.name)
        else:
            if ref.uri not in self._parts.catalog.templates:
                raise invalid_params(f"Unknown uri template: {ref.uri!r}")
            target = ("ref/resource", ref.uri)
        if target not in self._parts.catalog.completions:
            empty = self.completion_result(w.Completion(values=[]))
            return Step(reply=self._parts.encode.result(request_id, empty))
        context = UNSET if params.context is UNSET else params.context.arguments
        call = CompletionCall(
            request_id=request_id,
            ref=ref,
            argument=params.argument,
            context={} if context is UNSET else context,
            meta=meta,
        )
        return Complete(call=call, handler=self._parts.catalog.handler("completion", target))

    def completion_returned(self, call: CompletionCall, outcome: CompletionOutcome) -> Step:
        if isinstance(outcome, w.ErrorObject):
            return Step(reply=self._parts.encode.error_object(call.request_id, outcome))
        return Step(
            reply=self._parts.encode.result(call.request_id, self.completion_result(outcome))
        )

    def completion_result(self, completion: w.Completion) -> w.CompleteResult:
        """More than `MAX_COMPLETION_VALUES` values are cut to that many, with `hasMore`."""
        if len(completion.values) > MAX_COMPLETION_VALUES:
            total = len(completion.values) if completion.total is None else completion.total
            completion = w.Completion(
                values=completion.values[:MAX_COMPLETION_VALUES], total=total, has_more=True
            )
        return w.CompleteResult(completion=completion, meta=self._parts.encode.result_meta)


def _encoded(arguments: dict[str, str]) -> bytes:
    return msgspec.json.encode(arguments)
