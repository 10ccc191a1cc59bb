"""WireServer: chunking, faults, delays, statuses, recorded requests, keep-alive, handlers."""

from __future__ import annotations

import contextlib
import select
import socket
import time
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_worker.errors import ConfigurationError
from llm_worker.testing import Chunking, RecordedRequest, WireResponse, WireServer

BODY = "data: é漢😀 — 0123456789\n\n".encode() * 20


# --- Chunking.split --------------------------------------------------------------------------


def test_whole_is_one_piece() -> None:
    assert Chunking.whole().split(BODY) == [BODY]
    assert Chunking().split(BODY) == [BODY]


def test_bytewise_is_one_byte_a_piece() -> None:
    pieces = Chunking.bytewise().split(BODY)
    assert len(pieces) == len(BODY)
    assert all(len(p) == 1 for p in pieces)
    assert b"".join(pieces) == BODY


def test_random_is_reproducible_by_seed_and_bounded() -> None:
    a = Chunking.random(seed=7, max_size=5).split(BODY)
    assert a == Chunking.random(seed=7, max_size=5).split(BODY)
    assert a != Chunking.random(seed=8, max_size=5).split(BODY)
    assert all(1 <= len(p) <= 5 for p in a)
    assert b"".join(a) == BODY


def test_sizes_are_cycled_and_zero_means_one() -> None:
    pieces = Chunking("sizes", sizes=(1, 3)).split(b"abcdefghij")
    assert pieces == [b"a", b"bcd", b"e", b"fgh", b"i", b"j"]
    assert Chunking("sizes", sizes=(0,)).split(b"abc") == [b"a", b"b", b"c"]
    assert Chunking("sizes").split(b"abc") == [b"abc"]


@pytest.mark.parametrize(
    "chunking", [Chunking.whole(), Chunking.bytewise(), Chunking.random(), Chunking("sizes")]
)
def test_an_empty_body_has_no_pieces(chunking: Chunking) -> None:
    assert chunking.split(b"") == []


@given(body=st.binary(max_size=300), seed=st.integers(0, 2**32), max_size=st.integers(1, 50))
def test_random_pieces_always_rebuild_the_body(body: bytes, seed: int, max_size: int) -> None:
    pieces = Chunking.random(seed, max_size).split(body)
    assert b"".join(pieces) == body
    assert all(1 <= len(p) <= max_size for p in pieces)


def test_body_forms() -> None:
    assert WireResponse("é").body_bytes() == "é".encode()
    assert WireResponse({"a": [1, None]}).body_bytes() == b'{"a":[1,null]}'
    assert WireResponse([1, "x"]).body_bytes() == b'[1,"x"]'
    assert WireResponse(b"\xff").body_bytes() == b"\xff"


# --- the wire, read raw ----------------------------------------------------------------------


async def raw_exchange(server: WireServer, request: bytes) -> bytes:
    """Send one raw request; read until the server closes the connection."""
    with anyio.fail_after(10):
        async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
            await stream.send(request)
            out = b""
            try:
                while True:
                    out += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return out


async def read_body(client: httpx.AsyncClient, url: str, into: list[bytes]) -> None:
    with anyio.fail_after(10):
        async with client.stream("GET", url) as answer:
            async for chunk in answer.aiter_bytes():
                into.append(chunk)


async def read_until_closed(stream: anyio.abc.ByteStream) -> None:
    while True:
        await stream.receive()


GET_CLOSE = b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"


def chunk_sizes(raw: bytes) -> tuple[list[int], bytes, bool]:
    """Parse a chunked body: the chunk sizes, the body, and whether the last-chunk came."""
    _, _, rest = raw.partition(b"\r\n\r\n")
    sizes: list[int] = []
    body = b""
    while rest:
        line, _, rest = rest.partition(b"\r\n")
        size = int(line, 16)
        if size == 0:
            return sizes, body, True
        sizes.append(size)
        body += rest[:size]
        rest = rest[size + 2 :]
    return sizes, body, False


