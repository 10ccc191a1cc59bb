"""Adversarial probes of the HTTP seam over both transports (httpx and aiohttp).

Malformed answers from a raw socket, a lent client that raises for statuses or was closed,
cancellation before the headers and mid-stream, gzip bodies: every case gives the typed error
or the answer, never the key, and leaves the connection pool usable.
"""

from __future__ import annotations

import asyncio
import gzip
import subprocess
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import anyio
import httpx
import orjson
import pytest

from llm_worker.errors import (
    APIConnectionError,
    AuthenticationError,
    ConfigurationError,
    ProviderError,
    StreamInterruptedError,
)
from llm_worker.providers._http import RetryPolicy, Transport
from llm_worker.testing import Chunking, RecordedRequest, WireResponse, WireServer

pytestmark = pytest.mark.anyio

SECRET = "sk-review-SECRET-0123456789abcdef"
FAST = RetryPolicy(initial_delay=0.001, max_delay=0.01, jitter=0.0)
SSE_BODY = b"".join(b"data: " + orjson.dumps({"n": i}) + b"\n\n" for i in range(40))


def make(base_url: str, **options: object) -> Transport:
    options.setdefault("retry", RetryPolicy.disabled())
    options.setdefault("timeout", 5.0)
    return Transport(
        provider="test",
        base_url=base_url + "/v1",
        headers={"authorization": f"Bearer {SECRET}", "content-type": "application/json"},
        secret=SECRET,
        **options,  # type: ignore[arg-type]
    )


async def collect(t: Transport, *, close: bool = True) -> bytes:
    out = b""
    with anyio.fail_after(10):
        try:
            async for chunk in t.stream("/x", {"q": 1}):
                out += chunk
        finally:
            if close:
                await t.aclose()
    return out


@asynccontextmanager
async def raw_server(answer: bytes) -> AsyncIterator[str]:
    """A server that answers every request with `answer`, bytes as given, then closes."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            writer.write(answer)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


def shown(error: BaseException) -> list[BaseException]:
    """The exceptions a traceback of `error` prints."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(chain) < 16:
        chain.append(current)
        if current.__cause__ is not None:
            current = current.__cause__
        elif current.__suppress_context__:
            current = None
        else:
            current = current.__context__
    return chain


MALFORMED = {
    "bad content-length": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Content-Length: abc\r\n\r\ndata: x\n\n",
    "bad chunk size": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
    "bad status line": b"HTTP/1.1 abc OK\r\n\r\n",
}


async def test_a_gigantic_header_is_an_answer_or_a_typed_error_without_the_key(
    http_transport: str,
) -> None:
    # httpx takes a 100 kB header line whole; aiohttp refuses lines above 8,190 bytes.
    answer = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000 + b"\r\nContent-Length: 9\r\n\r\n"
    async with raw_server(answer + b"data: x\n\n") as base_url:
        if http_transport == "httpx":
            assert await collect(make(base_url)) == b"data: x\n\n"
            return
        with pytest.raises(APIConnectionError) as caught:
            await collect(make(base_url))
    assert SECRET not in "".join(traceback.format_exception(caught.value))


@pytest.mark.usefixtures("http_transport")
@pytest.mark.parametrize("name", sorted(MALFORMED))
async def test_a_malformed_answer_is_typed_and_its_traceback_never_shows_the_key(
    name: str,
) -> None:
    # aiohttp's ClientResponseError keeps the request's headers in its repr: it must not be
    # chained to the error we raise.
    async with raw_server(MALFORMED[name]) as base_url:
        with pytest.raises(ProviderError) as caught:
            await collect(make(base_url))
    error = caught.value
    # Broken body framing is a broken answer on both transports (test_http_framing.py);
    # an answer whose head does not parse is one that never came.
    expected = StreamInterruptedError if name == "bad chunk size" else APIConnectionError
    assert isinstance(error, expected), repr(error)
    assert SECRET not in "".join(traceback.format_exception(error))
    for exc in shown(error):
        assert SECRET not in repr(exc)
        assert SECRET not in str(exc)


