"""Review of Gemini's lone-text-part hand-off (issue 39): it gives what the parts loop gives.

A chunk of one text part whose candidate holds only `content` (and `index`) hands its text
to `drive`; anything else takes the parts loop. The same chunk with an empty text part added
(which the loop passes over) takes the loop: the two streams' events and errors must match,
whatever the part (thought, functionCall, inlineData, executableCode, hostile text) and
whatever else the candidate or chunk carries (finishReason, safetyRatings, citationMetadata,
groundingMetadata, usageMetadata in every chunk).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from llm_worker.errors import ProviderError
from llm_worker.messages import Origin
from llm_worker.providers._blocks import drive
from llm_worker.providers._gemini_ids import CallIds
from llm_worker.providers.gemini import _GeminiMapper  # pyright: ignore[reportPrivateUsage]
from support import recorded

pytestmark = pytest.mark.anyio

_PARTS: list[Any] = [
    {"text": "a"},
    {"text": "é\u2028"},
    {"text": ""},
    {"text": 5},
    {"text": None},
    {"text": ["x"]},
    {"text": "t", "thought": True},
    {"text": "s", "thoughtSignature": "c2ln"},
    {"functionCall": {"name": "f", "args": {"a": 1}}},
    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
    {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}},
    {"unknownPart": {}},
    {},
    "text",
    None,
]
_CANDIDATE_EXTRAS: list[dict[str, Any]] = [
    {},
    {},
    {},
    {"index": 0},
    {"finishReason": "STOP"},
    {"finishReason": "MAX_TOKENS"},
    {"safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]},
    {"citationMetadata": {"citationSources": [{"startIndex": 0, "endIndex": 1, "uri": "u"}]}},
    {"groundingMetadata": {"webSearchQueries": ["q"]}},
    {"index": 1},
]


def _chunk(rng: random.Random, turn: int) -> dict[str, Any]:
    part = rng.choice(_PARTS)
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}}
    candidate.update(rng.choice(_CANDIDATE_EXTRAS))
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-x"}
    if rng.random() < 0.5:
        chunk["usageMetadata"] = {"promptTokenCount": 3, "candidatesTokenCount": turn + 1}
    if rng.random() < 0.05:
        chunk["responseId"] = "r2"
    return chunk


def _loop_shaped(chunk: dict[str, Any]) -> dict[str, Any]:
    # The same chunk, but of two parts (an empty text added, which the loop passes over).
    again: dict[str, Any] = orjson.loads(orjson.dumps(chunk))
    for candidate in again.get("candidates") or []:
        content = candidate.get("content") if isinstance(candidate, dict) else None
        if isinstance(content, dict) and isinstance(content.get("parts"), list):
            content["parts"].append({"text": ""})
    return again


def _sse(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks)


async def _events(body: bytes, size: int) -> list[str]:
    async def pieces() -> AsyncIterator[bytes]:
        for at in range(0, len(body), size):
            yield body[at : at + size]

    mapper = _GeminiMapper(CallIds([]), Origin("gemini", "m"))
    seen: list[str] = []
    try:
        async for event in drive(pieces(), mapper, provider="gemini", max_answer_chars=10**9):
            seen.append(repr(event))
    except ProviderError as exc:
        seen.append(f"{type(exc).__name__}: {exc}")
    return seen


async def test_a_lone_part_of_any_kind_gives_what_the_parts_loop_gives() -> None:
    for case in range(400):
        rng = random.Random(f"gemini-lone-{case}")
        chunks = [_chunk(rng, turn) for turn in range(rng.randint(1, 6))]
        size = rng.choice([7, 64, 10**6])
        fast = await _events(_sse(chunks), size)
        loop = await _events(_sse([_loop_shaped(c) for c in chunks]), size)
        assert fast == loop, (case, chunks)


async def test_every_recorded_gemini_stream_gives_what_the_parts_loop_gives() -> None:
    checked = 0
    for name in recorded.fixture_names("gemini"):
        response = recorded.load("gemini", name)["response"]
        if response["status"] != 200 or "event-stream" not in response["content_type"]:
            continue
        chunks: list[dict[str, Any]] = []
        for line in response["body"].split("\n"):
            if line.startswith("data: {"):
                chunks.append(orjson.loads(line[6:]))
        for size in (5, 10**6):
            fast = await _events(_sse(chunks), size)
            loop = await _events(_sse([_loop_shaped(c) for c in chunks]), size)
            assert fast == loop, (name, size)
        checked += 1
    assert checked >= 10
