"""Adversarial probes of the transport's per-read path (both transports): read timeouts against
a slow reader, bodies split at every byte, cancellation, the owned client across event loops."""

from __future__ import annotations

import anyio
import orjson
import pytest

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


async def test_a_reader_slower_than_the_read_timeout_loses_nothing_once_the_body_is_in() -> None:
    # The server sends the whole answer at once; the caller then pauses longer than the read
    # timeout between two events (a slow consumer). The server was never silent: no timeout.
    pieces = [_text(w) for w in "abcd"] + [_FINISH + b"data: [DONE]\n\n"]
    sizes = Chunking("sizes", sizes=tuple(len(p) for p in pieces))
    response = WireResponse(b"".join(pieces), chunking=sizes, chunk_delay=0.01)
    async with WireServer([response]) as server:
        client = _client(server, timeout=0.2)
        events: list[Event] = []
        try:
            with anyio.fail_after(10):
                async for event in client.stream(Request([Message.user("hi")])):
                    events.append(event)
                    if len(events) == 3:
                        await anyio.sleep(0.6)  # the slow consumer under test, not a sync
        finally:
            await client.aclose()
    assert _text_of(events) == "abcd"


async def test_a_trickle_just_inside_the_read_timeout_never_times_out() -> None:
    # One small write every 0.8 x the read timeout, the caller slow in between: never silent.
    pieces = [_text(w) for w in "abc"] + [_FINISH + b"data: [DONE]\n\n"]
    sizes = Chunking("sizes", sizes=tuple(len(p) for p in pieces))
    response = WireResponse(b"".join(pieces), chunking=sizes, chunk_delay=0.8)
    async with WireServer([response]) as server:
        client = _client(server, timeout=1.0)
        events: list[Event] = []
        try:
            with anyio.fail_after(15):
                async for event in client.stream(Request([Message.user("hi")])):
                    events.append(event)
                    if len(events) == 2:
                        await anyio.sleep(0.3)  # a slow caller: its time is not the server's
        finally:
            await client.aclose()
    assert _text_of(events) == "abc"
