"""The built-in server's request reader (`_http_wire.RequestInput`) on bytes alone: heads
parsed by httptools, bodies framed by `Content-Length` or chunks, whatever the cuts between
reads, and a `Refusal` with the right status for each thing that is not HTTP/1.1."""

from __future__ import annotations

import pytest

from mcp_tasks.transports._http_rules import Refusal
from mcp_tasks.transports._http_wire import (
    HEAD_KEPT_BYTES,
    HEADS_KEPT,
    LAST_CHUNK,
    RequestHead,
    RequestInput,
    chunk,
    json_answer_bytes,
    response_bytes,
    stream_head,
)

HEAD_LIMIT = 1024
BODY_LIMIT = 10_000


def post(body: bytes, *extra: bytes, version: bytes = b"1.1") -> bytes:
    lines = [b"POST /mcp HTTP/" + version, b"Host: 127.0.0.1", *extra]
    if not any(line.lower().startswith(b"transfer-encoding") for line in extra):
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def read_all(data: bytes, cuts: int = 1) -> list[tuple[RequestHead, bytes]]:
    """Every request in `data`, fed `cuts` bytes at a time (the whole at once for 0)."""
    reader = RequestInput(HEAD_LIMIT)
    pieces = [data] if cuts == 0 else [data[i : i + cuts] for i in range(0, len(data), cuts)]
    requests: list[tuple[RequestHead, bytes]] = []
    head: RequestHead | None = None
    body = b""
    for piece in [*pieces, b""]:
        reader.receive(piece)
        while True:
            if head is None:
                head = reader.next_head()
                if head is None:
                    break
                body = b""
            more = reader.next_body(len(body), BODY_LIMIT)
            if more is None:
                break
            if more:
                body += more
                continue
            requests.append((head, body))
            head = None
    assert reader.buffered == 0
    return requests


def refusal_of(data: bytes, *, cuts: int = 0) -> Refusal:
    with pytest.raises(Refusal) as refused:
        read_all(data, cuts)
    return refused.value


@pytest.mark.parametrize("cuts", [0, 1, 7, 64])
def test_pipelined_requests_are_read_one_by_one_however_the_bytes_are_cut(cuts: int) -> None:
    chunked = (
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: yes\r\n\r\n"
    )
    data = post(b'{"a":1}', b"Mcp-Method: tools/call") + chunked + post(b"")
    requests = read_all(data, cuts)
    assert [body for _, body in requests] == [b'{"a":1}', b"hello world", b""]
    first = requests[0][0]
    assert (first.method, first.target, first.http_version) == (b"POST", b"/mcp", "1.1")
    assert first.found[b"mcp-method"] == b"tools/call" and first.keep_alive


def test_headers_the_endpoint_reads_are_picked_out_as_the_head_is_parsed() -> None:
    data = post(
        b"",
        b"Accept:  application/json \t",
        b"accept: text/event-stream",
        b"Mcp-Param-Region: eu",
        b"X-Other: kept",
    )
    ((head, _),) = read_all(data)
    assert head.found[b"accept"] == b"application/json, text/event-stream"
    assert head.params == {"region": "eu"}
    assert (b"X-Other", b"kept") in head.headers  # names as sent, values trimmed


def test_http_1_0_does_not_keep_the_connection_nor_wait_for_100_continue() -> None:
    ((head, _),) = read_all(post(b"{}", b"Expect: 100-continue", version=b"1.0"))
    assert head.http_version == "1.0" and not head.keep_alive and not head.expects_continue
    ((head, _),) = read_all(post(b"{}", b"Expect: 100-Continue"))
    assert head.expects_continue and head.keep_alive


@pytest.mark.parametrize(
    ("version", "connection", "keeps"),
    [
        (b"1.1", None, True),
        (b"1.1", b"close", False),
        (b"1.1", b"Close, x", False),
        (b"1.1", b"x, close", False),
        (b"1.0", None, False),
        (b"1.0", b"keep-alive", True),
    ],
)
@pytest.mark.parametrize("body", [None, b"", b"{}"])
def test_connection_says_whether_the_client_keeps_it_with_a_body_or_without(
    version: bytes, connection: bytes | None, keeps: bool, body: bytes | None
) -> None:
    lines = [b"Connection: " + connection] if connection is not None else []
    if body is None:  # a GET: no body, no Content-Length
        data = b"\r\n".join([b"GET /mcp HTTP/" + version, b"Host: x", *lines]) + b"\r\n\r\n"
    else:
        data = post(body, *lines, version=version)
    ((head, _),) = read_all(data)
    assert head.keep_alive is keeps


