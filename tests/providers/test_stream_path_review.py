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


_WIRES: dict[str, tuple[str, str]] = {
    # wire: (its recording of a plain answer, the base URL's path)
    "openai_chat": ("finish_length", "/v1"),
    "anthropic_messages": ("plain_text", ""),
    "openai_responses": ("plain_text", "/v1"),
    "gemini": ("plain_text", "/v1beta"),
}


def _client(wire: str, base_url: str) -> Any:
    from llm_worker.providers import (
        AnthropicClient,
        GeminiClient,
        OpenAIChatClient,
        OpenAIResponsesClient,
    )

    kinds: dict[str, Any] = {
        "openai_chat": OpenAIChatClient,
        "anthropic_messages": AnthropicClient,
        "openai_responses": OpenAIResponsesClient,
        "gemini": GeminiClient,
    }
    return kinds[wire](
        model="m",
        api_key="k-0123456789abcdef",
        base_url=base_url + _WIRES[wire][1],
        retry=RetryPolicy.disabled(),
        max_concurrency=1,  # a slot a cancelled stream kept would make the next one wait
    )


@pytest.mark.parametrize("wire", sorted(_WIRES))
async def test_a_stream_closed_at_every_event_frees_its_connection(
    http_transport: str, wire: str
) -> None:
    # The lazy parts (mapper, decoder, emitter made at the first bytes) and the inline hot
    # paths: a stream closed after any number of its events (none included: abandoned
    # before its first byte) releases its connection and its admission slot at once; the
    # client's next stream (one slot) then runs whole. Every wait bounded.
    import anyio

    name = _WIRES[wire][0]
    full = streams.recorded_response(wire, name, Chunking.random(seed=7, max_size=48))
    async with WireServer([full] * 200) as server:
        client = _client(wire, server.base_url)
        try:
            whole, error = await streams.collect(client, Request([Message.user("hi")]))
            assert error is None, repr(error)
            for cut in range(len(whole) + 1):
                with anyio.fail_after(10):
                    stream = client.stream(Request([Message.user("hi")]))
                    seen = 0
                    if cut:  # 0: closed before it was read at all
                        async for _ in stream:
                            seen += 1
                            if seen == cut:
                                break
                    await stream.aclose()
                    assert seen == cut
            again, error = await streams.collect(client, Request([Message.user("hi")]))
        finally:
            await client.aclose()
    assert error is None, repr(error)
    assert [type(e) for e in again] == [type(e) for e in whole]
