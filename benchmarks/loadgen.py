"""The load generators of `compare.py`: one for every server, so the same client measures all.

Plain standard library on raw sockets and pipes (a `selectors` loop): cheap enough that the
server is the bottleneck, and independent of every library being measured. Each generator
keeps a fixed number of requests in flight (one per keep-alive connection over HTTP, a
window of lines over stdio), counts the answers completed inside a window that starts after
a warm-up, and checks every answer.

* `fixed_requests`: one pre-built request, again and again (tasks/get, tools/call);
* `fill`: exactly `count` requests (storing that many tasks), then stop;
* `stdio_requests`: one pre-built line into a child process's stdin, answers off its stdout.

Over HTTP the timed loads of `compare.py` are driven by wrk, a C load generator, from here:
`wrk_requests` (one request again and again) and `wrk_lives` (create a task, poll
`tasks/get` at once until it is `completed`, start over).
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any

CONNECTIONS = 16
VERSION = "2026-07-28"
TASKS_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
}
_RECEIVE_BYTES = 262144


def message(method: str, params: dict[str, Any], request_id: int = 1) -> bytes:
    """One JSON-RPC request of the 2026-07-28 wire: `_meta` names the version and says the
    client holds tasks."""
    body = {"jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**params, "_meta": TASKS_META}}  # fmt: skip
    return json.dumps(body, separators=(",", ":")).encode()


LEGACY_OPENING = (
    json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "loadgen", "version": "1"}}}).encode()
    + b"\n" + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
)  # fmt: skip
"""What a client of the 2025 revisions sends first over stdio: `initialize`, then
`notifications/initialized` (the process is its session from then on)."""


def legacy_message(method: str, params: dict[str, Any], request_id: int | None = 1) -> bytes:
    """One JSON-RPC request as a 2025 client sends it in its session: no `_meta` (a
    notification when `request_id` is None)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if request_id is None:
        del body["id"]
    body["params"] = params
    return json.dumps(body, separators=(",", ":")).encode()


def post(port: int, method: str, name: str, params: dict[str, Any]) -> bytes:
    """One POST with every header a strict peer asks for: `Host` with the port (the official
    SDK answers 421 without it), an `Accept` naming both JSON and SSE (406 otherwise), the
    version header and `Mcp-Method` / `Mcp-Name`."""
    body = message(method, params)
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {VERSION}\r\n"
        f"Mcp-Method: {method}\r\nMcp-Name: {name}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def legacy_post(
    port: int,
    method: str,
    params: dict[str, Any],
    session_id: str | None,
    request_id: int | None = 1,
) -> bytes:
    """One POST as a 2025-11-25 client sends it in its session: no `_meta`, no `Mcp-Method`,
    the session's id (when the server gave one) and version in their headers."""
    body = legacy_message(method, params, request_id)
    session = "" if session_id is None else f"Mcp-Session-Id: {session_id}\r\n"
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        f"{session}Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def legacy_greet_call(port: int, session_id: str | None) -> bytes:
    greet = {"name": "greet", "arguments": {"name": "bench"}}
    return legacy_post(port, "tools/call", greet, session_id)


def greet_call(port: int) -> bytes:
    return post(port, "tools/call", "greet", {"name": "greet", "arguments": {"name": "bench"}})


def task_creation(port: int) -> bytes:
    """A call of `slow_compute` with no work: the server answers with a task handle."""
    params = {"name": "slow_compute", "arguments": {"seconds": 0, "label": "bench"}}
    return post(port, "tools/call", "slow_compute", params)


def task_poll(port: int, task_id: str) -> bytes:
    return post(port, "tasks/get", task_id, {"taskId": task_id})


def legacy_task_creation(port: int, session_id: str | None) -> bytes:
    """`task_creation` as a 2025-11-25 client asks it: `params.task` (the tasks utility)."""
    params = {"name": "slow_compute", "arguments": {"seconds": 0, "label": "bench"}, "task": {}}
    return legacy_post(port, "tools/call", params, session_id)


