"""A real redis-server for the tests, started on a free loopback port, never saved to disk.

Outside CI, a machine without `redis-server` skips the Redis tests with a message that says
how to install it; in CI (`CI` set) a missing server is a failure: `.ci/run` installs it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

INSTALL_HINT = (
    "redis-server is not installed: the Redis store tests need it "
    "(Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_redis(password: str | None = None) -> Iterator[str]:
    """Start redis-server on a free loopback port (requiring `password`, if given); yield
    its URL (with the password in it); stop it."""
    with running_redis_process(password) as (url, _):
        yield url


@contextmanager
def running_redis_process(
    password: str | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`running_redis`, with its process (to stop it with SIGSTOP, say)."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    port = free_port()
    auth = [] if password is None else ["--requirepass", password]
    process = subprocess.Popen(
        [
            binary,
            *("--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
            *auth,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith((b"+PONG", b"-NOAUTH")):
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {port}")
            time.sleep(0.02)
        userinfo = "" if password is None else f":{password}@"
        yield f"redis://{userinfo}127.0.0.1:{port}/0", process
    finally:
        process.send_signal(signal.SIGCONT)  # a test may have left it stopped
        process.terminate()
        process.wait(timeout=10)
