"""Adversarial probes of the transport's per-read path (both transports): read timeouts against
a slow reader, bodies split at every byte, cancellation, the owned client across event loops."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Literal

import anyio
import orjson
import pytest

from llm_worker.errors import APITimeoutError, ProviderError
from llm_worker.events import BlockDelta, Event, TextDelta
from llm_worker.messages import Message, Request
from llm_worker.providers import OpenAIChatClient
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import Chunking, WireResponse, WireServer

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

API_KEY = "sk-review-transport-0123456789"
_FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'


def _text(text: str) -> bytes:
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}}],
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _client(server: WireServer, **options: object) -> OpenAIChatClient:
    options.setdefault("retry", RetryPolicy.disabled())
    return OpenAIChatClient(
        model="m",
        base_url=server.base_url + "/v1",
        api_key=API_KEY,
        **options,  # type: ignore[arg-type]
    )


def _text_of(events: list[Event]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


async def _run(
    responses: list[WireResponse], *, pause_after: int = 0, pause: float = 0.0, **options: object
) -> tuple[list[Event], Exception | None]:
    """One stream of a fresh client: its events and the error that ended it, every wait bounded.

    `pause`: seconds the caller takes after its `pause_after`-th event (a slow consumer).
    """
    events: list[Event] = []
    error: Exception | None = None
    async with WireServer(responses) as server:
        client = _client(server, **options)
        try:
            with anyio.fail_after(20):
                async for event in client.stream(Request([Message.user("hi")])):
                    events.append(event)
                    if len(events) == pause_after:
                        await anyio.sleep(pause)  # the slow caller under test, not a sync
        except Exception as exc:
            error = exc
        finally:
            await client.aclose()
    return events, error


@pytest.mark.parametrize(
    ("gap", "seconds", "pause"),
    [
        # The writes come at once; the caller pauses 3 x the timeout: the rest is buffered.
        (0.01, 0.2, 0.6),
        # A write every 0.8 x the timeout, the caller slow in between: never silent.
        (0.8, 1.0, 0.3),
    ],
)
async def test_a_caller_slower_than_the_read_timeout_is_not_a_silent_server(
    gap: float, seconds: float, pause: float
) -> None:
    # The time the caller spends between two events is not the server's silence (aiohttp's
    # silence watch lost the buffered rest of the body to a spurious APITimeoutError).
    pieces = [_text(w) for w in "abcd"] + [_FINISH + b"data: [DONE]\n\n"]
    sizes = Chunking("sizes", sizes=tuple(len(p) for p in pieces))
    response = WireResponse(b"".join(pieces), chunking=sizes, chunk_delay=gap)
    events, error = await _run([response], timeout=seconds, pause_after=3, pause=pause)
    assert error is None, repr(error)
    assert _text_of(events) == "abcd"


def _whole_json() -> bytes:
    return orjson.dumps(
        {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"content": "abcd"}, "finish_reason": "stop"}],
        }
    )


@pytest.mark.parametrize("shape", ["sse", "json"])
async def test_a_stream_cancelled_at_any_point_frees_its_slot_and_connection(shape: str) -> None:
    # Cancelled at seeded times across the send, the head sniff, the whole-JSON read and the
    # per-read pump; with one slot, a permit or connection left held would hang the next one.
    import random

    rng = random.Random(17)
    if shape == "sse":
        pieces = [_text(w) for w in "abcd"] + [_FINISH + b"data: [DONE]\n\n"]
        content_type = "text/event-stream"
    else:
        raw = _whole_json()
        pieces = [raw[i : i + 9] for i in range(0, len(raw), 9)]
        content_type = "application/json"
    sizes = Chunking("sizes", sizes=tuple(len(p) for p in pieces))
    slow = WireResponse(
        b"".join(pieces), chunking=sizes, chunk_delay=0.01, content_type=content_type
    )
    deadlines = [rng.uniform(0.0, 0.06) for _ in range(6)]
    async with WireServer([slow] * len(deadlines) + [slow]) as server:
        client = _client(server, max_concurrency=1)
        try:
            for deadline in deadlines:
                with anyio.move_on_after(deadline):
                    async for _ in client.stream(Request([Message.user("hi")])):
                        pass
            with anyio.fail_after(10):
                events = [e async for e in client.stream(Request([Message.user("hi")]))]
        finally:
            await client.aclose()
            await client.aclose()  # twice: a no-op
    assert _text_of(events) == "abcd"


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
async def test_a_body_split_at_every_byte_with_bom_crlf_and_multibyte_text(
    framing: Literal["chunked", "length", "close"],
) -> None:
    # One byte per write: a BOM, CRLF line ends (the CR and LF in separate reads), a field
    # name split, and 2-, 3- and 4-byte UTF-8 characters split inside their bytes.
    body = (
        "\ufeff".encode()
        + _text("é€").replace(b"\n", b"\r\n")
        + b": a comment\r\n\r\n"
        + _text("𝄞x")
        + _FINISH.replace(b"\n", b"\r\n")
        + b"data: [DONE]\r\n\r\n"
    )
    response = WireResponse(body, chunking=Chunking.bytewise(), framing=framing)
    events, error = await _run([response])
    assert error is None, repr(error)
    assert _text_of(events) == "é€𝄞x"


async def test_a_whole_json_answer_over_the_bound_is_refused_not_buffered() -> None:
    # A chat answer sent as one JSON object is read whole, up to max_event_bytes.
    raw = _whole_json().replace(b"abcd", b"x" * 5000)
    _, error = await _run(
        [WireResponse(raw, content_type="application/json")], max_event_bytes=4096
    )
    assert isinstance(error, ProviderError), repr(error)
    assert "max_event_bytes" in str(error)


def _compressed(encoding: str, raw: bytes) -> bytes:
    import gzip
    import zlib

    return gzip.compress(raw) if encoding == "gzip" else zlib.compress(raw)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("chunking", ["whole", "bytewise"])
async def test_a_compressed_stream_is_decoded_at_any_split(encoding: str, chunking: str) -> None:
    body = b"".join(_text(w) for w in "ab€") + _FINISH + b"data: [DONE]\n\n"
    response = WireResponse(
        _compressed(encoding, body),
        headers={"content-encoding": encoding},
        chunking=Chunking.bytewise() if chunking == "bytewise" else Chunking.whole(),
    )
    events, error = await _run([response])
    assert error is None, repr(error)
    assert _text_of(events) == "ab€"


async def test_an_encoding_header_that_lies_is_a_typed_error_without_the_key() -> None:
    body = b"".join(_text(w) for w in "ab") + _FINISH + b"data: [DONE]\n\n"
    response = WireResponse(body, headers={"content-encoding": "gzip"})
    _, error = await _run([response])
    assert isinstance(error, ProviderError), repr(error)
    assert API_KEY not in repr(error) and API_KEY not in str(error.__cause__)


@pytest.mark.parametrize("seconds", [float("inf"), 1e9])
async def test_an_unbounded_read_timeout_streams(seconds: float) -> None:
    pieces = [_text(w) for w in "ab"] + [_FINISH + b"data: [DONE]\n\n"]
    sizes = Chunking("sizes", sizes=tuple(len(p) for p in pieces))
    response = WireResponse(b"".join(pieces), chunking=sizes, chunk_delay=0.01)
    events, error = await _run([response], timeout=seconds)
    assert error is None, repr(error)
    assert _text_of(events) == "ab"


@pytest.mark.parametrize("lead", [b"", b"\n", "\ufeff".encode(), b"\r\n\r\n"])
async def test_a_connection_broken_before_any_event_is_retried(lead: bytes) -> None:
    # Blank bytes or a BOM before the break are not the answer: nothing was handed on.
    body = b"".join(_text(w) for w in "ab") + _FINISH + b"data: [DONE]\n\n"
    broken = WireResponse(lead + body, chunking=Chunking.bytewise(), reset_at=len(lead))
    retry = RetryPolicy(max_attempts=2, initial_delay=0.01, jitter=0.0)
    events, error = await _run([broken, WireResponse(body)], retry=retry)
    assert error is None, repr(error)
    assert _text_of(events) == "ab"


async def test_a_body_broken_midway_keeps_the_library_error_readable() -> None:
    # The library's exception chained as the cause keeps what it says about its request.
    body = b"".join(_text(w) for w in "abcd") + _FINISH + b"data: [DONE]\n\n"
    response = WireResponse(body, chunking=Chunking.bytewise(), reset_at=len(_text("a")) + 3)
    _, error = await _run([response])
    assert isinstance(error, ProviderError), repr(error)
    cause = error.__cause__
    assert cause is not None
    if hasattr(type(cause), "request"):  # httpx: reading .request raised a RuntimeError
        url: object = getattr(cause, "request").url  # noqa: B009
        assert str(url).endswith("/v1/chat/completions")


LOOPS = """
import asyncio, gc, sys, threading, warnings
import anyio
from llm_worker.providers._http import RetryPolicy, Transport
from llm_worker.testing import WireResponse, WireServer

