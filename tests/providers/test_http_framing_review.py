"""Review of the one classification of a broken body: a content encoding that does not decode.

A server that answers 200 `Content-Encoding: gzip` with bytes that are not gzip sent a broken
answer as broken chunked framing does; both transports called it "could not reach" before any
byte of it, and sent the request three times. Now it is one request and one
`StreamInterruptedError` naming the content encoding, on httpx and aiohttp alike; a gzip
stream that breaks after some of the answer was handed on is a streamed interruption.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib

import anyio
import orjson
import pytest

from llm_worker.errors import StreamInterruptedError
from llm_worker.events import BlockDelta, TextDelta
from llm_worker.messages import Message, Request
from llm_worker.providers import OpenAIChatClient

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(text: str) -> bytes:
    delta = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + orjson.dumps(delta) + b"\n\n"


def _gzip_then_garbage() -> bytes:
    # A gzip stream flushed after its first events (they decode at once), then bytes that are
    # not deflate data.
    squeeze = zlib.compressobj(wbits=31)
    head = squeeze.compress(_event("hello ") * 20) + squeeze.flush(zlib.Z_SYNC_FLUSH)
    return _chunk(head) + _chunk(b"\xff" * 64) + b"0\r\n\r\n"


async def _fails(body: bytes) -> tuple[StreamInterruptedError, int]:
    requests: list[int] = []
    with pytest.raises(StreamInterruptedError) as caught:
        await _serve(body, [], requests)
    return caught.value, len(requests)


async def _text(body: bytes) -> str:
    texts: list[str] = []
    await _serve(body, texts, [])
    return "".join(texts)


async def _serve(body: bytes, texts: list[str], requests: list[int]) -> None:
    """Stream one answer of `body` into `texts`; each request the server saw into `requests`."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(1)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            writer.write(_HEAD + body)
            await writer.drain()
            await reader.read()  # until the client gives up on the connection
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = OpenAIChatClient(
        model="m", api_key="k-local", base_url=f"http://127.0.0.1:{port}/v1", timeout=60
    )
    try:
        with anyio.fail_after(10):
            async for event in client.stream(Request([Message.user("hi")])):
                if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                    texts.append(event.delta.text)
    finally:
        await client.aclose()
        listener.close()


async def test_a_body_that_is_not_gzip_is_one_request_and_a_broken_encoding() -> None:
    error, requests = await _fails(_chunk(b"this is not gzip at all") + b"0\r\n\r\n")
    assert requests == 1, "a broken answer is not sent again"
    assert "content encoding broke after 0 bytes" in error.message, error.message
    assert not error.streamed and "could not reach" not in error.message


async def test_gzip_that_breaks_after_its_first_events_is_one_request_and_interrupted() -> None:
    # Whether the first events were handed on depends on the reads (aiohttp decodes a read
    # with the headers before handing on any of it); the classification does not.
    error, requests = await _fails(_gzip_then_garbage())
    assert requests == 1, "a broken answer is not sent again"
    assert "content encoding broke after" in error.message, error.message


async def test_a_whole_gzip_body_still_streams() -> None:
    # The control: a well-formed compressed answer is read as any other.
    body = gzip.compress(_event("fine ") + _event("answer") + b"data: [DONE]\n\n")
    assert await _text(_chunk(body) + b"0\r\n\r\n") == "fine answer"
