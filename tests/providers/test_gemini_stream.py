"""The Gemini client against the recorded streams, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import zlib
from typing import Any

import orjson
import pytest
from test_gemini_support import (
    API,
    answer,
    check_invariants,
    expected,
    recorded_chunks,
    recording_response,
    replay,
    replay_bytewise,
)

from llm_worker.errors import ContentFilterError, InvalidRequestError, NotFoundError
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    ErrorEvent,
    ResponseStatus,
    SignatureDelta,
    StatusEvent,
    StopReason,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import Message, Request, ToolResultPart, ToolUsePart
from llm_worker.testing import Chunking, WireResponse
from support.recorded import fixture_names, load

pytestmark = pytest.mark.anyio


def _answers() -> list[Any]:
    """Every recording with a 200 answer: SSE streams, JSON-array streams, single bodies."""
    return [n for n in fixture_names(API) if load(API, n)["response"]["status"] == 200]


def _chunking(name: str, mode: str) -> Chunking:
    if mode == "random":
        return Chunking.random(seed=zlib.crc32(name.encode()), max_size=97)
    return Chunking(mode)  # type: ignore[arg-type]


# Byte by byte over a socket for a few recordings (SSE with signatures, a JSON array, one
# object); for every recording through the in-process transport (same client code path).
_SOCKET_BYTEWISE = {
    "gemini3_function_call_signature",
    "json_array_stream_function_call",
    "nonstream_three_function_calls",
}


@pytest.mark.parametrize("chunking", ["whole", "bytewise", "random"])
@pytest.mark.parametrize("name", _answers())
async def test_recording_replays_to_its_recorded_content(name: str, chunking: str) -> None:
    response = recording_response(name, chunking=_chunking(name, chunking))
    if chunking == "bytewise" and name not in _SOCKET_BYTEWISE:
        events, error = await replay_bytewise(response)
    else:
        events, error, _ = await replay(response)
    if name == "nonstream_finish_safety":
        assert isinstance(error, ContentFilterError)  # a filter finish with no content at all
    else:
        assert error is None, error
    check_invariants(events, error)
    want = expected(name)
    got = answer(events)
    assert got.blocks == want.blocks
    assert got.text == want.text
    assert got.thinking == want.thinking
    assert got.signatures == want.signatures
    assert got.calls == want.calls
    assert got.provider == want.provider
    assert got.citations == want.citations
    if error is None:
        assert got.finish == want.finish
        assert got.usage == want.usage


@pytest.mark.parametrize(
    ("name", "cls", "status"),
    [
        ("error_400_invalid_key_event_stream_content_type", InvalidRequestError, 400),
        ("error_404_model_event_stream_content_type", NotFoundError, 404),
    ],
)
async def test_error_bodies_under_event_stream_content_type_raise_typed(
    name: str, cls: type[Exception], status: int
) -> None:
    events, error, server = await replay(recording_response(name))
    assert type(error) is cls
    assert error.status_code == status  # type: ignore[attr-defined]
    recorded = orjson.loads(load(API, name)["response"]["body"])["error"]
    assert error.error_type == recorded["status"]  # type: ignore[attr-defined]
    assert error.message == recorded["message"]  # type: ignore[attr-defined]
    assert events == [
        ErrorEvent(recorded["status"], recorded["message"]),
        StatusEvent(ResponseStatus.FAILED),
    ]
    assert len(server.requests) == 1


async def test_signature_of_a_text_part_rides_on_the_text_block_not_the_thinking() -> None:
    events, _, _ = await replay(recording_response("thought_parts_with_signature"))
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [s.block_type for s in starts] == [BlockType.THINKING, BlockType.TEXT]
    signed = [
        e for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, SignatureDelta)
    ]
    assert [s.index for s in signed] == [1]


async def test_signature_on_a_final_empty_text_part_is_kept_on_the_text_block() -> None:
    events, _, _ = await replay(recording_response("gemini3_thoughts_and_signature"))
    stop = events.index(next(e for e in events if isinstance(e, BlockStop) and e.index == 1))
    signature = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, BlockDelta) and isinstance(e.delta, SignatureDelta)
    )
    assert events[signature].index == 1  # type: ignore[union-attr]
    assert signature < stop


async def test_function_call_answer_is_one_tool_block_with_its_signature() -> None:
    events, _, _ = await replay(recording_response("function_call_thought_signature_run_step1"))
    blocks = [e for e in events if isinstance(e, BlockStart | BlockDelta | BlockStop)]
    assert [type(e).__name__ for e in blocks] == [
        "BlockStart",
        "BlockDelta",
        "BlockDelta",
        "BlockStop",
    ]
    start, signature, arguments, stop = blocks
    assert isinstance(start, BlockStart) and start.metadata == ToolUseMetadata(
        "gemini_call_0", "get_country"
    )
    assert isinstance(signature, BlockDelta) and isinstance(signature.delta, SignatureDelta)
    assert isinstance(arguments, BlockDelta) and arguments.delta.partial_json == "{}"  # type: ignore[union-attr]
    assert isinstance(stop, BlockStop) and stop.stop_reason is StopReason.TOOL_USE
    assert stop.raw_stop_reason == "STOP"


def _history_with_calls(*ids: str) -> Request:
    calls = [ToolUsePart(i, "lookup", {}) for i in ids]
    results = [ToolResultPart(i, "ok", name="lookup") for i in ids]
    return Request(
        [Message.user("go"), Message("assistant", list(calls)), Message("user", list(results))]
    )


def _call_ids(events: list[Any]) -> list[str]:
    return [
        e.metadata.id
        for e in events
        if isinstance(e, BlockStart) and isinstance(e.metadata, ToolUseMetadata)
    ]


async def test_call_ids_continue_the_conversation_and_skip_ids_in_use() -> None:
    # Two calls in the history, one of them already named like our third id.
    request = _history_with_calls("toolu_01", "gemini_call_2")
    events, _, _ = await replay(
        recording_response("parallel_function_calls_run_step1"), request=request
    )
    assert _call_ids(events) == ["gemini_call_3", "gemini_call_4"]
    again, _, _ = await replay(
        recording_response("parallel_function_calls_run_step1"), request=request
    )
    assert _call_ids(again) == _call_ids(events)  # the same history gives the same ids


def _body(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks)


def _candidate(
    parts: list[dict[str, Any]], finish: str | None = None, **more: Any
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0, **more}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("STOP", StopReason.END_TURN),
        ("MAX_TOKENS", StopReason.MAX_TOKENS),
        ("SAFETY", StopReason.CONTENT_FILTER),
        ("RECITATION", StopReason.CONTENT_FILTER),
        ("BLOCKLIST", StopReason.CONTENT_FILTER),
        ("PROHIBITED_CONTENT", StopReason.CONTENT_FILTER),
        ("SPII", StopReason.CONTENT_FILTER),
        ("IMAGE_PROHIBITED_CONTENT", StopReason.CONTENT_FILTER),
        ("IMAGE_RECITATION", StopReason.CONTENT_FILTER),
        ("MODEL_ARMOR", StopReason.CONTENT_FILTER),
        ("MALFORMED_FUNCTION_CALL", StopReason.MALFORMED_TOOL_CALL),
        ("UNEXPECTED_TOOL_CALL", StopReason.MALFORMED_TOOL_CALL),
        ("TOO_MANY_TOOL_CALLS", StopReason.MALFORMED_TOOL_CALL),
        ("LANGUAGE", StopReason.OTHER),
        ("SOMETHING_NEW", StopReason.OTHER),
    ],
)
async def test_finish_reasons_are_mapped_and_kept_raw(raw: str, reason: StopReason) -> None:
    body = _body(_candidate([{"text": "Hi"}]), _candidate([{"text": " there"}], raw))
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    check_invariants(events, error)
    stop = next(e for e in events if isinstance(e, BlockStop))
    assert (stop.stop_reason, stop.raw_stop_reason) == (reason, raw)
    assert answer(events).text == "Hi there"  # the content before a filter finish is kept


async def test_a_call_then_stop_is_a_tool_use_stop() -> None:
    call = {"functionCall": {"name": "f", "args": {"x": [1, {"y": None}]}}}
    events, error, _ = await replay(
        WireResponse(_body(_candidate([{"text": "Let me"}, call], "STOP")))
    )
    assert error is None
    check_invariants(events, error)
    got = answer(events)
    assert got.blocks == ["text", "tool_use"]
    assert got.calls == [("f", {"x": [1, {"y": None}]})]
    assert [e for e in events if isinstance(e, BlockStop)][-1].stop_reason is StopReason.TOOL_USE


async def test_a_call_without_args_gets_an_empty_object() -> None:
    events, _, _ = await replay(
        WireResponse(_body(_candidate([{"functionCall": {"name": "now"}}], "STOP")))
    )
    assert answer(events).calls == [("now", {})]


async def test_a_blocked_prompt_raises_content_filter_error() -> None:
    feedback = {
        "promptFeedback": {
            "blockReason": "PROHIBITED_CONTENT",
            "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "blocked": True}],
        },
        "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
    }
    events, error, _ = await replay(WireResponse(_body(feedback)))
    assert isinstance(error, ContentFilterError)
    assert error.error_type == "PROHIBITED_CONTENT"
    assert "HARM_CATEGORY_HARASSMENT" in error.message
    check_invariants(events, error)
    # The usage of the blocked request is delivered before the error.
    assert [type(e) for e in events] == [StatusEvent, UsageEvent, ErrorEvent, StatusEvent]
    assert events[1] == UsageEvent(input_tokens=7, total_tokens=7)


async def test_a_safety_finish_with_no_content_raises_after_the_error_event() -> None:
    events, error, _ = await replay(recording_response("nonstream_finish_safety"))
    assert isinstance(error, ContentFilterError)
    assert error.error_type == "SAFETY"
    assert "HARM_CATEGORY_HATE_SPEECH" in error.message
    assert events[-2] == ErrorEvent("SAFETY", error.message)


async def test_usage_is_emitted_when_it_changes_once_per_network_read() -> None:
    name = "plain_text"  # the first two chunks repeat the same usage, the third changes it
    chunks = recorded_chunks(load(API, name)["response"]["body"])
    distinct = [
        c["usageMetadata"]
        for i, c in enumerate(chunks)
        if i == 0 or c["usageMetadata"] != chunks[i - 1]["usageMetadata"]
    ]
    final = UsageEvent(input_tokens=13, output_tokens=8, total_tokens=21)
    # Events arriving one read at a time: a snapshot for each change, none for a repeat.
    events, _ = await replay_bytewise(recording_response(name))
    usages = [e for e in events if isinstance(e, UsageEvent)]
    assert len(usages) == len(distinct) == 2
    assert usages == [UsageEvent(input_tokens=15, total_tokens=15), final]
    # All chunks in one read: only the latest counts are news.
    events, _, _ = await replay(recording_response(name, chunking=Chunking.whole()))
    assert [e for e in events if isinstance(e, UsageEvent)] == [final]


@pytest.mark.parametrize(
    ("name", "usage"),
    [
        # cachedContentTokenCount is part of promptTokenCount; thoughts are output tokens.
        (
            "nonstream_cached_content_tokens",
            UsageEvent(
                input_tokens=3520,
                output_tokens=44,
                total_tokens=3564,
                cache_read_input_tokens=3512,
                reasoning_tokens=42,
            ),
        ),
        # toolUsePromptTokenCount (search results read) is input: input + output = total.
        (
            "google_search_grounding",
            UsageEvent(input_tokens=119, output_tokens=653, total_tokens=772, reasoning_tokens=412),
        ),
    ],
)
async def test_usage_fields(name: str, usage: UsageEvent) -> None:
    events, _, _ = await replay(recording_response(name))
    assert answer(events).usage == usage


async def test_parts_outside_the_event_model_become_provider_blocks() -> None:
    events, error, _ = await replay(recording_response("code_execution_parts"))
    assert error is None
    got = answer(events)
    assert got.blocks == ["provider", "provider", "text"]
    code, result = got.provider
    assert code["executableCode"]["code"].endswith("print(result)")
    assert code["thoughtSignature"].startswith("EqADCp0D")  # kept on the part, not a delta
    assert result["codeExecutionResult"]["output"] == "-428330955.97745\n"
    assert "print(result)" not in got.text
    assert got.text.startswith("The result of $65465")


async def test_only_the_first_candidate_is_read() -> None:
    chunk = {
        "candidates": [
            {"content": {"parts": [{"text": "second"}]}, "index": 1, "finishReason": "STOP"},
            {"content": {"parts": [{"text": "first"}]}, "index": 0, "finishReason": "STOP"},
        ]
    }
    events, error, _ = await replay(WireResponse(_body(chunk)))
    assert error is None
    assert answer(events).text == "first"


async def test_a_second_signature_on_one_kind_of_part_starts_a_new_block() -> None:
    body = _body(
        _candidate([{"text": "a", "thoughtSignature": "S1"}]),
        _candidate([{"text": "b"}, {"text": "c", "thoughtSignature": "S2"}], "STOP"),
    )
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    got = answer(events)
    assert got.blocks == ["text", "text"]
    assert got.signatures == ["S1", "S2"]
    assert got.text == "abc"


async def test_json_array_splitting_survives_brackets_and_escapes_in_strings() -> None:
    tricky = 'a "quoted" {x} [y] \\ back\\"slash\n\u00e9\U0001f600 }]'
    chunks = [
        _candidate([{"text": tricky}]),
        {"candidates": [{"content": {"parts": [{"text": "]["}]}, "finishReason": "STOP"}]},
    ]
    body = b"[" + b",\r\n".join(orjson.dumps(c, option=orjson.OPT_INDENT_2) for c in chunks) + b"]"
    for chunking in (Chunking.whole(), Chunking.bytewise(), Chunking.random(seed=3, max_size=5)):
        response = WireResponse(body, content_type="application/json", chunking=chunking)
        events, error, _ = await replay(response)
        assert error is None
        check_invariants(events, error)
        assert answer(events).text == tricky + "]["
