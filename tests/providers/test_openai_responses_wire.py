"""`encode(ScriptedResponse)` round trip: the Responses client reading the encoded stream gives
the same events as `ScriptedClient` playing the same answer (and the stream has the recorded
shape).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_openai_responses_support import data_events, replay

from llm_worker.errors import ServerError
from llm_worker.events import (
    BlockStart,
    BlockStop,
    Event,
    StatusEvent,
    StopReason,
    TextMetadata,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import Message, Request, TextPart, ThinkingPart, ToolUsePart
from llm_worker.testing import Chunking, ScriptedClient, ScriptedResponse, WireResponse
from llm_worker.testing._wire_openai_responses import encode
from support.recorded import load

# Every test runs over both transports (httpx and aiohttp).
pytestmark = pytest.mark.usefixtures("http_transport")

USAGE = UsageEvent(
    input_tokens=40,
    output_tokens=12,
    total_tokens=52,
    cache_read_input_tokens=8,
    reasoning_tokens=3,
)

ANSWERS = [
    pytest.param(ScriptedResponse.text("Hello, wörld — 👋!", usage=USAGE, chunk_size=4), id="text"),
    pytest.param(
        ScriptedResponse(
            [
                ThinkingPart("Plan one.", item_id="rs_a"),
                ThinkingPart("Plan two.", signature="gAAAA-enc", item_id="rs_a"),
                TextPart("Checking.", item_id="msg_a"),
                ToolUsePart("call_x", "get_weather", {"city": "Oslo"}, item_id="fc_a"),
                ToolUsePart("", "get_time", {}),
            ],
            usage=USAGE,
            chunk_size=5,
        ),
        id="reasoning-text-calls",
    ),
    pytest.param(
        ScriptedResponse([TextPart("1, 2, 3, 4")], stop_reason=StopReason.MAX_TOKENS, usage=USAGE),
        id="max-tokens",
    ),
    pytest.param(
        ScriptedResponse(
            [TextPart("Filtered")], stop_reason=StopReason.CONTENT_FILTER, usage=USAGE
        ),
        id="content-filter",
    ),
    pytest.param(
        ScriptedResponse(
            [TextPart("I can't help with that.")], stop_reason=StopReason.REFUSAL, usage=USAGE
        ),
        id="refusal",
    ),
    pytest.param(
        ScriptedResponse(
            [ThinkingPart("hmm", item_id="rs_f"), TextPart("Partial")],
            fail_with=ServerError("The model failed.", error_type="server_error"),
        ),
        id="failed",
    ),
]


async def scripted_events(answer: ScriptedResponse) -> tuple[list[Event], Exception | None]:
    client = ScriptedClient([answer])
    events: list[Event] = []
    try:
        async for event in client.stream(Request([Message.user("hi")])):
            events.append(event)
    except ServerError as exc:
        return events, exc
    return events, None


def comparable(events: list[Event]) -> list[Event]:
    """Events without what only the wire has: the `msg_` id, the raw stop spelling, the
    response's id and model, the item ids the encoder makes up where the script gave none
    (the wire always has one), and a cache-write count the script left unknown (the API's
    usage always has one: 0)."""
    return [_comparable(event) for event in events]


def _comparable(event: Event) -> Event:
    if isinstance(event, BlockStart):
        meta = event.metadata
        if isinstance(meta, TextMetadata):
            return replace(event, metadata=TextMetadata())
        if isinstance(meta, ToolUseMetadata) and (meta.item_id or "").endswith("scripted"):
            return replace(event, metadata=replace(meta, item_id=None))
    if isinstance(event, BlockStop):
        return replace(event, raw_stop_reason=None)
    if isinstance(event, StatusEvent):
        return StatusEvent(event.status)
    if isinstance(event, UsageEvent) and not event.cache_creation_input_tokens:
        return replace(event, cache_creation_input_tokens=None)
    return event


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("chunking", [Chunking.whole(), Chunking.random(seed=11, max_size=17)])
async def test_client_reads_what_scripted_client_plays(
    answer: ScriptedResponse, chunking: Chunking
) -> None:
    want, want_error = await scripted_events(answer)
    body = encode(answer, model="gpt-5")
    events, error, _ = await replay(WireResponse(body, chunking=chunking))
    assert comparable(events) == comparable(want)
    assert type(error) is type(want_error)
    if isinstance(error, ServerError) and isinstance(want_error, ServerError):
        assert (error.message, error.error_type) == (want_error.message, want_error.error_type)
        assert error.streamed


@pytest.mark.anyio
async def test_text_keeps_its_message_id() -> None:
    body = encode(ScriptedResponse([TextPart("x", item_id="msg_keep")]), model="m")
    events, _, _ = await replay(WireResponse(body))
    start = next(e for e in events if isinstance(e, BlockStart))
    assert start.metadata == TextMetadata(item_id="msg_keep")


def test_stream_has_the_recorded_shape() -> None:
    # Every event type and every key the encoder writes appears in a real recording.
    real: dict[str, set[str]] = {}
    for name in ("reasoning_summary_run_step1", "parallel_function_calls_run_step1", "refusal"):
        for event in data_events(load("openai_responses", name)["response"]["body"]):
            real.setdefault(event["type"], set()).update(event)
    answer = ANSWERS[1].values[0]
    assert isinstance(answer, ScriptedResponse)
    for event in data_events(encode(answer, model="gpt-5").decode()):
        assert event["type"] in real
        assert set(event) <= real[event["type"]]
    sequence = [e["sequence_number"] for e in data_events(encode(answer, model="m").decode())]
    assert sequence == list(range(len(sequence)))


@pytest.mark.parametrize("stop", [StopReason.STOP_SEQUENCE, StopReason.PAUSE_TURN])
def test_stop_reasons_responses_cannot_express_are_refused(stop: StopReason) -> None:
    with pytest.raises(ValueError, match="cannot express"):
        encode(ScriptedResponse.text("x", stop_reason=stop), model="m")
