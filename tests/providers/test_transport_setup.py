"""The per-request setup an own HTTP client does once instead (issue 39, 1,000 streams).

The proxy variables are read when the client's own session is made, as httpx reads them
(aiohttp's `trust_env` read them and `.netrc` in a worker thread at every request); the
answer's first byte is found without copying the first read.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import weakref
from pathlib import Path

import anyio
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_worker.events import BlockDelta, Event, ResponseStatus, StatusEvent, TextDelta
from llm_worker.messages import Message, Request
from llm_worker.providers import AnthropicClient, OpenAIChatClient
from llm_worker.providers._blocks import StreamMapper
from llm_worker.providers._http import RetryPolicy, Transport, _first_byte
from llm_worker.providers._sse import BLANK
from llm_worker.providers.openai_chat import ChatStreamMapper
from llm_worker.testing import Chunking, WireResponse, WireServer

pytestmark = pytest.mark.anyio

API_KEY = "sk-setup-review-0123456789"
_PROXY_VARIABLES = ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy", "HTTP_PROXY")
# Port 9 (discard) is closed on 127.0.0.1: an answer can only come through a proxy.
_CLOSED = "http://127.0.0.1:9/v1"


def _body(text: str) -> bytes:
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}}],
    }
    finish = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    return (
        b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in (chunk, finish))
        + b"data: [DONE]\n\n"
    )


def _text_of(events: list[Event]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


def _client(base_url: str, **options: object) -> OpenAIChatClient:
    options.setdefault("api_key", API_KEY)
    return OpenAIChatClient(
        model="m",
        base_url=base_url,
        retry=RetryPolicy.disabled(),
        **options,  # type: ignore[arg-type]
    )


async def _text(client: OpenAIChatClient) -> str:
    with anyio.fail_after(10):
        return _text_of([e async for e in client.stream(Request([Message.user("hi")]))])


@pytest.fixture
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.usefixtures("http_transport")
async def test_the_proxy_variables_are_read_when_the_client_s_pool_is_made(
    no_proxy_variables: pytest.MonkeyPatch,
) -> None:
    # As httpx reads them when its client is made: a variable changed later reaches the
    # next pool (after aclose), not the requests of the one in use.
    first = WireServer([WireResponse(_body("a")), WireResponse(_body("b"))])
    second = WireServer([WireResponse(_body("c"))])
    async with first, second:
        credentials = first.base_url.replace("http://", "http://proxy-user:proxy-pass@")
        no_proxy_variables.setenv("HTTP_PROXY", credentials)
        client = _client(_CLOSED)
        try:
            assert await _text(client) == "a"
            no_proxy_variables.setenv("HTTP_PROXY", second.base_url)
            assert await _text(client) == "b"
            await client.aclose()
            assert await _text(client) == "c"
        finally:
            await client.aclose()
    assert [len(first.requests), len(second.requests)] == [2, 1]
    assert first.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    proxy_basic = "Basic " + base64.b64encode(b"proxy-user:proxy-pass").decode()
    assert [r.headers.get("proxy-authorization") for r in first.requests] == [proxy_basic] * 2
    assert "proxy-authorization" not in second.requests[0].headers


@pytest.mark.usefixtures("http_transport")
async def test_concurrent_first_requests_all_take_the_proxy(
    no_proxy_variables: pytest.MonkeyPatch,
) -> None:
    # The first requests of a pool arrive together while the environment is looked up.
    async with WireServer([WireResponse(_body(str(i))) for i in range(20)]) as proxy:
        no_proxy_variables.setenv("HTTP_PROXY", proxy.base_url)
        client = _client(_CLOSED)
        texts: list[str] = []

        async def one() -> None:
            texts.append(await _text(client))

        try:
            async with anyio.create_task_group() as group:
                for _ in range(20):
                    group.start_soon(one)
        finally:
            await client.aclose()
    assert sorted(texts) == sorted(str(i) for i in range(20))
    assert len(proxy.requests) == 20


@pytest.mark.usefixtures("http_transport")
async def test_no_proxy_exempts_the_host(no_proxy_variables: pytest.MonkeyPatch) -> None:
    async with WireServer([]) as proxy, WireServer([WireResponse(_body("direct"))]) as target:
        no_proxy_variables.setenv("HTTP_PROXY", proxy.base_url)
        no_proxy_variables.setenv("NO_PROXY", "127.0.0.1")
        client = _client(target.base_url + "/v1")
        try:
            assert await _text(client) == "direct"
        finally:
            await client.aclose()
    assert proxy.requests == []
    assert len(target.requests) == 1


def _netrc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "netrc"
    path.write_text("machine 127.0.0.1 login netrc-user password netrc-pass\n")
    path.chmod(0o600)
    monkeypatch.setenv("NETRC", str(path))


async def test_aiohttp_sends_the_netrc_credentials_of_a_keyless_server(
    tmp_path: Path, no_proxy_variables: pytest.MonkeyPatch
) -> None:
    _netrc(tmp_path, no_proxy_variables)
    async with WireServer([WireResponse(_body("a")), WireResponse(_body("b"))]) as server:
        client = _client(server.base_url + "/v1", api_key=None, transport="aiohttp")
        try:
            assert await _text(client) + await _text(client) == "ab"
        finally:
            await client.aclose()
    basic = "Basic " + base64.b64encode(b"netrc-user:netrc-pass").decode()
    assert [r.headers.get("authorization") for r in server.requests] == [basic, basic]


async def test_aiohttp_sends_the_api_key_over_a_netrc_entry(
    tmp_path: Path, no_proxy_variables: pytest.MonkeyPatch
) -> None:
    # aiohttp's trust_env refused the request ("Cannot combine AUTHORIZATION header with AUTH
    # argument"): a .netrc entry for the API's host made every request an APIConnectionError.
    _netrc(tmp_path, no_proxy_variables)
    async with WireServer([WireResponse(_body("a"))]) as server:
        client = _client(server.base_url + "/v1", transport="aiohttp")
        try:
            assert await _text(client) == "a"
        finally:
            await client.aclose()
    assert server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"


@given(st.binary(max_size=40) | st.lists(st.sampled_from([*BLANK, 0x7B, 0x3C, 0x64])).map(bytes))
def test_the_first_byte_is_the_first_that_is_not_blank(data: bytes) -> None:
    assert _first_byte(data) == data.lstrip(BLANK)[:1]


class _Barrier:
    """Answers no request until `count` requests are in: each waits for all the others."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.arrived = 0
        self.all_in = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            self.arrived += 1
            if self.arrived == self.count:
                self.all_in.set()
            await self.all_in.wait()
            body = _body("x")
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
        finally:
            writer.close()


