"""Every recorded OpenAI Chat Completions answer, replayed through the real client over HTTP.

Each recording is served by a `WireServer` on 127.0.0.1 whole, in random pieces and (small
ones) byte by byte, and must give exactly the text, thinking, tool calls, stop reason and usage
that the recording holds — computed here from the recording's JSON, not by the client. Large
recordings are also fed byte by byte through the client's decoding path without a socket
(`replay_sans_io`), which costs microseconds per byte instead of ~0.3 ms over HTTP.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest
from test_openai_chat_support import (
    API,
    answer,
    check_invariants,
    expected,
    normalized_body,
    recorded_response,
    replay,
    replay_sans_io,
    request_from_body,
)

from llm_worker.errors import (
    AuthenticationError,
    InvalidRequestError,
    NotFoundError,
    ProviderError,
    RateLimitError,
)
from llm_worker.events import (
    ErrorEvent,
    Event,
    ResponseStatus,
    StatusEvent,
    StopReason,
    UsageEvent,
)
from llm_worker.testing import Chunking
from support.recorded import fixture_names, load, params

pytestmark = pytest.mark.anyio

BYTEWISE_HTTP_MAX = 6_000  # bytes; larger recordings go bytewise through replay_sans_io

_ANSWERS = [n for n in fixture_names(API) if load(API, n)["response"]["status"] == 200]
_ERRORS = [n for n in fixture_names(API) if load(API, n)["response"]["status"] != 200]
_SMALL = [n for n in _ANSWERS if len(load(API, n)["response"]["body"]) <= BYTEWISE_HTTP_MAX]
# Whole-JSON answers (a server that ignored `stream: true`) are recognized by the client's body
# sniffing, which sits before the SSE decoder: they replay over HTTP only.
_SSE = [n for n in _ANSWERS if "event-stream" in load(API, n)["response"]["content_type"]]


def _params(names: list[str]) -> list[Any]:
    # Without the recordings, params() gives its one skipped placeholder.
    return [pytest.param(n, id=n) for n in names] or params(API)


def _chunkings(name: str) -> list[Chunking]:
    seed = zlib.crc32(name.encode())
    return [Chunking.whole(), Chunking.random(seed)]


def _assert_matches_recording(name: str, events: list[Event], error: Exception | None) -> None:
    want = expected(name)
    got = answer(events)
    check_invariants(events, error)
    assert got.text == want.text
    assert got.thinking == want.thinking
    assert got.usage == want.usage
    if want.error is not None:
        assert isinstance(error, ProviderError)
        assert error.message == want.error["message"]
        assert error.streamed
        code = error.error_type or type(error).__name__
        assert got.error == {"code": code, "message": error.message}
        return
    assert error is None, repr(error)
    assert got.calls == want.calls
    assert got.stop_reason is want.stop_reason
    assert got.raw_stop_reason == want.raw_stop_reason


@pytest.mark.parametrize("name", _params(_ANSWERS))
async def test_recorded_answer_replays_exactly(name: str) -> None:
    for chunking in _chunkings(name):
        events, error, _ = await replay(recorded_response(name, chunking))
        _assert_matches_recording(name, events, error)


@pytest.mark.parametrize("name", _params(_SMALL))
async def test_recorded_answer_replays_bytewise_over_http(name: str) -> None:
    events, error, _ = await replay(recorded_response(name, Chunking.bytewise()))
    _assert_matches_recording(name, events, error)


@pytest.mark.parametrize("name", _params(_SSE))
async def test_recorded_answer_replays_bytewise_sans_io(name: str) -> None:
    events, error = await replay_sans_io(load(API, name)["response"]["body"].encode())
    _assert_matches_recording(name, events, error)


def test_recordings_cover_the_features() -> None:
    """The replays above exercise what they claim: guard against a fixture set that shrank."""
    features = {f for n in _ANSWERS for f in load(API, n)["features"]}
    for feature in (
        "reasoning_content",
        "reasoning_field",
        "refusal",
        "tool_calls:2",
        "tool_empty_args",
        "mid_stream_error",
        "sse_event_lines",
        "x_groq",
        "cached_tokens",
        "usage_chunk_empty_choices",
        "sse_comments",
        "cjk",
    ):
        assert feature in features, feature


async def test_specific_recordings_read_as_the_provider_meant() -> None:
    """A few facts spelled out, beyond matching the reference reading."""
    events, error, _ = await replay(recorded_response("refusal_structured_output"))
    assert error is None
    assert answer(events).stop_reason is StopReason.REFUSAL
    assert answer(events).raw_stop_reason == "stop"
    assert answer(events).text == "I'm very sorry, but I can't assist with that request."

    events, error, _ = await replay(recorded_response("openrouter_cached_tokens"))
    assert error is None
    usage = answer(events).usage
    assert usage == UsageEvent(687, 187, 874, 679, None, 118, audio_input_tokens=0)

    events, error, _ = await replay(recorded_response("groq_text_x_groq_usage"))
    assert answer(events).usage == UsageEvent(18, 73, 91)

    events, error, _ = await replay(recorded_response("nonstream_korean_text"))
    assert answer(events).text == "나는 바다를 좋아해요."

    events, error, _ = await replay(recorded_response("agent_run_step1_two_calls_empty_args"))
    calls = answer(events).calls
    assert [(c.name, c.input) for c in calls] == [("get_country", {}), ("get_product_name", {})]
    assert answer(events).stop_reason is StopReason.TOOL_USE

    events, error, _ = await replay(recorded_response("snowflake_logprobs"))
    assert error is None  # [DONE] without any finish_reason is complete, its reason unknown
    assert answer(events).stop_reason is None
    assert answer(events).text == "4"


async def test_mid_stream_errors_are_typed() -> None:
    events, error, _ = await replay(recorded_response("groq_mid_stream_error_tool_use_failed"))
    assert isinstance(error, InvalidRequestError)
    assert error.error_type == "invalid_request_error"
    assert error.status_code == 400
    assert answer(events).thinking.startswith("We need")

    events, error, _ = await replay(recorded_response("openrouter_mid_stream_error"))
    assert isinstance(error, InvalidRequestError)
    assert error.message == "Token limit reached"
    # The usage that came with the error is kept (it is what the request cost).
    assert answer(events).usage.output_tokens == 10
    # The closing status names the response that failed (for a support request).
    assert events[-1] == StatusEvent(
        ResponseStatus.FAILED, "gen-1762179802-UN8pkJI4AGZvryk0kFnb", "minimax/minimax-m2:free"
    )


_ERROR_CLASSES: dict[int, type[ProviderError]] = {
    401: AuthenticationError,
    404: NotFoundError,
    429: RateLimitError,
}


@pytest.mark.parametrize("name", _params(_ERRORS))
async def test_recorded_error_raises_typed_error(name: str) -> None:
    rec = load(API, name)["response"]
    events, error, _ = await replay(recorded_response(name, headers={"retry-after": "7"}))
    assert isinstance(error, _ERROR_CLASSES[rec["status"]])
    assert error.status_code == rec["status"]
    assert error.message == json.loads(rec["body"])["error"]["message"]
    assert not error.streamed
    assert error.retry_after == 7.0
    assert events == [
        ErrorEvent(error.error_type, error.message),
        StatusEvent(ResponseStatus.FAILED),
    ]


# `nonstream_cached_tokens` marks one content part with `prompt_cache_breakpoint`, a per-part
# option the neutral message model has no place for: its request cannot be rebuilt.
_REBUILDABLE = [n for n in fixture_names(API) if n != "nonstream_cached_tokens"]


@pytest.mark.parametrize("name", _params(_REBUILDABLE))
async def test_build_body_gives_the_recorded_request(name: str) -> None:
    """The recorded request, read back into neutral form, is rebuilt field for field."""
    rec = load(API, name)
    recorded = rec["request"]["body"]
    request = request_from_body(recorded)
    path = rec["request"]["url_path"].split("?")[0]
    prefix = path.removesuffix("/chat/completions")
    _, _, server = await replay(
        recorded_response(name), request, model=recorded["model"], prefix=prefix
    )
    sent = server.requests[0]
    assert sent.path == path
    assert sent.headers["authorization"].startswith("Bearer sk-test-")
    assert normalized_body(sent.json()) == normalized_body(recorded)
