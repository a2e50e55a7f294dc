"""Can one core's load generator drive the fastest server? wrk and h2load, side by side.

    python benchmarks/generators.py [--seconds S] [--rounds N]   # prints JSON

The check of `compare.py` (a fixed-answer server must reach its figure with wrk under 0.9 of
its core) fails on the uvloop ceiling on two cores. This asks whether that is wrk's doing:
the same `tasks/get` request, on the same 16 keep-alive connections with one request in
flight on each, from wrk and from h2load (nghttp2's C generator, `--h1`; Debian:
nghttp2-client), in alternate rounds against the uvloop + httptools fixed-answer server
pinned to one core, the generator on the other. For each: its best requests/s and the
share of its core it used then. If both read near 1 at the same rate, the two ends do
about the same work a request (a read, a parse, a write), and no generator on one core
can show a fixed-answer server's limit: only a third core (or pipelined requests, which
change what every server is measured on) would.
"""

# ruff: noqa: E402  (the imports must follow the sys.path fix below)
from __future__ import annotations

import os
import sys

# Run as a script, this file's folder comes first on sys.path, where the benchmark `http.py`
# would stand in for the standard library's `http`: take the folder off first.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]

import argparse
import importlib.util
import json
import re
import shutil
import tempfile
from typing import Any


def _compare_module() -> Any:
    spec = importlib.util.spec_from_file_location("compare", os.path.join(_HERE, "compare.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


compare = _compare_module()
loadgen = compare.loadgen

_FINISHED = re.compile(r"finished in [^,]+, ([\d.]+) req/s")
_REQUESTS = re.compile(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded")
_STATUS = re.compile(r"status codes: (\d+) 2xx")


def h2load_requests(port: int, data: bytes, warmup: float, seconds: float) -> dict[str, Any]:
    """`data` (an HTTP/1.1 request) again and again from h2load on `loadgen.CONNECTIONS`
    connections, one thread: requests/s, the answers that failed or were not 2xx, and
    `load_cpu_share`, the share of its core h2load used."""
    _, path, fields, body = loadgen.request_parts(data)
    url = f"http://127.0.0.1:{port}{path.decode()}"
    headers: list[str] = []
    for name, value in fields:
        headers += ["-H", f"{name.decode()}: {value.decode()}"]
    with tempfile.NamedTemporaryFile("wb", suffix=".json") as posted:
        posted.write(body)
        posted.flush()
        command = ["h2load", "--h1", f"-c{loadgen.CONNECTIONS}", "-t1",
                   f"-D{max(1, round(seconds))}", f"--warm-up-time={max(1, round(warmup))}",
                   "-d", posted.name, *headers, url]  # fmt: skip
        done, share = loadgen.measured_run(command)
    finished, requests = _FINISHED.search(done.stdout), _REQUESTS.search(done.stdout)
    statuses = _STATUS.search(done.stdout)
    if done.returncode != 0 or not finished or not requests or not statuses:
        raise RuntimeError(f"h2load failed ({done.returncode}): {done.stdout} {done.stderr}")
    total, succeeded, ok = int(requests[1]), int(requests[3]), int(statuses[1])
    return {
        "per_second": float(finished[1]),
        "count": total,
        "failures": total - min(succeeded, ok),
        "load_cpu_share": share,
        "generator": "h2load",
    }


def compare_generators(seconds: float, rounds: int) -> dict[str, Any]:
    """Alternate rounds of wrk and h2load against the uvloop ceiling: each one's best."""
    if compare._can_pin():
        os.sched_setaffinity(0, {compare.LOAD_CPU})
    ceiling = next(s for s in compare.http_servers(None) if s.name == compare.CEILING_UVLOOP)
    generators = {
        "wrk": loadgen.wrk_requests,
        "h2load": h2load_requests,
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in generators}
    with ceiling.started() as running:
        poll = loadgen.task_poll(running.port, "tsk_fixed")  # the ceiling answers any id
        for _ in range(rounds):
            for name, drive in generators.items():
                runs[name].append(drive(running.port, poll, 1.0, seconds))
    found: dict[str, Any] = {}
    for name, results in runs.items():
        best = max(results, key=lambda run: run["per_second"])
        found[name] = {
            "per_second": round(best["per_second"], 1),
            "load_cpu_share": round(best["load_cpu_share"], 3),
            "failures": best["failures"],
            "every_run": [
                [round(run["per_second"], 1), round(run["load_cpu_share"], 3)] for run in results
            ],
        }
    return {"server": compare.CEILING_UVLOOP, "workload": "tasks/get", "generators": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="each measured run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each generator")
    args = parser.parse_args()
    missing = [tool for tool in ("wrk", "h2load") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"needs {' and '.join(missing)} (Debian: apt-get install wrk nghttp2-client)")
    print(json.dumps(compare_generators(args.seconds, args.rounds), indent=1))


if __name__ == "__main__":
    main()
