"""Review probe (issue 32): a run cancelled while its large request body is being sent.

A long run's body passes megabytes (aiohttp's body is its own payload class since e770314).
A cancel while the server is not reading must end at once, close that half-sent connection
(never reuse it for the next request), and leave the client usable — on both transports.
"""

from __future__ import annotations

import asyncio
from typing import cast

import anyio
import pytest

from llm_worker import providers
from llm_worker.errors import ProviderError
from llm_worker.messages import Message, Request, TextPart
from llm_worker.testing import WIRE_PROVIDERS

pytestmark = pytest.mark.anyio

BIG = "x" * (16 * 1024 * 1024)  # far over any socket buffer: the send waits on the server


class Stalling:
    """Reads the first request's headers and then nothing; answers later ones with a 400."""

    def __init__(self) -> None:
        self.connections = 0
        self.headers_in = asyncio.Event()
        self.first_closed = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.unread = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        first = self.connections == 1
        head = await reader.readuntil(b"\r\n\r\n")
        if first:
            transport = cast("asyncio.Transport", writer.transport)
            transport.pause_reading()  # the body stays unread: the send waits
            self.headers_in.set()
            await self.cancelled.wait()
            transport.resume_reading()
            self.unread = len(await reader.read())  # to EOF: the client closed it
            self.first_closed.set()
            writer.close()
            return
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        body = b'{"error": {"type": "invalid_request_error", "message": "no"}}'
        writer.write(
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
            + b"content-length: %d\r\n\r\n" % len(body)
            + body
        )
        await writer.drain()
        writer.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("wire", ["anthropic", "gemini"])
async def test_a_cancel_mid_send_of_a_large_body_ends_at_once_and_the_client_goes_on(
    wire: str, http_transport: str
) -> None:
    stalling = Stalling()
    server = await asyncio.start_server(stalling.serve, "127.0.0.1", 0, limit=1 << 16)
    port = server.sockets[0].getsockname()[1]
    class_name, suffix = WIRE_PROVIDERS[wire]
    client = getattr(providers, class_name)(
        model="m", api_key="k", base_url=f"http://127.0.0.1:{port}{suffix}"
    )
    request = Request([Message("user", [TextPart(BIG)])])
    try:
        async with client:
            with anyio.fail_after(20):
                async with anyio.create_task_group() as group:

                    async def send() -> None:
                        async for _ in client.stream(request):
                            pass

                    group.start_soon(send)
                    await stalling.headers_in.wait()
                    await anyio.sleep(0.2)  # the body is being written, the buffers full
                    group.cancel_scope.cancel()
            stalling.cancelled.set()
            with anyio.fail_after(10):
                await stalling.first_closed.wait()  # the half-sent connection was closed
            small = Request([Message("user", [TextPart("hi")])])
            with anyio.fail_after(20), pytest.raises(ProviderError) as raised:
                async for _ in client.stream(small):
                    pass
            assert raised.value.status_code == 400
            assert stalling.connections == 2  # a new connection, not the half-sent one
            assert 0 < stalling.unread < len(BIG)  # the cancel came mid-body
    finally:
        server.close()
        await server.wait_closed()
