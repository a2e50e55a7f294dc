"""`subscriptions/listen`: what a stream agrees to carry, each message on it, and the
refusal of one stream too many.

Streams are bounded three ways, each an option of `ServerOptions`: the task ids and
resource uris one listen may name (`max_listen_items`; -32602 beyond), the streams open at
once (`max_listen_streams`) and those of one principal (`max_listen_streams_per_principal`).
The core cannot count open streams (it keeps no state): `Listen` carries the two stream
limits, and the shell that holds the streams asks for `refused` when one is reached.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw

from . import _wire as w
from ._effects import Reply
from ._encode import META_SUBSCRIPTION_ID, notification
from ._envelope import decode_params, invalid_params
from ._errors import INTERNAL_ERROR
from ._needs import Listen, Subscription
from ._options import ServerOptions
from ._parts import Parts
from ._records import TaskRecord, task_era
from ._rounds import needs_tasks_extension

MAX_SUBSCRIBED_ITEMS: Final = ServerOptions().max_listen_items
"""Task ids, and resource uris, one `subscriptions/listen` may name by default."""
LISTEN_RETRY_AFTER_MS: Final = 5000
"""When a client refused a stream is advised to try again: streams end when their clients
leave, which nobody can foresee; often enough to notice, rarely enough to cost nothing."""
LIST_CHANGED_METHODS: Final = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}


class Subscriptions:
    """`subscriptions/listen`: checks a request for a stream, and words what each stream
    carries (its acknowledgement, list changes, resource updates, task changes, its end)."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts

    def listen(
        self,
        request_id: w.RequestId,
        raw_params: Raw,
        meta: w.RequestMeta,
        principal: str | None,
    ) -> Listen:
        wanted = decode_params(raw_params, w.ListenParams).notifications
        most = self._parts.options.max_listen_items
        for name, items in (
            ("taskIds", wanted.task_ids),
            ("resourceSubscriptions", wanted.resource_subscriptions),
        ):
            if items is not UNSET and len(items) > most:
                raise invalid_params(
                    f"Invalid params: params.notifications.{name} names {len(items)} items, "
                    f"at most {most}"
                )
        if wanted.task_ids is not UNSET and not meta.client_capabilities.has_tasks:
            raise needs_tasks_extension("Listening for task status (taskIds) needs")
        offered = self._parts.catalog.capabilities()
        agreed = w.SubscriptionFilter(
            tools_list_changed=True if wanted.tools_list_changed is True else UNSET,
            prompts_list_changed=(
                True if wanted.prompts_list_changed is True and "prompts" in offered else UNSET
            ),
            resources_list_changed=(
                True if wanted.resources_list_changed is True and "resources" in offered else UNSET
            ),
            resource_subscriptions=_unset_if_empty(
                _unique(
                    uri
                    for uri in wanted.resource_subscriptions or ()
                    if self._parts.catalog.find_resource(uri) is not None
                )
            ),
            task_ids=_unset_if_empty(_unique(wanted.task_ids or ())),
        )
        subscription = Subscription(
            request_id=request_id, notifications=agreed, meta=meta, principal=principal
        )
        return Listen(
            subscription=subscription,
            max_streams=self._parts.options.max_listen_streams,
            max_streams_per_principal=self._parts.options.max_listen_streams_per_principal,
        )

    def refused(self, listen: Listen, *, per_principal: bool) -> Reply:
        """The answer to a listen the server has no room for: it carries `max_streams`
        streams already (HTTP 503), or this principal's `max_streams_per_principal` (429).
        Both -32603 and retryable, `LISTEN_RETRY_AFTER_MS` from now."""
        if per_principal:
            message = (
                f"Too many listen streams for this caller: at most "
                f"{listen.max_streams_per_principal} open at once; close one, or try again later"
            )
            status = 429
        else:
            message = (
                f"Too many listen streams: the server carries its limit of "
                f"{listen.max_streams}; try again later"
            )
            status = 503
        return self._parts.encode.retryable(
            listen.request_id,
            INTERNAL_ERROR,
            message,
            http_status=status,
            retry_after_ms=LISTEN_RETRY_AFTER_MS,
        )

    def acknowledged(self, subscription: Subscription) -> bytes:
        """The stream's first message: which notifications it will carry."""
        params = {
            "_meta": {META_SUBSCRIPTION_ID: subscription.request_id},
            "notifications": subscription.notifications,
        }
        return notification("notifications/subscriptions/acknowledged", params)

    def list_changed(self, subscription: Subscription, kind: str) -> bytes | None:
        """`notifications/<kind>/list_changed` for this stream, or None if it did not ask.
        `kind` is "tools", "prompts" or "resources"."""
        wanted = subscription.notifications
        asked = {
            "tools": wanted.tools_list_changed,
            "prompts": wanted.prompts_list_changed,
            "resources": wanted.resources_list_changed,
        }[kind]
        if asked is not True:
            return None
        params = {"_meta": {META_SUBSCRIPTION_ID: subscription.request_id}}
        return notification(LIST_CHANGED_METHODS[kind], params)

    def resource_updated(self, subscription: Subscription, uri: str) -> bytes | None:
        """`notifications/resources/updated` for this stream, or None if it did not ask."""
        if uri not in (subscription.notifications.resource_subscriptions or ()):
            return None
        params = {"_meta": {META_SUBSCRIPTION_ID: subscription.request_id}, "uri": uri}
        return notification("notifications/resources/updated", params)

    def task_changed(self, subscription: Subscription, record: TaskRecord) -> bytes | None:
        """`notifications/tasks` with the task's full state (as `tasks/get` shows it), or
        None if this stream did not ask about this task."""
        if record.task_id not in (subscription.notifications.task_ids or ()):
            return None
        if record.principal != subscription.principal or record.era != task_era(subscription.meta):
            return None  # not theirs (or another era's): they learn nothing of it
        # Through JSON, not to_builtins: a completed task's result is kept as raw JSON.
        task = self._parts.encode.detailed_task(record)
        params: dict[str, Any] = msgspec.json.decode(w.json_encoder.encode(task))
        params.pop("resultType", None)
        params["_meta"] = {META_SUBSCRIPTION_ID: subscription.request_id}
        return notification("notifications/tasks", params)

    def ended(self, subscription: Subscription) -> Reply:
        """The response that ends a stream gracefully (the server is shutting down)."""
        meta = {**self._parts.encode.meta_dict, META_SUBSCRIPTION_ID: subscription.request_id}
        result = {"resultType": "complete", "_meta": meta}
        return self._parts.encode.result(subscription.request_id, result)


def _unique(items: Any) -> list[str]:
    return list(dict.fromkeys(items))


def _unset_if_empty(items: list[str]) -> list[str] | Any:
    return items if items else UNSET
