"""A Redis that stops answering costs each call `timeout_seconds`, not forever: a loopback
listener that accepts and never answers, and a real redis-server stopped with SIGSTOP."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
from collections.abc import Iterator

import pytest
import trio
from redis_server import running_redis_process
from runtime.helpers import request

from mcp_tasks import Server
from mcp_tasks.store import RedisTaskStore, StoreUnavailable
from mcp_tasks.store._redis import DEFAULT_TIMEOUT_SECONDS

pytest.importorskip("redis")


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port whose connections are accepted by the kernel and never answered."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


async def test_a_redis_that_never_answers_is_unavailable_after_the_timeout(
    silent_port: int,
) -> None:
    store = RedisTaskStore(f"redis://127.0.0.1:{silent_port}/0", timeout_seconds=0.3)
    started = trio.current_time()
    with trio.fail_after(10), pytest.raises(StoreUnavailable) as unavailable:
        await store.get("tsk_anything")
    assert trio.current_time() - started >= 0.3
    assert "Timeout" in str(unavailable.value), unavailable.value
    await store.aclose()


def test_the_timeout_is_set_unless_the_url_sets_its_own() -> None:
    def timeouts(store: RedisTaskStore) -> tuple[float, float]:
        kwargs = store._client.connection_pool.connection_kwargs
        return kwargs["socket_timeout"], kwargs["socket_connect_timeout"]

    plain = RedisTaskStore("redis://127.0.0.1:1/0")
    assert timeouts(plain) == (DEFAULT_TIMEOUT_SECONDS, DEFAULT_TIMEOUT_SECONDS)
    chosen = RedisTaskStore("redis://127.0.0.1:1/0", timeout_seconds=2)
    assert timeouts(chosen) == (2, 2)
    own = RedisTaskStore("redis://127.0.0.1:1/0?socket_timeout=7&socket_connect_timeout=8")
    assert timeouts(own) == (7, 8)


async def test_a_server_on_a_stopped_redis_answers_503_then_serves_when_it_runs_again() -> None:
    with running_redis_process() as (url, process):
        store = RedisTaskStore(url, prefix="stall" + secrets.token_hex(6), timeout_seconds=0.5)
        server = Server("stalled", "1")
        server.use_store(store)
        poll = request("tasks/get", {"taskId": "tsk_" + "a" * 32}, request_id=1)
        async with server.running():
            os.kill(process.pid, signal.SIGSTOP)
            try:
                with trio.fail_after(10):  # without a timeout: until SIGCONT
                    reply = await server.handle(poll)
            finally:
                os.kill(process.pid, signal.SIGCONT)
            assert reply is not None and reply.http_status == 503, reply
            with trio.fail_after(10):
                reply = await server.handle(poll)
            assert reply is not None and reply.http_status == 400  # unknown task: Redis read
            assert "error" in json.loads(reply.body)
        await store.aclose()
