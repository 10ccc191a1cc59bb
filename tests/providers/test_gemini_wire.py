"""`testing._wire_gemini.encode`: Gemini's real bytes for a scripted answer.

Round trip: the encoded stream, played over HTTP to the real `GeminiClient`, gives the same
events as `ScriptedClient` gives for the same `ScriptedResponse` (ids aside: Gemini sends
none, so the client synthesizes its own).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import pytest
from test_gemini_support import TIMEOUT, answer, check_invariants, recorded_chunks, replay

from llm_worker.errors import OverloadedError
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    ErrorEvent,
    Event,
    SignatureDelta,
    StatusEvent,
    StopReason,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import (
    Message,
    Request,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.testing import ScriptedClient, ScriptedResponse, WireResponse
from llm_worker.testing._wire_gemini import encode

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

USAGE = UsageEvent(
    input_tokens=120,
    output_tokens=45,
    total_tokens=165,
    cache_read_input_tokens=100,
    reasoning_tokens=30,
)


async def _scripted(response: ScriptedResponse) -> tuple[list[Event], Exception | None]:
    client = ScriptedClient([response], provider="gemini", model="gemini-2.5-flash")
    events: list[Event] = []
    with anyio.fail_after(TIMEOUT):
        try:
            async for event in client.stream(Request([Message.user("hi")])):
                events.append(event)
        except Exception as exc:
            return events, exc
    return events, None


def _shape(events: list[Event]) -> list[tuple[Any, ...]]:
    """The event sequence with runs of one delta kind collapsed and ids, signatures set apart."""
    shape: list[tuple[Any, ...]] = []
    for event in events:
        if isinstance(event, BlockDelta):
            if isinstance(event.delta, SignatureDelta):
                continue  # compared through `answer`; where it sits within its block is free
            token: tuple[Any, ...] = ("delta", event.index, type(event.delta).__name__)
            if shape and shape[-1] == token:
                continue
        elif isinstance(event, BlockStart):
            name = event.metadata.name if isinstance(event.metadata, ToolUseMetadata) else None
            token = ("start", event.index, event.block_type, name)
        elif isinstance(event, BlockStop):
            token = ("stop", event.index, event.block_type, event.stop_reason)
        elif isinstance(event, BlockAbort):
            token = ("abort", event.index, event.block_type)
        elif isinstance(event, ErrorEvent):
            token = ("error", event.code, event.message)
        elif isinstance(event, StatusEvent):
            token = ("status", event.status)  # the wire names the response; a script does not
        elif isinstance(event, UsageEvent):
            token = (type(event).__name__, event)
        else:
            token = (type(event).__name__,)
        shape.append(token)
    return shape


RESPONSES = {
    "text": ScriptedResponse.text("Hello, Gemini world! ünïcödé 🙂", chunk_size=5, usage=USAGE),
    "thinking_text_calls": ScriptedResponse(
        [
            ThinkingPart("Let me think about the weather.", signature="c2lnLXRoaW5r"),
            TextPart("I will look it up.", signature="c2lnLXRleHQ="),
            ToolUsePart(
                "", "get_weather", {"city": "Kyoto", "days": [1, 2]}, signature="c2lnLWNhbGw="
            ),
            ToolUsePart("", "get_time", {}),
        ],
        chunk_size=7,
        usage=USAGE,
    ),
    "max_tokens": ScriptedResponse(
        [TextPart("Cut short")], stop_reason=StopReason.MAX_TOKENS, usage=USAGE
    ),
    "failure": ScriptedResponse(
        [TextPart("Halfway")],
        usage=USAGE,
        fail_with=OverloadedError(
            "The model is overloaded.", status_code=503, error_type="UNAVAILABLE", streamed=True
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(RESPONSES))
async def test_encoded_stream_gives_the_scripted_events(case: str) -> None:
    response = RESPONSES[case]
    want, want_error = await _scripted(response)
    body = encode(response, model="gemini-2.5-flash")
    got, got_error, _ = await replay(WireResponse(body))
    check_invariants(got, got_error)
    assert _shape(got) == _shape(want)
    assert replace(answer(got), finish=None) == replace(answer(want), finish=None)
    assert type(got_error) is type(want_error)
    if isinstance(want_error, OverloadedError) and isinstance(got_error, OverloadedError):
        got_fields = (got_error.message, got_error.status_code, got_error.error_type)
        assert got_fields == (want_error.message, want_error.status_code, want_error.error_type)
        assert got_error.streamed


async def test_synthesized_ids_number_the_calls_of_the_conversation() -> None:
    body = encode(RESPONSES["thinking_text_calls"], model="gemini-2.5-flash")
    history = Request(
        [
            Message.user("q"),
            Message("assistant", [ToolUsePart("gemini_call_0", "f", {})]),
            Message("user", [ToolResultPart("gemini_call_0", "ok")]),
        ]
    )
    events, _, _ = await replay(WireResponse(body), request=history)
    ids = [
        e.metadata.id
        for e in events
        if isinstance(e, BlockStart) and isinstance(e.metadata, ToolUseMetadata)
    ]
    assert ids == ["gemini_call_1", "gemini_call_2"]


def test_the_encoding_is_what_gemini_sends() -> None:
    body = encode(RESPONSES["thinking_text_calls"], model="gemini-2.5-pro").decode()
    assert body.endswith("\r\n\r\n") and "\n\n" not in body.replace("\r\n", "")
    chunks = recorded_chunks(body)
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert parts[0] == {"text": "Let me ", "thought": True, "thoughtSignature": "c2lnLXRoaW5r"}
    assert {"functionCall": {"name": "get_time", "args": {}}} in parts
    assert all("id" not in p.get("functionCall", {}) for p in parts)
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"] == {
        "promptTokenCount": 120,
        "candidatesTokenCount": 15,
        "thoughtsTokenCount": 30,
        "totalTokenCount": 165,
        "cachedContentTokenCount": 100,
    }
    assert all(c["modelVersion"] == "gemini-2.5-pro" for c in chunks)


def test_what_gemini_cannot_stream_is_refused() -> None:
    with pytest.raises(ValueError, match="redacted"):
        encode(ScriptedResponse([ThinkingPart("", redacted="opaque")]), model="m")
    with pytest.raises(ValueError, match="tool result"):
        encode(ScriptedResponse([ToolResultPart("x", "y")]), model="m")
