"""The fault matrix against the Responses client: every failure ends in order — abort of the
open block, `ErrorEvent`, FAILED, typed exception — with everything received before it
delivered, and never hangs.

No recording holds a mid-stream `error` event or `response.failed`; those are built from the
documented shapes (`{"type": "error", "code", "message", "param"}` and a `response.failed` whose
`response.error` has `code` and `message`). HTTP error bodies are OpenAI's
`{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_openai_responses_support import (
    API,
    KEY,
    USAGE,
    check_invariants,
    created,
    data_events,
    message_added,
    recorded,
    replay,
    sse,
    text_delta,
    text_of,
    text_stream,
)

from llm_worker.errors import (
    APITimeoutError,
    ContentFilterError,
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
    BlockDelta,
    BlockType,
    ErrorEvent,
    InputJsonDelta,
    ThinkingDelta,
    UsageEvent,
)
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import Chunking, WireResponse
from support.recorded import load

# Every test runs over both transports (httpx and aiohttp).
pytestmark = pytest.mark.usefixtures("http_transport")

FAST_RETRY = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05)
RECORDING = "message_phase_reasoning_function_call"  # reasoning, then text, then a call


def openai_error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def prefix_content(body: bytes) -> tuple[str, str, str]:
    """Text, thinking and arguments of the events wholly inside `body` (a cut stream)."""
    whole = body[: body.rfind(b"\n\n") + 2].decode()
    text = thinking = args = ""
    for event in data_events(whole):
        kind = event["type"]
        if kind == "response.output_text.delta":
            text += event["delta"]
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            thinking += event["delta"]
        elif kind == "response.function_call_arguments.delta":
            args += event["delta"]
    return text, thinking, args


def delivered(events: list[Any]) -> tuple[str, str, str]:
    thinking = "".join(
        e.delta.text
        for e in events
        if isinstance(e, BlockDelta) and isinstance(e.delta, ThinkingDelta)
    )
    args = "".join(
        e.delta.partial_json
        for e in events
        if isinstance(e, BlockDelta) and isinstance(e.delta, InputJsonDelta)
    )
    return text_of(events), thinking, args


def cut_points() -> list[Any]:
    """Offsets across the recording: inside each kind of item, between events, at the end."""
    body = load(API, RECORDING)["response"]["body"].encode()
    marks = {
        "in-reasoning-done": body.find(b'"encrypted_content"', body.find(b"output_item.done")),
        "mid-text": body.find(b"capital"),
        "after-text-event": body.find(b"\n\n", body.find(b"capital")) + 2,
        "mid-arguments": body.find(b"Potato", body.find(b"function_call_arguments")),
        "before-completed": body.find(b"event: response.completed"),
        "mid-completed": body.find(b"usage", body.find(b"response.completed")),
    }
    return [pytest.param(offset, id=name) for name, offset in marks.items()]


@pytest.mark.anyio
@pytest.mark.parametrize("offset", cut_points())
@pytest.mark.parametrize("fault", ["cut_at", "reset_at"])
async def test_a_broken_connection_fails_in_order_and_keeps_what_arrived(
    fault: str, offset: int
) -> None:
    body = load(API, RECORDING)["response"]["body"].encode()
    response = recorded(RECORDING, Chunking.random(seed=offset, max_size=300), **{fault: offset})
    events, error, _ = await replay(response)
    assert isinstance(error, StreamInterruptedError)
    assert error.streamed
    check_invariants(events, failed=True)
    assert delivered(events) == prefix_content(body[:offset])
    assert events[-2] == ErrorEvent("stream_interrupted", error.message)


@pytest.mark.anyio
async def test_an_end_without_the_terminal_event_is_an_interruption() -> None:
    # The body ends cleanly (chunked terminator) right before `response.completed`.
    body = text_stream("Hello", " there")
    truncated = body[: body.index("event: response.completed")]
    events, error, _ = await replay(WireResponse(truncated))
    assert isinstance(error, StreamInterruptedError)
    check_invariants(events, failed=True)
    assert text_of(events) == "Hello there"
    # The message item was done, so its block had stopped: nothing is left to abort.
    assert not any(isinstance(e, BlockAbort) for e in events)


@pytest.mark.anyio
async def test_silence_beyond_the_read_timeout_is_a_timeout_not_a_hang() -> None:
    body = text_stream("slow", " answer")
    split = body.index("event: response.output_item.done")
    response = WireResponse(
        body, chunking=Chunking("sizes", sizes=(split, len(body))), chunk_delay=5.0
    )
    events, error, _ = await replay(response, timeout=0.3)
    assert isinstance(error, APITimeoutError)
    assert error.streamed
    check_invariants(events, failed=True)
    assert text_of(events) == "slow answer"
    assert isinstance(events[-3], BlockAbort)


# -- HTTP errors before the answer -------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            429,
            openai_error(
                "Rate limit reached for gpt-5 on tokens per min.", "tokens", "rate_limit_exceeded"
            ),
            RateLimitError,
        ),
        (
            500,
            openai_error("The server had an error while processing your request.", "server_error"),
            ServerError,
        ),
        (503, openai_error("The engine is currently overloaded.", "server_error"), OverloadedError),
        (
            400,
            openai_error("Invalid 'input[2].id': 'x'.", "invalid_request_error", "invalid_value"),
            InvalidRequestError,
        ),
    ],
    ids=["429", "500", "503", "400"],
)
async def test_http_errors_are_typed(status: int, body: dict[str, Any], kind: type) -> None:
    headers = {"retry-after": "7", "x-request-id": "req_abc"}
    response = WireResponse(body, status=status, content_type="application/json", headers=headers)
    events, error, server = await replay(response)
    assert type(error) is kind
    assert isinstance(error, ProviderError)
    assert error.status_code == status
    assert error.message == body["error"]["message"]
    assert error.request_id == "req_abc"
    if status == 429:
        assert error.retry_after == 7.0
    assert [type(e) for e in events] == [ErrorEvent, type(events[-1])]
    assert len(server.requests) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("status", [429, 500, 503])
async def test_errors_before_the_answer_are_retried(status: int) -> None:
    failure = WireResponse(
        openai_error("try again", "server_error"), status=status, content_type="application/json"
    )
    events, error, server = await replay(
        failure, WireResponse(text_stream("fine")), retry=FAST_RETRY
    )
    assert error is None
    check_invariants(events)
    assert text_of(events) == "fine"
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body


# -- errors inside the stream ------------------------------------------------------------------


def failing_stream(*tail: str) -> str:
    return (
        created() + message_added() + text_delta("Partial") + text_delta(" answer") + "".join(tail)
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("event", "kind", "code"),
    [
        (
            {
                "type": "error",
                "code": "server_error",
                "message": "The server had an error.",
                "param": None,
            },
            ServerError,
            "server_error",
        ),
        (
            {
                "type": "error",
                "code": "rate_limit_exceeded",
                "message": "Slow down.",
                "param": None,
            },
            RateLimitError,
            "rate_limit_exceeded",
        ),
        (
            {"type": "error", "error": {"type": "invalid_request_error", "message": "Bad input."}},
            InvalidRequestError,
            "invalid_request_error",
        ),
        (
            {
                "type": "response.failed",
                "response": {
                    "id": "resp_1",
                    "status": "failed",
                    "error": {"code": "server_error", "message": "The model failed."},
                    "usage": USAGE,
                },
            },
            ServerError,
            "server_error",
        ),
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "invalid_prompt", "message": "Flagged as violating policy."},
                },
            },
            ContentFilterError,
            "invalid_prompt",
        ),
    ],
    ids=["error", "error-rate-limit", "error-nested", "failed", "failed-invalid-prompt"],
)
async def test_provider_errors_mid_stream_abort_then_raise(
    event: dict[str, Any], kind: type, code: str
) -> None:
    events, error, server = await replay(WireResponse(failing_stream(sse(event))), retry=FAST_RETRY)
    assert type(error) is kind
    assert isinstance(error, ProviderError)
    assert error.streamed
    assert error.error_type == code
    assert error.provider == API
    assert len(server.requests) == 1  # begun streams are never retried
    check_invariants(events, failed=True)
    assert text_of(events) == "Partial answer"
    abort = events[-3]
    assert isinstance(abort, BlockAbort)
    assert (abort.index, abort.block_type) == (0, BlockType.TEXT)
    assert events[-2] == ErrorEvent(code, error.message)
    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert usage == ([UsageEvent(20, 9, 29, 4, None, 2)] if "usage" in str(event) else [])


@pytest.mark.anyio
async def test_an_error_that_echoes_the_key_is_scrubbed() -> None:
    error_event = {"type": "error", "code": "invalid_api_key", "message": f"bad key {KEY}"}
    events, error, _ = await replay(WireResponse(failing_stream(sse(error_event))))
    assert error is not None
    assert KEY not in str(error)
    assert KEY not in repr(events)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "tail",
    [
        'data: {"type": "response.output_text.delta", "output_index": 0, "delta": "x\n\n',
        "data: [1, 2, 3]\n\n",
        'data: {"no_type": true}\n\n',
        sse(
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1"},
            }
        )
        + sse(
            {"type": "response.output_item.done", "output_index": 0, "item": {"type": "message"}}
        ),
    ],
    ids=["cut-json", "not-an-object", "no-type", "call-without-name"],
)
async def test_malformed_data_is_a_typed_error_after_what_arrived(tail: str) -> None:
    events, error, _ = await replay(WireResponse(failing_stream(tail) + text_delta("never")))
    assert isinstance(error, MalformedStreamError)
    check_invariants(events, failed=True)
    assert text_of(events) == "Partial answer"
    assert events[-2] == ErrorEvent("malformed_stream", error.message)


@pytest.mark.anyio
async def test_the_request_body_sent_is_the_built_body() -> None:
    events, error, server = await replay(WireResponse(text_stream("ok")))
    assert error is None
    assert json.loads(server.requests[0].body) == {
        "model": "m",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
        "stream": True,
    }
    assert server.requests[0].headers["accept"] == "text/event-stream"
    assert len(events) > 2
