"""The HTTP seam over a real local server: statuses, error bodies, retries, secrets, timeouts."""

from __future__ import annotations

import email.utils
import socket
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import anyio
import httpx
import orjson
import pytest

from llm_worker.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    ConfigurationError,
    ContentFilterError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
)
from llm_worker.events import ErrorEvent, Event, StopReason
from llm_worker.messages import Message, Request
from llm_worker.providers._base import HttpClient
from llm_worker.providers._blocks import BlockEmitter, StreamMapper
from llm_worker.providers._http import (
    RetryPolicy,
    Transport,
    error_class,
    parse_error_body,
    retry_after_seconds,
)
from llm_worker.testing import Chunking, WireResponse, WireServer
from support import recorded

# Every test runs over both transports (httpx and aiohttp).
pytestmark = pytest.mark.usefixtures("http_transport")

T = TypeVar("T")
SECRET = "sk-test-SECRET-0123456789abcdef"
FAST = RetryPolicy(initial_delay=0.001, max_delay=0.01, jitter=0.0)
SSE_BODY = b"data: one\n\ndata: two\n\n"


def transport(
    server: WireServer,
    *,
    retry: RetryPolicy | None = None,
    timeout: float | httpx.Timeout | None = 5.0,
    http_client: httpx.AsyncClient | None = None,
) -> Transport:
    return Transport(
        provider="test",
        base_url=server.base_url + "/v1/",
        headers={"authorization": f"Bearer {SECRET}"},
        secret=SECRET,
        retry=retry if retry is not None else RetryPolicy.disabled(),
        timeout=timeout,
        http_client=http_client,
    )


async def collect(t: Transport, body: dict[str, Any] | None = None) -> bytes:
    out = b""
    with anyio.fail_after(10):
        try:
            async for chunk in t.stream("/x", body or {"q": 1}):
                out += chunk
        finally:
            await t.aclose()
    return out


async def drain(stream: AsyncIterator[T], into: list[T]) -> None:
    with anyio.fail_after(10):
        async for item in stream:
            into.append(item)


async def failure(t: Transport) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await collect(t)
    return info.value


def json_response(status: int, body: object, **options: Any) -> WireResponse:
    return WireResponse(
        orjson.dumps(body), status=status, content_type="application/json", **options
    )


# --- the happy path --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_posts_json_with_headers_and_streams_the_body() -> None:
    async with WireServer([WireResponse(SSE_BODY, chunking=Chunking.bytewise())]) as server:
        t = transport(server)
        stream = t.stream("/chat", {"model": "m", "n": [1, None]}, params={"alt": "sse"})
        out = b""
        with anyio.fail_after(10):
            async for chunk in stream:
                out += chunk
        await t.aclose()
    assert out == SSE_BODY
    [request] = server.requests
    assert (request.method, request.path, request.query) == ("POST", "/v1/chat", {"alt": "sse"})
    assert request.json() == {"model": "m", "n": [1, None]}
    assert request.headers["authorization"] == f"Bearer {SECRET}"


@pytest.mark.anyio
@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
async def test_every_framing_delivers_the_whole_body(framing: Any) -> None:
    body = "data: é漢😀\n\n".encode() * 50
    response = WireResponse(body, framing=framing, chunking=Chunking.random(seed=3, max_size=7))
    async with WireServer([response]) as server:
        assert await collect(transport(server)) == body


# --- status -> error class -------------------------------------------------------------------

