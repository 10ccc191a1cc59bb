"""Review of issue 39's per-event path: reads holding many whole events, and reads cut anywhere.

The decoder reads a read's whole events at once where the framing is plain, and `drive` hands
each event's output on before decoding the next. These tests feed every recorded stream of the
four wires through the real clients in reads of seeded random sizes, large enough that a read
holds dozens of events and ends anywhere inside one, and in their CRLF form, and check that
the events are those of the whole body; they cancel a stream between the events of one read.
"""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import pytest

from llm_worker import Worker
from llm_worker.errors import MalformedStreamError, ProviderError
from llm_worker.events import BlockDelta, Event, PingEvent, TextDelta, UsageEvent
from llm_worker.messages import Message, Request
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    HttpClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
)
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import Chunking, WireResponse, WireServer
from support.recorded import fixture_names, load

pytestmark = pytest.mark.anyio

Make = Callable[[httpx.AsyncClient], HttpClient]
_CLIENTS: dict[str, Make] = {
    "anthropic_messages": lambda http: AnthropicClient(
        model="m",
        api_key="k",
        base_url="http://x.test",
        http_client=http,
        retry=RetryPolicy.disabled(),
    ),
    "openai_chat": lambda http: OpenAIChatClient(
        model="m",
        api_key="k",
        base_url="http://x.test/v1",
        http_client=http,
        retry=RetryPolicy.disabled(),
    ),
    "openai_responses": lambda http: OpenAIResponsesClient(
        model="m",
        api_key="k",
        base_url="http://x.test/v1",
        http_client=http,
        retry=RetryPolicy.disabled(),
    ),
    "gemini": lambda http: GeminiClient(
        model="m",
        api_key="k",
        base_url="http://x.test/v1beta",
        http_client=http,
        retry=RetryPolicy.disabled(),
    ),
}


def _sse_streams() -> list[Any]:
    return [
        pytest.param(api, name, id=f"{api}/{name}")
        for api in _CLIENTS
        for name in fixture_names(api)
        if load(api, name)["response"]["status"] == 200
        and load(api, name)["response"]["content_type"].startswith("text/event-stream")
    ]


class _Reads(httpx.AsyncByteStream):
    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for read in self.reads:
            yield read

    async def aclose(self) -> None:
        self.closed = True


def _cut(body: bytes, rng: random.Random) -> list[bytes]:
    # Short reads (an event over several, ending between the CR and LF of a pair) mixed with
    # long ones (dozens of whole events, the last cut anywhere).
    reads: list[bytes] = []
    at = 0
    while at < len(body):
        size = rng.randint(1, 7) if rng.random() < 0.5 else rng.randint(1, 4096)
        reads.append(body[at : at + size])
        at += size
    return reads


async def _events(api: str, reads: list[bytes]) -> list[object]:
    def handler(_: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=_Reads(reads))

    events: list[Event] = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        with anyio.fail_after(30):
            try:
                async for event in _CLIENTS[api](http).stream(Request([Message.user("hi")])):
                    events.append(event)
            except ProviderError as exc:  # a recorded error event: the same one each time
                return [*_comparable(events), type(exc), str(exc)]
    return _comparable(events)


def _comparable(events: list[Event]) -> list[object]:
    # A ping is stamped with the time it was read. A provider repeating its running usage in
    # every event (Gemini) reports one snapshot per read: the reads differ, the last must not.
    usage = [e for e in events if isinstance(e, UsageEvent)]
    kept = [e for e in events if not isinstance(e, UsageEvent)]
    shown: list[object] = [("ping" if isinstance(e, PingEvent) else e) for e in kept]
    return shown + usage[-1:]


@pytest.mark.parametrize(("api", "name"), _sse_streams())
@pytest.mark.parametrize("eol", ["LF", "CRLF"])
async def test_reads_of_any_size_give_the_events_of_the_whole_body(
    api: str, name: str, eol: str
) -> None:
    body = load(api, name)["response"]["body"].encode()
    if eol == "CRLF":
        body = body.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    whole = await _events(api, [body])
    rng = random.Random(f"{api}/{name}/{eol}")
    reads = _cut(body, rng)
    assert await _events(api, reads) == whole, reads


def _chat_body(n: int) -> bytes:
    head = b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    deltas = b"".join(
        b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"%d "}}]}\n\n' % i
        for i in range(n)
    )
    end = b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
    end += b"\n\n"
    return head + deltas + end + b"data: [DONE]\n\n"


@pytest.mark.parametrize("at", [1, 25, 49])
async def test_a_stream_left_between_the_events_of_one_read_saw_each_before_once(at: int) -> None:
    # One read completes 50 text deltas: the consumer leaves after the `at`-th; it has seen
    # exactly the first `at`, in order, and the read's source is closed, not drained.
    reads = _Reads([_chat_body(50)])

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=reads)

    seen: list[str] = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        stream = _CLIENTS["openai_chat"](http).stream(Request([Message.user("hi")]))
        with anyio.fail_after(10):
            async for event in stream:
                if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                    seen.append(event.delta.text)
                    if len(seen) == at:
                        break
            await stream.aclose()  # type: ignore[attr-defined]
    assert seen == [f"{i} " for i in range(at)]
    assert reads.closed


async def _peak_while_reading(body: bytes) -> int:
    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Reads([body])
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        client = _CLIENTS["openai_chat"](http)
        count = 0
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            with anyio.fail_after(30):
                async for _ in client.stream(Request([Message.user("hi")])):
                    count += 1
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    assert count > body.count(b"\n\n") - 2  # every delta came through
    return peak