def legacy_task_poll(port: int, task_id: str, session_id: str | None) -> bytes:
    return legacy_post(port, "tasks/get", {"taskId": task_id}, session_id)


def _split_answer(buffer: bytearray) -> tuple[int, int]:
    """(where the body starts, where the answer ends) of the first whole answer in `buffer`,
    or (0, 0) while it is not all there."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return 0, 0
    head = bytes(buffer[:end]).lower()
    start = head.find(b"content-length:")
    if start < 0:
        raise RuntimeError(f"an answer without Content-Length: {head[:300]!r}")
    line_end = head.find(b"\r\n", start)
    length = int(head[start + 15 : line_end if line_end >= 0 else None])
    total = end + 4 + length
    return (end + 4, total) if len(buffer) >= total else (0, 0)


_WRK_SCRIPT = """
wrk.method = %(method)s
wrk.path = %(path)s
wrk.body = %(body)s
%(headers)s
function done(summary, latency, requests)
  local failed = summary.errors.status + summary.errors.read + summary.errors.write
    + summary.errors.timeout
  io.write(string.format("MCP_FIGURES %%d %%d %%d %%d %%d\\n", summary.requests, failed,
    summary.duration, latency:percentile(50), latency:percentile(99)))
end
"""
"""No `response` function: handing each answer to Lua would cost wrk as much as the fastest
servers spend on it. wrk counts the answers that are not 2xx or 3xx itself; the body of the
same request is checked once before (`wrk_requests`)."""


def _lua_string(data: bytes) -> str:
    return "".join(f"\\{byte:03d}" if byte < 32 or byte in b'"\\' or byte > 126 else chr(byte)
                   for byte in data).join('""')  # fmt: skip


def _checked_once(port: int, data: bytes) -> None:
    """One exchange of `data` on a connection of its own: a 2xx without a JSON-RPC error."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        buffer = bytearray()
        while not (split := _split_answer(buffer))[1]:
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("the server closed the connection before answering")
            buffer += chunk
    status = int(buffer[9:12])
    if status // 100 != 2 or b'"error"' in buffer[split[0] : split[1]]:
        raise RuntimeError(f"the request is refused: {bytes(buffer[:300])!r}")


def request_parts(data: bytes) -> tuple[bytes, bytes, list[tuple[bytes, bytes]], bytes]:
    """An HTTP/1.1 request's method, path, headers and body, for a generator that writes the
    request itself: without `Content-Length` and `Host`, which it writes on its own."""
    head, _, body = data.partition(b"\r\n\r\n")
    request_line, *header_lines = head.split(b"\r\n")
    method, path, _ = request_line.split(b" ", 2)
    fields = [
        (name, value.strip())
        for name, _, value in (line.partition(b":") for line in header_lines)
        if name.lower() not in (b"content-length", b"host")
    ]
    return method, path, fields, body


