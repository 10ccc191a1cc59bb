"""Review of Gemini's per-event cuts (R42): the candidate index read once, usage built field by
field, citation spans only with citations — against the recordings, reshaped as a server may.

Each reshaped recording must give the answer the recording's own JSON holds (`expected`), in
whole reads and in reads of a few bytes.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from test_gemini_support import answer, expected, recorded_chunks, replay

from llm_worker.events import CitationDelta, UsageEvent
from llm_worker.testing import Chunking, WireResponse
from support.recorded import load

pytestmark = pytest.mark.anyio

_NAMES = (
    "plain_text",
    "usage_in_every_chunk",
    "google_search_grounding",
    "text_with_thoughts_token_count",
)


def _body(chunks: list[dict[str, Any]]) -> str:
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)


def _chunks(name: str) -> list[dict[str, Any]]:
    return recorded_chunks(load("gemini", name)["response"]["body"])


async def _answer_of(body: str, *, size: int | None) -> Any:
    chunking = Chunking.random(seed=size, max_size=size) if size else Chunking.whole()
    events, error, _ = await replay(
        WireResponse(body, content_type="text/event-stream", chunking=chunking)
    )
    assert error is None
    return events


@pytest.mark.parametrize("name", _NAMES)
@pytest.mark.parametrize("size", [None, 7])
async def test_a_second_candidate_before_the_first_changes_nothing(
    name: str, size: int | None
) -> None:
    chunks = copy.deepcopy(_chunks(name))
    for chunk in chunks:
        candidates = chunk.get("candidates") or []
        if candidates:
            other = copy.deepcopy(candidates[0])
            other["index"] = 1
            other["content"] = {"parts": [{"text": "NOT THIS"}], "role": "model"}
            candidates[0].setdefault("index", 0)
            chunk["candidates"] = [other, *candidates]
    events = await _answer_of(_body(chunks), size=size)
    assert answer(events) == expected(name)
    assert "NOT THIS" not in repr(events)


@pytest.mark.parametrize("size", [None, 5])
async def test_usage_changing_and_disappearing_mid_stream_ends_with_the_last_counts(
    size: int | None,
) -> None:
    chunks = copy.deepcopy(_chunks("usage_in_every_chunk"))
    assert len(chunks) > 2
    last = chunks[-1]["usageMetadata"]
    for n, chunk in enumerate(chunks[:-1]):
        if n % 2:
            chunk.pop("usageMetadata", None)
        else:
            chunk["usageMetadata"] = {**last, "candidatesTokenCount": n, "thoughtsTokenCount": "x"}
    events = await _answer_of(_body(chunks), size=size)
    usages = [e for e in events if isinstance(e, UsageEvent)]
    assert usages
    assert usages[-1].output_tokens == last.get("candidatesTokenCount", 0) + last.get(
        "thoughtsTokenCount", 0
    )
    assert usages[-1].input_tokens == last["promptTokenCount"] + last.get(
        "toolUsePromptTokenCount", 0
    )


async def test_grounding_arriving_with_the_last_chunk_still_places_its_citations() -> None:
    chunks = copy.deepcopy(_chunks("plain_text"))
    text = "".join(
        p.get("text", "")
        for c in chunks
        for cand in c.get("candidates", [])[:1]
        for p in (cand.get("content") or {}).get("parts", [])
    )
    assert len(text.encode()) > 4
    chunks[-1]["candidates"][0]["groundingMetadata"] = {
        "groundingChunks": [{"web": {"uri": "https://a.example", "title": "a"}}],
        "groundingSupports": [
            {"segment": {"startIndex": 0, "endIndex": 4}, "groundingChunkIndices": [0, 9, "x"]}
        ],
    }
    events = await _answer_of(_body(chunks), size=None)
    cited = [e.delta for e in events if isinstance(getattr(e, "delta", None), CitationDelta)]
    assert [c.citation.url for c in cited] == ["https://a.example", None, None]
    assert cited[0].citation.start_index == 0
    assert cited[0].citation.end_index == len(text.encode()[:4].decode("utf-8", "ignore"))