async def test_a_read_of_thousands_of_events_is_handed_on_without_holding_their_output() -> None:
    # A reader that drops each event holds about the read itself (and its split), not the
    # 20,000 events a single read of a bulk stream completes (mapped all at once: ~5x the read).
    await _peak_while_reading(_chat_body(100))  # imports and caches first
    body = _chat_body(20_000)
    assert await _peak_while_reading(body) < 3 * len(body)


def _text(events: list[object]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


@pytest.mark.parametrize(
    ("api", "name", "before"),
    [
        ("anthropic_messages", "plain_text", '"text_delta","text":"'),
        ("openai_chat", "plain_text_with_usage_chunk", '"content":"'),
        ("openai_responses", "plain_text", '"delta":"'),
        ("gemini", "plain_text", '"text": "'),
    ],
)
async def test_a_lone_surrogate_escaped_in_a_text_delta_is_a_replacement_character(
    api: str, name: str, before: str
) -> None:
    # A server cutting a text between the halves of an emoji's pair sends each half escaped
    # in its own event; orjson refuses a lone one, and the whole answer failed
    # MalformedStreamError ("no low surrogate in string").
    body = load(api, name)["response"]["body"]
    at = body.index(before) + len(before)
    cut = (body[:at] + "\\ud83d" + body[at:]).encode()
    plain = _text(await _events(api, [body.encode()]))
    for reads in ([cut], _cut(cut, random.Random(name))):
        events = await _events(api, reads)
        assert not any(isinstance(e, type) for e in events), events[-2:]  # no error
        got = _text(events)
        assert got.replace("\ufffd", "", 1) == plain
        assert "\ufffd" in got


_GEMINI_TEXT = (
    b'data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"index":0}],'
    b'"usageMetadata":{"promptTokenCount":15,"candidatesTokenCount":%d,"totalTokenCount":%d},'
    b'"modelVersion":"m","responseId":"r"}\r\n\r\n'
)


@pytest.mark.parametrize("together", [False, True], ids=["two reads", "one read"])
async def test_a_gemini_failure_in_the_read_of_its_last_counts_still_reports_them(
    together: bool,
) -> None:
    # Gemini's running usage is reported once per read; an unreadable event in the same read
    # as the chunk carrying the latest counts dropped them (the failure was reported with
    # none, or with the counts of an earlier read): the tokens were spent either way.
    first, last = _GEMINI_TEXT % (3, 18), _GEMINI_TEXT % (4, 19)
    bad = b"data: [not json\r\n\r\n"
    reads = [first + last + bad] if together else [first, last + bad]
    events = await _events("gemini", reads)
    assert events[-2] is MalformedStreamError
    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert usage[-1].output_tokens == 4
    assert usage[-1].total_tokens == 19


def _longest(api: str) -> str:
    streams = [name for a, name in (p.values for p in _sse_streams()) if a == api]
    return max(streams, key=lambda name: len(load(api, name)["response"]["body"]))


_SOCKET_CLIENTS: dict[str, Callable[[str], HttpClient]] = {
    "anthropic_messages": lambda url: AnthropicClient(model="m", api_key="k", base_url=url),
    "openai_chat": lambda url: OpenAIChatClient(model="m", api_key="k", base_url=url + "/v1"),
    "openai_responses": lambda url: OpenAIResponsesClient(
        model="m", api_key="k", base_url=url + "/v1"
    ),
    "gemini": lambda url: GeminiClient(model="m", api_key="k", base_url=url + "/v1beta"),
}


@pytest.mark.usefixtures("http_transport")
@pytest.mark.parametrize("api", list(_CLIENTS))
async def test_the_longest_recording_over_a_socket_in_random_reads_on_each_transport(
    api: str,
) -> None:
    name = _longest(api)
    body = load(api, name)["response"]["body"].encode()
    whole = await _events(api, [body])
    chunking = Chunking.random(seed=len(body), max_size=2048)
    response = WireResponse(body, content_type="text/event-stream", chunking=chunking)
    got: list[Event] = []
    async with WireServer([response]) as server:
        client = _SOCKET_CLIENTS[api](server.base_url)
        try:
            with anyio.fail_after(30):
                async for event in client.stream(Request([Message.user("hi")])):
                    got.append(event)
        finally:
            await client.aclose()
    assert _comparable(got) == whole


_CALL = (
    b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant",'
    b'"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"kid",'
    b'"arguments":"{\\"input\\": \\"go\\"}"}}]}}]}\n\n'
    b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}'
    b"\n\ndata: [DONE]\n\n"
)


async def test_a_worker_and_its_sub_agent_see_each_delta_of_a_bulk_read_once_in_order() -> None:
    # Over the wire, each answer in one read of hundreds of events: the parent's stream
    # carries the child's deltas (path ("c1",)) then its own, each once, in order.
    bodies = [_CALL, _chat_body(300), _chat_body(200)]

    def handler(_: httpx.Request) -> httpx.Response:
        body = bodies.pop(0)
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Reads([body])
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        child = Worker(_CLIENTS["openai_chat"](http), name="kid")
        parent = Worker(
            _CLIENTS["openai_chat"](http),
            tools=[child.as_tool(name="kid", description="A child.")],
        )
        texts: list[tuple[tuple[str, ...], str]] = []
        with anyio.fail_after(30):
            async with parent.stream("hi") as stream:
                async for event in stream:
                    if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                        texts.append((event.path, event.delta.text))
    assert texts == [(("c1",), f"{i} ") for i in range(300)] + [((), f"{i} ") for i in range(200)]
    assert bodies == []
