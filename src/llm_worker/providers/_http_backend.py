"""What the Transport needs of an HTTP library (httpx or aiohttp): the backend's interface.

A backend sends one POST and hands back the answer's status, headers and body chunks. It
translates its library's failures into `ConnectFailed` (no answer) and `BodyFailed` (the body
broke or went silent), keeping the library's exception as `cause`; the Transport turns those
into the typed errors, so both backends fail alike. The backend modules are imported only
when chosen (`_http.make_backend`): with aiohttp, httpx is never imported.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, Protocol

import sniffio

from llm_worker.errors import ConfigurationError

if TYPE_CHECKING:
    import anyio

__all__ = (
    "TRANSPORT_ENV",
    "Answer",
    "Backend",
    "BodyFailed",
    "ConnectFailed",
    "LoopBound",
    "TransportName",
    "admission_gate",
    "close_dead_transport",
)

TransportName = Literal["httpx", "aiohttp"]
"""The HTTP libraries a client can send through."""

TRANSPORT_ENV: Final = "LLM_WORKER_TRANSPORT"
"""The environment variable naming the transport of clients built without `transport=`."""


class ConnectFailed(Exception):
    """The request got no answer: the connection failed or timed out before the headers.

    `framing`: the answer came, but its body's HTTP framing was broken in the first read
    (aiohttp parses that read with the headers and fails the request itself): the Transport
    reports it as a broken body, as it does for httpx, which reads the body later.
    """

    def __init__(self, cause: BaseException, *, timeout: bool, framing: bool = False) -> None:
        super().__init__(type(cause).__name__)
        self.cause = cause
        self.timeout = timeout
        self.framing = framing


class BodyFailed(Exception):
    """The answer's body broke off, could not be decoded, or went silent for too long.

    `framing`: the server sent bytes that break the body's HTTP framing (a chunk size that is
    not hexadecimal, a chunk without its line end): a broken answer, not a lost connection.
    """

    def __init__(self, cause: BaseException, *, timeout: bool, framing: bool = False) -> None:
        super().__init__(type(cause).__name__)
        self.cause = cause
        self.timeout = timeout
        self.framing = framing


class Answer(Protocol):
    """One HTTP answer whose body has not been read yet."""

    @property
    def status_code(self) -> int:
        """The HTTP status."""
        ...

    @property
    def headers(self) -> Mapping[str, str]:
        """The response headers (names case-insensitive)."""
        ...

    def chunks(self) -> AsyncGenerator[bytes, None]:
        """The decoded body as it arrives, what each network read brought; raises `BodyFailed`."""
        ...

    async def aclose(self) -> None:
        """Release the connection (closed if the body was not read to its end)."""
        ...


class Backend(Protocol):
    """One HTTP library's client, owned or lent by the user."""

    name: ClassVar[TransportName]
    """The library's name."""

    @property
    def timeout(self) -> object:
        """The timeouts in the library's own type."""
        ...

    async def send(self, url: str, content: bytes, headers: Mapping[str, str]) -> Answer:
        """POST `content` to `url`; raises `ConnectFailed` when no answer comes."""
        ...

    async def aclose(self) -> None:
        """Close the library's client if the backend made it."""
        ...


def admission_gate(size: int) -> anyio.Semaphore:
    """A semaphore of `size` slots for the running async library (anyio's of asyncio or trio).

    anyio is imported here, at a transport's first request, not when its client is built.
    """
    import anyio

    # fast_acquire: a free slot is taken without a pass through the event loop (one more loop
    # iteration per request otherwise); the request's own first await (connecting, sending)
    # lets the other tasks run, and is where a cancel lands.
    return anyio.Semaphore(size, fast_acquire=True)


def running_loop() -> object:
    """The event loop (asyncio) or run (trio) the caller runs in.

    An HTTP client's sockets belong to it and cannot be used from another.
    """
    if sniffio.current_async_library() == "trio":
        return sys.modules["trio"].lowlevel.current_trio_token()
    return sys.modules["asyncio"].get_running_loop()


