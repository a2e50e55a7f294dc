"""The keep-alive comments of an SSE answer, the built-in server's and the ASGI app's (under
uvicorn) side by side, each a process of its own on 127.0.0.1 serving served.py
(`keep_alive_comment_seconds=0.3`): both keepers ask the same `Keeping` (`_exchange`), so
both send the same bytes, as chunks of their own, in the same places.

The tool `steps` reports progress, then is quiet for 0.8 s, twice: each quiet stretch gets
one comment or more (how many is the clock's, and is not compared), and none follows the
answer's last event. Waits are on the stream's chunks under `fail_after`.
"""

from __future__ import annotations

from collections.abc import Iterator

import h11
import pytest
import trio
from runtime.helpers import request
from transports.test_http import mcp_headers

from mcp_tasks.transports._exchange import KEEP_ALIVE

from .processes import Served, serving
from .test_asgi import JSON, WAIT, HttpClient

QUIET_SECONDS = 0.8  # served.py's comments come every 0.3 s: at least two per stretch


@pytest.fixture(scope="module")
def uvicorn() -> Iterator[Served]:
    with serving("uvicorn") as served:
        yield served


async def chunks_of_a_quiet_answer(served: Served) -> list[bytes]:
    """The chunks of the SSE answer to `steps`, as the server wrote them."""
    client = await HttpClient.to(served)
    arguments = {"count": 2, "seconds": QUIET_SECONDS}
    body = request(
        "tools/call", {"name": "steps", "arguments": arguments}, request_id=7, progressToken="q"
    )
    chunks, chunk = [], b""
    with trio.fail_after(WAIT):
        await client.send("POST", [JSON, *mcp_headers("tools/call", "steps")], body)
        head = await client.head()
        assert (head.status_code, dict(head.headers)[b"content-type"]) == (
            200,
            b"text/event-stream",
        )
        while not isinstance(event := await client.next_event(), h11.EndOfMessage):
            assert isinstance(event, h11.Data), event
            chunk += event.data
            if event.chunk_end:
                chunks.append(chunk)
                chunk = b""
    await client.aclose()
    return chunks


def without_repeats(chunks: list[bytes]) -> list[bytes]:
    """The chunks, each run of comments as one."""
    return [c for i, c in enumerate(chunks) if not (c == KEEP_ALIVE and chunks[i - 1] == c)]


async def test_both_drivers_send_the_same_comments_in_the_same_places(
    built_in: Served, uvicorn: Served
) -> None:
    theirs = await chunks_of_a_quiet_answer(uvicorn)
    ours = await chunks_of_a_quiet_answer(built_in)
    for chunks in (theirs, ours):
        comments = [chunk for chunk in chunks if chunk.startswith(b":")]
        assert comments and set(comments) == {KEEP_ALIVE}, chunks  # one comment a chunk
        progress, comment, _, comment_again, last = without_repeats(chunks)
        assert progress.startswith(b'data: {"jsonrpc":"2.0","method":"notifications/progress"')
        assert comment == comment_again == KEEP_ALIVE
        assert last.startswith(b'data: {"id":7,"result":')  # no comment after it
    assert without_repeats(theirs) == without_repeats(ours)
