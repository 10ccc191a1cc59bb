"""A real HTTP/1.1 server on 127.0.0.1 that plays scripted answers, with injected faults.

Written on asyncio streams rather than a web framework because the tests need control over
every byte: how the body is split into writes, where the connection is cut or reset, how long
each write waits. A framework would coalesce writes and hide those faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal, Self
from urllib.parse import parse_qsl, urlsplit

import anyio
import orjson

from llm_worker._secrets import is_credential
from llm_worker.errors import ConfigurationError

__all__ = ("Chunking", "RecordedRequest", "WireResponse", "WireServer")

_MAX_HEADER = 64 * 1024
_STREAM_LIMIT = 64 * 1024  # asyncio.start_server's default


@dataclass(slots=True, frozen=True)
class Chunking:
    """How a response body is split into separate writes.

    Attributes:
        mode: `"whole"` (one write), `"bytewise"` (one byte per write), `"random"` (random
            sizes from 1 to `max_size`, reproducible by `seed`), `"sizes"` (the given sizes,
            cycled).
        seed: Seed of the random split.
        max_size: Largest random piece.
        sizes: Piece sizes for `"sizes"`.
    """

    mode: Literal["whole", "bytewise", "random", "sizes"] = "whole"
    seed: int = 0
    max_size: int = 64
    sizes: tuple[int, ...] = ()

    @classmethod
    def whole(cls) -> Chunking:
        """The body in one write."""
        return cls("whole")

    @classmethod
    def bytewise(cls) -> Chunking:
        """One byte per write: every boundary, inside UTF-8 sequences and CRLF pairs too."""
        return cls("bytewise")

    @classmethod
    def random(cls, seed: int = 0, max_size: int = 64) -> Chunking:
        """Random piece sizes, reproducible by seed."""
        return cls("random", seed=seed, max_size=max_size)

    def split(self, body: bytes) -> list[bytes]:
        """Split a body into the pieces to write."""
        if self.mode == "whole" or not body:
            return [body] if body else []
        if self.mode == "bytewise":
            return [body[i : i + 1] for i in range(len(body))]
        if self.mode == "random":
            rng = random.Random(self.seed)
            sizes: Iterable[int] = iter(lambda: rng.randint(1, self.max_size), None)
        else:
            sizes = _cycle(self.sizes or (len(body),))
        pieces: list[bytes] = []
        pos = 0
        for size in sizes:
            if pos >= len(body):
                break
            pieces.append(body[pos : pos + max(1, size)])
            pos += max(1, size)
        return pieces


def _cycle(sizes: Sequence[int]) -> Iterable[int]:
    while True:
        yield from sizes


@dataclass(slots=True)
class WireResponse:
    """One scripted HTTP answer.

    Attributes:
        body: The body (a `str` is sent as UTF-8; a dict or list as JSON).
        status: HTTP status.
        content_type: The `Content-Type` header.
        headers: More headers (e.g. `{"retry-after": "1"}`).
        chunking: How the body is split into writes.
        framing: `"chunked"` (Transfer-Encoding: chunked, the default), `"length"`
            (Content-Length) or `"close"` (the end of the body is the end of the connection).
        first_byte_delay: Seconds to wait before sending the status line.
        chunk_delay: Seconds to wait before each body write after the first.
        chunk_delays: Seconds to wait before each body write after the first, one per write
            (a stream that trickles, then stalls); past its end, `chunk_delay` applies.
        cut_at: Close the connection after this many body bytes (an early end of stream).
        reset_at: Reset the connection (TCP RST) after this many body bytes.
        stream: A body written piece by piece as it is produced, in chunked framing, in
            place of `body` (a relay: a cassette recording a real API's answer); closed
            (`aclose`) if the connection ends first. Chunking, delays and faults do not apply.
    """

    body: bytes | str | dict[str, Any] | list[Any] = b""
    _: KW_ONLY
    status: int = 200
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=lambda: {})
    chunking: Chunking = field(default_factory=Chunking.whole)
    framing: Literal["chunked", "length", "close"] = "chunked"
    first_byte_delay: float = 0.0
    chunk_delay: float = 0.0
    chunk_delays: tuple[float, ...] = ()
    cut_at: int | None = None
    reset_at: int | None = None
    stream: AsyncGenerator[bytes] | None = None

    def body_bytes(self) -> bytes:
        """The body as bytes."""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return orjson.dumps(self.body)


@dataclass(slots=True)
class RecordedRequest:
    """A request the server received.

    Attributes:
        method: HTTP method.
        path: The path, without the query.
        query: Query parameters.
        headers: Headers, names lower-cased.
        body: The raw body.
    """

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return orjson.loads(self.body)

    def __repr__(self) -> str:
        # Credential headers and parameters masked: a cassette's requests carry the real key,
        # and pytest prints a repr in a failed assertion's explanation.
        def masked(values: dict[str, str]) -> dict[str, str]:
            return {k: "***" if is_credential(k) else v for k, v in values.items()}

        return (
            f"RecordedRequest(method={self.method!r}, path={self.path!r}, "
            f"query={masked(self.query)!r}, headers={masked(self.headers)!r}, "
            f"body={self.body!r})"
        )


Handler = Callable[[RecordedRequest], "WireResponse | Awaitable[WireResponse]"]
_Accept = Callable[[asyncio.StreamReader, asyncio.StreamWriter], None]
"""Chooses the answer to a request."""


class WireServer:
    """An HTTP server on 127.0.0.1 playing scripted answers; use with `async with`.

    Answers come from `handler` if given, else from the queue (`enqueue`), in order. A request
    with nothing left to answer, or whose handler raised, gets a 500 with a JSON error naming
    the problem (error type `test_server`). Every request is kept in `requests`.

    Example:
        ```python
        async with WireServer([WireResponse(body)]) as server:
            client = OpenAIChatClient(model="m", base_url=server.base_url + "/v1", api_key="k")
        ```
    """

    def __init__(
        self, responses: Iterable[WireResponse] = (), *, handler: Handler | None = None
    ) -> None:
        self._queue: deque[WireResponse] = deque(responses)
        self.handler = handler
        self.requests: list[RecordedRequest] = []
        self._server: asyncio.Server | None = None
        self._closing = False
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._open: set[_Connection] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`.

        Raises:
            ConfigurationError: The server is not running (not started yet, or closed): it
                has no port to name.
        """
        if self._server is None:
            raise ConfigurationError(
                f"the {type(self).__name__} is not running, so it has no address yet: start "
                f"it first (`async with server:` or `await server.start()`)"
            )
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *responses: WireResponse) -> None:
        """Add answers to the end of the queue."""
        self._queue.extend(responses)

    async def start(self) -> None:
        """Start listening on a free port of 127.0.0.1."""
        self._closing = False
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self._accept, self._open), "127.0.0.1", 0
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and drop open connections, those just accepted too."""
        server = self._server
        if server is None:
            return
        self._closing = True
        # Shielded: close() also runs as a cancelled block exits, and must finish there too.
        with anyio.CancelScope(shield=True):
            await self._close(server)
        self._server = None

    async def _close(self, server: asyncio.Server) -> None:
        await _stop_accepting(server)
        server.close()
        for writer in list(self._writers):
            writer.close()  # a handler cancelled before it ran would never close its own
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if ended := [c.ended for c in self._open]:
            # bounded: a connection whose setup failed never reports its end
            await asyncio.wait(ended, timeout=5)
        await server.wait_closed()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing:  # accepted as the server closed: no handler will serve it
            writer.close()
            return
        self._writers.add(writer)
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # close() cancelled this connection: it closes it below
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        request = await _read_request(reader)
        if request is None:
            return False
        self.requests.append(request)
        response = await self._answer(request)
        keep_alive = await _write_response(writer, response)
        return keep_alive and request.headers.get("connection", "").lower() != "close"

    async def _answer(self, request: RecordedRequest) -> WireResponse:
        if self.handler is not None:
            try:
                answer = self.handler(request)
                if isinstance(answer, WireResponse):
                    return answer
                return await answer
            except Exception as exc:
                # Answer rather than drop the connection: a dropped one would be retried as a
                # network fault and the handler's bug would surface as a timeout.
                return _problem(f"the test server's handler raised {exc!r}")
        if self._queue:
            return self._queue.popleft()
        return _problem("the test server has no answer left")


async def _stop_accepting(server: asyncio.Server) -> None:
    """Stop accepting, then let the connections accepted so far get their transport.

    asyncio makes an accepted connection's transport a loop turn after the accept; if the
    server was closed in between, it fails and leaves the socket to the garbage collector
    (CPython gh-109564, gh-155934). Callbacks run in order, so one turn is enough.
    """
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):  # a proactor loop has no readers
        for sock in server.sockets:
            loop.remove_reader(sock.fileno())
    await asyncio.sleep(0)


class _Connection(asyncio.StreamReaderProtocol):
    """One connection's protocol: in `opened` (its server's) until the connection has ended."""

    def __init__(self, accept: _Accept, opened: set[_Connection]) -> None:
        super().__init__(asyncio.StreamReader(limit=_STREAM_LIMIT), accept)
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._opened = opened
        opened.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._opened.discard(self)
        if not self.ended.done():
            self.ended.set_result(None)


def _problem(message: str) -> WireResponse:
    return WireResponse(
        {"error": {"type": "test_server", "message": message}},
        status=500,
        content_type="application/json",
    )


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    if len(head) > _MAX_HEADER:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    url = urlsplit(target)
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    return RecordedRequest(method, url.path, query, headers, body)


async def _write_response(writer: asyncio.StreamWriter, response: WireResponse) -> bool:
    """Write one answer; return whether the connection may serve another request."""
    if response.first_byte_delay:
        await asyncio.sleep(response.first_byte_delay)
    body = response.body_bytes()
    head = [f"HTTP/1.1 {response.status} {_reason(response.status)}"]
    head.append(f"content-type: {response.content_type}")
    head.extend(f"{k}: {v}" for k, v in response.headers.items())
    if response.stream is not None:
        return await _relay(writer, head, response.stream)
    if response.framing == "chunked":
        head.append("transfer-encoding: chunked")
    elif response.framing == "length":
        head.append(f"content-length: {len(body)}")
    if response.framing == "close":
        head.append("connection: close")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    await writer.drain()
    limit = _fault_limit(response)
    sent = 0
    for n, piece in enumerate(response.chunking.split(body)):
        delay = response.chunk_delays[n - 1] if 0 < n <= len(response.chunk_delays) else 0.0
        if n and (delay or response.chunk_delay):
            await asyncio.sleep(delay or response.chunk_delay)
        if limit is not None and sent + len(piece) >= limit:
            await _send(writer, piece[: limit - sent], response.framing)
            return _fault(writer, response)
        await _send(writer, piece, response.framing)
        sent += len(piece)
        if response.chunking.mode != "whole":
            await asyncio.sleep(0)  # let the reader see each piece as a separate read
    if limit is not None:
        return _fault(writer, response)
    if response.framing == "chunked":
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    return response.framing != "close"


async def _relay(
    writer: asyncio.StreamWriter, head: list[str], stream: AsyncGenerator[bytes]
) -> bool:
    """Write a produced body as it comes, chunked; the producer is closed however it ends."""
    head.append("transfer-encoding: chunked")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    try:
        await writer.drain()
        async for piece in stream:
            await _send(writer, piece, "chunked")
    finally:
        await stream.aclose()
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True


def _fault_limit(response: WireResponse) -> int | None:
    limits = [n for n in (response.cut_at, response.reset_at) if n is not None]
    return min(limits) if limits else None


async def _send(writer: asyncio.StreamWriter, piece: bytes, framing: str) -> None:
    if not piece:
        return
    if framing == "chunked":
        writer.write(b"%x\r\n%b\r\n" % (len(piece), piece))
    else:
        writer.write(piece)
    await writer.drain()


def _fault(writer: asyncio.StreamWriter, response: WireResponse) -> bool:
    if response.reset_at is not None and (
        response.cut_at is None or response.reset_at <= response.cut_at
    ):
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
    return False


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
