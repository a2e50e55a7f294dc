"""`mcp-tasks serve --workers N`: N processes serving one listening socket, and the
supervisor that keeps them.

Theory of operation
-------------------
A Python process serves on one core. For more, the process the command started becomes a
supervisor: it binds the address once (port 0 picks one port for all) and starts N
workers, each `python -m mcp_tasks.cli` with the same command line and environment, told by
`_MCP_TASKS_WORKER` which descriptors it inherits: the listening sockets, and its end of a
socket pair, its channel to the supervisor. A worker loads the server, opens the store and
runs its own event loop (`--loop`), nothing shared with the supervisor but descriptors; it
accepts on the shared sockets. One accept queue for all: the kernel hands a connection to a
worker waiting for one, and a worker that stops takes no queued connection with it. A
worker says `ready` on its channel once it serves; when the channel ends (the supervisor is
gone, even killed), the worker stops as on SIGTERM.

A tasks/get may land on any worker, so the tasks are where every worker finds them: in
Redis, or in a SQLite file each worker opens shared (leases that lapse, signals through the
file). The memory store is one process's.

The supervisor waits on one selector: its signals (`signal.set_wakeup_fd`) and the
workers' channels. What it does:

    a worker exits, unasked    another starts in its slot; past `RESTART_LIMIT` such exits
                               within `RESTART_WINDOW_SECONDS` (a crash loop), all stop, exit 1
    SIGTERM, SIGINT            SIGTERM to each worker: it drains within the server's shutdown
                               grace; a second signal passes on a second SIGTERM: at once
    SIGHUP                     N new workers; as each is ready, one old one gets SIGTERM, so
                               the port never stops answering

Workers run in their own process group: Ctrl-C in a terminal reaches the supervisor alone,
which passes it on once (under systemd, `KillMode=mixed` does the same).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

import anyio
import click

from ._serving import say

__all__ = ["MAX_WORKERS", "Seat", "refuse_unless_shareable", "supervise", "take_seat"]

MAX_WORKERS: Final = 64
"""The most `--workers`: a worker is a whole process (its own memory, store connections and
threads) that serves one core, so more than the cores only contend; the bound stops a typo
(`--workers 1000`) before it starts a thousand processes."""
RESTART_LIMIT: Final = 10
RESTART_WINDOW_SECONDS: Final = 60.0
"""More unasked exits than `RESTART_LIMIT` within this window is a crash loop: give up."""
SHARED_SCHEMES: Final = frozenset({"redis", "rediss", "unix", "sqlite"})
"""The stores (by URL scheme) that several processes share: Redis, and SQLite (each worker
opens the file shared)."""
_VARIABLE: Final = "_MCP_TASKS_WORKER"
_READY: Final = b"ready\n"
_TICK_SECONDS: Final = 1.0
_BACKLOG: Final = 65535  # the kernel caps it (somaxconn)


def refuse_unless_shareable(*, stdio: bool, store_url: str | None, record: bool) -> None:
    """Raise `click.UsageError` unless N workers can serve these options."""
    if stdio:
        raise click.UsageError("--workers is for --http: stdio has one stdin, read by one process.")
    scheme = urlsplit(store_url or "memory://").scheme
    if scheme in ("", "memory"):
        raise click.UsageError(
            "--workers needs a store the workers share: with the memory store each worker "
            "would hold its own tasks, and a tasks/get answered by another worker would not "
            "find the task. Add --store sqlite:///tasks.db or --store redis://HOST:6379/0, or "
            "serve with one worker."
        )
    if scheme not in SHARED_SCHEMES:
        raise click.UsageError(
            "--workers needs a store the workers share: redis://HOST:6379/0 or sqlite:///path.db."
        )
    if record:
        raise click.UsageError(
            "--record writes one journal: with --workers every worker would write the same "
            "file. Record with one worker."
        )
    if sys.argv[1:2] != ["serve"]:
        raise click.UsageError(
            "--workers starts each worker with this command line again: run it as "
            "`mcp-tasks serve ...` or `python -m mcp_tasks.cli serve ...`."
        )


# --- a worker -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seat:
    """What a worker is handed by its supervisor: the listening sockets it serves, and its
    channel (say `ready`; the end of it means the supervisor is gone)."""

    sockets: tuple[socket.socket, ...]
    channel: socket.socket

    def ready(self) -> None:
        self.channel.sendall(_READY)

    async def watch_supervisor(self) -> None:
        """Wait for the supervisor to be gone, then stop as on SIGTERM (gracefully)."""
        while True:
            await anyio.wait_readable(self.channel)
            try:
                if not self.channel.recv(64):
                    break
            except BlockingIOError:
                continue
            except OSError:
                break
        os.kill(os.getpid(), signal.SIGTERM)


def take_seat() -> Seat | None:
    """This process's seat, if a supervisor started it as a worker; None otherwise. The
    variable is taken out of the environment: a process a tool starts is no worker."""
    value = os.environ.pop(_VARIABLE, None)
    if value is None:
        return None
    channel, *listening = (int(part) for part in value.split())
    return Seat(tuple(socket.socket(fileno=fd) for fd in listening), socket.socket(fileno=channel))


# --- the supervisor -------------------------------------------------------------------------


def bind(host: str, port: int) -> list[socket.socket]:
    """A listening socket on each address `host` resolves to, as `serve_http` binds them:
    with port 0, the first picks the port and the others take the same."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[int, str]] = set()
    try:
        for family, kind, protocol, _, address in found:
            if (family, str(address[0])) in seen:
                continue
            seen.add((family, str(address[0])))
            listening = socket.socket(family, kind, protocol)
            sockets.append(listening)
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listening.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            chosen = sockets[0].getsockname()[1] if len(sockets) > 1 else port
            listening.bind((address[0], chosen, *address[2:]))
            listening.listen(_BACKLOG)
    except BaseException:
        for listening in sockets:
            listening.close()
        raise
    return sockets


