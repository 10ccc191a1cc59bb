"""A body whose HTTP chunked framing is broken fails alike on httpx and aiohttp.

The server answers 200 with its headers, then sends bytes that are not valid chunked
framing: in the same network read as the headers (aiohttp parses that read with the headers
and used to fail the request itself, "could not reach", retried three times), in a later read
(aiohttp's C parser put the error on the connection, not the body, and the reader waited out
the whole read timeout), or after some of the answer was handed on. Each is one request and
a `StreamInterruptedError` saying the framing broke, on both transports.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from llm_worker.errors import StreamInterruptedError
from llm_worker.messages import Message, Request
from llm_worker.providers import OpenAIChatClient

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


class _Server:
    """Answers every request with `_HEAD` and the given writes (each flushed on its own)."""

    def __init__(self, writes: list[bytes], *, hang_up: bool) -> None:
        self.writes = writes
        self.hang_up = hang_up
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            first, *rest = self.writes
            writer.write(_HEAD + first)
            await writer.drain()
            for piece in rest:
                # A read of its own: wait until the client has taken the previous one.
                await asyncio.sleep(0.05)
                writer.write(piece)
                await writer.drain()
            if not self.hang_up:
                await reader.read()  # until the client gives up on the connection
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def _serving(writes: list[bytes], hang_up: bool) -> AsyncIterator[tuple[_Server, str]]:
    server = _Server(writes, hang_up=hang_up)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        yield server, f"http://127.0.0.1:{port}/v1"
    finally:
        listener.close()


async def _failure(
    writes: list[bytes], *, hang_up: bool = False
) -> tuple[StreamInterruptedError, int]:
    async with _serving(writes, hang_up) as (server, base_url):
        client = OpenAIChatClient(model="m", api_key="k-local", base_url=base_url, timeout=60)
        try:
            # Far below the 60 s read timeout: the body fails at once, it is not waited out.
            with anyio.fail_after(10), pytest.raises(StreamInterruptedError) as caught:
                async for _ in client.stream(Request([Message.user("hi")])):
                    pass
        finally:
            await client.aclose()
        return caught.value, server.requests


_BROKEN = b"zz\r\ndata: x\r\n\r\n"  # not a hexadecimal chunk size


@pytest.mark.parametrize(
    "writes",
    [[_BROKEN], [b"", _BROKEN], [b"5\r\ndata:XXXXX\r\n"]],
    ids=["with-the-headers", "in-a-later-read", "bad-chunk-end-with-the-headers"],
)
async def test_framing_broken_before_any_answer_byte_is_one_request_and_interrupted(
    writes: list[bytes],
) -> None:
    error, requests = await _failure(writes)
    assert requests == 1, "a broken answer is not sent again"
    assert "HTTP framing broke" in error.message, error.message
    assert "could not reach" not in error.message


async def test_framing_broken_after_answer_bytes_is_a_streamed_interruption() -> None:
    error, requests = await _failure([b"6\r\ndata: \r\n", _BROKEN])
    assert requests == 1
    assert error.streamed  # bytes were handed on: the Worker's stream retry may take it
    assert "HTTP framing broke after 6 bytes" in error.message, error.message


async def test_a_body_cut_short_is_still_an_interruption_not_a_framing_error() -> None:
    error, requests = await _failure([b"6\r\ndata: \r\n", b"9\r\nda"], hang_up=True)
    assert requests == 1 and error.streamed
    assert "HTTP framing" not in error.message and "connection broke after" in error.message