def measured_run(command: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """`command` run to its end, its output captured: what it did, and the share of a core
    it used meanwhile (its CPU time over the wall time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done, used / wall


def wrk_requests(port: int, data: bytes, warmup: float, seconds: float) -> dict[str, Any]:
    """`fixed_requests` measured by wrk (a C load generator, `CONNECTIONS` connections on
    one thread): requests/s, latency, the answers that were not 2xx or 3xx (or failed to
    arrive), and `load_cpu_share`, the share of its core wrk used (near 1: wrk, not the
    server, may be what limits the figure). The request is checked once first."""
    _checked_once(port, data)
    method, path, fields, body = request_parts(data)
    headers = "\n".join(
        f"wrk.headers[{_lua_string(name)}] = {_lua_string(value)}" for name, value in fields
    )
    script = _WRK_SCRIPT % {"method": _lua_string(method), "path": _lua_string(path),
                            "body": _lua_string(body), "headers": headers}  # fmt: skip
    out, share = _run_wrk(script, f"http://127.0.0.1:{port}{path.decode()}", 1, warmup, seconds)
    line = next(line for line in out.splitlines() if line.startswith("MCP_FIGURES "))
    return _wrk_figures([int(part) for part in line.split()[1:]], share)


_WRK_LIVES_SCRIPT = """
local create = %(create)s
local head_start, head_end, body_start, body_end = %(head_start)s, %(head_end)s,
  %(body_start)s, %(body_end)s
local next_ids, first, last = {}, 1, 0
lives, polls, failures = 0, 0, 0

function request()
  if first > last then
    return create
  end
  local task_id = next_ids[first]
  next_ids[first] = nil
  first = first + 1
  polls = polls + 1
  local body = body_start .. task_id .. body_end
  return head_start .. task_id .. head_end .. #body .. "\\r\\n\\r\\n" .. body
end

function response(status, headers, body)
  if status < 200 or status > 299 or body:find('"error"', 1, true) then
    failures = failures + 1
  elseif body:find('"completed"', 1, true) then
    lives = lives + 1
  else
    local task_id = body:match('"taskId"%%s*:%%s*"([^"]+)"')
    if task_id == nil then
      failures = failures + 1
    else
      last = last + 1
      next_ids[last] = task_id
    end
  end
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function done(summary, latency, requests)
  local all_lives, all_polls, failed = 0, 0, summary.errors.status + summary.errors.read
    + summary.errors.write + summary.errors.timeout
  for _, thread in ipairs(threads) do
    all_lives = all_lives + thread:get("lives")
    all_polls = all_polls + thread:get("polls")
    failed = failed + thread:get("failures")
  end
  io.write(string.format("MCP_LIVES %%d %%d %%d %%d %%d %%d\\n", all_lives, all_polls, failed,
    summary.duration, latency:percentile(50), latency:percentile(99)))
end
"""
"""One wrk thread for the 16 connections (16 threads on the generator's one core cost it
a switch an answer). Each answer decides the next request, which goes out on whichever
connection is free next: the poll of the task it names, unless it says `completed` (or
failed): then a new task's creation (as when nothing is queued). So 16 lives are under
way at any time, each with one request in flight; wrk times requests, not lives: the
latencies are of a life's requests."""

_ID_MARK = "MCPBENCHTASKIDMARK"


def wrk_lives(port: int, warmup: float, seconds: float) -> dict[str, Any]:
    """Whole task lives driven by wrk (one thread, `CONNECTIONS` connections, reading the
    answers in Lua): create a task with no work, poll it at once until it is
    `completed`, then the next. Lives/s, the latency of a life's requests, the failed
    answers, the polls a life took on average, and wrk's share of its core."""
    create = task_creation(port)
    _checked_once(port, create)
    poll = task_poll(port, _ID_MARK)
    head, _, body = poll.partition(b"\r\n\r\n")
    head = head[: head.index(b"Content-Length:") + len(b"Content-Length:")] + b" "
    mark = _ID_MARK.encode()
    head_start, head_end = head.split(mark)
    body_start, body_end = body.split(mark)
    script = _WRK_LIVES_SCRIPT % {
        "create": _lua_string(create),
        "head_start": _lua_string(head_start),
        "head_end": _lua_string(head_end),
        "body_start": _lua_string(body_start),
        "body_end": _lua_string(body_end),
    }
    url = f"http://127.0.0.1:{port}/mcp"
    out, share = _run_wrk(script, url, 1, warmup, seconds)
    line = next(line for line in out.splitlines() if line.startswith("MCP_LIVES "))
    lives, polls, *rest = (int(part) for part in line.split()[1:])
    figures = _wrk_figures([lives, *rest], share)
    figures["polls_per_life"] = polls / lives if lives else None
    return figures


def _wrk_figures(printed: list[int], share: float) -> dict[str, Any]:
    """What wrk's `done` printed (count, failures, duration, p50 and p99 in us), as the
    figures of a run, with wrk's `share` of its core."""
    count, failures, duration_us, p50_us, p99_us = printed
    return {
        "count": count,
        "failures": failures,
        "per_second": count / (duration_us / 1e6),
        "p50_ms": p50_us / 1000,
        "p99_ms": p99_us / 1000,
        "load_cpu_share": share,
        "generator": "wrk",
    }


def _run_wrk(
    script: str, url: str, threads: int, warmup: float, seconds: float
) -> tuple[str, float]:
    """wrk with `script` on `CONNECTIONS` connections over `threads` threads: a warm-up
    run (when it is half a second or more: wrk counts whole seconds), then the measured
    one. Its output, and the share of a core it used while measured."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as lua:
        lua.write(script)
        lua.flush()

        def run(duration: float) -> tuple[str, float]:
            command = ["wrk", f"-t{threads}", f"-c{CONNECTIONS}", f"-d{max(1, round(duration))}s",
                       "-s", lua.name, url]  # fmt: skip
            done, share = measured_run(command)
            if done.returncode != 0 or "MCP_" not in done.stdout:
                raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout} {done.stderr}")
            return done.stdout, share

        if warmup >= 0.5:
            run(warmup)
        return run(seconds)


def _summary(latencies: list[float], seconds: float, failures: int) -> dict[str, Any]:
    latencies.sort()
    count = len(latencies)
    return {
        "count": count,
        "failures": failures,
        "per_second": count / seconds,
        "p50_ms": latencies[count // 2] * 1000 if count else None,
        "p99_ms": latencies[min(count - 1, int(count * 0.99))] * 1000 if count else None,
    }


class _Connections:
    """`CONNECTIONS` keep-alive sockets to one port, each with a receive buffer and the time
    its request in flight was sent."""

    def __init__(self, port: int, connections: int) -> None:
        self.selector = selectors.DefaultSelector()
        self.sockets: list[socket.socket] = []
        for _ in range(connections):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            self.sockets.append(sock)
            self.selector.register(sock, selectors.EVENT_READ, [bytearray(), 0.0, None])

    def send(self, sock: socket.socket, data: bytes) -> None:
        sock.sendall(data)  # small requests: the kernel takes them whole
        self.selector.get_key(sock).data[1] = time.perf_counter()

    def answers(self, timeout: float) -> Any:
        """(socket, its state, status line ok, body) for every answer that came in."""
        for key, _ in self.selector.select(timeout=timeout):
            sock, state = key.fileobj, key.data
            assert isinstance(sock, socket.socket)
            received = sock.recv(_RECEIVE_BYTES)
            if not received:
                raise RuntimeError("the server closed a connection")
            buffer = state[0]
            buffer += received
            while True:
                body_start, end = _split_answer(buffer)
                if not end:
                    break
                ok = buffer.startswith(b"HTTP/1.1 200 ")
                body = bytes(buffer[body_start:end])
                del buffer[:end]
                yield sock, state, ok, body

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.selector.close()


def fixed_requests(
    port: int, data: bytes, warmup: float, seconds: float, connections: int = CONNECTIONS
) -> dict[str, Any]:
    """`data` on every connection, sent again as soon as its answer is in; requests/s,
    latency from writing a request to reading the end of its answer."""
    pool = _Connections(port, connections)
    latencies: list[float] = []
    failures = 0
    window_start = time.perf_counter() + warmup
    window_end = window_start + seconds
    for sock in pool.sockets:
        pool.send(sock, data)
    while (now := time.perf_counter()) < window_end:
        for sock, state, ok, body in pool.answers(1.0):
            now = time.perf_counter()
            if window_start <= now < window_end:
                latencies.append(now - state[1])
                failures += not ok or b'"error"' in body
            pool.send(sock, data)
    pool.close()
    return _summary(latencies, seconds, failures)


def fill(port: int, data: bytes, count: int, limit_seconds: float) -> dict[str, Any]:
    """Exactly `count` answers to `data` (each a task stored), or fewer if `limit_seconds`
    runs out first; how many, how fast, every failure, and the last task id answered."""
    pool = _Connections(port, min(CONNECTIONS, count))
    sent = done = failures = 0
    last = b"{}"
    started = time.perf_counter()
    for sock in pool.sockets:
        pool.send(sock, data)
        sent += 1
    while done < count and time.perf_counter() - started < limit_seconds:
        for sock, _state, ok, body in pool.answers(1.0):
            done += 1
            failures += not ok or b'"error"' in body
            last = body
            if sent < count:
                pool.send(sock, data)
                sent += 1
    elapsed = time.perf_counter() - started
    pool.close()
    last_task_id = json.loads(last).get("result", {}).get("taskId")
    return {"count": done, "failures": failures, "seconds": elapsed, "per_second": done / elapsed,
            "last_task_id": last_task_id}  # fmt: skip


def stdio_requests(
    command: list[str],
    line: bytes,
    warmup: float,
    seconds: float,
    *,
    window: int = CONNECTIONS,
    prelude: bytes = b"",
) -> dict[str, Any]:
    """Start `command`, wait for its first answer, then keep `window` copies of `line` in
    flight on its stdin; answers/s off its stdout, and the CPU time the server spent on each
    (`cpu_us_per_answer`: less swayed than answers/s by whatever else the machine runs), and
    this generator's share of its core (`load_cpu_share`: near 1, it may be what limits).
    `prelude` (lines ending in a request) goes first, in place of the first `line`: a 2025
    client's `initialize`. Every answer is read before stdin closes (a server may drop what
    is in flight at end of input)."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    stdin, out_fd = process.stdin, process.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(out_fd, selectors.EVENT_READ)
    pending = bytearray()
    failures = count = in_flight = 0

    def read_lines(timeout: float) -> list[bytearray]:
        if not selector.select(timeout):
            return []
        data = os.read(out_fd, _RECEIVE_BYTES)
        if not data:
            raise RuntimeError(f"{command[-1]} closed its stdout")
        pending.extend(data)
        *lines, rest = pending.split(b"\n")
        pending[:] = rest
        return lines

    def send(copies: int, lines: bytes = b"") -> None:
        stdin.write(lines + b"\n" if lines else (line + b"\n") * copies)
        stdin.flush()

    try:
        send(1, prelude)  # the server is up once this is answered
        deadline = time.monotonic() + 60
        while not read_lines(1.0):  # the server is up once it answers
            if time.monotonic() > deadline:
                raise RuntimeError(f"no answer on stdout from {command}")
        send(window)
        window_end = (window_start := time.perf_counter() + warmup) + seconds
        cpu_at_start = None
        while (now := time.perf_counter()) < window_end:
            lines = read_lines(1.0)
            now = time.perf_counter()
            if window_start <= now < window_end:
                if cpu_at_start is None:  # the window's first answers: the server's, ours
                    cpu_at_start = cpu_seconds(process.pid), _own_cpu_seconds(), now
                count += len(lines)
                failures += sum(b'"error"' in answer for answer in lines)
            if lines:
                send(len(lines))
        cpu, share = _window_costs(process.pid, cpu_at_start)
        deadline = time.monotonic() + 30
        in_flight = window
        while in_flight and time.monotonic() < deadline:  # the tail, before closing stdin
            in_flight -= len(read_lines(1.0))
        stdin.close()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return {"count": count, "failures": failures, "per_second": count / seconds,
            "unanswered": in_flight, "load_cpu_share": share,
            "cpu_us_per_answer": cpu / count * 1e6 if cpu and count else None}  # fmt: skip


def stop(process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """End a server: resumed (it may be paused), SIGTERM, and SIGKILL past `timeout`."""
    process.send_signal(signal.SIGCONT)
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _window_costs(
    pid: int, at_start: tuple[float, float, float] | None
) -> tuple[float | None, float | None]:
    """The CPU seconds process `pid` used since `at_start` (its CPU time, this process's,
    and the clock then), and this process's share of its core meanwhile."""
    if at_start is None:
        return None, None
    cpu = cpu_seconds(pid) - at_start[0]
    return cpu, (_own_cpu_seconds() - at_start[1]) / (time.perf_counter() - at_start[2])


def _own_cpu_seconds() -> float:
    """The CPU time (user and system) this process has used so far: the generator's."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) process `pid` has used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
