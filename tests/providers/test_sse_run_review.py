"""Review of the SSE decoder's run of one-line events (R42): the decoder's state around a run.

A Chat-compatible body with what the standard lets a server send between runs — an id that
later events carry, a retry that only its own event carries, a late `event: error`, a BOM, a
comment, NUL and bytes that are not UTF-8 — decoded in two reads cut at every byte, and in
reads of one byte, must equal the reference reading (tests/providers/test_sse.py).
"""

from __future__ import annotations

import pytest
from test_sse import decode, reference

from llm_worker.providers._sse import SSEDecoder

_BODIES = [
    b"\xef\xbb\xbfdata: a\n\ndata: b\n\nid: 7\n\ndata: c\n\ndata: d\n\n",
    b"data: a\n\nretry: 30\ndata: b\n\ndata: c\n\ndata: d\n\n",
    b'data: a\n\ndata: b\n\nevent: error\ndata: {"e": 1}\n\ndata: c\n\ndata: \n\n',
    b"data: a\x00\n\n: ping\n\ndata: \xff\xfe\n\ndata:  two\n\ndata:x\n\ndata: y",
    b"data: a\n\ndata: b\r\n\r\ndata: c\rdata: d\n\ndata: e\n\n",
]


@pytest.mark.parametrize("body", _BODIES)
def test_state_around_a_run_matches_the_reference_at_every_split(body: bytes) -> None:
    want = reference(body)
    assert decode(body) == want
    assert decode(*(body[i : i + 1] for i in range(len(body)))) == want
    for cut in range(len(body) + 1):
        for second in (cut, min(len(body), cut + 7)):
            assert decode(body[:cut], body[cut:second], body[second:]) == want, (cut, second)


def test_an_id_set_before_a_run_rides_on_every_event_of_the_run() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 5\n\n") == []
    events = decoder.feed(b"data: a\n\ndata: b\n\n")
    assert [(e.data, e.id, e.retry) for e in events] == [("a", "5", None), ("b", "5", None)]
