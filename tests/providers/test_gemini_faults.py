"""The Gemini client when things go wrong: cuts, resets, error answers, bad data, silence.

Every failure must give, in order: what arrived before it, the abort of the open block, an
`ErrorEvent`, a FAILED status, then a typed exception. Never a hang or a bare `KeyError`.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from test_gemini_support import (
    API,
    KEY,
    answer,
    check_invariants,
    expected,
    recorded_chunks,
    recording_response,
    replay,
)

from llm_worker.errors import (
    APITimeoutError,
    AuthenticationError,
    ContentFilterError,
    InvalidRequestError,
    MalformedStreamError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
)
from llm_worker.events import BlockAbort, BlockType, ErrorEvent
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import Chunking, WireResponse
from support.recorded import load

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]


def _text_before(body: str, cut: int) -> str:
    """The text of the SSE events complete within the first `cut` bytes (read independently)."""
    head = body.encode()[:cut].decode("utf-8", "ignore")
    complete = head[: head.rfind("\r\n\r\n") + 4] if "\r\n\r\n" in head else ""
    text = ""
    for chunk in recorded_chunks(complete):
        for candidate in chunk.get("candidates", []):
            for part in candidate.get("content", {}).get("parts", []):
                if "text" in part and not part.get("thought"):
                    text += part["text"]
    return text


def _cuts(body: str) -> list[int]:
    size = len(body.encode())
    ends = [i + 4 for i in range(size) if body.encode()[i : i + 4] == b"\r\n\r\n"]
    # Mid-line, right at event boundaries (the last before the finish chunk), in the last JSON.
    return sorted({1, size // 3, size // 2, ends[0], ends[-2] if len(ends) > 1 else 2, size - 10})


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
@pytest.mark.parametrize(
    "name", ["thought_parts_with_signature", "sequential_function_calls_run_step3"]
)
async def test_a_cut_anywhere_fails_typed_and_keeps_what_arrived(name: str, framing: Any) -> None:
    body = load(API, name)["response"]["body"]
    full = expected(name).text
    for cut in _cuts(body):
        response = recording_response(name, cut_at=cut, framing=framing)
        events, error, _ = await replay(response)
        if framing == "close":
            # The end of the body is the end of the connection: the SSE decoder hands over
            # the cut event (no byte is withheld), whose JSON then does not parse.
            assert isinstance(error, StreamInterruptedError | MalformedStreamError), (cut, error)
        else:
            assert isinstance(error, StreamInterruptedError), (cut, error)
        assert error.streamed
        check_invariants(events, error)
        got = answer(events).text
        assert got.startswith(_text_before(body, cut)), cut  # every complete event arrived
        assert full.startswith(got), cut  # and nothing else


async def test_a_cut_mid_text_aborts_the_open_block() -> None:
    body = load(API, "plain_text")["response"]["body"]
    second_event = body.encode().index(b"\r\n\r\n") + 4
    events, error, _ = await replay(recording_response("plain_text", cut_at=second_event + 10))
    assert isinstance(error, StreamInterruptedError)
    assert [type(e).__name__ for e in events[-3:]] == ["BlockAbort", "ErrorEvent", "StatusEvent"]
    abort = events[-3]
    assert isinstance(abort, BlockAbort) and abort.block_type is BlockType.TEXT
    assert events[-2] == ErrorEvent("stream_interrupted", error.message)
    assert answer(events).text == "The"


@pytest.mark.parametrize("at", [1, 200, 700])
async def test_a_connection_reset_fails_typed(at: int) -> None:
    events, error, _ = await replay(recording_response("finish_max_tokens", reset_at=at))
    assert isinstance(error, StreamInterruptedError)
    check_invariants(events, error)


async def test_a_cut_inside_a_json_array_stream_is_interrupted_not_complete() -> None:
    body = load(API, "json_array_stream_function_call")["response"]["body"]
    cut = body.encode().index(b"functionCall")
    events, error, _ = await replay(
        recording_response("json_array_stream_function_call", cut_at=cut)
    )
    assert isinstance(error, StreamInterruptedError)
    check_invariants(events, error)
    assert answer(events).thinking.startswith("**Generating Pelican Names**")
    assert not answer(events).calls


def _gemini_error(code: int, status: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


@pytest.mark.parametrize(
    ("code", "status", "cls"),
    [
        (400, "INVALID_ARGUMENT", InvalidRequestError),
        (400, "FAILED_PRECONDITION", InvalidRequestError),
        (401, "UNAUTHENTICATED", AuthenticationError),
        (403, "PERMISSION_DENIED", PermissionDeniedError),
        (404, "NOT_FOUND", NotFoundError),
        (429, "RESOURCE_EXHAUSTED", RateLimitError),
        (500, "INTERNAL", ServerError),
        (503, "UNAVAILABLE", OverloadedError),
    ],
)
async def test_http_errors_with_gemini_bodies_raise_typed(
    code: int, status: str, cls: type[Exception]
) -> None:
    body = _gemini_error(code, status, f"{status.lower()} happened")
    response = WireResponse(
        body, status=code, content_type="application/json", headers={"retry-after": "7"}
    )
    events, error, server = await replay(response)
    assert type(error) is cls
    assert error.status_code == code  # type: ignore[attr-defined]
    assert error.error_type == status  # type: ignore[attr-defined]
    assert error.message == f"{status.lower()} happened"  # type: ignore[attr-defined]
    assert not error.streamed  # type: ignore[attr-defined]
    if cls is RateLimitError:
        assert error.retry_after == 7.0  # type: ignore[attr-defined]
    check_invariants(events, error)
    assert len(server.requests) == 1  # retries are disabled in these tests


@pytest.mark.parametrize(("code", "status"), [(429, "RESOURCE_EXHAUSTED"), (503, "UNAVAILABLE")])
async def test_a_retryable_error_before_the_answer_is_retried(code: int, status: str) -> None:
    failure = WireResponse(
        _gemini_error(code, status, "busy"), status=code, content_type="application/json"
    )
    ok = WireResponse(
        b'data: {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}'
        b"\r\n\r\n"
    )
    retry = RetryPolicy(initial_delay=0.01, max_delay=0.02)
    events, error, server = await replay(failure, ok, retry=retry)
    assert error is None
    assert answer(events).text == "ok"
    assert len(server.requests) == 2


def _sse(*chunks: dict[str, Any] | str) -> bytes:
    raw = (c if isinstance(c, str) else orjson.dumps(c).decode() for c in chunks)
    return "".join(f"data: {c}\r\n\r\n" for c in raw).encode()


_TEXT = {"candidates": [{"content": {"parts": [{"text": "Partial answer"}]}}]}


@pytest.mark.parametrize(
    ("code", "status", "cls"),
    [
        (503, "UNAVAILABLE", OverloadedError),
        (500, "INTERNAL", ServerError),
        (429, "RESOURCE_EXHAUSTED", RateLimitError),
        (400, "INVALID_ARGUMENT", InvalidRequestError),
    ],
)
@pytest.mark.parametrize("chunking", [Chunking.whole(), Chunking.bytewise()])
async def test_an_error_inside_the_stream_aborts_then_raises(
    code: int, status: str, cls: type[Exception], chunking: Chunking
) -> None:
    body = _sse(_TEXT, _gemini_error(code, status, "The model is overloaded."))
    events, error, server = await replay(WireResponse(body, chunking=chunking))
    assert type(error) is cls
    assert error.streamed  # type: ignore[attr-defined]
    check_invariants(events, error)
    assert answer(events).text == "Partial answer"
    assert [type(e).__name__ for e in events[-3:]] == ["BlockAbort", "ErrorEvent", "StatusEvent"]
    assert events[-2] == ErrorEvent(status, "The model is overloaded.")
    assert len(server.requests) == 1  # a streamed failure is never retried


@pytest.mark.parametrize(
    "bad",
    [
        '{"candidates": [{"content": {"parts": [{"text": "cut',  # JSON cut in the middle
        "not json at all",
        '{"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]}',  # no name
    ],
)
async def test_malformed_data_fails_typed_and_keeps_the_text(bad: str) -> None:
    events, error, _ = await replay(WireResponse(_sse(_TEXT, bad)))
    assert isinstance(error, MalformedStreamError)
    assert error.streamed
    check_invariants(events, error)
    assert answer(events).text == "Partial answer"


async def test_a_stream_without_a_finish_reason_is_interrupted_not_complete() -> None:
    events, error, _ = await replay(WireResponse(_sse(_TEXT)))
    assert isinstance(error, StreamInterruptedError)
    check_invariants(events, error)
    assert answer(events).text == "Partial answer"


@pytest.mark.parametrize("body", [b"", b"\r\n\r\n", b": keep-alive\r\n\r\n"])
async def test_an_empty_answer_is_interrupted(body: bytes) -> None:
    events, error, _ = await replay(WireResponse(body))
    assert isinstance(error, StreamInterruptedError)
    check_invariants(events, error)


async def test_a_stalled_stream_times_out_instead_of_hanging() -> None:
    body = _sse(
        _TEXT, {"candidates": [{"content": {"parts": [{"text": "!"}]}, "finishReason": "STOP"}]}
    )
    response = WireResponse(
        body, chunking=Chunking("sizes", sizes=(len(body) // 2,)), chunk_delay=10
    )
    events, error, _ = await replay(response, timeout=httpx.Timeout(5.0, read=0.3))
    assert isinstance(error, APITimeoutError)
    assert error.streamed
    check_invariants(events, error)


async def test_an_error_message_that_echoes_the_key_is_scrubbed() -> None:
    body = _sse(_TEXT, _gemini_error(400, "INVALID_ARGUMENT", f"bad key {KEY} given"))
    events, error, _ = await replay(WireResponse(body))
    assert isinstance(error, InvalidRequestError)
    assert KEY not in str(error) and KEY not in repr(error)
    assert all(KEY not in e.message for e in events if isinstance(e, ErrorEvent))


async def test_a_prompt_block_of_any_reason_fails_typed() -> None:
    blocked = {"promptFeedback": {"blockReason": "OTHER"}}
    events, error, _ = await replay(WireResponse(_sse(blocked)))
    assert isinstance(error, ContentFilterError)
    assert error.error_type == "OTHER"
    check_invariants(events, error)


async def test_a_429_says_how_long_to_wait_in_its_retry_info() -> None:
    # Gemini sends no Retry-After header: its 429 names the wait in a google.rpc.RetryInfo
    # detail. Without it the client retried after half a second, inside the same quota window.
    body = _gemini_error(429, "RESOURCE_EXHAUSTED", "quota exceeded, retry in 21.5s")
    body["error"]["details"] = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "21.500s"},
    ]
    response = WireResponse(body, status=429, content_type="application/json")
    events, error, _ = await replay(response)
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 21.5
    check_invariants(events, error)
    # A Retry-After header, when there is one, still wins.
    header = WireResponse(
        body, status=429, content_type="application/json", headers={"retry-after": "3"}
    )
    _, error, _ = await replay(header)
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 3.0


@pytest.mark.parametrize("index", ["0", "1", 1.5, [0], {"n": 0}, True])
async def test_a_candidate_index_not_an_integer_is_malformed_not_interrupted(
    index: object,
) -> None:
    # Read as "not the first candidate", the chunk was passed over and the stream later ended
    # as interrupted: the provider sent a malformed field, and the error must say which.
    bad = {"candidates": [{"content": {"parts": [{"text": " more"}]}, "index": index}]}
    done = {"candidates": [{"finishReason": "STOP", "index": 0}]}
    events, error, _ = await replay(WireResponse(_sse(_TEXT, bad, done)))
    assert type(error) is MalformedStreamError, error
    assert error.streamed
    assert "`index`" in str(error) and "an integer" in str(error)
    check_invariants(events, error)
    assert answer(events).text == "Partial answer"


async def test_a_null_candidate_index_is_the_first_candidate() -> None:
    # proto3's JSON reads a null field as its default: index 0.
    more = {"candidates": [{"content": {"parts": [{"text": " more"}]}, "index": None}]}
    done = {"candidates": [{"finishReason": "STOP", "index": None}]}
    events, error, _ = await replay(WireResponse(_sse(_TEXT, more, done)))
    assert error is None
    assert answer(events).text == "Partial answer more"
