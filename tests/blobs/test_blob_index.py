"""The index beside a blob: every point is where its line or entry starts, whatever the text."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker.blobs import BlobIndex
from llm_worker.blobs._index import array_index, text_index


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)] or [b""]


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(["a", "é", "\n", "\r", "😀", " "]), max_size=300),
    st.integers(1, 9),
    st.integers(1, 40),
    st.integers(1, 64),
)
def test_text_points_are_line_starts(text: str, every: int, span: int, chunk: int) -> None:
    data = text.encode()
    index = text_index(_chunks(data, chunk), every, span)
    assert index.size == len(data)
    assert index.count == len(text.split("\n")) - (1 if text.endswith("\n") or not text else 0)
    assert index.points[0] == (1, 0)
    for (line, offset), (next_line, next_offset) in zip(
        index.points, index.points[1:], strict=False
    ):
        assert next_line - line <= every and next_line > line and next_offset > offset
    for line, offset in index.points:
        assert data[:offset].count(b"\n") == line - 1
        assert offset == 0 or data[offset - 1 : offset] == b"\n"
        assert offset < len(data) or line == 1
    if len(data) > 0:  # no gap of more than `every` lines or `span` bytes before a line starts
        starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10 and i + 1 < len(data)]
        kept = {offset for _, offset in index.points}
        last_line, last = 1, 0
        for line, start in enumerate(starts, 1):
            if start in kept:
                last_line, last = line, start
            else:
                assert start - last < span and line - last_line < every


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.integers(), st.text(max_size=5), st.lists(st.booleans(), max_size=3))),
    st.integers(1, 5),
    st.booleans(),
)
def test_array_points_are_entry_starts(values: list[object], every: int, spaced: bool) -> None:
    text = json.dumps(values, indent=1 if spaced else None, ensure_ascii=False)
    data = text.encode()
    index = array_index(text, every, 1 << 20)
    assert index.size == len(data) and index.count == len(values)
    assert [n for n, _ in index.points] == list(range(0, len(values), every))
    for number, offset in index.points:
        decoded, _ = json.JSONDecoder().raw_decode(data[offset:].decode())
        assert decoded == values[number]


def test_the_format_round_trips_and_refuses_others() -> None:
    index = BlobIndex("text", 10, 3, ((1, 0), (3, 7)))
    assert BlobIndex.from_json(index.to_json()) == index
    doc = json.loads(index.to_json())
    assert doc == {
        "format": "llm-worker.blob-index",
        "version": 2,
        "kind": "text",
        "bytes": 10,
        "count": 3,
        "points": [[1, 0], [3, 7]],
        "check": doc["check"],
    }
    assert re.fullmatch("[0-9a-f]{16}", doc["check"])
    for bad in (
        {**doc, "version": 1},
        {key: value for key, value in doc.items() if key != "check"},
        {**doc, "check": "0" * 16},
        {**doc, "count": 2},  # still consistent with the points: only the check tells
        {**doc, "bytes": 9},
        {**doc, "format": "other"},
        {**doc, "kind": "object"},
        {**doc, "points": [[1]]},
        {**doc, "count": "3"},
    ):
        assert BlobIndex.from_json(json.dumps(bad).encode()) is None
    assert BlobIndex.from_json(b"not json") is None


@pytest.mark.parametrize("text", ["", "[]", "  [ ]  "])
def test_empty_inputs(text: str) -> None:
    if text:
        assert array_index(text) == BlobIndex("array", len(text), 0, ())
    else:
        assert text_index([b""]) == BlobIndex("text", 0, 0, ((1, 0),))
