"""Gemini's running usage: one snapshot per network read, when a count it reads changed.

A paced stream is one chunk per read, each repeating the running `usageMetadata`: the
snapshot is decided by the six counts the client reads (prompt, tool-use prompt, candidates,
thoughts, total, cached), read with `as_int`'s rule (an integer, else unknown).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from test_gemini_support import replay, replay_bytewise

from llm_worker.events import BlockDelta, Event, TextDelta, UsageEvent
from llm_worker.providers._gemini_usage import snapshot
from llm_worker.testing import Chunking, WireResponse

pytestmark = pytest.mark.anyio


def _chunk(text: str, usage: Any, *, finish: bool = False) -> bytes:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}}
    if finish:
        candidate["finishReason"] = "STOP"
    chunk = {"candidates": [candidate], "usageMetadata": usage, "responseId": "r"}
    return b"data: " + orjson.dumps(chunk) + b"\r\n\r\n"


def _texts(events: list[Event]) -> list[str]:
    return [
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    ]


def _usages(events: list[Event]) -> list[UsageEvent]:
    return [e for e in events if isinstance(e, UsageEvent)]


async def test_a_snapshot_per_read_only_when_a_count_it_reads_changed() -> None:
    counts = {"promptTokenCount": 5, "candidatesTokenCount": 1, "totalTokenCount": 6}
    later = {**counts, "candidatesTokenCount": 2, "totalTokenCount": 7}
    body = b"".join(
        [
            _chunk("a", counts),
            # Fields the client does not read changed, its counts did not: no news.
            _chunk("b", {**counts, "serviceTier": "standard", "promptTokensDetails": []}),
            _chunk("c", later),
            _chunk("d", dict(later), finish=True),  # equal, not the same object
        ]
    )
    events, error = await replay_bytewise(WireResponse(body, content_type="text/event-stream"))
    assert error is None
    assert _texts(events) == ["a", "b", "c", "d"]
    assert _usages(events) == [
        UsageEvent(input_tokens=5, output_tokens=1, total_tokens=6),
        UsageEvent(input_tokens=5, output_tokens=2, total_tokens=7),
    ]
    # The same body in one read: only the latest counts.
    events, error, _ = await replay(WireResponse(body, chunking=Chunking.whole()))
    assert error is None
    assert _usages(events) == [UsageEvent(input_tokens=5, output_tokens=2, total_tokens=7)]


async def test_every_count_is_read_and_one_of_another_type_is_unknown() -> None:
    every = {
        "promptTokenCount": 10,
        "toolUsePromptTokenCount": 3,
        "candidatesTokenCount": 4,
        "thoughtsTokenCount": 6,
        "totalTokenCount": 23,
        "cachedContentTokenCount": 8,
    }
    wrong = {
        "promptTokenCount": "10",
        "candidatesTokenCount": True,
        "thoughtsTokenCount": 2,
        "totalTokenCount": 12.0,
    }
    body = _chunk("a", every) + _chunk("b", wrong) + _chunk("c", [7], finish=True)
    events, error = await replay_bytewise(WireResponse(body, content_type="text/event-stream"))
    assert error is None
    assert _usages(events) == [
        UsageEvent(
            input_tokens=13,
            output_tokens=10,
            total_tokens=23,
            cache_read_input_tokens=8,
            reasoning_tokens=6,
        ),
        UsageEvent(output_tokens=2, reasoning_tokens=2),
        UsageEvent(),  # a usageMetadata that is no object: nothing known
    ]


@pytest.mark.parametrize("counts", [(13, 10, 23, 8, 6), (None, None, None, None, None)])
def test_a_snapshot_built_field_by_field_is_the_constructed_event(
    counts: tuple[int | None, int | None, int | None, int | None, int | None],
) -> None:
    # The client builds its snapshots field by field (no `__init__` per paced event): an unset
    # slot (a field added to the class but not to that build) raises AttributeError here.
    built = snapshot(counts)
    input_tokens, output_tokens, total, cached, thoughts = counts
    expected = UsageEvent(input_tokens, output_tokens, total, cached, None, thoughts)
    assert type(built) is UsageEvent
    assert {f.name: getattr(built, f.name) for f in dataclasses.fields(UsageEvent)} == {
        f.name: getattr(expected, f.name) for f in dataclasses.fields(UsageEvent)
    }
    assert built == expected
    assert repr(built) == repr(expected)
    assert built + built == expected + expected  # CONTINUATION sums them
    assert snapshot(counts) is not built
    built.path = ("sub",)  # the Worker stamps sub-agent events
    assert built.path == ("sub",)
