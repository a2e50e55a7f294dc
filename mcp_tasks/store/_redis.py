"""The Redis store: tasks that several server processes share, on one or more machines.

Layout, under a key prefix (`mcp_tasks` unless the URL says `?prefix=`):

* `{p}:task:{id}` a hash: `v` the version, `r` the record's JSON;
* `{p}:ids` the set of task ids (the task limit counts it), `{p}:due` a sorted set of ids
  by expiry time, `{p}:leases` a sorted set of ids by lease end, `{p}:holders` a hash of
  id -> the process holding its lease;
* `{p}:signals` the pub/sub channel that carries `Signal`s between the processes;
* `{p}:session:{id}`, `{p}:sessions...` the sessions of 2025 clients (`_redis_sessions`).

The leases, the signals, the shared key and single use are the store's coordination
(`_RedisCoordination`, `store.coordination`), on the same Redis: a save takes or drops a
lease inside its script, in the same atomic step as the write.

Every write that reads before it writes (compare-and-set, the task limit, popping due
records and lapsed leases) is one Lua script, so it is atomic however many processes ask.
A save also publishes a `changed` signal in the same script: a `subscriptions/listen`
stream held on another process hears of it without a second round trip. redis-py is
blocking; calls run in one worker thread, batched (`BatchingWorker`); the pub/sub reader
waits in a thread of its own. One Redis server, not a cluster (the
scripts touch keys they build).

A Redis that stops answering (stopped, or a network that drops packets) holds that thread,
and every call queued behind it, for `timeout_seconds` at most (`DEFAULT_TIMEOUT_SECONDS`;
the URL's own `socket_timeout` and `socket_connect_timeout` win): then it is
`StoreUnavailable`, what an unreachable Redis is, so requests get 503 and a task's outcome
is saved again later, instead of waiting for as long as the socket stays open.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
import anyio.to_thread
import msgspec

from ..core import (
    TaskRecord,
    VersionConflict,
    decode_record,
    encode_record,
)
from ..core.commands import (
    TaskLimits,
)
from ._base import EXPIRY_CLAIM_SECONDS, Signal, StoreFull, StoreUnavailable, redacted
from ._legacy import Save, SavingStore
from ._redis_sessions import RedisSessions
from ._worker import BatchingWorker

try:
    import redis
except ImportError:  # pragma: no cover - the extra is not installed
    redis = None  # type: ignore[assignment]

T = TypeVar("T")

DEFAULT_TIMEOUT_SECONDS: Final = 5.0
"""How long connecting to Redis, or a command's answer, may take before the store counts
Redis as unavailable."""

_SAVE = """
local current = redis.call('HGET', KEYS[1], 'v')
if ARGV[2] == '' then
    if current then return {'conflict', current} end
    if ARGV[6] ~= '' and redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[6]) then
        return {'full'}
    end
    if ARGV[13] ~= '' then
        local held = tonumber(redis.call('GET', KEYS[9]) or '0')
        if held + tonumber(ARGV[14]) > tonumber(ARGV[13]) then return {'full_bytes'} end
    end
    if ARGV[11] ~= '' and redis.call('SCARD', KEYS[7]) >= tonumber(ARGV[11]) then
        return {'full_principal'}
    end
    if ARGV[12] ~= '' and redis.call('ZCARD', KEYS[8]) >= tonumber(ARGV[12]) then
        local first = redis.call('ZRANGE', KEYS[8], 0, 0, 'WITHSCORES')
        return {'full_principal_stored', first[2]}
    end
    -- the principal's stored tasks, by expiry: the first one's is when room comes back
    redis.call('ZADD', KEYS[8], ARGV[5] ~= '' and ARGV[5] or '+inf', ARGV[1])
elseif current ~= ARGV[2] then
    return {'conflict', current or ''}
end
-- the task data bytes of every record, kept as each one's size changes (ARGV[14])
local size_before = tonumber(redis.call('HGET', KEYS[1], 'b') or '0')
redis.call('INCRBY', KEYS[9], tonumber(ARGV[14]) - size_before)
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'r', ARGV[4], 'a', KEYS[7], 'o', KEYS[8], 'b', ARGV[14])
-- ARGV[10] is '1' while the task is active (unfinished), '' once it is not
if ARGV[10] == '1' then
    redis.call('SADD', KEYS[7], ARGV[1])
