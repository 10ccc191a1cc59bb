"""The decoder against the standard's reading at the edges a faster framing would have to keep.

Each body is decoded whole, and split at every byte (and at every pair of bytes for some), so
that each edge falls on a read boundary: an event ending exactly at a read's end, a read ending
between the CR and LF of a pair or between the two line ends of a blank line. A decoder that
splits reads on blank lines into whole events (tried for issue 39, see docs/benchmarks.md) must
pass these unchanged.
"""

from __future__ import annotations

import itertools

import pytest
from test_sse import decode, reference, split_at

from llm_worker.errors import MalformedStreamError
from llm_worker.providers._sse import SSEDecoder

NAMED = b'event: delta\ndata: {"a":1}\n\nevent: delta\ndata: {"a":2}\n\n'
BODIES = {
    "plain": b'data: {"a":1}\n\ndata: {"a":2}\n\ndata: [DONE]\n\n',
    "named": NAMED + b"event: stop\ndata: {}\n\n" + NAMED,
    "no space after the colon": b"data: a\n\ndata:b\n\nevent:x\ndata: c\n\nevent:x\ndata:d\n\n",
    "two data lines": b"data: a\n\ndata: b\ndata: c\n\nevent: e\ndata: d\ndata: f\n\ndata: g\n\n",
    "comments between events": b": ping\n\ndata: a\n\n: keep-alive\ndata: b\n\n:\n\ndata: c\n\n",
    "extra blank lines": b"data: a\n\n\n\ndata: b\n\n\n\n\nevent: e\n\nevent: e\ndata: c\n\n",
    "id and retry": b"id: 1\ndata: a\n\nretry: 5\n\ndata: b\n\ndata: c\nretry: 7\n\ndata: d\n\n",
    "empty event type and data": b"event: \ndata: \n\nevent: \ndata: x\n\ndata: \n\n",
    "a BOM": b"\xef\xbb\xbfdata: a\n\ndata: b\n\n",
    "event seen again": b"event: a\ndata: 1\n\nevent: a\ndata: 2\n\nevent: b\ndata: 3\n\n",
    "field without a colon": b"data\n\ndata: a\n\nevent\ndata: b\n\n",
    # The decoder holds an event's one `data: ` line apart from its other data lines: the
    # order and the retry must survive every mix of the two.
    "data lines of both spellings": (
        b"data:a\ndata: b\n\ndata: c\ndata:d\n\ndata: e\nid: 2\ndata: f\n\n"
        b"retry: 3\ndata: g\n\ndata: h\n\ndata: i\nretry: 4\ndata: j\n\n"
    ),
}
BODIES |= {f"{name}, CRLF": body.replace(b"\n", b"\r\n") for name, body in list(BODIES.items())}
BODIES["mixed line ends"] = b"data: a\r\n\r\ndata: b\n\ndata: c\r\rdata: d\r\n\ndata: e\n\r\n"
BODIES["CR only"] = b"data: a\r\rdata: b\r\revent: e\rdata: c\r\r"


def same(body: bytes, chunks: list[bytes]) -> None:
    assert b"".join(chunks) == body
    assert decode(*chunks) == reference(body), chunks


@pytest.mark.parametrize("name", sorted(BODIES))
def test_whole_and_split_at_every_byte(name: str) -> None:
    body = BODIES[name]
    same(body, [body])
    for cut in range(1, len(body)):
        same(body, split_at(body, [cut]))


@pytest.mark.parametrize(
    "name", ["named", "two data lines, CRLF", "id and retry", "mixed line ends"]
)
def test_split_at_every_pair_of_bytes(name: str) -> None:
    body = BODIES[name]
    for cuts in itertools.combinations(range(1, len(body)), 2):
        same(body, split_at(body, list(cuts)))


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"], ids=["LF", "CRLF"])
def test_split_exactly_at_the_blank_line(eol: bytes) -> None:
    first, second = b"data: a" + eol, eol + b"data: b" + eol + eol
    # The read ends after the data line's line end, before the blank line's: one event each.
    assert [event.data for event in decode(first, second)] == ["a", "b"]
    # Between the CR and LF of the blank line.
    if eol == b"\r\n":
        body = first + second
        cut = len(first) + 1
        assert [event.data for event in decode(body[:cut], body[cut:])] == ["a", "b"]


def test_a_retry_without_data_rides_on_the_next_event_in_the_same_read() -> None:
    events = decode(b"data: a\n\nretry: 9\n\ndata: b\n\ndata: c\n\n")
    assert [(event.data, event.retry) for event in events] == [("a", None), ("b", 9), ("c", None)]


def test_a_known_event_type_applies_to_its_event_only() -> None:
    decoder = SSEDecoder()
    body = b"event: delta\ndata: 1\n\ndata: 2\n\nevent: delta\ndata: 3\n\n"
    assert list(decoder.raw(body)) == [("delta", b"1"), ("message", b"2"), ("delta", b"3")]


@pytest.mark.parametrize("named", [False, True])
def test_an_event_over_the_limit_fails_though_its_type_is_known(named: bool) -> None:
    head = b"event: e\n" if named else b""
    decoder = SSEDecoder(max_event_bytes=8)
    # Seen once below the limit, so that the event line is a known one.
    assert list(decoder.raw(head + b"data: 12345678\n\n")) == [
        ("e" if named else "message", b"12345678")
    ]
    with pytest.raises(MalformedStreamError, match="max_event_bytes=8"):
        list(decoder.raw(head + b"data: 123456789\n\n"))


@pytest.mark.parametrize(
    "reads",
    [
        # A paced Gemini stream: each read one event of one line, CRLF-framed (the decoder's
        # fast path for such a read), and reads that end the same way but are not one line.
        [b"data: a\r\n\r\n", b"data: b\r\n\r\n", b"data: c\r\n\r\n"],
        [b"data: a\r\n\r\n", b"\r\n\r\n", b"data: b\r\n\r\n"],  # a read of blank lines only
        [b"data: a\rdata: b\r\n\r\n", b"data: c\ndata: d\r\n\r\n"],  # a lone CR, a lone LF
        [b"data: a\r\n\r\ndata: b\r\n\r\n", b"event: e\r\ndata: c\r\n\r\n"],  # two lines
        [b"data: a\r", b"\ndata: b\r\n\r\n", b"data: c\r\n\r\n"],  # a CRLF across two reads
        [b"data: a\r\n", b"\r\n", b"data", b": b\r\n\r\n"],  # a line held from the last read
        [b"\xef\xbb\xbfdata: a\r\n\r\n", b"data: \r\n\r\n", b": ping\r\n\r\n"],
    ],
)
def test_reads_of_one_crlf_event_each(reads: list[bytes]) -> None:
    assert decode(*reads) == reference(b"".join(reads))
