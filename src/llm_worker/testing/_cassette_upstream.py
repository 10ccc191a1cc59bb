"""Recording: a request passed on to the real API, its answer relayed chunk by chunk.

The cassette's local server stands between the client and the provider: the client's
request (its headers, the key among them, and its body, byte for byte) is sent on to the
API's host, and each piece of the answer's body is passed to the client as it arrives and
kept, with its boundaries and its time, for the file.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final
from urllib.parse import urlencode

from llm_worker.testing._server import RecordedRequest

if TYPE_CHECKING:
    import httpx

__all__ = ("Relay", "Upstream")

# Headers that describe one hop, not the request: httpx sets its own.
_HOP: Final = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "accept-encoding"}
)
# Answer headers a replay sends again; the others (cookies, server, dates, ids of the
# account) are neither needed by a client nor welcome in a reviewed file.
_KEPT_PREFIXES: Final = ("x-ratelimit-", "anthropic-ratelimit-", "x-request-id", "retry-after")
_KEPT: Final = frozenset({"content-type", "request-id", "x-request-id", "retry-after"})


@dataclass(slots=True)
class Relay:
    """An answer of the API being relayed: status, the headers kept, the chunks so far.

    Attributes:
        status: The HTTP status.
        headers: The headers a replay sends again.
        chunks: The body's pieces read so far.
        times: Seconds from the request to each piece.
        complete: Whether the whole body was read.
    """

    status: int
    headers: dict[str, str]
    response: httpx.Response
    started: float
    chunks: list[bytes] = field(default_factory=lambda: [])
    times: list[float] = field(default_factory=lambda: [])
    complete: bool = False

    async def body(self) -> AsyncGenerator[bytes]:
        """The body's pieces as they arrive; the API's response is closed however it ends.

        Raises:
            ConnectionResetError: The API's answer broke: the client's connection is
                dropped too, as the API's was.
        """
        import httpx

        try:
            async for chunk in self.response.aiter_bytes():
                self.chunks.append(chunk)
                self.times.append(round(time.monotonic() - self.started, 3))
                yield chunk
            self.complete = True
        except httpx.HTTPError as exc:
            raise ConnectionResetError(f"the API's answer broke: {type(exc).__name__}") from None
        finally:
            await self.response.aclose()


class Upstream:
    """An HTTP client that passes the cassette server's requests on to the real APIs."""

    __slots__ = ("_client", "timeout")

    def __init__(self, timeout: float) -> None:
        """Wait `timeout` seconds at most for each read of an answer."""
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None

    def url(self, origin: str, path: str, request: RecordedRequest) -> str:
        """The API's URL of a request the local server received at `path`."""
        query = urlencode(request.query)
        return f"{origin}{path}?{query}" if query else origin + path

    async def open(self, url: str, request: RecordedRequest) -> Relay:
        """Send the request on; the answer's head is read, its body is relayed by `Relay.body`.

        Raises:
            httpx.HTTPError: The API could not be reached.
        """
        import httpx

        if self._client is None:
            # A dead host fails in seconds; a slow answer gets the whole read timeout.
            timeout = httpx.Timeout(self.timeout, connect=min(15.0, self.timeout))
            self._client = httpx.AsyncClient(timeout=timeout)
        headers = {k: v for k, v in request.headers.items() if k not in _HOP}
        headers["accept-encoding"] = "identity"  # the bytes as the API sent them
        started = time.monotonic()
        built = self._client.build_request(
            request.method, url, content=request.body, headers=headers
        )
        response = await self._client.send(built, stream=True)
        kept = _kept(response.headers.multi_items())
        return Relay(response.status_code, kept, response, started)

    async def aclose(self) -> None:
        """Close the HTTP client, if one was made."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _kept(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    kept: dict[str, str] = {}
    for name, value in headers:
        lowered = name.lower()
        if lowered in _KEPT or lowered.startswith(_KEPT_PREFIXES):
            kept[lowered] = value
    return kept