else
    redis.call('SREM', KEYS[7], ARGV[1])
end
redis.call('SADD', KEYS[2], ARGV[1])
if ARGV[5] ~= '' then
    redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
else
    redis.call('ZREM', KEYS[3], ARGV[1])
end
if ARGV[8] ~= '' then
    redis.call('HSET', KEYS[6], ARGV[1], ARGV[9])
    redis.call('ZADD', KEYS[5], ARGV[8], ARGV[1])
end
if ARGV[10] ~= '1' then
    redis.call('HDEL', KEYS[6], ARGV[1])
    redis.call('ZREM', KEYS[5], ARGV[1])
end
redis.call('PUBLISH', KEYS[4], ARGV[7])
return {'ok'}
"""

_DELETE = """
local current = redis.call('HGET', KEYS[1], 'v')
if not current then return {'gone'} end
if ARGV[2] ~= '' and current ~= ARGV[2] then return {'conflict', current} end
local active = redis.call('HGET', KEYS[1], 'a')
if active then redis.call('SREM', active, ARGV[1]) end
local owned = redis.call('HGET', KEYS[1], 'o')
if owned then redis.call('ZREM', owned, ARGV[1]) end
local size = redis.call('HGET', KEYS[1], 'b')
if size then redis.call('DECRBY', KEYS[6], tonumber(size)) end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
return {'ok'}
"""

_POP_DUE = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local found = {}
for _, id in ipairs(ids) do
    local record = redis.call('HGET', ARGV[3] .. id, 'r')
    if record then
        redis.call('ZADD', KEYS[1], 'XX', ARGV[4], id)
        table.insert(found, record)
    else
        redis.call('ZREM', KEYS[1], id)
    end
end
return found
"""

_LAPSED = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(ids) do
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
end
return ids
"""

_RENEW = """
for i = 3, #ARGV do
    if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[1] then
        redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[i])
    end
end
return 0
"""

_RELEASE = """
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
    redis.call('HDEL', KEYS[2], ARGV[1])
    redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
