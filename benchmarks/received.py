"""What a host saves by handing the core the message it decoded already.

The official SDK's integration holds each request decoded (`ctx.method`, `ctx.params`).
Before, it encoded the whole message to hand the core bytes the core decoded again; now it
hands an `IncomingMessage` with only `params` encoded. Measured: `ServerCore.handle` of a
`tasks/get` (`Received`, up to its `FetchTask` need), including the host's encoding, each
way; best of 7 batches of 20,000, in-process, one thread. Run from the repository root:

    python benchmarks/received.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec
from msgspec import Raw

from mcp_tasks.core import PROTOCOL_VERSION, Implementation, ServerCore
from mcp_tasks.core.inputs import Received
from mcp_tasks.core.wire import IncomingMessage

PARAMS = {
    "taskId": "tsk-none",
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
    },
}
BATCH = 20_000


def main() -> None:
    info = Implementation(name="b", version="1")
    core = ServerCore(info=info, new_task_id=lambda: "t", state_key=b"k" * 32)

    def as_bytes() -> object:
        message = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": PARAMS}
        return core.handle(Received(msgspec.json.encode(message)), 0.0)

    def as_decoded() -> object:
        message = IncomingMessage("2.0", 7, "tasks/get", Raw(msgspec.json.encode(PARAMS)))
        return core.handle(Received(message), 0.0)

    ways: dict[str, Callable[[], object]] = {"bytes": as_bytes, "decoded": as_decoded}
    best = dict.fromkeys(ways, float("inf"))
    for _ in range(7):
        for name, way in ways.items():
            started = time.perf_counter()
            for _ in range(BATCH):
                way()
            best[name] = min(best[name], (time.perf_counter() - started) / BATCH * 1e6)
    for name, micros in best.items():
        print(f"{name:8} {micros:6.2f} µs a tasks/get")
    saved, ratio = best["bytes"] - best["decoded"], best["decoded"] / best["bytes"]
    print(f"saved    {saved:6.2f} µs ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