@pytest.mark.anyio
@pytest.mark.parametrize(
    "chunking",
    [Chunking.whole(), Chunking.bytewise(), Chunking.random(seed=3, max_size=9)],
    ids=["whole", "bytewise", "random"],
)
async def test_each_piece_is_one_http_chunk_on_the_wire(chunking: Chunking) -> None:
    async with WireServer([WireResponse(BODY, chunking=chunking)]) as server:
        raw = await raw_exchange(server, GET_CLOSE)
    head = raw.partition(b"\r\n\r\n")[0].decode().lower()
    assert head.startswith("http/1.1 200 ok")
    assert "transfer-encoding: chunked" in head
    assert "content-type: text/event-stream" in head
    sizes, body, complete = chunk_sizes(raw)
    assert sizes == [len(p) for p in chunking.split(BODY)]
    assert body == BODY
    assert complete


@pytest.mark.anyio
async def test_cut_at_closes_after_that_many_body_bytes() -> None:
    response = WireResponse(BODY, chunking=Chunking("sizes", sizes=(10,)), cut_at=25)
    async with WireServer([response]) as server:
        raw = await raw_exchange(server, GET_CLOSE)
    sizes, body, complete = chunk_sizes(raw)
    assert body == BODY[:25]
    assert sizes == [10, 10, 5]
    assert not complete  # no last-chunk: the stream was cut


@pytest.mark.anyio
async def test_cut_at_beyond_the_body_still_withholds_the_end() -> None:
    async with WireServer([WireResponse(BODY, cut_at=10**6)]) as server:
        raw = await raw_exchange(server, GET_CLOSE)
    _, body, complete = chunk_sizes(raw)
    assert body == BODY
    assert not complete


@pytest.mark.anyio
async def test_length_framing_announces_the_full_length_even_when_cut() -> None:
    response = WireResponse(BODY, framing="length", cut_at=7)
    async with WireServer([response]) as server:
        raw = await raw_exchange(server, GET_CLOSE)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert f"content-length: {len(BODY)}".encode() in head
    assert b"transfer-encoding" not in head
    assert body == BODY[:7]


@pytest.mark.anyio
async def test_close_framing_ends_the_body_with_the_connection() -> None:
    response = WireResponse(BODY, framing="close", chunking=Chunking.random(seed=1))
    async with WireServer([response]) as server, httpx.AsyncClient() as client:
        answer = await client.get(server.base_url + "/")
    assert answer.headers["connection"] == "close"
    assert "content-length" not in answer.headers
    assert "transfer-encoding" not in answer.headers
    assert answer.content == BODY


@pytest.mark.anyio
async def test_reset_at_resets_the_connection_after_the_bytes() -> None:
    response = WireResponse(BODY, chunking=Chunking("sizes", sizes=(8,)), reset_at=16)
    received: list[bytes] = []
    async with WireServer([response]) as server, httpx.AsyncClient() as client:
        with pytest.raises(httpx.ReadError) as info:
            await read_body(client, server.base_url + "/", received)
    # Linux may drop unread bytes when the RST arrives: at most the first 16 came through.
    body = b"".join(received)
    assert body == BODY[: len(body)]
    assert len(body) <= 16
    causes: list[BaseException] = []
    cause: BaseException | None = info.value
    while cause is not None:
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    assert any(isinstance(c, ConnectionResetError) for c in causes)


@pytest.mark.anyio
async def test_reset_at_sends_rst_not_fin() -> None:
    response = WireResponse(BODY, framing="length", reset_at=0)
    async with WireServer([response]) as server:
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
                await stream.send(GET_CLOSE)
                with pytest.raises(anyio.BrokenResourceError):
                    await read_until_closed(stream)


# --- timing, status, headers -----------------------------------------------------------------