@pytest.mark.usefixtures("http_transport")
async def test_a_body_shorter_than_its_content_length_is_a_typed_error() -> None:
    answer = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 1000\r\n\r\n"
        + SSE_BODY[:20]
    )
    async with raw_server(answer) as base_url:
        with pytest.raises(ProviderError) as caught:
            await collect(make(base_url))
    assert caught.value.streamed
    assert SECRET not in "".join(traceback.format_exception(caught.value))


@pytest.mark.usefixtures("http_transport")
async def test_a_body_that_is_not_the_gzip_it_claims_is_a_typed_error() -> None:
    bad = WireResponse(b"not gzip at all", headers={"Content-Encoding": "gzip"}, framing="length")
    async with WireServer([bad]) as server:
        with pytest.raises(ProviderError):
            await collect(make(server.base_url))


@pytest.mark.usefixtures("http_transport")
async def test_a_gzip_stream_arrives_decoded() -> None:
    zipped = WireResponse(
        gzip.compress(SSE_BODY),
        headers={"Content-Encoding": "gzip"},
        chunking=Chunking.random(seed=3, max_size=17),
    )
    async with WireServer([zipped]) as server:
        assert await collect(make(server.base_url)) == SSE_BODY


async def test_a_lent_aiohttp_session_that_raises_for_status_still_gives_typed_errors() -> None:
    rate_limited = WireResponse(
        orjson.dumps({"error": {"message": "slow down", "type": "rate_limit"}}),
        status=429,
        content_type="application/json",
        headers={"Retry-After": "0"},
    )
    unauthorized = WireResponse(
        orjson.dumps({"error": {"message": "bad key", "type": "auth"}}),
        status=401,
        content_type="application/json",
    )
    async with (
        WireServer([rate_limited, WireResponse(SSE_BODY), unauthorized]) as server,
        aiohttp.ClientSession(raise_for_status=True) as session,
    ):
        # The 429 is retried after its Retry-After, as without raise_for_status.
        assert await collect(make(server.base_url, http_client=session, retry=FAST)) == SSE_BODY
        with pytest.raises(AuthenticationError):
            await collect(make(server.base_url, http_client=session))
    assert len(server.requests) == 3


async def _closed_httpx() -> httpx.AsyncClient:
    client = httpx.AsyncClient()
    await client.aclose()
    return client


async def _closed_aiohttp() -> aiohttp.ClientSession:
    session = aiohttp.ClientSession()
    await session.close()
    return session


@pytest.mark.parametrize("closed", [_closed_httpx, _closed_aiohttp], ids=["httpx", "aiohttp"])
async def test_a_lent_client_closed_under_the_transport_is_a_configuration_error(
    closed: Callable[[], Awaitable[httpx.AsyncClient | aiohttp.ClientSession]],
) -> None:
    # Not a raw RuntimeError (httpx), nor a new session made behind the caller's back that
    # nobody closes (aiohttp).
    lent = await closed()
    async with WireServer([WireResponse(SSE_BODY)]) as server:
        t = make(server.base_url, http_client=lent)
        with pytest.raises(ConfigurationError, match="lent as http_client is closed"):
            await collect(t)
        await t.aclose()
    assert server.requests == []


async def _cancel_after(t: Transport, started: anyio.Event) -> None:
    async def consume() -> None:
        async for _ in t.stream("/x", {"q": 1}):
            started.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            await started.wait()
            group.cancel_scope.cancel()


