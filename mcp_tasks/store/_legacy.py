"""Stores written before the split into `TaskStore` and `Coordination`, kept working for
one release.

Before, a store was one object: its `save` took eight parameters (the four limits one by
one) and it had the lease methods, `shared_key`, `use_once`, `shared`, `origin` and
`signals` itself. Three things keep such code working:

* `as_task_store` (what `Server` does with the store it is given) sees a store with no
  `coordination` and the old lease methods, warns once (`DeprecationWarning`) and wraps it
  in `PreSplitStore`, which answers for both halves by calling the old methods;
* `CoordinationOnStore`, a base of the built-in stores, answers the old coordination
  methods on the store by passing them to `store.coordination`, for code that calls
  `store.claim(...)` or wraps a built-in store the old way;
* `SavingStore`, the base of the built-in stores and of `PreSplitStore`: its `save` still
  takes the old limit keywords (`limit=`, `principal_limit=`, `principal_stored_limit=`,
  `bytes_limit=`), turns them into one `TaskLimits` (`legacy_limits`) and hands the save,
  whole, to the store's `_write`. It holds `TaskStore.save`'s signature once for them all.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, Final, NamedTuple

from .._support.handing_on import AttributeOf, handed_on
from ..core import (
    TaskRecord,
)
from ..core.commands import (
    TaskLimits,
)
from ._base import Coordination, Signals, StoreFull, TaskStore

_OLD_KEYWORDS = {
    "limit": "max_tasks",
    "principal_limit": "max_active_per_principal",
    "principal_stored_limit": "max_stored_per_principal",
    "bytes_limit": "max_bytes",
}
"""The `save` keywords of before the split -> the `TaskLimits` field each one became."""

COORDINATION_METHODS: Final = (
    "claim",
    "renew",
    "release",
    "lease_holder",
    "lapsed",
    "shared_key",
    "use_once",
)
"""The methods of `Coordination` (the store had them itself before the split)."""


def legacy_limits(limits: TaskLimits | None, old: dict[str, int | None]) -> TaskLimits | None:
    """`limits`, or the one `TaskLimits` the old `save` keywords in `old` say. A limit the
    old keywords leave out (None) is none: `max_tasks` is then as large as can be."""
    unknown = sorted(set(old) - set(_OLD_KEYWORDS))
    if unknown:
        raise TypeError(f"save() got unexpected keyword argument(s) {unknown}")
    given = {_OLD_KEYWORDS[name]: value for name, value in old.items() if value is not None}
    if not given:
        return limits
    if limits is not None:
        raise TypeError("save() takes `limits` or the old limit keywords, not both")
    given.setdefault("max_tasks", sys.maxsize)
    return TaskLimits(**given)


class CoordinationOnStore:
    """The coordination methods on the store itself, as before the split: each passes to
    `self.coordination`. Kept for one release; call `store.coordination` instead."""

    coordination: Coordination

    shared = AttributeOf[bool]("coordination")
    origin = AttributeOf[str]("coordination")
    signals = AttributeOf[Signals | None]("coordination")
    claim = handed_on("coordination", Coordination.claim)
    renew = handed_on("coordination", Coordination.renew)
    release = handed_on("coordination", Coordination.release)
    lease_holder = handed_on("coordination", Coordination.lease_holder)
    lapsed = handed_on("coordination", Coordination.lapsed)
    shared_key = handed_on("coordination", Coordination.shared_key)
    use_once = handed_on("coordination", Coordination.use_once)


class Save(NamedTuple):
    """One `TaskStore.save` call, its limits whole: what `SavingStore.save` hands `_write`."""

    record: TaskRecord
    expected_version: int | None
    active: bool
    limits: TaskLimits | None
    lease_until: float | None


class SavingStore(CoordinationOnStore):
    """The `save` of the built-in stores (and `PreSplitStore`): it takes the old limit
    keywords too, for one release, and passes each save on, whole, to `_write`, where a
    store does its compare-and-set under the limits."""

    async def save(
        self,
        record: TaskRecord,
        expected_version: int | None,
        *,
        active: bool,
        limits: TaskLimits | None = None,
        lease_until: float | None = None,
        **old: Any,
    ) -> None:
        """What `TaskStore.save` says (the old limit keywords taken as well)."""
        if old:
            limits = legacy_limits(limits, old)
        await self._write(Save(record, expected_version, active, limits, lease_until))

    async def _write(self, save: Save) -> None:
        """Perform `save` as `TaskStore.save` says."""
        raise NotImplementedError


def as_task_store(store: object) -> TaskStore:
    """`store` as a `TaskStore`: itself when it is one (it has `coordination`), a store
    written before the split wrapped in `PreSplitStore` (with a `DeprecationWarning`)."""
    if hasattr(store, "coordination"):
        return store  # type: ignore[return-value]  # a Protocol: checked where it is made
    missing = [name for name in ("save", "get", *COORDINATION_METHODS) if not hasattr(store, name)]
    if missing:
        raise TypeError(
            f"{type(store).__name__} is not a task store: it has no `coordination` "
            f"(see mcp_tasks.store.TaskStore), nor the old store's {', '.join(missing)}"
        )
    warnings.warn(
        f"{type(store).__name__} is a store written before the split into TaskStore and "
        "Coordination (its save takes the limits one by one, and it has the lease methods "
        "itself); it keeps working for one release: give it a `coordination` and a `save` "
        "that takes `limits` (docs/stores.md, 'Writing a store')",
        DeprecationWarning,
        stacklevel=3,
    )
    return PreSplitStore(store)


class PreSplitStore(SavingStore):
    """A store written before the split, as both halves: `save` with `limits` whole calls
    the old `save` with the limits one by one, and the old store, which has the lease
    methods, `shared`, `origin` and `signals` itself, is the coordination."""

    def __init__(self, old: Any) -> None:
        self.old = old
        """The store as it was written."""
        self.coordination: Coordination = old

    async def get(self, task_id: str) -> TaskRecord | None:
        record: TaskRecord | None = await self.old.get(task_id)
        return record

    async def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        return bool(await self.old.delete(task_id, expected_version))

    async def count(self) -> int:
        return int(await self.old.count())

    async def pop_due(self, now: float, limit: int = 1000) -> list[TaskRecord]:
        return list(await self.old.pop_due(now, limit))

    async def next_deadline(self) -> float | None:
        deadline: float | None = await self.old.next_deadline()
        return deadline

    async def aclose(self) -> None:
        await self.old.aclose()

    async def _write(self, save: Save) -> None:
        record, expected_version, active, limits, lease_until = save
        if limits is None:
            await self.old.save(record, expected_version, active=active, lease_until=lease_until)
            return
        try:
            await self.old.save(
                record,
                expected_version,
                active=active,
                limit=limits.max_tasks,
                principal_limit=limits.max_active_per_principal,
                principal_stored_limit=limits.max_stored_per_principal,
                bytes_limit=limits.max_bytes,
                lease_until=lease_until,
            )
        except StoreFull as full:  # written before `retry_at`: the store's next deadline
            if full.retry_at is None and not full.per_principal:
                full.retry_at = await self.next_deadline()
            raise

    def __repr__(self) -> str:
        return f"PreSplitStore({self.old!r})"
