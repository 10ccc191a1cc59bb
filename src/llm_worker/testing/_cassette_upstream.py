"""Recording: a request passed on to the real API, its answer read chunk by chunk.

The cassette's local server stands between the client and the provider: the client's
request (its headers, the key among them, and its body, byte for byte) is sent on to the
API's host, and the answer's body is kept in the pieces it arrived in, then played back to
the client with those same boundaries. The answer is read whole before the client gets it:
recording is done once, by a person, so the client's read timeout must allow for the whole
answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final
from urllib.parse import urlencode

from llm_worker.testing._server import RecordedRequest

if TYPE_CHECKING:
    import httpx

__all__ = ("Answer", "Upstream")

# Headers that describe one hop, not the request: httpx sets its own.
_HOP: Final = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "accept-encoding"}
)
# Answer headers a replay sends again; the others (cookies, server, dates, ids of the
# account) are neither needed by a client nor welcome in a reviewed file.
_KEPT_PREFIXES: Final = ("x-ratelimit-", "anthropic-ratelimit-", "x-request-id", "retry-after")
_KEPT: Final = frozenset({"content-type", "request-id", "x-request-id", "retry-after"})


@dataclass(slots=True)
class Answer:
    """What the API answered: status, the headers kept, the body's chunks and their times."""

    status: int
    headers: dict[str, str]
    chunks: list[bytes] = field(default_factory=lambda: [])
    times: list[float] = field(default_factory=lambda: [])


class Upstream:
    """An HTTP client that passes the cassette server's requests on to the real APIs."""

    __slots__ = ("_client", "_timeout")

    def __init__(self, timeout: float) -> None:
        """Wait `timeout` seconds at most for each read of an answer."""
        self._timeout = timeout
        self._client: httpx.AsyncClient | None = None

    def url(self, origin: str, path: str, request: RecordedRequest) -> str:
        """The API's URL of a request the local server received at `path`."""
        query = urlencode(request.query)
        return f"{origin}{path}?{query}" if query else origin + path

    async def send(self, url: str, request: RecordedRequest) -> Answer:
        """Send the request on; read the answer whole, chunk by chunk.

        Raises:
            httpx.HTTPError: The API could not be reached or the answer broke.
        """
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout)
        headers = {k: v for k, v in request.headers.items() if k not in _HOP}
        headers["accept-encoding"] = "identity"  # the bytes as the API sent them
        started = time.monotonic()
        async with self._client.stream(
            request.method, url, content=request.body, headers=headers
        ) as response:
            answer = Answer(response.status_code, _kept(response.headers.multi_items()))
            async for chunk in response.aiter_bytes():
                answer.chunks.append(chunk)
                answer.times.append(round(time.monotonic() - started, 3))
        return answer

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