@pytest.mark.usefixtures("http_transport")
async def test_the_default_client_streams_150_answers_at_once() -> None:
    # Every answer waits until all 150 requests are in: a default cap below that (it was 100)
    # holds the rest back until answers end, and none ends. An LLM stream holds its
    # connection for the whole answer.
    barrier = _Barrier(150)
    listener = await asyncio.start_server(barrier.handle, "127.0.0.1", 0, backlog=256)
    port = listener.sockets[0].getsockname()[1]
    client = _client(f"http://127.0.0.1:{port}/v1")
    texts: list[str] = []

    async def one() -> None:
        texts.append(await _text(client))

    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                for _ in range(150):
                    group.start_soon(one)
    finally:
        await client.aclose()
        listener.close()
    assert texts == ["x"] * 150


class _Body(dict[str, object]):
    """A request body that can be watched with a weak reference."""


@pytest.mark.usefixtures("http_transport")
async def test_a_stream_in_flight_does_not_hold_its_request_body() -> None:
    # The body's objects (a long conversation: thousands) are encoded once and let go: 1,000
    # streams in flight held 1,000 bodies, and the garbage collector went over them all.
    answer = _body("ab") * 20
    paced = WireResponse(answer, chunking=Chunking(mode="sizes", sizes=(64,)), chunk_delay=0.01)
    async with WireServer([paced]) as server:
        transport = Transport(
            provider="test",
            base_url=server.base_url + "/v1",
            headers={"authorization": f"Bearer {API_KEY}"},
            secret=API_KEY,
            retry=RetryPolicy.disabled(),
        )
        body = _Body(model="m", messages=[{"role": "user", "content": "hi"}])
        watched = weakref.ref(body)
        received = b""
        try:
            with anyio.fail_after(10):
                chunks = transport.stream("/chat/completions", body)
                del body
                async for chunk in chunks:
                    if not received:
                        gc.collect()
                        assert watched() is None  # mid-stream: the answer goes on
                    received += chunk
        finally:
            await transport.aclose()
    assert received == answer
    assert server.requests[0].json() == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
    }


class _Held:
    """Reads each request, then holds its answer back until `release` is set."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            self.arrived.set()
            await self.release.wait()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(self.body), self.body)
            )
            await writer.drain()
        finally:
            writer.close()


def _anthropic_body(text: str) -> bytes:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
               "content": [], "usage": {"input_tokens": 1, "output_tokens": 0}}  # fmt: skip
    block = {"type": "text", "text": ""}
    delta = {"type": "text_delta", "text": text}
    events = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    return b"".join(
        b"event: %s\ndata: %s\n\n" % (str(e["type"]).encode(), orjson.dumps(e)) for e in events
    )


class _CountedChat(OpenAIChatClient):
    made = 0

    def mapper(self, request: Request) -> ChatStreamMapper:
        type(self).made += 1
        return super().mapper(request)


class _CountedAnthropic(AnthropicClient):
    made = 0

    def mapper(self, request: Request) -> StreamMapper:
        type(self).made += 1
        return super().mapper(request)


@pytest.mark.usefixtures("http_transport")
@pytest.mark.parametrize("wire", ["openai_chat", "anthropic"])
async def test_a_stream_waiting_for_its_answer_holds_no_mapper_yet(wire: str) -> None:
    # 1,000 streams waiting for their answers: what each holds meanwhile is walked by every
    # pass of the garbage collector and moved to its older generations. The mapper, the SSE
    # decoder and the emitter are made when the first bytes arrive (Chat has its own
    # `stream()`, Anthropic the base class's).
    chat = wire == "openai_chat"
    held = _Held(_body("x") if chat else _anthropic_body("x"))
    listener = await asyncio.start_server(held.handle, "127.0.0.1", 0)
    base_url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    kind = _CountedChat if chat else _CountedAnthropic
    kind.made = 0
    client = kind(model="m", api_key=API_KEY, base_url=base_url + ("/v1" if chat else ""),
                  retry=RetryPolicy.disabled())  # fmt: skip
    try:
        with anyio.fail_after(10):
            stream = client.stream(Request([Message.user("hi")]))
            first = asyncio.ensure_future(anext(stream))
            await held.arrived.wait()  # the request is sent; its answer is held back
            await asyncio.sleep(0.05)  # the stream waits for the answer's head
            assert kind.made == 0
            held.release.set()
            events = [await first, *[e async for e in stream]]
    finally:
        await client.aclose()
        listener.close()
    assert kind.made == 1
    assert _text_of(events) == "x"
    assert events[0] == StatusEvent(ResponseStatus.STARTED)
    assert events[-1].status is ResponseStatus.COMPLETED  # type: ignore[union-attr]
