"""A stdio server behind a tee: what the client sends is also written to a file.

    python stdio_tee.py RECORD CMD ARG...

Spawns CMD, copies our stdin to its stdin and its stdout to ours, line by line, and appends
each line the client sent to RECORD (its stderr is left as it is). So a test sees what a
client that spawns its own server (the MCP Inspector) put on the wire, e.g. which
`initialize` it opened with. Ends when the server ends; closing our stdin closes the server's.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import IO


def relay_requests(record: str, source: IO[bytes], server: IO[bytes]) -> None:
    with open(record, "ab") as copy:
        for line in source:
            copy.write(line)
            copy.flush()
            try:
                server.write(line)
                server.flush()
            except BrokenPipeError:
                break
    server.close()


def main(record: str, argv: list[str]) -> int:
    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    requests = threading.Thread(
        target=relay_requests, args=(record, sys.stdin.buffer, server.stdin), daemon=True
    )
    requests.start()
    for line in server.stdout:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    return server.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