class LoopBound:
    """The event loop an HTTP client is used under, and the closing of a client a backend made.

    A backend's own client is closed when the event loop it was made under ends (an
    `asyncio.run` returning: its pending async generators are closed, this one with them), so a
    client object can serve one `asyncio.run` after another, each with a client of its own. A
    lent client is only checked: used under another loop than its first, it fails with a
    `ConfigurationError` instead of the library's error about a closed or foreign loop.
    """

    __slots__ = ("_keeper", "_library", "_loop")

    def __init__(self, library: str) -> None:
        self._library = library  # the lent client's type, for the errors
        self._loop: object = None
        self._keeper: AsyncGenerator[None, None] | None = None

    def moved(self, loop: object = None) -> bool:
        """Whether the running loop differs from the client's (the first call records it).

        `loop`: the running loop, when the caller knows it (an asyncio-only library).
        """
        loop = loop if loop is not None else running_loop()
        if self._loop is None:
            self._loop = loop
        return loop is not self._loop

    def check_lent(self, closed: bool, loop: object = None) -> None:
        """Before a request through a lent client: it is open and used under its first loop.

        Raises:
            ConfigurationError: It is closed (replacing it would drop the caller's settings
                and leak a client nobody closes), or was first used under another event loop.
        """
        if self.moved(loop):
            raise ConfigurationError(
                f"the {self._library} lent as http_client was first used under another "
                "event loop, and its connections belong to that loop: lend one per event loop "
                "(asyncio.run), or leave http_client out and the client makes its own for each"
            )
        if closed:
            raise ConfigurationError(
                f"the {self._library} lent as http_client is closed: lend an open one"
            )

    async def adopt(self, close: Callable[[], Awaitable[object]]) -> None:
        """Run `close` when the running event loop ends or `release()` is awaited."""
        self._loop = running_loop()
        self._keeper = _keeper(close)
        await anext(self._keeper)  # started: the loop now closes it when it ends

    async def release(self) -> object:
        """Close the adopted client now (one of another event loop is left to that loop).

        Returns:
            As `forget()`: the closed loop of a client it left open, for the caller to
            close its sockets; `None` otherwise.
        """
        keeper, loop = self._keeper, self._loop
        if keeper is not None and loop is running_loop():
            self._keeper = None
            self._loop = None
            await keeper.aclose()
            return None
        return self.forget()

    def forget(self) -> object:
        """Drop the client of an earlier loop: that loop closes it (or closed it) when it ends.

        Returns:
            That loop if it was closed without closing the client (`run_until_complete` and
            `close()` by hand, not `asyncio.run`, which closes it first): the caller closes
            its sockets, which that loop no longer can. `None` otherwise.
        """
        keeper, loop = self._keeper, self._loop
        self._keeper = None
        self._loop = None
        is_closed = getattr(loop, "is_closed", None)  # an asyncio loop (a trio token has none)
        finished = keeper is None or getattr(keeper, "ag_frame", None) is None  # the keeper ran
        if finished or is_closed is None or not is_closed():
            return None  # no client, closed already, or its loop still runs (and closes it)
        return loop


def close_dead_transport(transport: object) -> None:
    """Close the socket of an asyncio transport whose event loop was closed under it.

    asyncio closes a transport's socket in a callback of its loop, which a closed loop refuses
    (`RuntimeError`): the socket would stay open until the garbage collector found it, with a
    `ResourceWarning`. It is closed here and the transport marked closed. (These are asyncio's
    private attributes, read with care: a transport of another kind is left as it is.)
    """
    known: Any = transport  # asyncio's selector and TLS transports, by their private fields
    ssl_protocol = getattr(known, "_ssl_protocol", None)
    if ssl_protocol is not None:  # TLS: the socket is under the TLS protocol's own transport
        known._closed = True
        close_dead_transport(getattr(ssl_protocol, "_transport", None))
        return
    import socket  # here: a client's build need not load it (its library does, at a request)

    sock = getattr(known, "_sock", None)
    if isinstance(sock, socket.socket):
        sock.close()
        known._sock = None  # the transport warns at collection while it holds a socket


def dead_loop_transport(loop: object, sock: object) -> object:
    """The transport of `loop` (closed) over the socket `sock`, `None` if none is known."""
    transports = getattr(loop, "_transports", None)  # a selector loop's, by file descriptor
    fileno = getattr(sock, "fileno", None)
    if transports is None or fileno is None:
        return None
    return transports.get(fileno())


async def _keeper(close: Callable[[], Awaitable[object]]) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await close()