STATUS_CLASSES: dict[int, type[APIStatusError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    408: ServerError,
    409: ServerError,
    413: InvalidRequestError,
    422: InvalidRequestError,
    429: RateLimitError,
    500: ServerError,
    502: ServerError,
    503: OverloadedError,
    529: OverloadedError,
}

# Each provider's error shape, with a type this library does not know: the status decides.
ERROR_BODIES: dict[str, tuple[str, bytes, str | None, str]] = {
    "openai": (
        "application/json",
        orjson.dumps({"error": {"message": "the msg", "type": "odd", "param": None, "code": None}}),
        "odd",
        "the msg",
    ),
    "anthropic": (
        "application/json",
        orjson.dumps(
            {"type": "error", "error": {"type": "odd", "message": "the msg"}, "request_id": "req_1"}
        ),
        "odd",
        "the msg",
    ),
    "gemini": (
        "application/json",
        orjson.dumps({"error": {"code": 400, "message": "the msg", "status": "ODD"}}),
        "ODD",
        "the msg",
    ),
    "gemini_list": (
        "text/event-stream",
        orjson.dumps([{"error": {"code": 400, "message": "the msg", "status": "ODD"}}]),
        "ODD",
        "the msg",
    ),
    "html": (
        "text/html; charset=utf-8",
        b"<!DOCTYPE html><html><head><TITLE> Bad Gateway </TITLE></head><body>x</body></html>",
        None,
        "an HTML page instead of an API answer: Bad Gateway",
    ),
    "empty": ("application/json", b"", None, "HTTP {status} with no error message"),
    "text": ("text/plain", b"upstream connect error\n", None, "upstream connect error"),
}


@pytest.mark.anyio
@pytest.mark.parametrize("status", sorted(STATUS_CLASSES))
@pytest.mark.parametrize("shape", sorted(ERROR_BODIES))
async def test_status_and_body_give_the_typed_error(status: int, shape: str) -> None:
    content_type, body, error_type, message = ERROR_BODIES[shape]
    response = WireResponse(body, status=status, content_type=content_type)
    async with WireServer([response]) as server:
        error = await failure(transport(server))
    assert type(error) is STATUS_CLASSES[status]
    assert error.status_code == status
    assert error.error_type == error_type
    assert error.message == message.format(status=status)
    assert error.provider == "test"
    assert not error.streamed
    assert error.request_id == ("req_1" if shape == "anthropic" else None)


@pytest.mark.parametrize(
    ("status", "error_type", "expected"),
    [
        (400, "invalid_request_error", InvalidRequestError),
        (400, "INVALID_ARGUMENT", InvalidRequestError),
        (400, "FAILED_PRECONDITION", InvalidRequestError),
        (400, "content_filter", ContentFilterError),  # the type decides for a 400
        (401, "authentication_error", AuthenticationError),
        (401, "invalid_request_error", AuthenticationError),  # OpenAI's type for a bad key
        (403, "PERMISSION_DENIED", PermissionDeniedError),
        (404, "not_found_error", NotFoundError),
        (429, "RESOURCE_EXHAUSTED", RateLimitError),
        (500, "overloaded_error", OverloadedError),  # Anthropic: an overload beats the status
        (429, "overloaded_error", OverloadedError),
        (500, "api_error", ServerError),
        (503, "UNAVAILABLE", OverloadedError),
        (529, "overloaded_error", OverloadedError),
        (418, None, APIStatusError),
        (599, None, ServerError),
        (None, "rate_limit_error", RateLimitError),  # a mid-stream error event has no status
        (None, "overloaded_error", OverloadedError),
        (None, "something_new", APIStatusError),
        (None, None, APIStatusError),
    ],
)
def test_error_class_rules(
    status: int | None, error_type: str | None, expected: type[Exception]
) -> None:
    assert error_class(status, error_type) is expected


def test_parse_error_body_edge_shapes() -> None:
    assert parse_error_body(b'{"error": "model not loaded"}', "application/json") == (
        None,
        "model not loaded",
        None,
    )
    assert parse_error_body(b"[]", "application/json") == (None, "[]", None)
    assert parse_error_body(b"\xff\xfe", "text/plain") == (None, "\ufffd\ufffd", None)
    kind, message, _ = parse_error_body(b"x" * 10_000, "text/plain")
    assert kind is None
    assert len(message) == 500
    _, title, _ = parse_error_body(b"<html><body>no title</body></html>", "")
    assert title == "an HTML page instead of an API answer"


@pytest.mark.anyio
async def test_an_html_page_with_status_200_is_an_error() -> None:
    page = b"<html><head><title>Sign in</title></head></html>"
    async with WireServer([WireResponse(page, content_type="text/html")]) as server:
        error = await failure(transport(server))
    assert type(error) is APIStatusError
    assert error.status_code == 200
    assert error.message == "an HTML page instead of an API answer: Sign in"


@pytest.mark.anyio
async def test_request_id_header_is_kept() -> None:
    response = json_response(400, {"error": {"message": "m"}}, headers={"x-request-id": "abc"})
    async with WireServer([response]) as server:
        error = await failure(transport(server))
    assert error.request_id == "abc"


ERROR_RECORDINGS = [
    ("anthropic_messages", "error_401_on_stream_request", AuthenticationError),
    ("anthropic_messages", "error_404_on_stream_request", NotFoundError),
    ("anthropic_messages", "nonstream_error_400_invalid_request", InvalidRequestError),
    ("gemini", "error_400_invalid_key_event_stream_content_type", InvalidRequestError),
    ("gemini", "error_404_model_event_stream_content_type", NotFoundError),
    ("openai_chat", "error_401_on_stream_request", AuthenticationError),
    ("openai_chat", "error_404_on_stream_request", NotFoundError),
    ("openai_chat", "openrouter_error_429", RateLimitError),
    ("openai_responses", "error_400_model_not_found_on_stream_request", InvalidRequestError),
    ("openai_responses", "error_401_on_stream_request", AuthenticationError),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("api", "name", "cls"), ERROR_RECORDINGS, ids=str)
async def test_recorded_error_answers(api: str, name: str, cls: type[ProviderError]) -> None:
    response = recorded.load(api, name)["response"]
    wire = WireResponse(
        response["body"], status=response["status"], content_type=response["content_type"]
    )
    async with WireServer([wire]) as server:
        error = await failure(transport(server))
    assert type(error) is cls
    assert error.status_code == response["status"]
    body = orjson.loads(response["body"])
    expected = body[0] if isinstance(body, list) else body
    assert error.message == expected["error"]["message"]


# --- Retry-After -----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the finer one wins
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "tomorrow"}, None),
        ({}, None),
    ],
)
async def test_retry_after_from_headers(headers: dict[str, str], expected: float | None) -> None:
    async with WireServer([json_response(429, {}, headers=headers)]) as server:
        error = await failure(transport(server))
    assert isinstance(error, RateLimitError)
    assert error.retry_after == expected


