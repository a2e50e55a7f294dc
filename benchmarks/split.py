"""Where a request's time goes in the built-in HTTP server, without a socket or a profiler.

    python benchmarks/split.py [--loop asyncio|trio] [--requests N]   # prints JSON

A profiler inflates every call alike, and a server under wrk shares its CPU with the
kernel's network stack; this measures each part alone, in CPU microseconds a request, on the
benchmark's own server (`servers.py`):

* `connection_us`: one `HttpConnection` answering N requests from an in-memory stream (each
  read a real suspension of the loop, each answer kept, no system call): the whole of our
  Python per request, head to answer;
* `server_us`: `Server.handle` alone on the same request (the core and the runtime; for a
  task creation, the task's run too: a loop round is let go after each);
* `head_us`: the request read alone from its bytes (`RequestInput`: llhttp and our header
  callbacks, the body framed);
* `transport_us`: the connection less the server: what the HTTP layer costs.

Beside the same workloads' rates under wrk (`compare.py`), what is left per request is the
loop, the task's wake-up and the `send` system call.
"""

# ruff: noqa: E402  (the imports must follow the sys.path fix below)
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]

import argparse
import importlib.util
import json
import time
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from mcp_tasks.cli._serving import LOOPS, run_on_loop
from mcp_tasks.transports._http_connection import HttpConnection
from mcp_tasks.transports._http_rules import HttpConfig, mcp_headers
from mcp_tasks.transports._http_server import _Serving
from mcp_tasks.transports._http_wire import RequestInput

_META = (
    '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    '"io.modelcontextprotocol/clientCapabilities":'
    '{"extensions":{"io.modelcontextprotocol/tasks":{}}}}'
)
_LIMIT = 4 * 1024 * 1024


def _servers_module() -> Any:
    path = os.path.join(_HERE, "servers.py")
    spec = importlib.util.spec_from_file_location("bench_servers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its structs' annotations are looked up there
    spec.loader.exec_module(module)
    return module


def _request(method: str, name: str, params: str) -> bytes:
    body = f'{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{{params},{_META}}}}}'
    data = body.encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
        f"Mcp-Method: {method}\r\nMcp-Name: {name}\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


class _Replayed(anyio.abc.SocketStream):
    """The same request `count` times (each read waits a loop round, as a socket's does),
    then end-of-file; the answers are kept, the last one for a look."""

    def __init__(self, request: bytes, count: int) -> None:
        self.request, self.left, self.answers, self.last = request, count, 0, b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self.left:
            raise anyio.EndOfStream
        self.left -= 1
        await anyio.lowlevel.checkpoint()
        return self.request

    async def send(self, item: bytes) -> None:
        self.answers += 1
        self.last = item

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    @property
    def _raw_socket(self) -> Any:
        raise NotImplementedError

    def extra(self, attribute: Any, default: Any = None) -> Any:
        raise anyio.TypedAttributeLookupError


async def _answered(serving: _Serving, request: bytes, count: int) -> tuple[float, bytes]:
    stream = _Replayed(request, count)
    started = time.process_time()
    await HttpConnection(serving, stream).serve()
    took = time.process_time() - started
    if stream.answers != count or b" 200 " not in stream.last[:16] or b'"error"' in stream.last:
        raise RuntimeError(f"not answered as expected: {stream.last[:300]!r}")
    return took / count * 1e6, stream.last


async def _server_alone(server: Any, request: bytes, count: int, *, settle: bool) -> float:
    reader = RequestInput(65536)
    reader.receive(request)
    head = reader.next_head()
    assert head is not None
    body = reader.take_whole_body()
    headers = mcp_headers(head.found, head.params)
    started = time.process_time()
    for _ in range(count):
        await server.handle(body, headers=headers)
        if settle:  # the task it made runs (as each read of a connection lets it)
            await anyio.lowlevel.checkpoint()
    return (time.process_time() - started) / count * 1e6


def _head_alone(request: bytes, count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        reader = RequestInput(65536)
        reader.receive(request)
        reader.next_head()
        reader.take_whole_body()
    return (time.process_time() - started) / count * 1e6


async def split(count: int) -> dict[str, dict[str, float]]:
    servers = _servers_module()
    server = servers.server
    async with server.running():
        serving = _Serving(server, HttpConfig(), loopback=True)
        create = '"name":"slow_compute","arguments":{"seconds":0},"task":{"ttl":900000}'
        _, handle = await _answered(serving, _request("tools/call", "slow_compute", create), 1)
        task_id = json.loads(handle.split(b"\r\n\r\n", 1)[1])["result"]["taskId"]
        get = _request("tasks/get", task_id, f'"taskId":"{task_id}"')
        with anyio.fail_after(10):  # the task ends at once: wait until it has
            while b'"completed"' not in (await _answered(serving, get, 1))[1]:
                await anyio.sleep(0.01)
        greet = _request("tools/call", "greet", '"name":"greet","arguments":{"name":"bench"}')
        found: dict[str, dict[str, float]] = {}
        creation = _request("tools/call", "slow_compute", create)
        workloads = (("tasks/get", get), ("sync tools/call", greet), ("task creations", creation))
        for workload, request in workloads:
            await _answered(serving, request, count // 10)  # warm
            connection, _ = await _answered(serving, request, count)
            settle = request is creation
            alone = await _server_alone(server, request, count, settle=settle)
            found[workload] = {
                "connection_us": round(connection, 1),
                "server_us": round(alone, 1),
                "head_us": round(_head_alone(request, count), 1),
                "transport_us": round(connection - alone, 1),
            }
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--loop", choices=LOOPS, default="asyncio")
    parser.add_argument("--requests", type=int, default=20_000)
    options = parser.parse_args()
    print(json.dumps(run_on_loop(options.loop, split, options.requests)))


if __name__ == "__main__":
    main()
