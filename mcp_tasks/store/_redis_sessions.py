"""The sessions of a Redis store (`RedisTaskStore.sessions`): every process on the store's
URL and prefix serves every session.

Layout, under the store's prefix `{p}`:

* `{p}:session:{id}` a hash: `v` the version, `s` the state, `x` when it expires (the
  callers' clock), `w` the principal (absent for None), `a` the name of its principal's
  sorted set; and its events: per stream, `l:{stream}` the last number given,
  `f:{stream}` the first kept, `e:{number}:{stream}` each event kept. Its Redis expiry is
  the idle time (`PEXPIRE`), set again at each `get_session` and `save_session`: an idle
  session, its events with it, is gone without anyone deleting it.
* `{p}:sessions` a sorted set of every session by expiry time, and one per principal,
  `{p}:sessions:of:{principal}` (`{p}:sessions:none` for None): what the limits count.
  Each opening removes the expired members first, in the same script, so a session that
  expired counts no more. Each set's own Redis expiry is kept at least as far as its
  members' (raised, never lowered), so a principal's set that nobody opens into again
  goes too.

Every call is one Lua script: opening checks both limits and writes in one atomic step,
however many processes open at once; a save is compare-and-set on `v`. A session found
expired by the caller's `now` (before Redis's own expiry, when clocks differ a little) is
deleted and treated as gone. One Redis server, not a cluster (the scripts touch keys they
build), as for the tasks.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..core import VersionConflict

try:
    import redis.exceptions as redis_errors
except ImportError:  # pragma: no cover - the extra is not installed: no store is made
    redis_errors = None  # type: ignore[assignment]
from ._sessions import (
    MAX_EVENTS,
    SessionLimits,
    SessionRecord,
    another_principal,
    check_max_events,
    sessions_full,
)

if TYPE_CHECKING:
    from ._redis import RedisTaskStore

_HELPERS = """
local function drop(key, all, owned, id)
    redis.call('DEL', key)
    redis.call('ZREM', all, id)
    if owned then redis.call('ZREM', owned, id) end
end
local function extend(key, ms)
    if redis.call('PTTL', key) < tonumber(ms) then redis.call('PEXPIRE', key, ms) end
end
local function renew(key, all, owned, id, expires, ms)
    redis.call('HSET', key, 'x', expires)
    redis.call('PEXPIRE', key, ms)
    redis.call('ZADD', all, expires, id)
    redis.call('ZADD', owned, expires, id)
    extend(all, ms)
    extend(owned, ms)
end
"""

_OPEN = (
    _HELPERS
    + """
local found = redis.call('HMGET', KEYS[1], 'v', 'x', 'a')
if found[1] then
    if tonumber(found[2]) > tonumber(ARGV[4]) then return {'conflict'} end
    drop(KEYS[1], KEYS[2], found[3], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then
    local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {'full', first[2] or ''}
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[4])
if ARGV[7] ~= '' and redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[7]) then
    local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    return {'full_principal', first[2] or ''}
end
redis.call('HSET', KEYS[1], 'v', ARGV[8], 's', ARGV[2], 'a', KEYS[3])
if ARGV[9] == '1' then redis.call('HSET', KEYS[1], 'w', ARGV[10]) end
renew(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[3], ARGV[5])
return {'ok'}
"""
)

_GET = (
    _HELPERS
    + """
local found = redis.call('HMGET', KEYS[1], 'v', 's', 'x', 'a', 'w')
if not found[1] then return {'gone'} end
if tonumber(found[3]) <= tonumber(ARGV[1]) then
    drop(KEYS[1], KEYS[2], found[4], ARGV[4])
    return {'gone'}
end
renew(KEYS[1], KEYS[2], found[4], ARGV[4], ARGV[2], ARGV[3])
return {'ok', found[1], found[2], found[5] and '1' or '', found[5] or ''}
"""
)

_SAVE = (
    _HELPERS
    + """
local found = redis.call('HMGET', KEYS[1], 'v', 'x', 'a', 'w')
if not found[1] then return {'conflict', ''} end
if tonumber(found[2]) <= tonumber(ARGV[1]) then
    drop(KEYS[1], KEYS[2], found[3], ARGV[4])
    return {'conflict', ''}
end
if found[1] ~= ARGV[5] then return {'conflict', found[1]} end
local named = false
if ARGV[8] == '1' then named = ARGV[9] end
if found[4] ~= named then return {'principal'} end
redis.call('HSET', KEYS[1], 'v', ARGV[6], 's', ARGV[7])
renew(KEYS[1], KEYS[2], found[3], ARGV[4], ARGV[2], ARGV[3])
return {'ok'}
"""
)

_CLOSE = (
    _HELPERS
    + """
local owned = redis.call('HGET', KEYS[1], 'a')
if not owned then return 0 end
drop(KEYS[1], KEYS[2], owned, ARGV[1])
return 1
"""
)

_APPEND = """
if redis.call('HEXISTS', KEYS[1], 'v') == 0 then return 0 end
local number = redis.call('HINCRBY', KEYS[1], 'l:' .. ARGV[1], 1)
redis.call('HSET', KEYS[1], 'e:' .. number .. ':' .. ARGV[1], ARGV[2])
local first = tonumber(redis.call('HGET', KEYS[1], 'f:' .. ARGV[1]) or '1')
local oldest = number - tonumber(ARGV[3]) + 1
if first < oldest then
    for dropped = first, oldest - 1 do
        redis.call('HDEL', KEYS[1], 'e:' .. dropped .. ':' .. ARGV[1])
    end
    first = oldest