@pytest.mark.usefixtures("http_transport")
@pytest.mark.parametrize("where", ["before the headers", "mid-stream"])
async def test_a_cancelled_stream_gives_its_connection_back(where: str) -> None:
    # One connection in the pool: a connection kept by the cancelled stream would make the
    # next request wait for it until the deadline.
    started = anyio.Event()
    answers = [WireResponse(SSE_BODY), WireResponse(SSE_BODY)]
    if where == "before the headers":
        # Cancelled once the server holds the request (not after a guessed sleep: under load
        # the cancel came before the request was out, and the stalled answer went to the
        # next request, which timed out).
        def first_stalls(request: RecordedRequest) -> WireResponse:
            if started.is_set():
                return answers.pop(0)
            started.set()
            return WireResponse(SSE_BODY, first_byte_delay=30.0)

        server = WireServer(handler=first_stalls)
    else:
        stalled = WireResponse(
            SSE_BODY, chunking=Chunking.random(seed=1, max_size=9), chunk_delay=0.5
        )
        server = WireServer([stalled, *answers])
    async with server:
        t = make(server.base_url, max_concurrency=1)
        try:
            await _cancel_after(t, started)
            assert await collect(t, close=False) == SSE_BODY
            assert await collect(t, close=False) == SSE_BODY
        finally:
            await t.aclose()
    assert len(server.requests) == 3


@pytest.mark.parametrize("limit", [0, -1, 2.5, "3", True])
def test_a_max_concurrency_that_is_not_a_positive_count_is_refused_at_once(
    http_transport: str, limit: object
) -> None:
    # 0 made every request wait forever; -1 or 2.5 failed at the first request as a
    # MalformedStreamError.
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        make("http://127.0.0.1:9", max_concurrency=limit, transport=http_transport)


TWO_LOOPS = """
import asyncio, gc, sys, threading, warnings
from llm_worker.errors import ConfigurationError
from llm_worker.providers._http import RetryPolicy, Transport
from llm_worker.testing import WireResponse, WireServer

warnings.simplefilter("always", ResourceWarning)
library, mode = sys.argv[1], sys.argv[2]
ready, address = threading.Event(), []

async def serve():
    async with WireServer([WireResponse(b"data: x\\n\\n")] * 2) as server:
        address.append(server.base_url)
        ready.set()
        await asyncio.Event().wait()

def lend():
    if library == "httpx":
        import httpx
        return httpx.AsyncClient()
    import aiohttp
    return aiohttp.ClientSession()

threading.Thread(target=asyncio.run, args=(serve(),), daemon=True).start()
assert ready.wait(10)
made = []

async def once():
    if not made:
        made.append(Transport(provider="test", base_url=address[0], headers={}, secret=None,
                              http_client=lend() if mode == "lent" else None,
                              retry=RetryPolicy.disabled(), timeout=5.0, transport=library))
    return b"".join([chunk async for chunk in made[0].stream("/x", {})])

for _ in range(2):
    try:
        print(asyncio.run(asyncio.wait_for(once(), 10)) == b"data: x\\n\\n", flush=True)
    except ConfigurationError as exc:
        print("refused:", exc, flush=True)
made.clear()
gc.collect()
"""


def _two_loops(library: str, mode: str) -> subprocess.CompletedProcess[str]:
    # In a fresh interpreter: a failed client's session must not be collected in the suite.
    return subprocess.run(
        [sys.executable, "-c", TWO_LOOPS, library, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("library", ["httpx", "aiohttp"])
def test_a_client_serves_two_event_loops_one_after_the_other(library: str) -> None:
    result = _two_loops(library, "own")
    assert result.stdout.split() == ["True", "True"], result.stderr[-2000:]
    # The HTTP client made under the first loop was closed when that loop ended, not left to
    # the garbage collector with its sockets open.
    assert "nclosed" not in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("library", ["httpx", "aiohttp"])
def test_a_lent_http_client_used_under_a_second_event_loop_is_refused_naming_the_cause(
    library: str,
) -> None:
    result = _two_loops(library, "lent")
    first, second = result.stdout.splitlines()
    assert first == "True", result.stderr[-2000:]
    assert second.startswith("refused: ") and "another event loop" in second, second