@pytest.mark.anyio
async def test_retry_after_as_http_date() -> None:
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    async with WireServer([json_response(429, {}, headers={"retry-after": when})]) as server:
        error = await failure(transport(server))
    assert error.retry_after is not None
    assert 28.0 <= error.retry_after <= 30.0
    past = email.utils.format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert retry_after_seconds({"retry-after": past}) == 0.0


# --- retries ---------------------------------------------------------------------------------


def test_retry_policy_delays() -> None:
    policy = RetryPolicy(initial_delay=1.0, multiplier=2.0, max_delay=3.0, jitter=0.0)
    assert [policy.delay(n, None) for n in (1, 2)] == [1.0, 2.0]
    assert policy.delay(3, None) is None  # max_attempts=3: two retries in all
    long = RetryPolicy(max_attempts=10, initial_delay=1.0, max_delay=3.0, jitter=0.0)
    assert [long.delay(n, None) for n in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, 3.0]
    assert long.delay(1, 5.0) == 5.0  # the provider asked for longer
    assert long.delay(1, 0.5) == 1.0  # but never shorter than the backoff
    assert long.delay(1, 61.0) is None  # above max_retry_after: give up at once
    jittery = RetryPolicy(initial_delay=1.0, jitter=0.5)
    waits = {jittery.delay(1, None) for _ in range(200)}
    assert all(w is not None and 0.5 <= w <= 1.0 for w in waits)
    assert len(waits) > 1
    assert RetryPolicy.disabled().delay(1, None) is None


@pytest.mark.anyio
async def test_429_then_200_succeeds_after_the_asked_delay() -> None:
    responses = [json_response(429, {}, headers={"retry-after-ms": "200"}), WireResponse(SSE_BODY)]
    async with WireServer(responses) as server:
        started = time.monotonic()
        assert await collect(transport(server, retry=FAST)) == SSE_BODY
        elapsed = time.monotonic() - started
    assert len(server.requests) == 2
    assert elapsed >= 0.19
    assert server.requests[0].body == server.requests[1].body


@pytest.mark.anyio
@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 529])
async def test_transient_statuses_are_retried(status: int) -> None:
    async with WireServer([json_response(status, {}), WireResponse(SSE_BODY)]) as server:
        assert await collect(transport(server, retry=FAST)) == SSE_BODY
    assert len(server.requests) == 2


@pytest.mark.anyio
async def test_attempts_are_bounded() -> None:
    async with WireServer([json_response(503, {})] * 6) as server:
        error = await failure(
            transport(server, retry=RetryPolicy(max_attempts=4, jitter=0, initial_delay=0.001))
        )
    assert isinstance(error, OverloadedError)
    assert len(server.requests) == 4


