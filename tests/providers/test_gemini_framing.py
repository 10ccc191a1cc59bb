"""Gemini's JSON-array framing (`JsonArraySplitter`): objects cut out whole, in linear work.

The array arrives in network reads of any size; one object may span thousands of them (a long
answer in a non-streaming reply, a large function call). Each read must cost work in its own
size, not in the size of the object read so far.
"""

from __future__ import annotations

import tracemalloc

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker.errors import MalformedStreamError
from llm_worker.providers._gemini_framing import JsonArraySplitter

LIMIT = 64 * 1024 * 1024


def _objects(sse: bytes) -> list[object]:
    events = [e for e in sse.split(b"\n\n") if e]
    assert all(e.startswith(b"data: ") for e in events)
    return [orjson.loads(e.removeprefix(b"data: ")) for e in events]


def _reads(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def test_one_big_object_over_many_reads_costs_linear_work() -> None:
    # 1 MiB of text in one object, read 1 KiB at a time (1,024 reads). The work is counted as
    # the bytes each read allocates while it is fed (tracemalloc's peak above the memory
    # before it): copying the object so far at every read sums to ~500 MiB (quadratic); a
    # buffer grown in place costs each read about its own size.
    text = ("x" * 58 + '\\"\u00e9\n') * (1024 * 1024 // 64)
    first = {"candidates": [{"content": {"parts": [{"text": text}]}}]}
    body = b"[" + orjson.dumps(first) + b",\r\n" + orjson.dumps({"n": 2}) + b"]"
    splitter = JsonArraySplitter(LIMIT)
    out: list[bytes] = []
    allocated = 0
    tracemalloc.start()
    try:
        for read in _reads(body, 1024):
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            out.append(splitter.feed(read))
            allocated += tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert _objects(b"".join(out)) == [first, {"n": 2}]
    assert allocated < 16 * len(body)  # the quadratic splitter: ~530x


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.text(max_size=4),
            st.text(max_size=12)  # quotes, backslashes, brackets and line breaks inside
            | st.integers(-(2**63), 2**63 - 1)
            | st.lists(st.text(max_size=4) | st.none(), max_size=3)
            | st.dictionaries(st.text(max_size=3), st.text(max_size=8), max_size=2),
            max_size=4,
        ),
        max_size=4,
    ),
    st.integers(1, 40),
    st.sampled_from([b",", b",\r\n", b" ,\n "]),
)
def test_any_reads_give_the_objects_of_the_array(
    objects: list[dict[str, object]], size: int, separator: bytes
) -> None:
    body = b"[" + separator.join(orjson.dumps(o, option=orjson.OPT_INDENT_2) for o in objects)
    body += b"]"
    splitter = JsonArraySplitter(LIMIT)
    out = b"".join(splitter.feed(read) for read in _reads(body, size))
    assert _objects(out) == objects


def test_an_object_over_the_limit_fails_and_frees_its_buffer() -> None:
    splitter = JsonArraySplitter(1000)
    splitter.feed(b'[{"text": "' + b"x" * 600)
    with pytest.raises(MalformedStreamError):
        splitter.feed(b"x" * 600)
