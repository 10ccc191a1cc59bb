"""Every recorded Anthropic Messages stream, replayed over HTTP through `AnthropicClient`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from test_anthropic_support import (
    API,
    TIMEOUT,
    answer,
    check_invariants,
    expected,
    recorded_response,
    replay,
)

from llm_worker.errors import (
    AuthenticationError,
    InvalidRequestError,
    NotFoundError,
    ProviderError,
    StreamInterruptedError,
)
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    ErrorEvent,
    Event,
    PingEvent,
    ResponseStatus,
    StatusEvent,
    StopReason,
    TextDelta,
    ThinkingMetadata,
    UsageEvent,
)
from llm_worker.messages import Message, Request
from llm_worker.providers import AnthropicClient
from llm_worker.providers._blocks import drive
from llm_worker.testing import Chunking
from support.recorded import fixture_names, load

pytestmark = pytest.mark.anyio


def _streams() -> list[str]:
    return [
        n
        for n in fixture_names(API)
        if load(API, n)["response"]["status"] == 200
        and load(API, n)["response"]["content_type"].startswith("text/event-stream")
    ]


# One byte per write costs ~75 µs a byte over real HTTP, so over HTTP the bytewise replay
# covers the first 8 kB of a recording (all of most of them) and goes on in 997-byte pieces;
# `test_recorded_stream_parses_byte_by_byte_in_process` then feeds every byte of every
# recording separately to the same driver and mapper.
_BYTEWISE_HEAD = 8_000

CHUNKINGS = {
    "whole": Chunking.whole(),
    "bytewise": Chunking.bytewise(),
    "random1": Chunking.random(seed=1, max_size=16),
    "random2": Chunking.random(seed=2, max_size=300),
}


def _chunking(name: str, chunking: str) -> Chunking:
    size = len(load(API, name)["response"]["body"].encode())
    if chunking == "bytewise" and size > _BYTEWISE_HEAD:
        rest = (size - _BYTEWISE_HEAD) // 997 + 1
        return Chunking("sizes", sizes=(1,) * _BYTEWISE_HEAD + (997,) * rest)
    return CHUNKINGS[chunking]


def _check_against_recording(name: str, events: list[Event]) -> None:
    check_invariants(events)
    got, want = answer(events), expected(name)
    assert got.blocks == want.blocks
    assert got.stop_reason == want.stop_reason
    assert (got.input_tokens, got.output_tokens) == (want.input_tokens, want.output_tokens)
    assert (got.cache_read, got.cache_creation) == (want.cache_read, want.cache_creation)


STREAMS = _streams() or [pytest.param("none", marks=pytest.mark.skip)]


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("name", STREAMS)
async def test_recorded_stream_replays_to_the_recorded_content(name: str, chunking: str) -> None:
    events, error, _ = await replay(recorded_response(name, _chunking(name, chunking)))
    assert error is None, error
    _check_against_recording(name, events)


async def _bytes_one_by_one(body: bytes) -> AsyncIterator[bytes]:
    for i in range(len(body)):
        yield body[i : i + 1]


@pytest.mark.parametrize("name", STREAMS)
async def test_recorded_stream_parses_byte_by_byte_in_process(name: str) -> None:
    body = load(API, name)["response"]["body"].encode()
    client = AnthropicClient(model="m", api_key="k")
    request = Request([Message.user("hi")])
    events: list[Event] = []
    with anyio.fail_after(TIMEOUT):
        async for event in drive(
            _bytes_one_by_one(body), client.mapper(request), provider="anthropic"
        ):
            events.append(event)
    _check_against_recording(name, events)


async def test_signature_and_thinking_text_of_a_thinking_stream() -> None:
    events, error, _ = await replay(recorded_response("thinking_with_signature"))
    assert error is None
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [s.block_type for s in starts] == [BlockType.THINKING, BlockType.TEXT]
    got = answer(events)
    assert got.blocks[0].signature.startswith("E")
    assert len(got.blocks[0].signature) > 100
    assert got.blocks[0].text
    # The signature delta rides on the thinking block, before its stop.
    stop_at = next(i for i, e in enumerate(events) if isinstance(e, BlockStop))
    sig_at = max(i for i, e in enumerate(events) if isinstance(e, BlockDelta) and e.index == 0)
    assert sig_at < stop_at


async def test_redacted_thinking_arrives_as_metadata_without_deltas() -> None:
    events, error, _ = await replay(recorded_response("redacted_thinking"))
    assert error is None
    starts = [e for e in events if isinstance(e, BlockStart)]
    redacted = [s for s in starts if isinstance(s.metadata, ThinkingMetadata)]
    assert len(redacted) == 2
    assert all(isinstance(s.metadata, ThinkingMetadata) and s.metadata.redacted for s in redacted)
    assert not [e for e in events if isinstance(e, BlockDelta) and e.index in (0, 1)]


async def test_tool_without_arguments_gives_an_empty_object() -> None:
    events, error, _ = await replay(recorded_response("single_tool_call_empty_args"))
    assert error is None
    got = answer(events)
    assert [b.input for b in got.blocks] == [{}]
    assert got.stop_reason == "tool_use"
    stop = [e for e in events if isinstance(e, BlockStop)][-1]
    assert stop.stop_reason is StopReason.TOOL_USE


async def test_pause_turn_is_kept_and_server_tool_blocks_are_provider_blocks() -> None:
    events, error, _ = await replay(recorded_response("pause_turn_web_search"))
    assert error is None
    stop = [e for e in events if isinstance(e, BlockStop)][-1]
    assert stop.stop_reason is StopReason.PAUSE_TURN
    assert stop.raw_stop_reason == "pause_turn"
    # 25 blocks: thinking, 3 empty texts, 21 server blocks kept whole; no tool-use block leaks.
    kinds = [e.block_type for e in events if isinstance(e, BlockStart)]
    assert kinds.count(BlockType.PROVIDER) == 21
    assert [k for k in kinds if k is not BlockType.PROVIDER] == [
        BlockType.THINKING,
        BlockType.TEXT,
        BlockType.TEXT,
        BlockType.TEXT,
    ]
    assert stop.block_type is BlockType.PROVIDER  # the last server_tool_use, still unanswered


async def test_citation_deltas_and_server_tool_inputs_never_reach_text() -> None:
    events, error, _ = await replay(recorded_response("web_search_citations"))
    assert error is None
    text = "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )
    assert "query" not in text  # the server tool's input_json_delta
    assert text == "".join(b.text for b in expected("web_search_citations").blocks)


async def test_usage_adds_cache_tokens_to_input_tokens() -> None:
    events, error, _ = await replay(recorded_response("prompt_cache_run_step1_creation"))
    assert error is None
    first = next(e for e in events if isinstance(e, UsageEvent))
    assert first == UsageEvent(
        input_tokens=4 + 1165,
        output_tokens=1,
        total_tokens=4 + 1165 + 1,
        cache_read_input_tokens=0,
        cache_creation_input_tokens=1165,
    )
    events, error, _ = await replay(recorded_response("prompt_cache_run_step2_read"))
    assert error is None
    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert usage[-1].input_tokens == 4 + 1165  # message_delta repeats no input: kept
    assert usage[-1].cache_read_input_tokens == 1165
    assert usage[-1].output_tokens == 221


async def test_thinking_tokens_are_reported_as_reasoning_tokens() -> None:
    events, error, _ = await replay(recorded_response("thinking_tool_run_step1"))
    assert error is None
    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert usage[-1].reasoning_tokens == 53
    assert usage[-1].output_tokens == 92


async def test_pings_become_ping_events() -> None:
    events, error, _ = await replay(recorded_response("redacted_thinking"))
    assert error is None
    assert sum(isinstance(e, PingEvent) for e in events) == 3


@pytest.mark.parametrize(
    ("name", "error_type"),
    [
        ("error_401_on_stream_request", AuthenticationError),
        ("error_404_on_stream_request", NotFoundError),
        ("nonstream_error_400_invalid_request", InvalidRequestError),
    ],
)
async def test_recorded_error_answers_raise_typed_errors(
    name: str, error_type: type[ProviderError]
) -> None:
    events, error, _ = await replay(recorded_response(name))
    assert isinstance(error, error_type)
    body = load(API, name)["response"]["body"]
    assert error.message in body
    assert error.error_type in body
    assert error.request_id == "req_REDACTED"
    assert error.provider == "anthropic"
    assert not error.streamed
    # Nothing began: no STARTED, no block; the error event, FAILED, then the exception.
    assert events == [
        ErrorEvent(error.error_type, error.message),
        StatusEvent(ResponseStatus.FAILED),
    ]


@pytest.mark.parametrize("name", ["nonstream_max_tokens", "nonstream_four_parallel_tool_calls"])
async def test_a_json_answer_where_a_stream_was_expected_fails_typed(name: str) -> None:
    events, error, _ = await replay(recorded_response(name))
    assert isinstance(error, StreamInterruptedError)
    check_invariants(events, failed=True)
