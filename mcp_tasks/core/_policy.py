"""How often a client may poll: a policy the core asks, injected, with the state it keeps.

The core keeps nothing per task between calls; a poll-rate limit must remember when each
caller last polled each task, so that memory lives in a `PollPolicy` object the server
hands the core (`ServerCore(poll_policy=...)`). `MinPollInterval` is the one
`TaskOptions(min_poll_fraction=...)` builds.
"""

from __future__ import annotations

import math
from typing import Final, Protocol

from ._records import TaskRecord

MAX_TRACKED_POLLS: Final = 100_000
"""Last-poll times `MinPollInterval` keeps; past it the oldest are forgotten."""


class PollPolicy(Protocol):
    def wait_ms(self, principal: str | None, record: TaskRecord, now: float) -> int | None:
        """How long `principal` must wait before polling `record` again, or None: answer
        this poll now (and count it as the latest)."""
        ...


class MinPollInterval:
    """Refuse a poll of an unfinished task sooner than `fraction` of its advised
    `pollIntervalMs` after the same principal's previous one."""

    def __init__(self, fraction: float, max_tracked: int = MAX_TRACKED_POLLS) -> None:
        self.fraction = fraction
        self._max_tracked = max_tracked
        self._last_polls: dict[tuple[str | None, str], float] = {}
        """(principal, task id) -> when its last poll was answered."""

    def wait_ms(self, principal: str | None, record: TaskRecord, now: float) -> int | None:
        interval_ms = record.poll_interval_ms
        if interval_ms is None or record.status.is_terminal:
            return None  # a finished task may be read as often as the client likes
        key = (principal, record.task_id)
        polls = self._last_polls
        earliest = polls.get(key, -math.inf) + self.fraction * interval_ms / 1000
        if now < earliest:
            return math.ceil((earliest - now) * 1000)
        polls.pop(key, None)  # most recent last: the oldest go first when over the bound
        polls[key] = now
        if len(polls) > self._max_tracked:
            del polls[next(iter(polls))]
        return None
