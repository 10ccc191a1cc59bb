"""`Hops` reads each response's framing on its own: a CONTINUATION follow-up may come as SSE
after a JSON array, or the other way round (a proxy that drops the query string on one request
only), and its running usage is added to the earlier responses' in every snapshot.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from test_gemini_support import KEY

from llm_worker.events import BlockDelta, Event, TextDelta, UsageEvent
from llm_worker.messages import Message, Request
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers.gemini import GeminiClient
from llm_worker.testing import Chunking, WireResponse, WireServer
from support import streams

pytestmark = pytest.mark.anyio

_BOM = b"\xef\xbb\xbf"


def _chunk(text: str, candidates: int, **finish: str) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    candidate.update(finish)
    usage = {"promptTokenCount": 4, "candidatesTokenCount": candidates}
    return {"candidates": [candidate], "usageMetadata": usage}


_FIRST = [
    _chunk("Once ", 1),
    _chunk("upon ", 2, finishReason="CONTINUATION", continuationToken="T"),
]
_SECOND = [_chunk("a ", 1), _chunk("time.", 2, finishReason="STOP")]


def _sse(chunks: list[dict[str, Any]]) -> WireResponse:
    body = b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks)
    return WireResponse(b"\r\n" + body, chunking=Chunking.bytewise())


def _array(chunks: list[dict[str, Any]]) -> WireResponse:
    body = _BOM + b" \n" + orjson.dumps(chunks, option=orjson.OPT_INDENT_2)
    return WireResponse(body, content_type="application/json", chunking=Chunking.bytewise())


async def _stream(*answers: WireResponse) -> tuple[list[Event], Exception | None, int]:
    async with WireServer(answers) as server:
        client = GeminiClient(
            model="gemini-2.5-flash",
            api_key=KEY,
            base_url=server.base_url + "/v1beta",
            retry=RetryPolicy.disabled(),
        )
        try:
            events, error = await streams.collect(client, Request([Message.user("Go.")]))
        finally:
            await client.aclose()
        return events, error, len(server.requests)


@pytest.mark.parametrize(
    ("first", "second"),
    [(_sse, _array), (_array, _sse), (_array, _array), (_sse, _sse)],
    ids=["sse-then-array", "array-then-sse", "arrays", "sse"],
)
async def test_each_response_of_a_continued_answer_has_its_own_framing(
    first: Any, second: Any
) -> None:
    events, error, requests = await _stream(first(_FIRST), second(_SECOND))
    assert error is None, repr(error)
    assert requests == 2
    deltas = [e.delta for e in events if isinstance(e, BlockDelta)]
    text = [d.text for d in deltas if isinstance(d, TextDelta)]
    assert len(text) == len(deltas)  # only text
    assert "".join(text) == "Once upon a time."
    # Read byte by byte: a snapshot per change, the follow-up's added to the first's.
    assert [(u.input_tokens, u.output_tokens) for u in events if isinstance(u, UsageEvent)] == [
        (4, 1),
        (4, 2),
        (8, 3),
        (8, 4),
    ]