@pytest.mark.anyio
async def test_first_byte_delay_holds_back_the_status_line() -> None:
    response = WireResponse(b"x", first_byte_delay=0.2)
    async with WireServer([response]) as server, httpx.AsyncClient() as client:
        started = time.monotonic()
        answer = await client.get(server.base_url + "/")
        elapsed = time.monotonic() - started
    assert answer.content == b"x"
    assert elapsed >= 0.19


@pytest.mark.anyio
async def test_chunk_delay_comes_before_every_piece_but_the_first() -> None:
    response = WireResponse(b"abcd", chunking=Chunking.bytewise(), chunk_delay=0.1)
    arrivals: list[float] = []
    async with WireServer([response]) as server, httpx.AsyncClient() as client:
        started = time.monotonic()
        async with client.stream("GET", server.base_url + "/") as answer:
            async for _ in answer.aiter_raw():
                arrivals.append(time.monotonic() - started)
    assert len(arrivals) == 4
    assert arrivals[0] < 0.09
    assert arrivals[-1] >= 0.29


@pytest.mark.anyio
async def test_status_reason_content_type_and_headers() -> None:
    response = WireResponse(
        {"error": {}},
        status=529,
        content_type="application/json",
        headers={"retry-after": "3", "x-request-id": "r1"},
    )
    teapot = WireResponse(b"", status=418)
    async with WireServer([response, teapot]) as server, httpx.AsyncClient() as client:
        answer = await client.post(server.base_url + "/")
        second = await client.post(server.base_url + "/")
    assert answer.status_code == 529
    assert answer.reason_phrase == "Unknown"
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["retry-after"] == "3"
    assert answer.headers["x-request-id"] == "r1"
    assert answer.json() == {"error": {}}
    assert (second.status_code, second.reason_phrase) == (418, "I'm a Teapot")


# --- requests, keep-alive, handlers ----------------------------------------------------------


@pytest.mark.anyio
async def test_requests_are_recorded() -> None:
    responses = [WireResponse(b"a"), WireResponse(b"b")]
    async with WireServer(responses) as server, httpx.AsyncClient() as client:
        await client.post(
            server.base_url + "/v1beta/models/m:streamGenerateContent?alt=sse&key=",
            json={"contents": [{"text": "é"}], "n": None},
            headers={"X-Goog-Api-Key": "k"},
        )
        await client.get(server.base_url + "/health")
    first, second = server.requests
    assert isinstance(first, RecordedRequest)
    assert first.method == "POST"
    assert first.path == "/v1beta/models/m:streamGenerateContent"
    assert first.query == {"alt": "sse", "key": ""}
    assert first.headers["x-goog-api-key"] == "k"
    assert first.headers["content-type"] == "application/json"
    assert first.json() == {"contents": [{"text": "é"}], "n": None}
    assert (second.method, second.path, second.query, second.body) == ("GET", "/health", {}, b"")


@pytest.mark.anyio
@pytest.mark.parametrize("framing", ["chunked", "length"])
async def test_keep_alive_serves_several_requests_on_one_connection(framing: Any) -> None:
    responses = [WireResponse(f"answer {n}", framing=framing) for n in range(3)]
    ports: set[int] = set()
    bodies: list[str] = []
    async with WireServer(responses) as server, httpx.AsyncClient() as client:
        for _ in range(3):
            async with client.stream("POST", server.base_url + "/", content=b"{}") as answer:
                await answer.aread()
                bodies.append(answer.text)
                network = answer.extensions["network_stream"]
                ports.add(network.get_extra_info("client_addr")[1])
    assert bodies == ["answer 0", "answer 1", "answer 2"]
    assert len(ports) == 1
    assert len(server.requests) == 3


@pytest.mark.anyio
async def test_enqueue_appends_to_the_queue() -> None:
    async with WireServer([WireResponse(b"1")]) as server, httpx.AsyncClient() as client:
        server.enqueue(WireResponse(b"2"), WireResponse(b"3"))
        texts = [(await client.get(server.base_url)).text for _ in range(3)]
    assert texts == ["1", "2", "3"]