def test_an_upgrade_is_read_as_a_plain_request() -> None:
    data = post(b"{}", b"Connection: Upgrade", b"Upgrade: h2c") + post(b"[]")
    assert [body for _, body in read_all(data)] == [b"{}", b"[]"]


@pytest.mark.parametrize("cuts", [0, 100])
def test_a_head_over_the_limit_is_431_whole_or_in_pieces(cuts: int) -> None:
    refused = refusal_of(post(b"", b"X-Pad: " + b"a" * HEAD_LIMIT), cuts=cuts)
    assert refused.status == 431 and "Request head too large" in refused.message


def test_a_head_with_no_end_in_sight_is_431_once_past_the_limit() -> None:
    reader = RequestInput(HEAD_LIMIT)
    reader.receive(b"POST /mcp HTTP/1.1\r\nX-Pad: " + b"a" * (HEAD_LIMIT // 2))
    assert reader.next_head() is None
    reader.receive(b"a" * HEAD_LIMIT)
    with pytest.raises(Refusal) as refused:
        reader.next_head()
    assert refused.value.status == 431


@pytest.mark.parametrize(
    ("data", "status", "words"),
    [
        (b"HELLO\r\n\r\n", 400, "Invalid HTTP request"),
        (b"POST /mcp HTTP/1.1\nHost: x\n\n\r\n\r\n", 400, "Invalid HTTP request"),
        (post(b"{}", b"Content-Length: 2"), 400, "Content-Length"),
        (post(b"", b"X-Bad: a\x01b"), 400, "header value"),
        (post(b"", version=b"2.0"), 505, "HTTP version not supported: 2.0"),
        (post(b"", b"Transfer-Encoding: gzip"), 501, "Transfer-Encoding not implemented: gzip"),
        (
            post(b"", b"Transfer-Encoding: chunked", b"Content-Length: 5"),
            400,
            "Content-Length and Transfer-Encoding",
        ),
    ],
)
def test_a_head_that_is_not_http_1_1_is_refused_with_its_status(
    data: bytes, status: int, words: str
) -> None:
    refused = refusal_of(data)
    assert refused.status == status and words in refused.message, refused.message


CHUNKED_HEAD = b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b"zz\r\n", 400, "not a hexadecimal size"),
        (b"\r\n", 400, "not a hexadecimal size"),
        (b"5\r\nhelloXX0\r\n\r\n", 400, "no CRLF after a chunk's data"),
        (b"1" * 5000, 400, "chunk-size line longer than"),
        (b"F" * 20 + b"\r\n", 400, "Invalid chunk size: 20 hex digits"),
        (b"%x\r\n" % (BODY_LIMIT + 1), 413, f"a chunk of {BODY_LIMIT + 1} bytes"),
        (b"0\r\nno colon\r\n\r\n", 400, "a malformed trailer field"),
    ],
)
def test_a_chunked_body_that_is_not_one_is_refused(body: bytes, status: int, words: str) -> None:
    refused = refusal_of(CHUNKED_HEAD + body)
    assert refused.status == status and words in refused.message, refused.message


def test_a_chunk_is_refused_by_its_declared_size_before_its_bytes_come() -> None:
    reader = RequestInput(HEAD_LIMIT)
    reader.receive(CHUNKED_HEAD + b"10\r\n" + b"x" * 16 + b"\r\n" + b"20\r\n")
    assert reader.next_head() is not None
    assert reader.next_body(0, 40) == b"x" * 16
    with pytest.raises(Refusal) as refused:  # 16 read, 32 declared: over 40 in all
        reader.next_body(16, 40)
    assert refused.value.status == 413


def test_end_if_no_body_tells_a_request_with_a_body_from_one_without() -> None:
    reader = RequestInput(HEAD_LIMIT)
    reader.receive(post(b"") + post(b"{}"))
    assert reader.next_head() is not None and reader.end_if_no_body()
    assert reader.next_head() is not None and not reader.end_if_no_body()
    assert reader.reading_body


def test_a_body_that_came_whole_is_taken_at_once_and_no_other_is() -> None:
    reader = RequestInput(HEAD_LIMIT)
    reader.receive(post(b'{"a":1}') + post(b"{}")[:-1])  # the second body lacks a byte
    assert reader.next_head() is not None
    assert reader.whole_body_size(6) is None  # over the limit given: read as it comes
    assert reader.whole_body_size(BODY_LIMIT) == 7
    assert reader.take_whole_body() == b'{"a":1}' and not reader.reading_body
    assert reader.next_head() is not None
    assert reader.whole_body_size(BODY_LIMIT) is None  # not all of it is here
    reader.receive(b"}")
    assert reader.whole_body_size(BODY_LIMIT) == 2 and reader.take_whole_body() == b"{}"
    assert reader.buffered == 0
    chunked = RequestInput(HEAD_LIMIT)
    chunked.receive(post(b"2\r\n{}\r\n0\r\n\r\n", b"Transfer-Encoding: chunked"))
    assert chunked.next_head() is not None and chunked.whole_body_size(BODY_LIMIT) is None


