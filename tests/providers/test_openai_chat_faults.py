"""Bad input and broken connections: each gives the ordered abort → error → FAILED events and a
typed exception, keeps the text received before the fault, and never hangs.

Every wait is bounded by `collect` (anyio.fail_after). The streams are real recordings, cut,
reset or corrupted at chosen bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import anyio
import orjson
import pytest
from test_openai_chat_support import (
    API,
    API_KEY,
    answer,
    check_invariants,
    client_for,
    collect,
    expected_from,
    replay,
)

from llm_worker.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    InvalidRequestError,
    MalformedStreamError,
    NotFoundError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
)
from llm_worker.events import (
    BlockAbort,
    ErrorEvent,
    ResponseStatus,
    StatusEvent,
    StopReason,
    UsageEvent,
)
from llm_worker.messages import Message, Request
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import Chunking, WireResponse, WireServer
from support.recorded import load

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

PLAIN = "plain_text_with_usage_chunk"  # finish chunk, then a usage chunk, then [DONE]
UNICODE = "deepseek_text_usage"  # non-ASCII text; usage rides on the finish chunk


def _body(name: str) -> bytes:
    return load(API, name)["response"]["body"].encode()


def _events_before(body: bytes, n: int) -> str:
    """The part of `body[:n]` made of whole SSE events (what a reader can act on)."""
    prefix = body[:n]
    return prefix[: prefix.rfind(b"\n\n") + 2].decode()


def _after_event(body: bytes, needle: bytes) -> int:
    """The byte just after the event that contains `needle`."""
    return body.index(b"\n\n", body.index(needle)) + 2


@dataclass
class Cut:
    name: str
    at: int
    fault: Literal["cut", "reset"]
    framing: Literal["chunked", "close"]
    error: type[ProviderError] | None


def _cuts() -> list[Any]:
    plain, uni = _body(PLAIN), _body(UNICODE)
    mid_json = plain.index(b'"content":" ') + 6
    mid_utf8 = uni.index(bytes([b for b in uni if b >= 0xC0][:1])) + 1
    boundary = _after_event(plain, b'"content":"')
    after_finish = _after_event(plain, b'"finish_reason":"stop"')
    after_usage = _after_event(plain, b'"usage":{')
    cuts = [
        # Nothing of the answer arrived: a connection failure (retryable), not a stream error.
        Cut(PLAIN, 0, "cut", "chunked", APIConnectionError),
        Cut(PLAIN, mid_json, "cut", "chunked", StreamInterruptedError),
        Cut(UNICODE, mid_utf8, "cut", "chunked", StreamInterruptedError),
        Cut(PLAIN, boundary, "cut", "chunked", StreamInterruptedError),
        Cut(PLAIN, mid_json, "reset", "chunked", StreamInterruptedError),
        Cut(UNICODE, mid_utf8, "reset", "chunked", StreamInterruptedError),
        Cut(PLAIN, boundary, "reset", "close", StreamInterruptedError),
        # A clean end of a `close`-framed body: no transport error, the stream is simply short.
        Cut(PLAIN, boundary, "cut", "close", StreamInterruptedError),
        # A clean end in the middle of an event (half a JSON line): interrupted, not malformed.
        Cut(PLAIN, mid_json, "cut", "close", StreamInterruptedError),
        Cut(UNICODE, mid_utf8, "cut", "close", StreamInterruptedError),
        # finish_reason without the usage chunk that OpenAI sends after it: the answer is
        # whole (local servers and proxies end there), only its usage is missing.
        Cut(PLAIN, after_finish, "cut", "close", None),
        # finish_reason and usage arrived: complete even without [DONE].
        Cut(PLAIN, after_usage, "cut", "close", None),
        # DeepSeek puts the usage on the finish chunk: complete right after it.
        Cut(UNICODE, _after_event(uni, b'"finish_reason":"stop"'), "cut", "close", None),
    ]
    return [
        pytest.param(c, id=f"{c.name[:8]}-{c.fault}-{c.framing}-at{c.at}-{i}")
        for i, c in enumerate(cuts)
    ]


@pytest.mark.parametrize("cut", _cuts())
async def test_cut_stream(cut: Cut) -> None:
    body = _body(cut.name)
    options: dict[str, Any] = {"cut_at": cut.at} if cut.fault == "cut" else {"reset_at": cut.at}
    response = WireResponse(body, framing=cut.framing, **options)
    events, error, _ = await replay(response)
    check_invariants(events, error)
    want = expected_from(_events_before(body, cut.at))
    got = answer(events)
    assert got.text == want.text  # nothing received before the fault is lost
    if cut.error is None:
        assert error is None
        assert got.stop_reason is want.stop_reason
        assert got.usage == want.usage
        return
    assert isinstance(error, ProviderError) and type(error) is cut.error, repr(error)
    assert error.streamed == (cut.at > 0)
    assert any(isinstance(e, BlockAbort) for e in events) == bool(want.text)
    codes = {StreamInterruptedError: "stream_interrupted", MalformedStreamError: "malformed_stream"}
    code = error.error_type or codes.get(type(error), type(error).__name__)
    assert events[-2] == ErrorEvent(code, error.message)


def _text_chunk(text: str) -> bytes:
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}}],
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


_FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
_USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'


async def _failing(body: bytes, error_type: type[ProviderError], text: str) -> None:
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert isinstance(error, ProviderError) and type(error) is error_type, repr(error)
    assert answer(events).text == text
    if text:
        abort = events[-3]
        assert isinstance(abort, BlockAbort) and abort.reason == error.message


async def test_malformed_json_in_a_data_line() -> None:
    body = _text_chunk("Hello") + _text_chunk(" wor") + b'data: {"choices": [{"delta"\n\n'
    await _failing(body + _text_chunk("ld") + _FINISH + _USAGE, MalformedStreamError, "Hello wor")


async def test_a_data_line_that_is_not_an_object() -> None:
    await _failing(_text_chunk("Hi") + b"data: [1, 2]\n\n" + _FINISH, MalformedStreamError, "Hi")


async def test_content_of_the_wrong_type() -> None:
    bad = b'data: {"choices":[{"index":0,"delta":{"content":42}}]}\n\n'
    await _failing(_text_chunk("Hi") + bad + _FINISH, MalformedStreamError, "Hi")


async def test_no_done_and_no_finish_reason() -> None:
    await _failing(_text_chunk("Hello") + _text_chunk("!"), StreamInterruptedError, "Hello!")


async def test_finish_reason_without_usage_or_done_is_complete() -> None:
    # Local servers and proxies end the stream right after the finish chunk; the finish
    # reason closed the only choice read, so nothing of the answer is missing.
    events, error, _ = await replay(WireResponse(_text_chunk("Hello") + _FINISH))
    check_invariants(events, error)
    assert error is None
    got = answer(events)
    assert (got.text, got.stop_reason) == ("Hello", StopReason.END_TURN)
    assert not any(isinstance(e, UsageEvent) for e in events)


async def test_a_cut_inside_a_tool_call_before_its_finish_is_interrupted() -> None:
    call = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a": '}}
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
    await _failing(b"data: " + orjson.dumps(chunk) + b"\n\n", StreamInterruptedError, "")


async def test_done_ends_the_stream_even_without_usage() -> None:
    events, error, _ = await replay(WireResponse(_text_chunk("Hi") + _FINISH + b"data: [DONE]\n\n"))
    check_invariants(events, error)
    assert error is None and answer(events).text == "Hi"


async def test_finish_and_usage_complete_a_stream_without_done() -> None:
    events, error, _ = await replay(WireResponse(_text_chunk("Hi") + _FINISH + _USAGE))
    check_invariants(events, error)
    assert error is None
    assert answer(events).usage.output_tokens == 2


async def test_unknown_fields_and_chunks_pass() -> None:
    body = _body(PLAIN)
    lines = []
    for line in body.split(b"\n"):
        if not line.startswith(b"data: {"):
            lines.append(line)
            continue
        chunk = orjson.loads(line[6:])
        chunk["brand_new_field"] = {"nested": [1, 2]}
        for choice in chunk["choices"]:
            choice["delta"]["future_delta_field"] = "x"
            choice["another"] = None
        lines.append(b"data: " + orjson.dumps(chunk))
    extra = b'data: {"object":"chat.completion.heartbeat","status":"alive"}\n\n'
    extra += b"event: ping\ndata: not json at all\n\n: a comment\n\nid: 7\nretry: 100\n\n"
    patched = extra + b"\n".join(lines)
    events, error, _ = await replay(WireResponse(patched))
    check_invariants(events, error)
    assert error is None
    assert answer(events) == expected_from(body.decode())


@pytest.mark.parametrize("body", [b"", b"\n\n  \r\n"], ids=["empty", "blank"])
async def test_empty_body(body: bytes) -> None:
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert isinstance(error, StreamInterruptedError)
    assert [type(e) for e in events][-2:] == [ErrorEvent, StatusEvent]


_HTML = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


@pytest.mark.parametrize(
    ("status", "content_type", "error_type"),
    [
        (200, "text/html", APIStatusError),
        (502, "text/html", ServerError),
        (200, "text/event-stream", APIStatusError),  # mislabelled: caught by the body sniffing
    ],
)
async def test_html_error_page(
    status: int, content_type: str, error_type: type[ProviderError]
) -> None:
    events, error, _ = await replay(WireResponse(_HTML, status=status, content_type=content_type))
    check_invariants(events, error)
    assert isinstance(error, ProviderError) and type(error) is error_type
    assert error.message == "an HTML page instead of an API answer: 502 Bad Gateway"
    assert error.status_code == status


def _openai_error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


_INVALID = "invalid_request_error"


@pytest.mark.parametrize(
    ("status", "body", "headers", "error_type", "retry_after"),
    [
        (401, _openai_error("Bad key", _INVALID, "invalid_api_key"), {}, AuthenticationError, None),
        (404, _openai_error("No model `x`", _INVALID, "model_not_found"), {}, NotFoundError, None),
        (429, _openai_error("Rate limit", "requests"), {"retry-after": "20"}, RateLimitError, 20.0),
        (429, _openai_error("Slow", "tokens"), {"retry-after-ms": "1500"}, RateLimitError, 1.5),
        (400, _openai_error("Invalid 'messages'", _INVALID), {}, InvalidRequestError, None),
        (500, _openai_error("The server had an error", "server_error"), {}, ServerError, None),
        (503, _openai_error("Overloaded", "server_error"), {}, OverloadedError, None),
        (500, "Internal Server Error", {}, ServerError, None),
    ],
    ids=["401", "404", "429", "429-ms", "400", "500", "503", "500-text"],
)
async def test_status_errors(
    status: int,
    body: Any,
    headers: dict[str, str],
    error_type: type[ProviderError],
    retry_after: float | None,
) -> None:
    content_type = "application/json" if isinstance(body, dict) else "text/plain"
    response = WireResponse(body, status=status, content_type=content_type, headers=headers)
    events, error, _ = await replay(response)
    check_invariants(events, error)
    assert isinstance(error, ProviderError) and type(error) is error_type
    assert error.status_code == status
    assert error.retry_after == retry_after
    message = body["error"]["message"] if isinstance(body, dict) else body
    assert error.message == message
    assert not error.streamed
    code = error.error_type or type(error).__name__
    assert events == [ErrorEvent(code, message), StatusEvent(ResponseStatus.FAILED)]


async def test_failure_before_the_answer_is_retried() -> None:
    overloaded = WireResponse(
        _openai_error("overloaded", "server_error"), status=503, content_type="application/json"
    )
    ok = WireResponse(_text_chunk("Hi") + _FINISH + _USAGE)
    retry = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.01)
    async with WireServer([overloaded, ok]) as server:
        client = client_for(server, retry=retry)
        events, error = await collect(client, Request([Message.user("hi")]))
        await client.aclose()
    assert error is None and answer(events).text == "Hi"
    assert len(server.requests) == 2


async def test_groq_error_event_with_plain_text_data() -> None:
    body = _text_chunk("Hi") + b"event: error\ndata: upstream timed out\n\n"
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert isinstance(error, ProviderError) and type(error) is APIStatusError
    assert error.message == "upstream timed out"
    assert answer(events).text == "Hi"


@pytest.mark.parametrize(
    ("error", "error_type"),
    [
        ({"code": 429, "message": "Rate limited upstream"}, RateLimitError),
        ({"code": 502, "message": "Provider returned error"}, ServerError),
        ({"message": "busy", "type": "overloaded_error"}, OverloadedError),
        ({"message": "blocked", "code": "content_filter"}, APIStatusError),
        ("a bare string", APIStatusError),
    ],
)
async def test_error_objects_in_data_lines(error: Any, error_type: type[ProviderError]) -> None:
    body = _text_chunk("Partial") + b"data: " + orjson.dumps({"error": error}) + b"\n\n"
    events, raised, _ = await replay(WireResponse(body + _FINISH + _USAGE))
    check_invariants(events, raised)
    assert isinstance(raised, error_type)
    assert raised.streamed
    assert raised.message == (error if isinstance(error, str) else error["message"])
    assert answer(events).text == "Partial"


async def test_an_error_never_shows_the_api_key() -> None:
    echo = {"message": f"key {API_KEY} is not allowed", "type": "invalid_request_error"}
    body = _text_chunk("Hi") + b"data: " + orjson.dumps({"error": echo}) + b"\n\n"
    events, error, _ = await replay(WireResponse(body))
    assert error is not None
    assert API_KEY not in str(error) and API_KEY not in repr(error)
    assert all(API_KEY not in repr(e) for e in events)

    status = WireResponse({"error": echo}, status=400, content_type="application/json")
    _, error, _ = await replay(status)
    assert error is not None and API_KEY not in str(error)


async def test_a_stream_that_stalls_after_some_reads_times_out() -> None:
    # The silence comes after several reads, each of which restarts the read timeout.
    pieces = [_text_chunk(word) for word in ("a", "b", "c", "d")] + [_FINISH + _USAGE]
    response = WireResponse(
        b"".join(pieces),
        chunking=Chunking("sizes", sizes=tuple(len(p) for p in pieces)),
        chunk_delays=(0.05, 0.05, 0.05, 5.0),
    )
    with anyio.fail_after(4):
        events, error, _ = await replay(response, timeout=0.3)
    check_invariants(events, error)
    assert isinstance(error, APITimeoutError) and error.streamed
    assert answer(events).text == "abcd"


async def test_reads_closer_together_than_the_read_timeout_never_time_out() -> None:
    # 6 reads 0.2 s apart: the stream lasts longer than the 0.35 s timeout, no gap does.
    pieces = [_text_chunk(word) for word in "abcde"] + [_FINISH + _USAGE]
    response = WireResponse(
        b"".join(pieces),
        chunking=Chunking("sizes", sizes=tuple(len(p) for p in pieces)),
        chunk_delay=0.2,
    )
    with anyio.fail_after(5):
        events, error, _ = await replay(response, timeout=0.35)
    assert error is None, repr(error)
    assert answer(events).text == "abcde"


async def test_a_silent_stream_times_out() -> None:
    # The second write waits 5 s; the read timeout (0.3 s) ends the wait instead.
    body = _text_chunk("Hello") + _text_chunk(" there") + _FINISH + _USAGE
    response = WireResponse(body, chunking=Chunking("sizes", sizes=(len(_text_chunk("Hello")),)))
    response.chunk_delay = 5.0
    with anyio.fail_after(5):
        events, error, _ = await replay(response, timeout=0.3)
    check_invariants(events, error)
    assert isinstance(error, APITimeoutError)
    assert error.streamed
    assert answer(events).text == "Hello"