warnings.simplefilter("always", ResourceWarning)
library, runs = sys.argv[1], sys.argv[2].split(",")
ready, address, N = threading.Event(), [], 5

async def serve():
    answer = WireResponse(b"data: x\\n\\n", chunk_delay=0.01)
    async with WireServer([answer] * (N * len(runs))) as server:
        address.append(server.base_url)
        ready.set()
        await asyncio.Event().wait()

threading.Thread(target=asyncio.run, args=(serve(),), daemon=True).start()
assert ready.wait(10)
t = Transport(provider="test", base_url=address[0], headers={}, secret=None, max_concurrency=2,
              retry=RetryPolicy.disabled(), timeout=5.0, transport=library)

async def one(out):
    out.append(b"".join([chunk async for chunk in t.stream("/x", {})]))

async def many():
    out = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(N):
                tg.start_soon(one, out)
    return out == [b"data: x\\n\\n"] * N

for run in runs:
    if run == "loop":  # a loop closed without shutdown_asyncgens (no asyncio.run)
        loop = asyncio.new_event_loop()
        print(loop.run_until_complete(many()), flush=True)
        loop.close()
    else:
        print(asyncio.run(many()), flush=True)

async def close():
    await t.aclose()
    await t.aclose()

asyncio.run(close())
del t
gc.collect()
"""


def _loops(library: str, runs: str) -> subprocess.CompletedProcess[str]:
    # A fresh interpreter in development mode: every unclosed socket or session is reported.
    return subprocess.run(
        [sys.executable, "-X", "dev", "-c", LOOPS, library, runs],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_concurrent_streams_under_three_event_loops_in_turn_leak_nothing(
    http_transport: str,
) -> None:
    # Five streams at once through two slots under each loop: the client and the admission
    # gate follow the loop; each loop's client is closed when its asyncio.run ends.
    result = _loops(http_transport, "run,run,run")
    assert result.stdout.split() == ["True"] * 3, result.stderr[-2000:]
    assert "nclosed" not in result.stderr, result.stderr[-2000:]


def test_a_client_made_under_a_loop_closed_by_hand_is_closed_too(http_transport: str) -> None:
    # A loop closed without shutdown_asyncgens (run_until_complete + close, not asyncio.run)
    # never closes its client: the next loop's request closes its sockets (the first "loop"),
    # and so does `aclose` under a later loop (the last one). Development mode reports any
    # socket, transport or aiohttp session left open.
    result = _loops(http_transport, "loop,run,loop")
    assert result.stdout.split() == ["True"] * 3, result.stderr[-2000:]
    assert "nclosed" not in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
async def test_a_whole_json_answer_split_at_every_byte_after_a_bom(content_type: str) -> None:
    # A server that ignored `stream: true`: one JSON object, whatever its content type.
    raw = "\ufeff \r\n".encode() + _whole_json()
    response = WireResponse(raw, chunking=Chunking.bytewise(), content_type=content_type)
    events, error = await _run([response])
    assert error is None, repr(error)
    assert _text_of(events) == "abcd"


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SSL_CERT_FILE", "/nonexistent/ca.pem"), ("HTTPS_PROXY", "foo://user:pw@proxy")],
)
async def test_an_httpx_client_that_cannot_be_made_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    # The client is made at the first request since session 4: a bad environment setting was
    # a bare FileNotFoundError, or a MalformedStreamError "unreadable data in the stream".
    from llm_worker.errors import ConfigurationError

    monkeypatch.setenv(variable, value)
    client = OpenAIChatClient(
        model="m", base_url="https://127.0.0.1:9/v1", api_key=API_KEY, transport="httpx"
    )
    try:
        with anyio.fail_after(10), pytest.raises(ConfigurationError, match=variable) as caught:
            async for _ in client.stream(Request([Message.user("hi")])):
                pass
    finally:
        await client.aclose()
    assert ":pw@" not in str(caught.value)


async def test_a_compressed_stream_whose_bytes_trickle_in_never_times_out() -> None:
    # The gzip header comes one byte per 0.15 s: bytes arrive well within the 0.5 s read
    # timeout, but none decodes to body bytes for 1.5 s.
    import gzip

    body = _compressed("gzip", b"".join(_text(w) for w in "ab") + _FINISH + b"data: [DONE]\n\n")
    assert gzip.decompress(body)
    sizes = Chunking("sizes", sizes=(1,) * 10 + (len(body) - 10,))
    response = WireResponse(
        body, headers={"content-encoding": "gzip"}, chunking=sizes, chunk_delay=0.15
    )
    events, error = await _run([response], timeout=0.5)
    assert error is None, repr(error)
    assert _text_of(events) == "ab"


async def test_a_compressed_stream_that_stalls_times_out() -> None:
    import zlib

    packer = zlib.compressobj(wbits=31)  # gzip, flushed per event as a server does
    pieces = [packer.compress(_text(w)) + packer.flush(zlib.Z_SYNC_FLUSH) for w in "ab"]
    pieces.append(packer.compress(_FINISH) + packer.flush())
    sizes = Chunking("sizes", sizes=tuple(len(p) for p in pieces))
    response = WireResponse(
        b"".join(pieces),
        headers={"content-encoding": "gzip"},
        chunking=sizes,
        chunk_delays=(0.01, 5.0),
    )
    async with WireServer([response]) as server:
        client = _client(server, timeout=0.3)
        events: list[Event] = []
        error: Exception | None = None
        try:
            with anyio.fail_after(4):
                async for event in client.stream(Request([Message.user("hi")])):
                    events.append(event)
        except APITimeoutError as exc:
            error = exc
        finally:
            await client.aclose()
    assert isinstance(error, APITimeoutError) and _text_of(events) == "ab"


@pytest.mark.parametrize("library", ["httpx", "aiohttp"])
async def test_both_transports_send_through_the_proxy_the_environment_names(
    monkeypatch: pytest.MonkeyPatch, library: Literal["httpx", "aiohttp"]
) -> None:
    # The target port is closed: the answer can only come through the proxy. Our aiohttp
    # session ignored HTTP_PROXY while httpx honoured it.
    body = b"".join(_text(w) for w in "ab") + _FINISH + b"data: [DONE]\n\n"
    async with WireServer([WireResponse(body)]) as proxy:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url)
        client = OpenAIChatClient(
            model="m", base_url="http://127.0.0.1:9/v1", api_key=API_KEY, transport=library
        )
        try:
            with anyio.fail_after(10):
                events = [e async for e in client.stream(Request([Message.user("hi")]))]
        finally:
            await client.aclose()
    assert _text_of(events) == "ab"
    assert len(proxy.requests) == 1


async def test_one_timer_watches_silent_and_flowing_bodies_at_once(http_transport: str) -> None:
    # aiohttp's bodies share one timer for their read timeouts: three bodies fall silent
    # after their first event while a fourth keeps writing (each gap below the timeout but
    # the whole longer than it). The silent ones fail, the flowing one is never failed, and
    # no body stays watched once all have ended.
    pieces = [_text(w) for w in "abcdef"] + [_FINISH + b"data: [DONE]\n\n"]
    flowing = WireResponse(
        b"".join(pieces),
        chunking=Chunking("sizes", sizes=tuple(len(p) for p in pieces)),
        chunk_delay=0.1,
    )
    first = len(pieces[0])
    silent = WireResponse(
        b"".join(pieces), chunking=Chunking("sizes", sizes=(first,)), chunk_delay=1.0
    )
    outcomes: list[tuple[str, Exception | None]] = []
    async with WireServer([flowing, silent, silent, silent]) as server:
        client = _client(server, timeout=0.3)
        started = anyio.Event()

        async def one(signal: anyio.Event | None) -> None:
            events: list[Event] = []
            try:
                async for event in client.stream(Request([Message.user("hi")])):
                    events.append(event)
                    if signal is not None and _text_of(events):
                        signal.set()
            except Exception as exc:
                outcomes.append((_text_of(events), exc))
            else:
                outcomes.append((_text_of(events), None))

        try:
            with anyio.fail_after(20):
                async with anyio.create_task_group() as group:
                    group.start_soon(one, started)
                    await started.wait()  # the flowing body is the first request's
                    for _ in range(3):
                        group.start_soon(one, None)
        finally:
            backend: Any = client.transport._backend  # pyright: ignore[reportPrivateUsage]
            await client.aclose()
    assert sorted(text for text, _ in outcomes) == ["a", "a", "a", "abcdef"]
    for text, error in outcomes:
        if text == "abcdef":
            assert error is None, repr(error)
        else:
            assert isinstance(error, APITimeoutError), repr(error)
    if http_transport == "aiohttp":
        assert not backend._watches._members  # all ended: none is held
