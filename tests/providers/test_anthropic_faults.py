"""The fault matrix against `AnthropicClient`: cuts, resets, error statuses, mid-stream error
events, malformed data, stalls — each ends in the ordered abort → ErrorEvent → FAILED → typed
exception, with nothing received before the fault lost and no hang."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from test_anthropic_support import (
    API,
    answer,
    block_delta,
    block_start,
    block_stop,
    check_invariants,
    message_end,
    message_start,
    recorded_response,
    replay,
    replay_many,
    sse,
    sse_payloads,
    text_stream,
    texts,
    thinking_text,
)

from llm_worker.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    InvalidRequestError,
    MalformedStreamError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
)
from llm_worker.events import (
    BlockAbort,
    BlockStart,
    BlockStop,
    BlockType,
    ErrorEvent,
    ResponseStatus,
    StatusEvent,
    StopReason,
)
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import Chunking, WireResponse
from support.recorded import load

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

FAST_RETRY = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.02)


def _received_before(body: str, cut: int) -> dict[str, str]:
    """Text and thinking of the events whole before byte `cut` (read without the client)."""
    head = body.encode()[:cut].decode("utf-8", "ignore")
    complete = head[: head.rfind("\n\n") + 2] if "\n\n" in head else ""
    out = {"text": "", "thinking": ""}
    for payload in sse_payloads(complete):
        delta = payload.get("delta", {})
        if payload["type"] == "content_block_delta" and delta["type"] == "text_delta":
            out["text"] += delta["text"]
        if payload["type"] == "content_block_delta" and delta["type"] == "thinking_delta":
            out["thinking"] += delta["thinking"]
    return out


def _cut_points(body: str) -> list[int]:
    size = len(body.encode())
    return [1, 100, *range(300, size - 1, max(1, size // 23)), size - 3]


@pytest.mark.parametrize("framing", ["chunked", "close"])
@pytest.mark.parametrize("name", ["thinking_tool_run_step1", "text_and_two_tool_calls"])
async def test_cut_at_any_byte_fails_typed_and_keeps_what_arrived(name: str, framing: Any) -> None:
    body = load(API, name)["response"]["body"]
    for cut in _cut_points(body):
        events, error, _ = await replay(recorded_response(name, cut_at=cut, framing=framing))
        # A clean close inside an event: the SSE decoder hands over the cut event at end of
        # stream (so no byte is withheld), whose JSON then does not parse.
        assert isinstance(error, StreamInterruptedError | MalformedStreamError), (cut, error)
        if framing == "chunked":
            assert isinstance(error, StreamInterruptedError), (cut, error)
        assert error.provider == "anthropic"
        assert error.streamed
        check_invariants(events, failed=True)
        before = _received_before(body, cut)
        assert texts(events) == before["text"], cut
        assert thinking_text(events) == before["thinking"], cut


@pytest.mark.parametrize("at", [0, 700, 1500])
async def test_connection_reset_fails_typed(at: int) -> None:
    name = "thinking_with_signature"
    events, error, _ = await replay(recorded_response(name, Chunking.random(seed=3), reset_at=at))
    if at == 0:
        # Nothing of the answer arrived: a connection error, which a retry policy may retry.
        assert isinstance(error, APIConnectionError), error
        assert not error.streamed
    else:
        assert isinstance(error, StreamInterruptedError), error
        assert error.streamed
    check_invariants(events, failed=True)
    body = load(API, name)["response"]["body"]
    assert thinking_text(events) == _received_before(body, at)["thinking"]


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": "req_011CTest",
    }


@pytest.mark.parametrize(
    ("status", "error_type", "cls"),
    [
        (429, "rate_limit_error", RateLimitError),
        (500, "api_error", ServerError),
        (529, "overloaded_error", OverloadedError),
        (500, "overloaded_error", OverloadedError),
        (400, "invalid_request_error", InvalidRequestError),
    ],
)
async def test_http_errors_with_anthropic_bodies_raise_typed(
    status: int, error_type: str, cls: type[ProviderError]
) -> None:
    response = WireResponse(
        _error_body(error_type, "Something specific."),
        status=status,
        content_type="application/json",
        headers={"retry-after": "7", "request-id": "req_header"},
    )
    events, error, server = await replay(response)
    assert isinstance(error, cls)
    assert type(error) is cls
    assert error.status_code == status
    assert error.error_type == error_type
    assert error.message == "Something specific."
    assert error.request_id == "req_011CTest"
    assert error.retry_after == 7.0
    assert not error.streamed
    assert len(server.requests) == 1  # retries disabled here
    assert events == [
        ErrorEvent(error_type, "Something specific."),
        StatusEvent(ResponseStatus.FAILED),
    ]


async def test_overloaded_before_the_answer_is_retried_then_succeeds() -> None:
    overloaded = WireResponse(
        _error_body("overloaded_error", "Overloaded"), status=529, content_type="application/json"
    )
    ok = WireResponse(text_stream("Hello", " there"))
    events, error, server = await replay_many([overloaded, overloaded, ok], retry=FAST_RETRY)
    assert error is None
    assert texts(events) == "Hello there"
    assert len(server.requests) == 3
    check_invariants(events)


async def test_invalid_request_is_not_retried() -> None:
    bad = WireResponse(
        _error_body("invalid_request_error", "max_tokens: required"),
        status=400,
        content_type="application/json",
    )
    _, error, server = await replay_many([bad, WireResponse(text_stream("x"))], retry=FAST_RETRY)
    assert isinstance(error, InvalidRequestError)
    assert len(server.requests) == 1


def _overloaded_mid_thinking() -> str:
    # No recording holds a mid-stream error: this one has the documented shape
    # (`event: error`, `{"type": "error", "error": {"type": "overloaded_error", ...}}`).
    return (
        message_start()
        + block_start(0, {"type": "thinking", "thinking": "", "signature": ""})
        + block_delta(0, {"type": "thinking_delta", "thinking": "Let me think"})
        + block_delta(0, {"type": "thinking_delta", "thinking": " about it."})
        + sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    )


@pytest.mark.parametrize("chunking", [Chunking.whole(), Chunking.bytewise()])
async def test_mid_stream_overloaded_error_aborts_then_raises(chunking: Chunking) -> None:
    response = WireResponse(_overloaded_mid_thinking(), chunking=chunking)
    events, error, server = await replay_many([response], retry=FAST_RETRY)
    assert isinstance(error, OverloadedError)
    assert error.streamed
    assert error.error_type == "overloaded_error"
    assert error.retryable  # for the caller to decide: never retried silently mid-stream
    assert len(server.requests) == 1
    check_invariants(events, failed=True)
    assert thinking_text(events) == "Let me think about it."
    assert events[-3:] == [
        BlockAbort(0, BlockType.THINKING, "Overloaded"),
        ErrorEvent("overloaded_error", "Overloaded"),
        # What message_start said about the response is kept on the failure too.
        StatusEvent(ResponseStatus.FAILED, "msg_test", "claude-test"),
    ]


@pytest.mark.parametrize(
    "bad_event",
    [
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"de\n\n',
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0}\n\n',
        sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}}
        ),
        sse({"type": "content_block_delta", "index": 0, "delta": ["not", "an", "object"]}),
        "data: [1, 2]\n\n",
        "data: \n\n",
    ],
    ids=["cut-json", "no-delta", "text-not-a-string", "delta-a-list", "not-an-object", "empty"],
)
async def test_malformed_data_fails_typed_and_keeps_the_text(bad_event: str) -> None:
    body = (
        message_start()
        + block_start(0, {"type": "text", "text": ""})
        + block_delta(0, {"type": "text_delta", "text": "kept"})
        + bad_event
        + block_delta(0, {"type": "text_delta", "text": " never seen"})
    )
    events, error, _ = await replay(WireResponse(body))
    assert isinstance(error, MalformedStreamError), error
    assert error.streamed
    check_invariants(events, failed=True)
    assert texts(events) == "kept"
    assert isinstance(events[-3], BlockAbort)


async def test_a_stream_without_message_stop_is_interrupted_not_complete() -> None:
    body = text_stream("all", " text").rsplit("event: message_stop", 1)[0]
    events, error, _ = await replay(WireResponse(body))
    assert isinstance(error, StreamInterruptedError)
    check_invariants(events, failed=True)
    assert texts(events) == "all text"
    # The block was whole: its stop is released (without a stop reason), not aborted.
    stop = next(e for e in events if isinstance(e, BlockStop))
    assert stop.stop_reason is None
    assert not any(isinstance(e, BlockAbort) for e in events)


@pytest.mark.parametrize(
    ("response", "cls"),
    [
        (WireResponse(b""), StreamInterruptedError),
        (
            WireResponse(
                "<html><head><title>502 Bad Gateway</title></head></html>",
                status=502,
                content_type="text/html",
            ),
            ServerError,
        ),
        (
            WireResponse("<!doctype html><title>Login</title>", content_type="text/html"),
            APIStatusError,
        ),
    ],
    ids=["empty-body", "html-502", "html-200"],
)
async def test_empty_body_and_html_pages_fail_typed(
    response: WireResponse, cls: type[ProviderError]
) -> None:
    events, error, _ = await replay(response)
    assert isinstance(error, cls), error
    check_invariants(events, failed=True)


async def test_a_stalled_stream_times_out_instead_of_hanging() -> None:
    body = text_stream("before", " the stall")
    head = body.index("event: content_block_stop")
    response = WireResponse(
        body, chunking=Chunking("sizes", sizes=(head, len(body))), chunk_delay=5.0
    )
    events, error, _ = await replay(response, timeout=httpx.Timeout(0.3))
    assert isinstance(error, APITimeoutError)
    assert error.streamed
    check_invariants(events, failed=True)
    assert texts(events) == "before the stall"
    assert isinstance(events[-3], BlockAbort)


async def test_unknown_events_and_deltas_are_passed_over_and_unknown_blocks_kept_whole() -> None:
    body = (
        message_start()
        + block_start(0, {"type": "text", "text": ""})
        + block_delta(0, {"type": "text_delta", "text": "Searching."})
        + block_stop(0)
        + block_start(1, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"})
        + block_delta(1, {"type": "input_json_delta", "partial_json": '{"query": "x"}'})
        + sse({"type": "future_event", "detail": {"anything": True}})
        + block_stop(1)
        + block_start(2, {"type": "web_search_tool_result", "content": []})
        + block_stop(2)
        + block_start(3, {"type": "text", "text": ""})
        + block_delta(3, {"type": "citations_delta", "citation": {"type": "web_search"}})
        + block_delta(3, {"type": "text_delta", "text": "Found"})
        # A late delta of the closed provider block 1 must not leak into the open text block.
        + block_delta(1, {"type": "input_json_delta", "partial_json": "LEAK"})
        + block_delta(1, {"type": "text_delta", "text": "LEAK"})
        + block_delta(3, {"type": "brand_new_delta", "x": 1})
        + block_delta(3, {"type": "text_delta", "text": " it."})
        + block_stop(3)
        + block_start(4, {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "ask"})
        + block_stop(4)
        + message_end()
    )
    events, error, _ = await replay(WireResponse(body, chunking=Chunking.random(seed=5)))
    assert error is None
    check_invariants(events)
    starts = [e for e in events if isinstance(e, BlockStart)]
    kinds = [BlockType.TEXT, BlockType.PROVIDER, BlockType.PROVIDER, BlockType.TEXT]
    assert [(s.index, s.block_type) for s in starts] == [
        *enumerate(kinds),
        (4, BlockType.PROVIDER),
    ]
    blocks = answer(events).blocks
    assert [b.text for b in blocks if b.kind == "text"] == ["Searching.", "Found it."]
    assert [b.data for b in blocks if b.kind == "provider"] == [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "x"},
        },
        {"type": "web_search_tool_result", "content": []},
        {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "ask"},
    ]
    last = [e for e in events if isinstance(e, BlockStop)][-1]
    assert (last.index, last.stop_reason) == (4, StopReason.END_TURN)


async def test_events_after_message_stop_are_ignored() -> None:
    body = text_stream("done") + block_start(1, {"type": "text", "text": "ghost"})
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    check_invariants(events)
    assert texts(events) == "done"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("refusal", StopReason.REFUSAL),
        ("pause_turn", StopReason.PAUSE_TURN),
        ("model_context_window_exceeded", StopReason.MAX_TOKENS),
        ("something_new", StopReason.OTHER),
    ],
)
async def test_stop_reasons_are_kept(raw: str, reason: StopReason) -> None:
    events, error, _ = await replay(WireResponse(text_stream("x", stop_reason=raw)))
    assert error is None
    last = [e for e in events if isinstance(e, BlockStop)][-1]
    assert (last.stop_reason, last.raw_stop_reason) == (reason, raw)


async def test_a_tool_call_with_its_input_in_the_start_block() -> None:
    # Some proxies send the whole input in content_block_start and no delta.
    body = (
        message_start()
        + block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": [1]}})
        + block_stop(0)
        + message_end("tool_use")
    )
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    assert answer(events).blocks[0].input == {"a": [1]}


async def test_an_error_event_that_echoes_the_key_is_scrubbed() -> None:
    body = message_start() + sse(
        {"type": "error", "error": {"type": "api_error", "message": "bad key sk-ant-test-key"}}
    )
    events, error, _ = await replay(WireResponse(body))
    assert isinstance(error, ServerError)
    assert "sk-ant-test-key" not in str(error)
    assert "sk-ant-test-key" not in json.dumps([repr(e) for e in events])
