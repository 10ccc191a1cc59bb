"""What the Transport needs of an HTTP library (httpx or aiohttp): the backend's interface.

A backend sends one POST and hands back the answer's status, headers and body chunks. It
translates its library's failures into `ConnectFailed` (no answer) and `BodyFailed` (the body
broke or went silent), keeping the library's exception as `cause`; the Transport turns those
into the typed errors, so both backends fail alike. The backend modules are imported only
when chosen (`_http.make_backend`): with aiohttp, httpx is never imported.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import ClassVar, Final, Literal, Protocol

__all__ = (
    "TRANSPORT_ENV",
    "Answer",
    "Backend",
    "BodyFailed",
    "ConnectFailed",
    "TransportName",
)

TransportName = Literal["httpx", "aiohttp"]
"""The HTTP libraries a client can send through."""

TRANSPORT_ENV: Final = "LLM_WORKER_TRANSPORT"
"""The environment variable naming the transport of clients built without `transport=`."""


class ConnectFailed(Exception):
    """The request got no answer: the connection failed or timed out before the headers."""

    def __init__(self, cause: BaseException, *, timeout: bool) -> None:
        super().__init__(type(cause).__name__)
        self.cause = cause
        self.timeout = timeout


class BodyFailed(Exception):
    """The answer's body broke off, could not be decoded, or went silent for too long."""

    def __init__(self, cause: BaseException, *, timeout: bool) -> None:
        super().__init__(type(cause).__name__)
        self.cause = cause
        self.timeout = timeout


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

    def chunks(self) -> AsyncIterator[bytes]:
        """The decoded body as it arrives; raises `BodyFailed`."""
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
