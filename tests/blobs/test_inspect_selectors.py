"""Selector parsing, with hypothesis: valid selectors read as written, anything else is a
ToolError, and no input makes inspect fail another way or exceed its bound."""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker import Content, MemoryBlobStore, OutputPolicy, ToolError
from llm_worker.blobs import InspectTool
from llm_worker.blobs._selectors import (
    KeySelector,
    LinesSelector,
    Selector,
    SliceSelector,
    WholeSelector,
    parse_selector,
)

numbers = st.integers(0, 10**12)
signed = st.integers(-(10**12), 10**12)
offsets = st.integers(0, 10**9)


def with_offset(text: str, offset: int) -> str:
    return f"{text}@{offset}" if offset else text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, WholeSelector()),
        ("", WholeSelector()),
        ("  ", WholeSelector()),
        ("@40", WholeSelector(40)),
        ("lines:20-50", LinesSelector(20, 50)),
        ("LINES: 20 - 50 ", LinesSelector(20, 50)),
        ("lines:7", LinesSelector(7, 7)),
        ("lines:7-", LinesSelector(7, None)),
        ("lines:7-9@12", LinesSelector(7, 9, 12)),
        ("slice:3..8", SliceSelector(3, 8)),
        ("slice:..8", SliceSelector(None, 8)),
        ("slice:-2..", SliceSelector(-2, None)),
        ("slice:..", SliceSelector(None, None)),
        ("slice:4", SliceSelector(4, 5)),
        ("slice:-1", SliceSelector(-1, None)),
        ("key:results", KeySelector("results")),
        ("key: a.b.0 ", KeySelector("a.b.0")),
        ("key:user@example.com", KeySelector("user@example.com")),
        ("key:x@15", KeySelector("x", 15)),
    ],
)
def test_examples(text: str | None, expected: Selector) -> None:
    assert parse_selector(text) == expected


@given(first=numbers, extra=numbers, offset=offsets)
def test_lines(first: int, extra: int, offset: int) -> None:
    text = with_offset(f"lines:{first}-{first + extra}", offset)
    assert parse_selector(text) == LinesSelector(first, first + extra, offset)


@given(first=numbers, less=st.integers(1, 10**6))
def test_reversed_lines_are_refused(first: int, less: int) -> None:
    with pytest.raises(ToolError, match="before the first"):
        parse_selector(f"lines:{first + less}-{first}")


@given(start=st.none() | signed, stop=st.none() | signed, offset=offsets)
def test_slices(start: int | None, stop: int | None, offset: int) -> None:
    text = with_offset(
        f"slice:{'' if start is None else start}..{'' if stop is None else stop}", offset
    )
    assert parse_selector(text) == SliceSelector(start, stop, offset)


@given(path=st.text(min_size=1, max_size=200).filter(lambda p: p.strip() == p and "@" not in p))
def test_keys(path: str) -> None:
    assert parse_selector(f"key:{path}") == KeySelector(path)


@settings(max_examples=500)
@given(
    text=st.text(max_size=60)
    | st.from_regex(r"(lines|slice|key):[-0-9.@ a-z]{0,12}", fullmatch=True)
)
def test_anything_else_is_a_selector_or_a_tool_error(text: str) -> None:
    try:
        selector = parse_selector(text)
    except ToolError as exc:
        message = str(exc)
    else:
        message = "selector"
        assert isinstance(selector, WholeSelector | LinesSelector | SliceSelector | KeySelector)
    assert "selector" in message


_STORE = MemoryBlobStore()
_TOOL = InspectTool(_STORE, OutputPolicy(inspect_max_chars=2_000))
_IDS: dict[str, str] = {}


def blob(kind: str) -> str:
    if not _IDS:

        async def fill() -> None:
            _IDS["text"] = await _STORE.store(
                Content.Text("\n".join("x" * (i % 300) for i in range(400)))
            )
            _IDS["array"] = await _STORE.store(Content.Structured([{"i": i} for i in range(400)]))
            _IDS["object"] = await _STORE.store(
                Content.Structured({"a": {"b": [1, 2]}, "c": "d" * 5000})
            )

        anyio.run(fill)
    return _IDS[kind]


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["text", "array", "object"]),
    selector=st.from_regex(r"(lines:|slice:|key:|)[-0-9.@ a-c]{0,10}", fullmatch=True),
)
def test_inspect_answers_every_selector_within_its_bound(kind: str, selector: str) -> None:
    args = json.dumps({"blob_id": blob(kind), "selector": selector})
    try:
        out = anyio.run(_TOOL.execute, args)
    except ToolError:
        return
    assert out.startswith(f"[blob:{blob(kind)}] ") and len(out) <= 2_000