@dataclass
class _Worker:
    slot: int
    generation: int
    process: subprocess.Popen[bytes]
    channel: socket.socket
    ready: bool = False
    stopping: bool = False

    @property
    def name(self) -> str:
        return f"worker {self.slot} (pid {self.process.pid})"

    def stop(self) -> None:
        """SIGTERM: the first drains within the server's shutdown grace, a second stops
        it at once."""
        self.stopping = True
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)


@dataclass
class _Supervisor:
    command: list[str]
    sockets: Sequence[socket.socket]
    count: int
    announce: Callable[[], None]
    """Said once, when the first worker serves."""
    workers: dict[int, _Worker] = field(default_factory=dict)
    generation: int = 0
    stops: int = 0
    announced: bool = False
    unasked_exits: deque[float] = field(default_factory=deque)
    failure: str | None = None
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)

    def run(self) -> None:
        with self._signals() as wakeup:
            self.selector.register(wakeup, selectors.EVENT_READ, None)
            for slot in range(1, self.count + 1):
                self._start(slot)
            while self.workers:
                for key, _ in self.selector.select(_TICK_SECONDS):
                    if key.data is None:
                        self._on_signals(wakeup.recv(256))
                    else:
                        self._on_channel(key.data)
                self._reap()

    @contextlib.contextmanager
    def _signals(self) -> Iterator[socket.socket]:
        """Signals as bytes on a socket (their numbers), for the selector."""
        wakeup, wakeup_write = socket.socketpair()
        wakeup.setblocking(False)
        wakeup_write.setblocking(False)
        numbers = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD)
        before = {number: signal.signal(number, lambda *_: None) for number in numbers}
        previous = signal.set_wakeup_fd(wakeup_write.fileno(), warn_on_full_buffer=False)
        try:
            yield wakeup
        finally:
            signal.set_wakeup_fd(previous)
            for number, handler in before.items():
                signal.signal(number, handler)
            wakeup.close()
            wakeup_write.close()
            self.selector.close()

    def _start(self, slot: int) -> None:
        ours, theirs = socket.socketpair()
        listening = [each.fileno() for each in self.sockets]
        seat = " ".join(str(fd) for fd in (theirs.fileno(), *listening))
        try:
            process = subprocess.Popen(
                self.command,
                env={**os.environ, _VARIABLE: seat},
                pass_fds=(theirs.fileno(), *listening),
                stdin=subprocess.DEVNULL,
                process_group=0,  # Ctrl-C reaches the supervisor alone
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        worker = _Worker(slot, self.generation, process, ours)
        self.workers[process.pid] = worker
        self.selector.register(ours, selectors.EVENT_READ, worker)
        say(f"{worker.name} started")

    def _on_signals(self, numbers: bytes) -> None:
        for number in numbers:
            if number in (signal.SIGINT, signal.SIGTERM):
                self._stop_all(signal.Signals(number).name)
            elif number == signal.SIGHUP and not self.stops:
                self.generation += 1
                say(f"SIGHUP: {self.count} new worker(s); the old ones stop as they serve")
                for slot in range(1, self.count + 1):
                    self._start(slot)

    def _stop_all(self, reason: str) -> None:
        self.stops += 1
        if self.stops == 1:
            say(f"{reason}: stopping the workers gracefully (again to stop at once)")
        else:
            say(f"{reason}: stopping the workers at once")
        for worker in self.workers.values():
            if self.stops > 1 or not worker.stopping:
                worker.stop()

    def _on_channel(self, worker: _Worker) -> None:
        try:
            said = worker.channel.recv(64)
        except BlockingIOError:
            return
        except OSError:
            said = b""
        if not said:  # the worker is gone: `_reap` will see it
            self.selector.unregister(worker.channel)
            return
        if worker.ready:
            return
        worker.ready = True
        if not self.announced:
            self.announced = True
            self.announce()
        say(f"{worker.name} serving")
        if worker.generation == self.generation:
            old = [w for w in self.workers.values() if w.generation < self.generation]
            if retiring := next((w for w in old if not w.stopping), None):
                say(f"{retiring.name} stopping: replaced")
                retiring.stop()

    def _reap(self) -> None:
        for pid, worker in list(self.workers.items()):
            code = worker.process.poll()
            if code is None:
                continue
            del self.workers[pid]
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(worker.channel)
            worker.channel.close()
            if worker.stopping or worker.generation < self.generation or self.stops:
                say(f"{worker.name} stopped" + ("" if code == 0 else f" ({_exit(code)})"))
            else:
                self._restart(worker, code)

    def _restart(self, worker: _Worker, code: int) -> None:
        now = time.monotonic()
        self.unasked_exits.append(now)
        while self.unasked_exits[0] < now - RESTART_WINDOW_SECONDS:
            self.unasked_exits.popleft()
        if len(self.unasked_exits) > RESTART_LIMIT:
            say(f"{worker.name} exited ({_exit(code)})")
            self.failure = (
                f"workers exited unasked {len(self.unasked_exits)} times within "
                f"{RESTART_WINDOW_SECONDS:g} s: a crash loop; see their errors above"
            )
            self._stop_all("giving up")
            return
        say(f"{worker.name} exited ({_exit(code)}): starting another")
        self._start(worker.slot)


def _exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def supervise(count: int, host: str, port: int, announce: Callable[[int], None]) -> None:
    """Serve with `count` worker processes on one listening socket until SIGTERM or SIGINT
    (the theory of operation above); `announce(port)` once the first one serves. Raises
    `click.ClickException` on a crash loop, or when the address cannot be bound."""
    try:
        sockets = bind(host, port)
    except OSError as error:
        raise click.ClickException(f"cannot serve: {error}") from None
    bound = int(sockets[0].getsockname()[1])
    command = [sys.executable, "-m", "mcp_tasks.cli", *sys.argv[1:]]
    supervisor = _Supervisor(command, sockets, count, lambda: announce(bound))
    cores = os.cpu_count() or 1
    if count > cores:
        say(f"{count} workers on {cores} core(s): more than one a core only adds contention")
    try:
        supervisor.run()
    finally:
        for listening in sockets:
            listening.close()
    if supervisor.failure is not None:
        raise click.ClickException(supervisor.failure)
