"""The httpx backend of the Transport (trio's default): failures as ConnectFailed, BodyFailed."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Mapping
from typing import ClassVar, Final

import httpx

from llm_worker.errors import ConfigurationError
from llm_worker.providers._http_backend import (
    BodyFailed,
    ConnectFailed,
    LoopBound,
    TransportName,
    close_dead_transport,
    dead_loop_transport,
)

__all__ = ("DEFAULT_TIMEOUT", "HttpxBackend")

DEFAULT_TIMEOUT: Final = httpx.Timeout(connect=15.0, read=300.0, write=60.0, pool=60.0)
"""Connect in 15 s; the read timeout bounds the silence between two chunks of a stream."""


class HttpxBackend:
    """Sends through an `httpx.AsyncClient`: the caller's, or one made on first use."""

    __slots__ = ("_bound", "_client", "_owns", "_pool_size", "timeout")
    name: ClassVar[TransportName] = "httpx"

    def __init__(self, http_client: object, timeout: object, pool_size: int | None) -> None:
        self._client = http_client if isinstance(http_client, httpx.AsyncClient) else None
        self._owns = self._client is None
        self._pool_size = pool_size
        self._bound = LoopBound("httpx.AsyncClient")
        self.timeout = _timeout(timeout)

    async def _http(self) -> httpx.AsyncClient:
        client = self._client
        if not self._owns and client is not None:
            self._bound.check_lent(client.is_closed)
            return client
        if client is None or client.is_closed or self._bound.moved():
            # A client made under an earlier event loop was closed when that loop ended,
            # or is closed here if that loop was closed without closing it.
            dead = self._bound.forget()
            if dead is not None and client is not None:
                _abandon(client, dead)
            size = self._pool_size
            limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
            try:
                client = httpx.AsyncClient(timeout=self.timeout, limits=limits)
            except (OSError, ValueError) as exc:
                # Made at the first request now: a bad SSL_CERT_FILE or proxy variable read
                # from the environment is a setting to fix, not a stream or network failure.
                raise ConfigurationError(
                    f"the httpx client could not be made: {type(exc).__name__}: {exc} (check the "
                    "environment's SSL_CERT_FILE, SSL_CERT_DIR, HTTP_PROXY, HTTPS_PROXY, ALL_PROXY)"
                ) from exc
            self._client = client
            await self._bound.adopt(client.aclose)
        return client

    async def send(self, url: str, content: bytes, headers: Mapping[str, str]) -> _HttpxAnswer:
        """POST `content` to `url` and return the answer once its headers are in."""
        http = await self._http()
        try:
            request = http.build_request(
                "POST", url, content=content, headers=headers, timeout=self.timeout
            )
            response = await http.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise ConnectFailed(exc, timeout=True) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ConnectFailed(exc, timeout=False) from exc
        return _HttpxAnswer(response)

    async def aclose(self) -> None:
        """Close the client if this backend made it (the next request makes a new one)."""
        if self._owns:
            client, self._client = self._client, None
            dead = await self._bound.release()
            if dead is not None and client is not None:
                _abandon(client, dead)

    def __del__(self) -> None:
        # Dropped with its thread (a Transport's own client is per thread): a client whose
        # loop was closed by hand, unclosed, has its sockets closed now, as the thread's next
        # request would have done (`_http`).
        client = self._client
        if self._owns and client is not None:
            dead = self._bound.forget()
            if dead is not None:
                _abandon(client, dead)


def _abandon(client: httpx.AsyncClient, loop: object) -> None:
    """Close the sockets of a client whose event loop was closed under it.

    `client.aclose()` needs its loop. httpcore's pool lists its connections, and each
    connection's network stream its socket; its transport is looked up in the closed loop and
    closed without it (httpx and httpcore themselves hold nothing that warns). The path to
    the pool and to each connection's stream is private: read with care.
    """
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    for connection in getattr(pool, "connections", ()):
        http11 = getattr(connection, "_connection", None)
        stream = getattr(http11, "_network_stream", None)
        if stream is not None:
            sock = stream.get_extra_info("socket")
            close_dead_transport(dead_loop_transport(loop, sock))


class _HttpxAnswer:
    __slots__ = ("_response", "headers", "status_code")

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers: Mapping[str, str] = response.headers

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The decoded body as it arrives."""
        response = self._response
        # Without a content encoding, `aiter_bytes()` and `aiter_raw()` only pass the stream's
        # bytes on (through a no-op decoder and two chunkers): reading the stream itself saves
        # their two generator layers and lists at every network read.
        stream = response.stream
        raw = response.headers.get("content-encoding", "identity") == "identity"
        body: AsyncIterable[bytes] = (
            stream if raw and isinstance(stream, httpx.AsyncByteStream) else response.aiter_bytes()
        )
        try:
            async for chunk in body:
                yield chunk
        except (httpx.TransportError, httpx.DecodingError) as exc:
            # `aiter_bytes` would have named the request on the error; the stream does not.
            exc.request = response.request
            timeout = isinstance(exc, httpx.TimeoutException)
            raise BodyFailed(exc, timeout=timeout, framing=_framing(exc)) from exc

    async def aclose(self) -> None:
        """Release the connection."""
        await self._response.aclose()


def _framing(exc: Exception) -> bool:
    """Whether h11 refused the body's framing (an early end is `peer closed connection`)."""
    # h11 raises one error type for both; only its text tells a cut from broken framing.
    if isinstance(exc, httpx.DecodingError):  # a content encoding (gzip…) that does not decode
        return True
    return isinstance(exc, httpx.RemoteProtocolError) and not str(exc).startswith("peer closed")


def _timeout(timeout: object) -> httpx.Timeout:
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, httpx.Timeout):
        return timeout
    if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
        return httpx.Timeout(float(timeout))
    raise ConfigurationError(
        f"timeout must be a positive number of seconds or an httpx.Timeout for the httpx "
        f"transport, not {type(timeout).__name__}"
    )