@pytest.mark.anyio
async def test_an_exhausted_queue_answers_500_naming_the_problem() -> None:
    async with WireServer() as server, httpx.AsyncClient() as client:
        answer = await client.post(server.base_url + "/v1/x")
    assert answer.status_code == 500
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "error": {"type": "test_server", "message": "the test server has no answer left"}
    }
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_a_sync_handler_answers_from_the_request() -> None:
    def handler(request: RecordedRequest) -> WireResponse:
        return WireResponse(f"{request.method} {request.path} {request.json()['n']}")

    async with WireServer(handler=handler) as server, httpx.AsyncClient() as client:
        answers = [
            (await client.post(server.base_url + f"/p{n}", json={"n": n})).text for n in range(2)
        ]
    assert answers == ["POST /p0 0", "POST /p1 1"]


@pytest.mark.anyio
async def test_an_async_handler_may_wait() -> None:
    async def handler(request: RecordedRequest) -> WireResponse:
        await anyio.lowlevel.checkpoint()
        return WireResponse(request.body, status=201)

    async with WireServer(handler=handler) as server, httpx.AsyncClient() as client:
        answer = await client.post(server.base_url + "/", content=b"echo")
    assert (answer.status_code, answer.content) == (201, b"echo")


@pytest.mark.anyio
async def test_a_handler_that_raises_gets_a_500_naming_the_error() -> None:
    def handler(request: RecordedRequest) -> WireResponse:
        raise LookupError("no script for " + request.path)

    async with WireServer(handler=handler) as server, httpx.AsyncClient() as client:
        answer = await client.post(server.base_url + "/x")
    assert answer.status_code == 500
    error = answer.json()["error"]
    assert error["type"] == "test_server"
    assert "LookupError('no script for /x')" in error["message"]


@pytest.mark.anyio
async def test_close_does_not_wait_for_a_stalled_answer() -> None:
    stalled = WireResponse(BODY, chunking=Chunking.bytewise(), chunk_delay=60.0)
    server = WireServer([stalled])
    await server.start()
    async with httpx.AsyncClient() as client:
        with anyio.fail_after(10):
            async with client.stream("GET", server.base_url + "/") as answer:
                stream = answer.aiter_raw()
                assert await stream.__anext__() == BODY[:1]
                started = time.monotonic()
                await server.close()
                assert time.monotonic() - started < 2.0
                with pytest.raises(httpx.TransportError):
                    await stream.__anext__()
    await server.close()  # closing twice is harmless


@pytest.mark.anyio
async def test_the_address_of_a_server_not_running_is_an_error_not_port_0() -> None:
    server = WireServer()
    with pytest.raises(ConfigurationError, match="not running, so it has no address yet"):
        _ = server.base_url
    async with server:
        assert server.base_url == f"http://127.0.0.1:{server.port}"
    with pytest.raises(ConfigurationError, match="not running"):
        _ = server.base_url


@pytest.mark.anyio
@pytest.mark.parametrize("turns", range(7))
async def test_close_ends_a_connection_accepted_just_before(turns: int) -> None:
    # A connection the server accepted a loop turn or two before close(), whose handler had
    # not run yet, stayed open (the client waited forever) and its socket was left to the
    # garbage collector: an "unclosed socket" warning in whichever later test it ran in.
    server = WireServer()
    await server.start()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as client:
        for _ in range(turns):  # each lets the event loop take the connection one step on
            await anyio.lowlevel.checkpoint()
        with anyio.fail_after(10):
            await server.close()
        readable, _, _ = select.select([client], [], [], 5)  # bounded: fails after 5 s
        assert readable, "the server left the connection open after close()"
        with contextlib.suppress(ConnectionResetError):  # reset: closed before accepting it
            assert client.recv(1) == b""


@pytest.mark.anyio
async def test_close_in_a_cancelled_block_still_stops_listening() -> None:
    port = 0
    with anyio.fail_after(10), anyio.CancelScope() as scope:
        async with WireServer() as server:
            port = server.port
            scope.cancel()
            await anyio.sleep_forever()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