@pytest.mark.anyio
async def test_no_retry_starts_after_max_elapsed() -> None:
    # A delay far above the bound, so "did not wait" holds on a loaded machine too (the first
    # request also pays the HTTP library's import, which is lazy).
    policy = RetryPolicy(max_attempts=10, initial_delay=5.0, jitter=0.0, max_elapsed=0.2)
    async with WireServer([json_response(500, {})] * 3) as server:
        started = time.monotonic()
        await failure(transport(server, retry=policy))
        elapsed = time.monotonic() - started
    assert len(server.requests) == 1
    assert elapsed < 2.5


@pytest.mark.anyio
async def test_a_retry_after_above_the_limit_is_not_waited_for() -> None:
    responses = [json_response(429, {}, headers={"retry-after": "120"}), WireResponse(SSE_BODY)]
    async with WireServer(responses) as server:
        started = time.monotonic()
        error = await failure(transport(server, retry=FAST))
        elapsed = time.monotonic() - started
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 120.0
    assert len(server.requests) == 1
    assert elapsed < 30.0  # far below the 120 s asked: not waited for (lazy HTTP import included)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_client_errors_are_not_retried(status: int) -> None:
    async with WireServer([json_response(status, {}), WireResponse(SSE_BODY)]) as server:
        error = await failure(transport(server, retry=FAST))
    assert error.status_code == status
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_disabled_policy_never_retries() -> None:
    async with WireServer([json_response(503, {}), WireResponse(SSE_BODY)]) as server:
        await failure(transport(server, retry=RetryPolicy.disabled()))
    assert len(server.requests) == 1


class CountingTransport(httpx.AsyncBaseTransport):
    """The real HTTP transport, counting requests and noting when a response is closed."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.requests = 0
        self.closed = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        response = await self.inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_NotingStream(response.stream, self),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _NotingStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, owner: CountingTransport) -> None:
        self.inner = inner
        self.owner = owner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            yield chunk

    async def aclose(self) -> None:
        self.owner.closed += 1
        await self.inner.aclose()


class HoldingTransport(httpx.AsyncBaseTransport):
    """The real HTTP transport, holding every request at the door until `release` is set."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.entered = 0
        self.release = anyio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.entered += 1
        await self.release.wait()
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.anyio
async def test_max_concurrency_bounds_the_requests_in_flight() -> None:
    spy = HoldingTransport()
    bodies: list[bytes] = []
    async with (
        WireServer([WireResponse(SSE_BODY)] * 5) as server,
        httpx.AsyncClient(transport=spy) as client,
    ):
        t = Transport(
            provider="test",
            base_url=server.base_url,
            headers={},
            secret=None,
            http_client=client,
            retry=RetryPolicy.disabled(),
            max_concurrency=2,
        )

        async def one() -> None:
            bodies.append(b"".join([chunk async for chunk in t.stream("/x", {})]))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                for _ in range(5):
                    group.start_soon(one)
                await anyio.wait_all_tasks_blocked()
                assert spy.entered == 2  # the other three wait in the Transport's gate
                spy.release.set()
    assert bodies == [SSE_BODY] * 5
    assert spy.entered == 5


def faulty(fault: str, at: int) -> WireResponse:
    response = WireResponse(SSE_BODY, chunking=Chunking("sizes", sizes=(5,)))
    if fault == "reset_at":
        response.reset_at = at
    else:
        response.cut_at = at
    return response


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.anyio
async def test_connection_refused_is_retried_then_raised() -> None:
    spy = CountingTransport()
    async with httpx.AsyncClient(transport=spy) as client:
        t = Transport(
            provider="test",
            base_url=f"http://127.0.0.1:{closed_port()}",
            headers={},
            secret=SECRET,
            http_client=client,
            retry=FAST,
        )
        error = await failure(t)
    assert isinstance(error, APIConnectionError)
    assert not error.streamed
    assert spy.requests == 3
    assert "could not reach http://127.0.0.1:" in error.message


@pytest.mark.anyio
@pytest.mark.parametrize("fault", ["reset_at", "cut_at"])
async def test_a_connection_lost_before_the_first_byte_is_retried(fault: str) -> None:
    broken = faulty(fault, 0)
    async with WireServer([broken, WireResponse(SSE_BODY)]) as server:
        assert await collect(transport(server, retry=FAST)) == SSE_BODY
    assert len(server.requests) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("fault", ["reset_at", "cut_at"])