"""

_signal_encoder = msgspec.json.Encoder()
_signal_decoder = msgspec.json.Decoder(Signal)


class RedisTaskStore(SavingStore):
    """Tasks on a Redis server, shared by every process that opens the same URL and prefix.
    A call Redis has not answered in `timeout_seconds` is `StoreUnavailable`."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        if redis is None:
            raise ImportError("the Redis store needs redis-py: pip install 'mcp-tasks[redis]'")
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        prefix = query.pop("prefix", "mcp_tasks") if prefix is None else prefix
        self.url = urlunsplit(parts._replace(query=urlencode(query)))
        self.prefix = prefix
        self._client = redis.Redis.from_url(  # the URL's own timeouts win
            self.url, socket_timeout=timeout_seconds, socket_connect_timeout=timeout_seconds
        )
        self._ids = f"{prefix}:ids"
        self._due = f"{prefix}:due"
        self._leases = f"{prefix}:leases"
        self._holders = f"{prefix}:holders"
        self._bytes = f"{prefix}:bytes"
        self._channel = f"{prefix}:signals"
        self._task_prefix = f"{prefix}:task:"
        self._save = self._client.register_script(_SAVE)
        self._delete = self._client.register_script(_DELETE)
        self._pop_due = self._client.register_script(_POP_DUE)
        self._worker = BatchingWorker(lambda: self._client.pipeline(transaction=False))
        self.coordination = _RedisCoordination(self)
        self.sessions = RedisSessions(self)
        """The 2025 clients' HTTP sessions (`SessionRecords`), on the same server."""

    async def _run(self, work: Callable[[], T]) -> T:
        with self._reachable():
            return await self._worker.run(work)

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        """Redis's connection failures, as the `StoreUnavailable` the server answers."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as error:
            raise StoreUnavailable(f"Redis at {redacted(self.url)}: {error}") from error

    def _owned_key(self, principal: str | None) -> str:
        """All a principal's stored tasks, finished ones included, by expiry time."""
        return f"{self.prefix}:owned" if principal is None else f"{self.prefix}:owned:{principal}"

    def _key(self, task_id: str) -> str:
        return self._task_prefix + task_id

    def _active_key(self, principal: str | None) -> str:
        """The set of a principal's unfinished tasks."""
        return f"{self.prefix}:active" if principal is None else f"{self.prefix}:active:{principal}"

    async def ping(self) -> None:
        """Raise if the server cannot be reached (redis-py's ConnectionError)."""
        await self._run(self._client.ping)

    async def get(self, task_id: str) -> TaskRecord | None:
        key = self._key(task_id)
        # Piped: the gets queued together (polls, mostly) take one round trip.
        with self._reachable():
            data: bytes | None = await self._worker.run_piped(
                lambda pipeline: pipeline.hget(key, "r"), lambda reply: reply
            )
        return None if data is None else decode_record(data)

    async def _write(self, save: Save) -> None:
        record, expected_version, active, limits, lease_until = save
        task_id = record.task_id
        expires_at = record.expires_at
        origin = self.coordination.origin
        changed = _signal_encoder.encode(Signal("changed", task_id, origin))
        keys = [self._key(task_id), self._ids, self._due, self._channel]
        keys += [self._leases, self._holders, self._active_key(record.principal)]
        keys += [self._owned_key(record.principal), self._bytes]
        args: list[bytes | str] = [
            task_id,
            "" if expected_version is None else str(expected_version),
            str(record.version),
            encode_record(record),
            "" if expires_at is None else repr(expires_at),
            _number(None if limits is None else limits.max_tasks),
            changed,
            "" if lease_until is None else repr(lease_until),
            origin,
            "1" if active else "",
            _number(None if limits is None else limits.max_active_per_principal),
            _number(None if limits is None else limits.max_stored_per_principal),
            _number(None if limits is None else limits.max_bytes),
            str(record.data_bytes),
        ]
        answer = await self._run(lambda: self._save(keys=keys, args=args))
        if answer[0] == b"conflict":
            raise VersionConflict(task_id, expected_version, _version(answer[1]))
        if answer[0] != b"ok":
            assert limits is not None
            full = _refusal(answer, limits)
            if not full.per_principal:  # room when the store's next task expires
                full.retry_at = await self.next_deadline()
            raise full

    async def delete(self, task_id: str, expected_version: int | None = None) -> bool:
        keys = [self._key(task_id), self._ids, self._due, self._leases, self._holders, self._bytes]
        args = [task_id, "" if expected_version is None else str(expected_version)]
        answer = await self._run(lambda: self._delete(keys=keys, args=args))
        if answer[0] == b"conflict":
            raise VersionConflict(task_id, expected_version, _version(answer[1]))
        return bool(answer[0] == b"ok")

    async def count(self) -> int:
        return int(await self._run(lambda: self._client.scard(self._ids)))

    async def pop_due(self, now: float, limit: int = 1000) -> list[TaskRecord]:
        again = repr(now + EXPIRY_CLAIM_SECONDS)  # claimed: due again unless deleted
        args: list[str | int] = [repr(now), limit, self._task_prefix, again]
        found = await self._run(lambda: self._pop_due(keys=[self._due], args=args))
        return [decode_record(data) for data in found]

    async def next_deadline(self) -> float | None:
        first = await self._run(lambda: self._client.zrange(self._due, 0, 0, withscores=True))
        return float(first[0][1]) if first else None

    async def aclose(self) -> None:
        await self._run(self._client.close)

    def __repr__(self) -> str:
        return f"RedisTaskStore({redacted(self.url)!r}, prefix={self.prefix!r})"


