"""The encoders' shortcuts write exactly what their general paths write.

Text and reasoning deltas are written straight into their SSE line, and a part's opaque data
is read without a pydantic serialisation where the part holds only plain values: both are
checked here against the general path, over generated texts and parts.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from unittest.mock import ANY

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker.errors import InvalidMessagesError
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockType,
    ResponseStatus,
    StatusEvent,
    TextDelta,
    TextMetadata,
    ThinkingDelta,
    ThinkingMetadata,
)
from llm_worker.messages import Citation, Origin, Part, TextPart, ThinkingPart, ToolUsePart
from llm_worker.ui._agui import AGUIEncoder
from llm_worker.ui._encoder import BlockEncoder, sse
from llm_worker.ui._parts import (
    _PLAIN,  # pyright: ignore[reportPrivateUsage]
    _VISIBLE,  # pyright: ignore[reportPrivateUsage]
    _hidden,  # pyright: ignore[reportPrivateUsage]
    _serialised,  # pyright: ignore[reportPrivateUsage]
    opaque,
)
from llm_worker.ui._vercel import VercelEncoder

ORIGIN = Origin("anthropic", "claude")
# Short and long, ASCII and not, quotes, backslashes, control characters, U+2028.
TEXTS = st.lists(
    st.one_of(
        st.text(max_size=80),
        st.text(alphabet=st.characters(max_codepoint=127), max_size=120),
        st.sampled_from(['"', "\\", "\n\t\x00\x1f\x7f", "\u2028\u2029", "é", "a" * 47, "a" * 48]),
    ),
    max_size=12,
)


def _opened(encoder: BlockEncoder, kind: BlockType) -> str:
    """Open a block of `kind` at index 0; its protocol id."""
    encoder.encode(StatusEvent(ResponseStatus.STARTED))
    meta = TextMetadata() if kind is BlockType.TEXT else ThinkingMetadata()
    first = encoder.encode(BlockStart(0, kind, meta))[0]
    return first.get("id") or first["messageId"]


# Per protocol: a fresh encoder, the chunk type of a text and of a reasoning delta, the
# field naming the block, and whether an empty delta writes nothing.
PROTOCOLS = {
    "vercel": (lambda: VercelEncoder("m1", ORIGIN), "text-delta", "reasoning-delta", "id", False),
    "ag-ui": (
        lambda: AGUIEncoder("t1", "r1", ORIGIN),
        "TEXT_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "messageId",
        True,
    ),
}


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@settings(max_examples=150, deadline=None)
@given(texts=TEXTS, thinking=st.booleans())
def test_fast_delta_writes_the_chunk_the_general_path_writes(
    protocol: str, texts: list[str], thinking: bool
) -> None:
    make, text_kind, reasoning_kind, field, skip_empty = PROTOCOLS[protocol]
    encoder = make()
    ident = _opened(encoder, BlockType.THINKING if thinking else BlockType.TEXT)
    kind = reasoning_kind if thinking else text_kind
    for text in texts:
        delta = BlockDelta(0, ThinkingDelta(text) if thinking else TextDelta(text))
        if skip_empty and not text:  # no event for an empty delta, on either path
            assert encoder.fast_delta(delta) is None
            assert encoder.encode(delta) == []
        else:
            assert encoder.fast_delta(delta) == sse({"type": kind, field: ident, "delta": text})


def test_a_delta_of_another_kind_takes_the_general_path() -> None:
    encoder = VercelEncoder("m1", ORIGIN)
    ident = _opened(encoder, BlockType.TEXT)
    delta = BlockDelta(0, ThinkingDelta("aside"))
    assert encoder.fast_delta(delta) is None
    assert encoder.encode(delta) == [{"type": "reasoning-delta", "id": ident, "delta": "aside"}]
    assert encoder.fast_delta(BlockDelta(1, TextDelta("no block"))) is None


_STR = st.one_of(st.none(), st.text(max_size=12))
_ORIGINS = st.one_of(st.none(), st.just(ORIGIN), st.just(Origin("gemini", "")))
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_HIDDEN: dict[str, st.SearchStrategy[Any]] = {
    "signature": _STR,
    "item_id": _STR,
    "origin": _ORIGINS,
}
# Values `to_dict` turns into JSON some other way, or refuses: the general path's to judge.
_ODD = st.sampled_from([(1, 2), {1: "int key"}, {"s": {1, 2}}, b"raw", object()])
_PARTS: st.SearchStrategy[Part] = st.one_of(
    st.builds(
        TextPart,
        st.text(max_size=8),
        phase=_STR,
        citations=st.one_of(st.just([]), st.just([Citation({"type": "url"}, url="https://x")])),
        **_HIDDEN,
    ),
    st.builds(ThinkingPart, st.text(max_size=8), redacted=_STR, **_HIDDEN),
    st.builds(
        ToolUsePart,
        st.text(max_size=6),
        st.text(max_size=6),
        st.dictionaries(st.text(max_size=4), st.one_of(_JSON, _ODD), max_size=3),
        caller=st.one_of(st.none(), st.just({}), st.just({"type": "direct"})),
        **_HIDDEN,
    ),
)


def _outcome(part: Part, read: Any) -> object:
    try:
        return read(part)
    except InvalidMessagesError as exc:
        return ("raised", str(exc))


@settings(max_examples=300, deadline=None)
@given(part=_PARTS)
def test_opaque_reads_what_the_serialised_part_holds(part: Part) -> None:
    fast, general = _outcome(part, _hidden), _outcome(part, _serialised)
    assert fast == general
    if isinstance(fast, dict) and fast:  # what the browser gets: the same, signed
        assert _outcome(part, opaque) == {**fast, "mac": ANY}
    if isinstance(fast, dict):  # the same order too: it is the order of the JSON written
        assert list(fast) == list(general)  # pyright: ignore[reportUnknownArgumentType, reportArgumentType]


@pytest.mark.parametrize("kind", [TextPart, ThinkingPart, ToolUsePart])
def test_the_shortcut_knows_every_field_of_the_parts_it_reads(kind: type) -> None:
    # A field added to a part must be added to the shortcut (or make it take the general
    # path), or `opaque` would silently leave it out of what the browser carries back.
    rich = {"citations", "caller"}
    fields = {f.name for f in dataclasses.fields(kind)}
    assert set(_PLAIN) == {TextPart, ThinkingPart, ToolUsePart}
    assert fields <= _VISIBLE | set(_PLAIN[kind]) | rich