end
redis.call('HSET', KEYS[1], 'f:' .. ARGV[1], first)
return number
"""

_EVENTS = """
if redis.call('HEXISTS', KEYS[1], 'v') == 0 then return {'gone'} end
local after = tonumber(ARGV[2])
local last = tonumber(redis.call('HGET', KEYS[1], 'l:' .. ARGV[1]) or '0')
if after >= last then return {'ok'} end
local first = tonumber(redis.call('HGET', KEYS[1], 'f:' .. ARGV[1]) or '1')
if first > after + 1 then return {'dropped'} end
local found = {'ok'}
for number = after + 1, last do
    table.insert(found, redis.call('HGET', KEYS[1], 'e:' .. number .. ':' .. ARGV[1]))
end
return found
"""


class RedisSessions:
    """`SessionRecords` on a Redis store's server, shared by every process on its prefix."""

    def __init__(self, store: RedisTaskStore) -> None:
        self._store = store
        self._run = store._run
        self._prefix = store.prefix
        self._all = f"{store.prefix}:sessions"
        client = store._client
        self._open = client.register_script(_OPEN)
        self._get = client.register_script(_GET)
        self._save = client.register_script(_SAVE)
        self._close = client.register_script(_CLOSE)
        self._append = client.register_script(_APPEND)
        self._events = client.register_script(_EVENTS)

    def _key(self, session_id: str) -> str:
        return f"{self._prefix}:session:{session_id}"

    def _owned_key(self, principal: str | None) -> str:
        """The sorted set of a principal's sessions."""
        if principal is None:
            return f"{self._prefix}:sessions:none"
        return f"{self._prefix}:sessions:of:{principal}"

    async def open_session(
        self, record: SessionRecord, *, limits: SessionLimits, idle_seconds: float, now: float
    ) -> None:
        keys = [self._key(record.session_id), self._all, self._owned_key(record.principal)]
        args: list[str | bytes | int] = [
            record.session_id,
            record.state,
            repr(now + idle_seconds),
            repr(now),
            _milliseconds(idle_seconds),
            limits.max_sessions,
            "" if limits.max_per_principal is None else limits.max_per_principal,
            record.version,
            *_principal(record.principal),
        ]
        answer = await self._run(lambda: self._open(keys=keys, args=args))
        if answer[0] == b"conflict":
            raise VersionConflict(record.session_id, None, 1)
        if answer[0] == b"full":
            raise sessions_full(limits.max_sessions, retry_at=_time(answer[1]))
        if answer[0] == b"full_principal":
            assert limits.max_per_principal is not None
            first = _time(answer[1])
            raise sessions_full(limits.max_per_principal, per_principal=True, retry_at=first)

    async def get_session(
        self, session_id: str, *, idle_seconds: float, now: float
    ) -> SessionRecord | None:
        keys = [self._key(session_id), self._all]
        args: list[str | int] = [
            repr(now),
            repr(now + idle_seconds),
            _milliseconds(idle_seconds),
            session_id,
        ]
        try:  # piped: every request of a session starts here, so those queued together
            with self._store._reachable():  # take one round trip, as the tasks' gets do
                answer = await self._store._worker.run_piped(
                    lambda pipeline: pipeline.evalsha(self._get.sha, len(keys), *keys, *args),
                    lambda reply: reply,
                )
        except redis_errors.NoScriptError:  # the server does not know the script (yet): it is sent
            answer = await self._run(lambda: self._get(keys=keys, args=args))
        if answer[0] != b"ok":
            return None
        _, version, state, named, principal = answer
        return SessionRecord(
            session_id=session_id,
            principal=principal.decode() if named else None,
            state=state,
            version=int(version),
        )

    async def save_session(
        self, record: SessionRecord, expected_version: int, *, idle_seconds: float, now: float
    ) -> None:
        keys = [self._key(record.session_id), self._all]
        args: list[str | bytes | int] = [
            repr(now),
            repr(now + idle_seconds),
            _milliseconds(idle_seconds),
            record.session_id,
            expected_version,
            record.version,
            record.state,
            *_principal(record.principal),
        ]
        answer = await self._run(lambda: self._save(keys=keys, args=args))
        if answer[0] == b"conflict":
            stored = int(answer[1]) if answer[1] else None
            raise VersionConflict(record.session_id, expected_version, stored)
        if answer[0] == b"principal":
            raise another_principal(record)

    async def close_session(self, session_id: str) -> bool:
        keys = [self._key(session_id), self._all]
        return bool(await self._run(lambda: self._close(keys=keys, args=[session_id])))

    async def append_event(
        self, session_id: str, stream: str, data: bytes, *, max_events: int = MAX_EVENTS
    ) -> int:
        check_max_events(max_events)
        keys = [self._key(session_id)]
        args: list[str | bytes | int] = [stream, data, max_events]
        return int(await self._run(lambda: self._append(keys=keys, args=args)))

    async def events_after(
        self, session_id: str, stream: str, after: int
    ) -> list[tuple[int, bytes]] | None:
        keys = [self._key(session_id)]
        args: list[str | int] = [stream, after]
        answer = await self._run(lambda: self._events(keys=keys, args=args))
        if answer[0] != b"ok":
            return None  # gone, or dropped already
        return [(after + offset, data) for offset, data in enumerate(answer[1:], 1)]


def _principal(principal: str | None) -> list[str]:
    """A principal as the scripts read it: a flag ('1': there is one), then its name."""
    return ["", ""] if principal is None else ["1", principal]


def _milliseconds(seconds: float) -> int:
    """Redis's expiry for an idle time: at least 1 ms (0 would delete at once)."""
    return max(1, math.ceil(seconds * 1000))


def _time(found: Any) -> float | None:
    """A score from a script's answer; None for '' (nothing to wait for)."""
    return float(found) if found else None