class _RedisCoordination:
    """Leases (`{p}:leases`, `{p}:holders`), signals (`{p}:signals`), the shared key and
    single use, on the store's Redis: every process on the prefix sees the same."""

    shared = True

    def __init__(self, store: RedisTaskStore) -> None:
        self._run = store._run
        self._client = store._client
        self._prefix = store.prefix
        self._leases, self._holders = store._leases, store._holders
        self.origin = "redis_" + secrets.token_hex(6)
        self.signals = _RedisSignals(store)
        self._lapsed = store._client.register_script(_LAPSED)
        self._renew = store._client.register_script(_RENEW)
        self._release = store._client.register_script(_RELEASE)

    async def claim(self, task_id: str, until: float) -> None:
        def work() -> None:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.hset(self._holders, task_id, self.origin)
                pipe.zadd(self._leases, {task_id: until})
                pipe.execute()

        await self._run(work)

    async def renew(self, task_ids: list[str], until: float) -> None:
        if task_ids:
            keys = [self._leases, self._holders]
            args = [self.origin, repr(until), *task_ids]
            await self._run(lambda: self._renew(keys=keys, args=args))

    async def release(self, task_id: str) -> None:
        keys = [self._leases, self._holders]
        await self._run(lambda: self._release(keys=keys, args=[task_id, self.origin]))

    async def lease_holder(self, task_id: str, now: float) -> str | None:
        def work() -> tuple[Any, Any]:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.hget(self._holders, task_id)
                pipe.zscore(self._leases, task_id)
                holder, until = pipe.execute()
            return holder, until

        holder, until = await self._run(work)
        if holder is None or until is None or float(until) <= now:
            return None
        return str(holder.decode())

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        keys = [self._leases, self._holders]
        ids = await self._run(lambda: self._lapsed(keys=keys, args=[repr(now), limit]))
        return [task_id.decode() for task_id in ids]

    async def use_once(self, key: str, until: float, now: float) -> bool:
        name = f"{self._prefix}:used:{key}"
        milliseconds = max(1, int((until - now) * 1000))  # Redis forgets it then
        taken = await self._run(lambda: self._client.set(name, b"1", nx=True, px=milliseconds))
        return bool(taken)

    async def shared_key(self, proposal: bytes) -> bytes:
        key = f"{self._prefix}:state_key"

        def work() -> bytes:
            self._client.set(key, proposal, nx=True)
            found = self._client.get(key)
            assert isinstance(found, bytes)
            return found

        return await self._run(work)


class _RedisSignals:
    """Signals over the store's pub/sub channel; a worker thread waits for each message."""

    def __init__(self, store: RedisTaskStore) -> None:
        self._store = store

    async def publish(self, signal: Signal) -> None:
        store = self._store
        data = _signal_encoder.encode(signal)
        await store._run(lambda: store._client.publish(store._channel, data))

    @asynccontextmanager
    async def listen(self) -> AsyncIterator[AsyncIterator[Signal]]:
        store = self._store
        pubsub = store._client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call, unused-ignore]
        await store._run(lambda: pubsub.subscribe(store._channel))
        try:
            yield _Messages(store, pubsub)
        finally:
            with anyio.CancelScope(shield=True):
                await store._run(pubsub.close)


class _Messages:
    def __init__(self, store: RedisTaskStore, pubsub: Any) -> None:
        self._store = store
        self._pubsub = pubsub

    def __aiter__(self) -> _Messages:
        return self

    async def __anext__(self) -> Signal:
        while True:
            # Abandoned on cancel: the thread returns within its timeout, and nobody waits.
            with self._store._reachable():  # Redis gone: the listener says so, and ends
                message = await anyio.to_thread.run_sync(
                    lambda: self._pubsub.get_message(timeout=0.5), abandon_on_cancel=True
                )
            if message is None or message.get("type") != "message":
                continue
            try:
                return _signal_decoder.decode(message["data"])
            except msgspec.DecodeError:
                continue  # not ours: someone else publishes on the channel


def _version(found: bytes) -> int | None:
    return int(found) if found else None


def _number(limit: int | None) -> str:
    """A limit as the save script reads it: '' for none."""
    return "" if limit is None else str(limit)


def _refusal(answer: list[bytes], limits: TaskLimits) -> StoreFull:
    """The `StoreFull` a save script's "full..." answer means."""
    if answer[0] == b"full_principal":
        assert limits.max_active_per_principal is not None
        return StoreFull(limits.max_active_per_principal, per_principal=True)
    if answer[0] == b"full_bytes":
        assert limits.max_bytes is not None
        return StoreFull(limits.max_bytes, data=True)
    if answer[0] == b"full_principal_stored":
        assert limits.max_stored_per_principal is not None
        first = float(answer[1])
        room_at = None if math.isinf(first) else first
        return StoreFull(
            limits.max_stored_per_principal, per_principal=True, stored=True, retry_at=room_at
        )
    return StoreFull(limits.max_tasks)
