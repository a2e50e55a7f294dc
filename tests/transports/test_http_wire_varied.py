"""A head that differs from one a connection keeps only in a header's value (a poll of
another task: its `Mcp-Name`) is read from the kept one, not parsed again. Whatever byte
changes, and wherever, the head read must be the one a fresh parse gives, or refused as a
fresh parse refuses it."""

from __future__ import annotations

import pytest

from mcp_tasks.transports._http_rules import Refusal, RequestRules, mcp_headers
from mcp_tasks.transports._http_wire import RequestHead, RequestInput

HEAD_LIMIT = 4096

KNOWN = (
    b"POST /mcp HTTP/1.1\r\n"
    b"Host: 127.0.0.1:8000\r\n"
    b"Content-Type: application/json\r\n"
    b"Accept: application/json, text/event-stream\r\n"
    b"MCP-Protocol-Version: 2026-07-28\r\n"
    b"Mcp-Method: tasks/get\r\n"
    b"Mcp-Name: tsk_0123456789abcdef0123456789abcdef\r\n"
    b"Mcp-Param-Region:  eu \r\n"
    b"X-Tag: one\r\n"
    b"X-Tag: two\r\n"
    b"X-Trace: 7f3a\t\r\n"
    b"Connection: keep-alive\r\n"
    b"Content-Length: 2\r\n"
    b"\r\n"
)
BODY = b"{}"
MUTATIONS = b"\x00\x01\t\x0b :AZaz09-_\x7f\x80\xff\r\n"


def learnt(head: RequestHead) -> RequestHead:
    """`head` as the connection leaves it after answering it: what the endpoint learnt."""
    head.mcp = mcp_headers(head.found, head.params)
    head.passed = True
    head.event_stream = True
    return head


def after_known(data: bytes) -> RequestHead | Refusal:
    """The head of `data` read by a connection that read (and learnt) `KNOWN` before."""
    reader = RequestInput(HEAD_LIMIT)
    reader.receive(KNOWN + BODY + data + BODY)
    known = reader.next_head()
    assert known is not None and reader.take_whole_body() == BODY
    learnt(known)
    return next_head(reader)


def fresh(data: bytes) -> RequestHead | Refusal:
    reader = RequestInput(HEAD_LIMIT)
    reader.receive(data + BODY)
    return next_head(reader)


def next_head(reader: RequestInput) -> RequestHead | Refusal:
    try:
        head = reader.next_head()
    except Refusal as refusal:
        return refusal
    assert head is not None
    return head


def assert_read_alike(read: RequestHead | Refusal, parsed: RequestHead | Refusal) -> None:
    if isinstance(parsed, Refusal):
        assert isinstance(read, Refusal), "read what llhttp refuses"
        assert (read.status, read.message) == (parsed.status, parsed.message)
        return
    assert isinstance(read, RequestHead), f"refused what llhttp reads: {read}"
    seen = (read.method, read.target, read.http_version, read.keep_alive, read.expects_continue)
    assert seen == (
        parsed.method,
        parsed.target,
        parsed.http_version,
        parsed.keep_alive,
        parsed.expects_continue,
    )
    assert (read.headers, read.found, read.params) == (parsed.headers, parsed.found, parsed.params)
    # What the endpoint learnt of the kept head stays only where it still holds.
    if read.mcp is not None:
        assert read.mcp == mcp_headers(read.found, read.params)
    known = fresh(KNOWN)
    assert isinstance(known, RequestHead)
    ruled = [(name, read.found.get(name)) for name in sorted(RequestRules.RULED)]
    if read.passed:
        assert ruled == [(name, known.found.get(name)) for name in sorted(RequestRules.RULED)]
    if read.event_stream is not None:
        assert read.found.get(b"accept") == known.found.get(b"accept")


def test_a_poll_of_another_task_is_read_from_the_kept_head() -> None:
    other = KNOWN.replace(b"tsk_0123456789abcdef", b"tsk_fedcba9876543210")
    read = after_known(other)
    assert isinstance(read, RequestHead)
    assert read.found[b"mcp-name"] == b"tsk_fedcba9876543210" + b"0123456789abcdef"
    assert read.mcp is not None and read.mcp.name == read.found[b"mcp-name"].decode()
    assert read.passed and read.event_stream  # the rules read nothing that changed
    assert_read_alike(read, fresh(other))


def test_a_changed_host_is_checked_again() -> None:
    other = KNOWN.replace(b"127.0.0.1:8000", b"127.0.0.2:8000")
    read = after_known(other)
    assert isinstance(read, RequestHead) and read.found[b"host"] == b"127.0.0.2:8000"
    assert not read.passed and read.event_stream  # the rules look at it anew
    assert_read_alike(read, fresh(other))


@pytest.mark.parametrize("position", range(len(KNOWN)))
def test_any_one_byte_changed_reads_as_a_fresh_parse(position: int) -> None:
    for byte in MUTATIONS:
        if KNOWN[position] == byte:
            continue
        changed = KNOWN[:position] + bytes([byte]) + KNOWN[position + 1 :]
        if changed.find(b"\r\n\r\n") != len(KNOWN) - 4:
            continue  # the head ends elsewhere: another test's matter
        assert_read_alike(after_known(changed), fresh(changed))


def test_two_lines_changed_read_as_a_fresh_parse() -> None:
    changed = KNOWN.replace(b"tasks/get", b"tasks/got").replace(b"tsk_0", b"tsk_1")
    assert_read_alike(after_known(changed), fresh(changed))
    spaced = KNOWN.replace(b"X-Trace: 7f3a\t", b"X-Trace:7f3a \t")  # the same value
    assert_read_alike(after_known(spaced), fresh(spaced))
