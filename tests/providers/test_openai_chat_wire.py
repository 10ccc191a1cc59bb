"""`testing._wire_openai_chat.encode`: a scripted answer as a real Chat Completions stream.

The encoded bytes, served over HTTP and read by the real `OpenAIChatClient`, must give the same
answer as `ScriptedClient` gives for that script — text, thinking, tool calls, stop reason,
usage, and the failure.
"""

from __future__ import annotations

import anyio
import pytest
from test_openai_chat_support import answer, check_invariants, expected_from, replay

from llm_worker.errors import (
    MalformedStreamError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    StreamInterruptedError,
)
from llm_worker.events import Event, StopReason, UsageEvent
from llm_worker.messages import Message, Request, TextPart, ThinkingPart, ToolUsePart
from llm_worker.testing import Chunking, ScriptedClient, ScriptedResponse, WireResponse
from llm_worker.testing._model_server import ScriptedModelServer
from llm_worker.testing._wire_openai_chat import encode

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

USAGE = UsageEvent(
    input_tokens=120,
    output_tokens=45,
    total_tokens=165,
    cache_read_input_tokens=100,
    reasoning_tokens=20,
)

SCRIPTS = {
    "text": ScriptedResponse.text("Hello, wörld! 🌍 " * 5, usage=USAGE, chunk_size=7),
    "thinking": ScriptedResponse(
        [ThinkingPart("Let me think about it."), TextPart("42.")], usage=USAGE, chunk_size=5
    ),
    "tools": ScriptedResponse(
        [
            TextPart("Looking up."),
            ToolUsePart("call_1", "weather", {"city": "Kyōto", "days": [1, 2]}),
            ToolUsePart("", "clock", {}),
        ],
        usage=USAGE,
        chunk_size=4,
    ),
    "refusal": ScriptedResponse.text(
        "I can't help with that.", stop_reason=StopReason.REFUSAL, usage=USAGE
    ),
    "max_tokens": ScriptedResponse.text("Cut sh", stop_reason=StopReason.MAX_TOKENS, usage=USAGE),
    "filtered": ScriptedResponse.text("", stop_reason=StopReason.CONTENT_FILTER, usage=USAGE),
    "cache_write": ScriptedResponse.text(
        "ok", usage=UsageEvent(10, 2, 12, cache_read_input_tokens=0, cache_creation_input_tokens=8)
    ),
}


async def _scripted(response: ScriptedResponse) -> tuple[list[Event], Exception | None]:
    events: list[Event] = []
    error: Exception | None = None
    with anyio.fail_after(10):
        try:
            async for event in ScriptedClient([response]).stream(Request([Message.user("hi")])):
                events.append(event)
        except ProviderError as exc:
            error = exc
    return events, error


@pytest.mark.parametrize("name", list(SCRIPTS))
@pytest.mark.parametrize("chunking", [Chunking.whole(), Chunking.random(11, max_size=9)])
async def test_encoded_stream_reads_as_the_scripted_answer(name: str, chunking: Chunking) -> None:
    response = SCRIPTS[name]
    body = encode(response, model="gpt-test")
    events, error, _ = await replay(WireResponse(body, chunking=chunking))
    check_invariants(events, error)
    assert error is None
    scripted, _ = await _scripted(response)
    got, want = answer(events), answer(scripted)
    assert got.text == want.text
    assert got.thinking == want.thinking
    assert got.calls == want.calls
    assert got.stop_reason is want.stop_reason
    assert got.usage == want.usage
    # The bytes are also what a plain reading of the Chat format finds.
    reference = expected_from(body.decode())
    assert (reference.text, reference.calls) == (got.text, got.calls)


@pytest.mark.parametrize(
    "failure",
    [
        OverloadedError("busy", error_type="overloaded_error"),
        RateLimitError("slow down", error_type="rate_limit_exceeded", status_code=429),
        StreamInterruptedError("cut"),
        MalformedStreamError("garbage"),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_encoded_failure_raises_the_same_error_class(failure: ProviderError) -> None:
    response = ScriptedResponse.text("partial answer", fail_with=failure)
    events, error, _ = await replay(WireResponse(encode(response, model="m")))
    check_invariants(events, error)
    scripted, scripted_error = await _scripted(response)
    assert type(error) is type(scripted_error)
    assert answer(events).text == answer(scripted).text == "partial answer"
    if not isinstance(failure, StreamInterruptedError | MalformedStreamError):
        assert isinstance(error, ProviderError) and error.message == failure.message


def test_inexpressible_answers_raise() -> None:
    with pytest.raises(ValueError, match="pause_turn"):
        encode(ScriptedResponse.text("x", stop_reason=StopReason.PAUSE_TURN), model="m")
    from llm_worker.messages import ToolResultPart

    with pytest.raises(ValueError, match="tool result"):
        encode(ScriptedResponse([ToolResultPart("c", "r")]), model="m")


async def test_scripted_model_server_speaks_chat() -> None:
    script = [
        ScriptedResponse([ToolUsePart("", "f", {"a": 1})]),
        ScriptedResponse.text("done"),
    ]
    server = ScriptedModelServer("openai_chat", script)
    async with server:
        client = server.client()
        try:
            with anyio.fail_after(10):
                first = [e async for e in client.stream(Request([Message.user("go")]))]
                second = [e async for e in client.stream(Request([Message.user("again")]))]
        finally:
            await client.aclose()
    assert answer(first).calls[0].name == "f" and answer(first).calls[0].input == {"a": 1}
    assert answer(second).text == "done"
    assert server.requests[0].path == "/v1/chat/completions"
