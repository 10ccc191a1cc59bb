"""What a stream holds while it runs, and lets go when it ends (the per-stream cost, issue 39).

With a thousand streams in flight, every object a stream holds is walked by each pass of the
garbage collector, and every async generator layer costs a resumption per network read.
These tests hold the layers to three (the driver, the Transport's stream and the backend's
body: a `read()` coroutine in place of the body's generator was tried and cost more per read,
docs/benchmarks.md, S40) and check that the read timeout's watch and the framing guard end
with the body whichever way the stream ends.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from llm_worker.errors import APIStatusError, ProviderError, StreamInterruptedError
from llm_worker.events import BlockDelta, Event, TextDelta
from llm_worker.messages import Message, Request
from llm_worker.providers import OpenAIChatClient
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import Chunking, WireResponse, WireServer

pytestmark = pytest.mark.anyio  # asyncio: the aiohttp transport's

_FINISH = (
    b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
)


def _text(text: str) -> bytes:
    return (
        b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"'
        + text.encode()
        + b'"},"finish_reason":null}]}\n\n'
    )


_PIECES = [_text(w) for w in "abcd"] + [_FINISH + b"data: [DONE]\n\n"]
_BODY = b"".join(_PIECES)
_BY_EVENT = Chunking("sizes", sizes=tuple(len(p) for p in _PIECES))


def _client(server: WireServer) -> OpenAIChatClient:
    return OpenAIChatClient(
        model="m",
        api_key="k-0123456789abcdef",
        base_url=server.base_url + "/v1",
        retry=RetryPolicy.disabled(),
        transport="aiohttp",
        timeout=30.0,  # a read timeout: every body is watched
        max_concurrency=1,  # a slot a stream kept would make the next one wait (and fail)
    )


def _texts(events: list[Event]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


def _our_generators() -> list[str]:
    loop: Any = asyncio.get_running_loop()  # its async generators not yet finished
    return sorted(
        g.ag_code.co_qualname
        for g in loop._asyncgens
        if g.ag_frame is not None and "llm_worker" in g.ag_code.co_filename
    )


async def test_a_stream_reading_its_body_has_three_generator_layers() -> None:
    # Paced (one event per write): the stream is held between two of its reads.
    paced = WireResponse(_BODY, chunking=_BY_EVENT, chunk_delay=0.05)
    async with WireServer([WireResponse(_BODY), paced]) as server:
        client = _client(server)
        try:
            with anyio.fail_after(10):
                # A first stream: the client's own (the session's keeper) are there before.
                _ = [e async for e in client.stream(Request([Message.user("hi")]))]
                before = _our_generators()
                events: list[Event] = []
                layers: list[str] = []
                async for event in client.stream(Request([Message.user("hi")])):
                    events.append(event)
                    if _texts(events) == "a" and not layers:
                        layers = [g for g in _our_generators() if g not in before]
        finally:
            await client.aclose()
    assert _texts(events) == "abcd"
    assert layers == ["Transport.stream", "_AiohttpAnswer.chunks", "drive"]


# Each way a stream ends: (the answer, how many events the caller reads before it closes the
# stream (None: to its end), the error it raises).
_ENDINGS: dict[str, tuple[WireResponse, int | None, type[Exception] | None]] = {
    "read whole": (WireResponse(_BODY, chunking=_BY_EVENT), None, None),
    "closed after an event": (WireResponse(_BODY, chunking=_BY_EVENT, chunk_delay=0.05), 3, None),
    "closed before a byte": (WireResponse(_BODY, first_byte_delay=0.05), 0, None),
    "status error": (
        WireResponse({"error": {"message": "busy"}}, status=503, content_type="application/json"),
        None,
        APIStatusError,
    ),
    "html page": (
        WireResponse("<html>proxy</html>", content_type="text/html"),
        None,
        ProviderError,
    ),
    "cut midway": (
        WireResponse(_BODY, chunking=_BY_EVENT, cut_at=len(_PIECES[0]) + 5),
        None,
        StreamInterruptedError,
    ),
}


@pytest.mark.parametrize("ending", sorted(_ENDINGS))
async def test_a_stream_ended_any_way_leaves_no_watch_nor_guard(ending: str) -> None:
    answer, read, raised = _ENDINGS[ending]
    good = WireResponse(_BODY, chunking=_BY_EVENT)
    async with WireServer([answer, good]) as server:
        client = _client(server)
        try:
            with anyio.fail_after(10):
                stream: Any = client.stream(Request([Message.user("hi")]))
                seen = 0
                error: Exception | None = None
                try:
                    if read != 0:
                        async for _ in stream:
                            seen += 1
                            if seen == read:
                                break
                except Exception as exc:
                    error = exc
                await stream.aclose()
                backend: Any = client.transport._backend  # pyright: ignore[reportPrivateUsage]
                watched = set(backend._watches._members) if backend is not None else set()
                # The pooled connection's close future: a guard left on it is a callback
                # of a bound `_lost` (the backend's own, `_retrieved`, is a function).
                session = backend._session if backend is not None else None
                connector: Any = None if session is None else session.connector
                guards = [
                    callback
                    for conns in ([] if connector is None else connector._conns.values())
                    for proto, _ in conns
                    if proto.closed is not None
                    for callback, _context in proto.closed._callbacks or ()
                    if getattr(callback, "__name__", "") == "_lost"
                ]
                after = [e async for e in client.stream(Request([Message.user("hi")]))]
        finally:
            await client.aclose()
    if raised is None:
        assert error is None, repr(error)
    else:
        assert isinstance(error, raised), repr(error)
    assert not watched
    assert not guards
    assert _texts(after) == "abcd"  # the slot and the pool are free for the next stream
