"""The TypeScript SDK server on Node as a peer: the synchronous `greet` over Streamable HTTP
(it has no tasks), measured by wrk as `compare.py` measures the others.

The server is `peers/ts_server.mjs`, pinned to core 0, on the SDK that `tests/interop/npm/install`
puts into tests/interop/npm/node_modules, run by the node that script recorded (Node 22), or
else the `node` on PATH. Two SDK lines, each with the request of its wire:

* `v1`: `@modelcontextprotocol/sdk` (1.32.2, pinned in package.json), which speaks up to
  2025-11-25: `loadgen.legacy_greet_call` with no session (the server is stateless, and a
  `tools/call` needs no `initialize` there), `MCP-Protocol-Version: 2025-11-25`, no `_meta`;
* `v2`: `@modelcontextprotocol/server` (2.3.1, pinned in tests/interop/npm/package.json),
  which speaks 2026-07-28: `loadgen.greet_call`, the very request ours is measured with.

Both answer plain JSON (`enableJsonResponse` / `responseMode: 'json'`) and keep no session.

    python benchmarks/ts_peer.py                   # both lines, JSON on stdout
    python benchmarks/ts_peer.py --sdk v2 --ours   # v2 and mcp_tasks, rounds alternating
"""

# ruff: noqa: E402  (the imports must follow the sys.path fix below)
from __future__ import annotations

import os
import sys

# Run as a script, this file's folder comes first on sys.path, and the benchmark `http.py`
# there would shadow the standard library's `http` (as in compare.py).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]

import argparse
import contextlib
import importlib.util
import json
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(_HERE)
NPM = HERE.parent / "tests" / "interop" / "npm"
SERVER = HERE / "peers" / "ts_server.mjs"
SERVER_CPU, LOAD_CPU = 0, 1
PACKAGES = {
    "v1": ("@modelcontextprotocol/sdk",),
    "v2": ("@modelcontextprotocol/server", "@hono/node-server"),
}
"""The npm packages each SDK line needs (zod besides)."""


def _load(name: str) -> ModuleType:
    """A sibling module by path, as `compare.py` loads them (this folder has an `http.py`)."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


loadgen = _load("loadgen")


def _can_pin() -> bool:
    return hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2


def node() -> str:
    """The node recorded by tests/interop/npm/install, else the one on PATH."""
    recorded = NPM / "node_modules" / ".node"
    if recorded.is_file():
        path = recorded.read_text().strip()
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("node")
    if found is None:
        raise RuntimeError("no node: install Node 22 (conformance/node22) or put node on PATH")
    return found


def package_version(name: str) -> str:
    manifest = NPM / "node_modules" / name / "package.json"
    if not manifest.is_file():
        raise RuntimeError(
            f"no npm package {name} in {NPM / 'node_modules'}: run {NPM / 'install'}"
        )
    version: str = json.loads(manifest.read_text())["version"]
    return version


def request(sdk: str, port: int) -> bytes:
    """The greet call of the wire `sdk` speaks."""
    if sdk == "v1":
        return loadgen.legacy_greet_call(port, None)  # type: ignore[no-any-return]
    return loadgen.greet_call(port)  # type: ignore[no-any-return]


@contextlib.contextmanager
def started(sdk: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The Node server of `sdk` ("v1" or "v2") on core 0: its process and port."""
    if sdk not in PACKAGES:
        raise ValueError(f"sdk is v1 or v2, not {sdk!r}")
    for name in (*PACKAGES[sdk], "zod"):
        package_version(name)
    command = [node(), str(SERVER), sdk, "0"]
    if _can_pin():
        command = ["taskset", "-c", str(SERVER_CPU), *command]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stderr is not None
        line = process.stdout.readline().decode()
        if not line.startswith("PORT "):
            process.kill()
            error = process.stderr.read().decode(errors="replace").strip()
            raise RuntimeError(f"the TS SDK server ({sdk}) did not start: {line!r} {error}")
        yield process, int(line.split()[1])
    finally:
        loadgen.stop(process)


def _labelled(result: dict[str, Any], sdk: str) -> dict[str, Any]:
    package = PACKAGES[sdk][0]
    return {**result, "server": f"{package} {package_version(package)}",
            "protocol": "2025-11-25" if sdk == "v1" else loadgen.VERSION}  # fmt: skip


def ts_greet(
    warmup: float, seconds: float, log: Callable[[str], None], sdk: str = "v1"
) -> dict[str, Any]:
    """Greet calls/s of the TS SDK server (`sdk`: "v1" or "v2") by `loadgen.wrk_requests`:
    its figures, with the package and protocol version. The caller pins itself (and so wrk)
    to core 1, as `compare.py` does."""
    with started(sdk) as (_, port):
        result = _labelled(loadgen.wrk_requests(port, request(sdk, port), warmup, seconds), sdk)
    log(f"sync tool calls (HTTP): TS SDK {sdk} {result['per_second']:,.0f}/s")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sdk", choices=sorted(PACKAGES), action="append")
    parser.add_argument("--ours", action="store_true", help="mcp_tasks too, rounds alternating")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3, help="the best run of each counts")
    args = parser.parse_args(argv)
    if _can_pin():
        os.sched_setaffinity(0, {LOAD_CPU})

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    sdks = args.sdk or sorted(PACKAGES)
    figures: dict[str, Any] = {
        "node": subprocess.check_output([node(), "--version"]).decode().strip()
    }
    with contextlib.ExitStack() as stack:
        servers: dict[str, tuple[Any, int, bytes]] = {}
        for sdk in sdks:
            process, port = stack.enter_context(started(sdk))
            servers[f"TS SDK {sdk}"] = (process, port, request(sdk, port))
        if args.ours:
            compare = _load("compare")
            ours = next(s for s in compare.http_servers(None) if s.name == "mcp_tasks")
            running = stack.enter_context(ours.started())
            servers["mcp_tasks"] = (running.process, running.port, loadgen.greet_call(running.port))
        for process, _, _ in servers.values():
            process.send_signal(signal.SIGSTOP)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        for round_ in range(args.rounds):
            for name, (process, port, data) in servers.items():
                process.send_signal(signal.SIGCONT)
                try:
                    result = loadgen.wrk_requests(port, data, args.warmup, args.seconds)
                finally:
                    process.send_signal(signal.SIGSTOP)
                runs[name].append(result)
                log(f"round {round_ + 1}: {name} {result['per_second']:,.0f}/s")
    best = {name: max(results, key=lambda r: r["per_second"]) for name, results in runs.items()}
    for sdk in sdks:
        best[f"TS SDK {sdk}"] = _labelled(best[f"TS SDK {sdk}"], sdk)
    figures["sync tool calls (HTTP)"] = best
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