async def test_no_retry_after_the_first_body_byte(fault: str) -> None:
    broken = faulty(fault, 5)
    async with WireServer([broken, WireResponse(SSE_BODY)]) as server:
        t = transport(server, retry=FAST)
        received: list[bytes] = []
        with pytest.raises(StreamInterruptedError) as info:
            await drain(t.stream("/x", {}), received)
        await t.aclose()
    assert b"".join(received) == SSE_BODY[:5]
    assert info.value.streamed
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_an_abandoned_stream_releases_its_response_at_once() -> None:
    endless = WireResponse(
        SSE_BODY * 1000, chunking=Chunking("sizes", sizes=(10,)), chunk_delay=0.01
    )
    spy = CountingTransport()
    async with WireServer([endless]) as server, httpx.AsyncClient(transport=spy) as client:
        stream = transport(server, http_client=client).stream("/x", {})
        with anyio.fail_after(10):
            first = await stream.__anext__()
        assert first
        assert spy.closed == 0
        await stream.aclose()  # type: ignore[attr-defined]
        assert spy.closed == 1


# --- timeouts --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_stream_that_stalls_times_out_as_streamed() -> None:
    stalled = WireResponse(SSE_BODY, chunking=Chunking("sizes", sizes=(6,)), chunk_delay=30.0)
    async with WireServer([stalled, WireResponse(SSE_BODY)]) as server:
        t = transport(server, retry=FAST, timeout=httpx.Timeout(5.0, read=0.2))
        started = time.monotonic()
        with anyio.fail_after(5):
            error = await failure(t)
        elapsed = time.monotonic() - started
    assert isinstance(error, APITimeoutError)
    assert error.streamed
    assert not error.retryable
    assert len(server.requests) == 1
    assert elapsed < 2.0


@pytest.mark.anyio
async def test_no_answer_in_time_is_a_retryable_timeout() -> None:
    slow = WireResponse(SSE_BODY, first_byte_delay=30.0)
    async with WireServer([slow, WireResponse(SSE_BODY)]) as server:
        t = transport(server, retry=FAST, timeout=httpx.Timeout(5.0, read=0.2))
        assert await collect(t) == SSE_BODY
    assert len(server.requests) == 2


# --- secrets ---------------------------------------------------------------------------------


class _Mapper:
    complete = False

    def on_event(self, event: str, data: bytes, emitter: BlockEmitter) -> None:
        emitter.text(data.decode())

    def on_end(self, emitter: BlockEmitter) -> None:
        emitter.finish(StopReason.END_TURN, None)


class EchoClient(HttpClient):
    provider = "echo"
    default_base_url = "https://echo.invalid/v1"
    api_key_env = ("LLM_WORKER_TEST_ECHO_KEY",)

    def build_body(self, request: Request) -> dict[str, Any]:
        return {"model": self.model}

    def path(self, request: Request) -> str:
        return "/echo"

    def mapper(self, request: Request) -> StreamMapper:
        return _Mapper()


ECHOES = [
    json_response(401, {"error": {"message": f"Incorrect API key provided: {SECRET}."}}),
    json_response(400, {"error": f"bad key {SECRET}"}),
    WireResponse(f"<html><title>key {SECRET}</title></html>", status=403, content_type="text/html"),
    WireResponse(f"denied for {SECRET}", status=500, content_type="text/plain"),
]


@pytest.mark.anyio
@pytest.mark.parametrize("echo", ECHOES, ids=["openai", "plain", "html", "text"])
async def test_the_key_never_shows_even_when_the_provider_echoes_it(echo: WireResponse) -> None:
    async with WireServer([echo]) as server:
        client = EchoClient(
            model="m", api_key=SECRET, base_url=server.base_url, retry=RetryPolicy.disabled()
        )
        assert SECRET not in repr(client)
        assert SECRET not in repr(client.transport)
        events: list[Event] = []
        with pytest.raises(ProviderError) as info:
            await drain(client.stream(Request([Message.user("hi")])), events)
        await client.aclose()
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"  # it was sent
    error = info.value
    for text in (str(error), repr(error), error.message, *map(str, error.args)):
        assert SECRET not in text
    assert "***" in error.message
    [error_event] = [e for e in events if isinstance(e, ErrorEvent)]
    assert SECRET not in error_event.message
    assert SECRET not in repr(events)