@pytest.mark.parametrize("cuts", [0, 5])
def test_a_repeated_head_is_read_once_and_never_stands_for_another(cuts: int) -> None:
    same = post(b'{"id":1}', b"Mcp-Name: task-a", b"Mcp-Param-Region: eu")
    other = post(b'{"id":2}', b"Mcp-Name: task-b")  # the same length: only a value differs
    chunked = post(b"2\r\n{}\r\n0\r\n\r\n", b"Mcp-Name: task-a", b"Transfer-Encoding: chunked")
    requests = read_all(same + same + other + same + chunked, cuts)
    heads = [head for head, _ in requests]
    assert [body for _, body in requests] == [
        b'{"id":1}',
        b'{"id":1}',
        b'{"id":2}',
        b'{"id":1}',
        b"{}",
    ]
    assert heads[1] is heads[0]  # the same bytes again: the head read before
    assert heads[2].found[b"mcp-name"] == b"task-b" and heads[2].params == {}
    assert heads[3].found[b"mcp-name"] == b"task-a" and heads[3].params == {"region": "eu"}
    assert b"transfer-encoding" in heads[4].found  # framed by its own head, not the last one


def test_a_connection_keeps_the_heads_it_read_most_recently() -> None:
    heads = [post(b"{}", b"Mcp-Name: task-%d" % number) for number in range(HEADS_KEPT + 1)]
    hot = heads[0]
    # A call and a poll taking turns: each is read once, however often it comes.
    order = [hot, heads[1], hot, heads[1], hot]
    # Then as many others as are kept: the hot head, read last among them, stays...
    order += [heads[2], hot, *heads[3 : HEADS_KEPT + 1]]
    # ...and the one read least recently (heads[1]) is gone: read anew.
    order += [hot, heads[1]]
    read = [head for head, _ in read_all(b"".join(order))]
    assert len({id(head) for head in read[::2][:3]}) == 1  # the hot head, every time
    assert read[3] is read[1]
    assert read[6] is read[0] and read[-2] is read[0]
    assert read[-1] is not read[1] and read[-1].found[b"mcp-name"] == b"task-1"


def test_a_long_head_is_read_each_time_it_comes() -> None:
    padding = b"X-Padding: " + b"p" * HEAD_KEPT_BYTES
    long_head = post(b"{}", padding)
    reader = RequestInput(4 * HEAD_KEPT_BYTES)
    reader.receive(long_head + long_head)
    first = reader.next_head()
    assert first is not None and reader.take_whole_body() == b"{}"
    second = reader.next_head()
    assert second is not None and second is not first
    assert second.found == first.found


def test_a_head_refused_after_a_good_one_is_still_refused() -> None:
    good = post(b"")
    bad = good.replace(b"Host: 127.0.0.1", b"Host : 127.0.0.1")  # llhttp refuses the space
    reader = RequestInput(HEAD_LIMIT)
    reader.receive(good + bad)
    assert reader.next_head() is not None and reader.end_if_no_body()
    with pytest.raises(Refusal) as refused:
        reader.next_head()
    assert refused.value.status == 400


@pytest.mark.parametrize("status", [200, 202, 400, 429, 500])
def test_a_json_answer_is_the_answer_its_headers_make(status: int) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    assert json_answer_bytes(status, body) == response_bytes(status, headers, body)
    assert json_answer_bytes(status, b"{}").endswith(b"content-length: 2\r\n\r\n{}")


def test_answers_are_framed_as_http_1_1() -> None:
    answer = response_bytes(200, [(b"content-length", b"2")], b"{}")
    assert answer == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"
    assert response_bytes(100, [], b"", head_only=True) == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert response_bytes(418, [], b"").startswith(b"HTTP/1.1 418 ")  # a status line made once
    head = stream_head(200, [(b"content-type", b"text/event-stream")], chunked=True)
    assert head.endswith(b"transfer-encoding: chunked\r\n\r\n")
    assert b"transfer-encoding" not in stream_head(200, [], chunked=False)
    assert chunk(b"data: x\n\n") == b"9\r\ndata: x\n\n\r\n" and chunk(b"") == b""
    assert LAST_CHUNK == b"0\r\n\r\n"
