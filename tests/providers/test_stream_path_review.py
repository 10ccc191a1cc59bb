"""Review of issue 39's stream-path cuts (SSE decoder, drive, the four mappers, Gemini's hops).

Each test is a probe that broke a cut, or guards an edge of one: the event sequences of the
fast paths are held to what the general paths give.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from llm_worker.events import BlockDelta, Event, TextDelta, UsageEvent
from llm_worker.messages import Message, Request
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers.gemini import GeminiClient
from llm_worker.testing import Chunking, WireResponse, WireServer
from support import streams

pytestmark = pytest.mark.anyio

_BOM = b"\xef\xbb\xbf"


def _texts(events: list[Event]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


def _gemini_chunk(text: str, candidates: int, **finish: str) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    candidate.update(finish)
    usage = {"promptTokenCount": 4, "candidatesTokenCount": candidates}
    return {"candidates": [candidate], "usageMetadata": usage}


def _gemini_sse(chunks: list[dict[str, Any]], chunking: Chunking, bom: bool) -> WireResponse:
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return WireResponse((_BOM if bom else b"") + body, chunking=chunking)


@pytest.mark.parametrize(
    "chunking", [Chunking.whole(), Chunking.bytewise()], ids=["whole", "bytes"]
)
async def test_a_gemini_follow_up_opening_with_a_bom_keeps_its_first_event(
    http_transport: str, chunking: Chunking
) -> None:
    # Broken: the SSE decoder drops a BOM only at the start of the whole stream, and Hops
    # handed a CONTINUATION follow-up's body on as it came: its first line read
    # `\ufeffdata: …`, a field of no name, and the follow-up's first text ("a ") was lost
    # without an error ("Once upon time.").
    first = [
        _gemini_chunk("Once ", 1),
        _gemini_chunk("upon ", 2, finishReason="CONTINUATION", continuationToken="T"),
    ]
    second = [_gemini_chunk("a ", 1), _gemini_chunk("time.", 2, finishReason="STOP")]
    answers = [_gemini_sse(first, chunking, bom=True), _gemini_sse(second, chunking, bom=True)]
    async with WireServer(answers) as server:
        client = GeminiClient(
            model="gemini-2.5-flash",
            api_key="gemini-test-key-0123456789",
            base_url=server.base_url + "/v1beta",
            retry=RetryPolicy.disabled(),
        )
        try:
            events, error = await streams.collect(client, Request([Message.user("Go.")]))
        finally:
            await client.aclose()
    assert error is None, repr(error)
    assert len(server.requests) == 2
    assert _texts(events) == "Once upon a time."
    usage = [(u.input_tokens, u.output_tokens) for u in events if isinstance(u, UsageEvent)]
    assert usage[-1] == (8, 4)