@pytest.mark.anyio
@pytest.mark.parametrize("echo", ECHOES, ids=["openai", "plain", "html", "text"])
async def test_the_transport_itself_scrubs_an_echoed_key(echo: WireResponse) -> None:
    # The Transport's own contract: no error it raises shows the key, whoever reads it
    # (not only clients that go through drive(), which scrubs a second time).
    async with WireServer([echo]) as server:
        with pytest.raises(APIStatusError) as info:
            await collect(transport(server))
    error = info.value
    for text in (str(error), repr(error), error.message, *map(str, error.args)):
        assert SECRET not in text
    assert "***" in error.message


@pytest.mark.anyio
async def test_the_key_never_shows_in_connection_errors() -> None:
    client = EchoClient(
        model="m",
        api_key=SECRET,
        base_url=f"http://127.0.0.1:{closed_port()}",
        retry=RetryPolicy.disabled(),
    )
    with pytest.raises(APIConnectionError) as info:
        await drain(client.stream(Request([Message.user("hi")])), [])
    await client.aclose()
    assert SECRET not in str(info.value)
    assert SECRET not in repr(info.value)


# --- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize("base_url", ["localhost:8000/v1", "ftp://example.com", "http://[::1"])
def test_a_base_url_that_is_not_http_fails_at_once(base_url: str) -> None:
    with pytest.raises(ConfigurationError, match="base_url"):
        Transport(provider="test", base_url=base_url, headers={}, secret=None)


def test_repr_names_provider_and_url_only() -> None:
    t = Transport(
        provider="p", base_url="https://x.test/v1/", headers={"x-api-key": SECRET}, secret=SECRET
    )
    assert repr(t) == "Transport(provider='p', base_url='https://x.test/v1')"
    assert t.scrub(f"a {SECRET} b {SECRET}") == "a *** b ***"
    assert Transport(provider="p", base_url="http://x", headers={}, secret=None).scrub("t") == "t"


@pytest.mark.anyio
async def test_an_error_object_with_status_200_surfaces_with_its_message() -> None:
    body = {"error": {"type": "overloaded_error", "message": "Overloaded, try later"}}
    async with WireServer([json_response(200, body)]) as server:
        error = await failure(transport(server))
    assert isinstance(error, OverloadedError)
    assert error.message == "Overloaded, try later"
    assert error.status_code == 200


@pytest.mark.anyio
async def test_a_json_answer_and_a_json_array_stream_pass_through() -> None:
    answer = orjson.dumps({"choices": [{"message": {"content": "hi"}}]})
    array = b'[{"candidates": []},\r\n{"candidates": []}]'
    async with WireServer(
        [
            WireResponse(answer, content_type="application/json"),
            WireResponse(array, content_type="application/json", chunking=Chunking.bytewise()),
        ]
    ) as server:
        assert await collect(transport(server)) == answer
        assert await collect(transport(server)) == array


@pytest.mark.anyio
async def test_a_used_up_quota_is_not_retried() -> None:
    body = {"error": {"type": "insufficient_quota", "message": "You exceeded your quota"}}
    async with WireServer([json_response(429, body), json_response(429, body)]) as server:
        error = await failure(transport(server, retry=FAST))
    assert isinstance(error, RateLimitError)
    assert len(server.requests) == 1


def test_a_short_key_is_no_secret_and_is_not_cut_out_of_messages() -> None:
    local = Transport(provider="test", base_url="http://127.0.0.1:1", headers={}, secret="ollama")
    assert local.scrub("the ollama server said no") == "the ollama server said no"
    assert transport_for_scrub().scrub(f"bad key {SECRET}") == "bad key ***"


def transport_for_scrub() -> Transport:
    return Transport(provider="test", base_url="http://127.0.0.1:1", headers={}, secret=SECRET)


@pytest.mark.anyio
@pytest.mark.parametrize("content_type", ["text/event-stream", "text/plain", ""])
async def test_an_error_object_with_status_200_under_any_content_type_keeps_its_message(
    content_type: str,
) -> None:
    # Under a stream's content type the SSE decoder passed the object over as no field at all:
    # the stream ended "interrupted" and the provider's message was lost (Anthropic, Responses).
    body = {"error": {"type": "overloaded_error", "message": "Overloaded, try later"}}
    response = WireResponse(
        b"\n" + orjson.dumps(body), status=200, content_type=content_type,
        chunking=Chunking.bytewise(),
    )  # fmt: skip
    async with WireServer([response]) as server:
        error = await failure(transport(server))
    assert isinstance(error, OverloadedError)
    assert error.message == "Overloaded, try later"
