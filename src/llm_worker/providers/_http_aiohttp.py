"""The aiohttp backend of the Transport: the default under asyncio, or `transport="aiohttp"`.

aiohttp reads a stream with less work per network read than httpx (one `readany()` per read,
no layers of byte iterators), which is most of a client's cost when events arrive one per
read. It runs on asyncio only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import weakref
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from llm_worker._extras import require_extra
from llm_worker.errors import ConfigurationError
from llm_worker.providers._http_backend import (
    BodyFailed,
    ConnectFailed,
    LoopBound,
    TransportName,
    close_dead_transport,
)

# This module is imported only when aiohttp is chosen: a core dependency, but an install that
# left it out fails here with the error naming the (compatibility) extra that brings it.
require_extra("aiohttp", "aiohttp", feature='transport="aiohttp"')

import aiohttp  # noqa: E402  (after the check: a missing extra is a MissingExtraError)
from aiohttp.abc import AbstractStreamWriter  # noqa: E402
from aiohttp.helpers import (  # noqa: E402
    basicauth_from_netrc,
    get_env_proxy_for_url,
    netrc_from_env,
)
from aiohttp.http_exceptions import (  # noqa: E402
    ContentEncodingError,
    ContentLengthError,
    HttpProcessingError,
    TransferEncodingError,
)
from multidict import CIMultiDict  # noqa: E402  (aiohttp's own dependency)
from yarl import URL  # noqa: E402  (aiohttp's own dependency)

__all__ = ("AiohttpBackend",)


class AiohttpBackend:
    """Sends through an `aiohttp.ClientSession`: the caller's, or one made on first use."""

    __slots__ = (
        "_bound",
        "_headers",
        "_owns",
        "_pool_size",
        "_routes",
        "_session",
        "_watches",
        "timeout",
    )
    name: ClassVar[TransportName] = "aiohttp"

    def __init__(self, http_client: object, timeout: object, pool_size: int | None) -> None:
        self._session = http_client if isinstance(http_client, aiohttp.ClientSession) else None
        self._owns = self._session is None
        self._pool_size = pool_size
        self._bound = LoopBound("aiohttp.ClientSession")
        self.timeout = _timeout(timeout)
        read = self.timeout.sock_read
        self._watches = _Watches(read) if read else None  # the bodies' read timeouts
        self._routes: dict[str, asyncio.Future[_Route]] = {}
        self._headers: tuple[Mapping[str, str], CIMultiDict[str]] | None = None

    async def _http(self) -> aiohttp.ClientSession:
        session = self._session
        # aiohttp runs on asyncio only: its running loop, without sniffio's look-up.
        loop = asyncio.get_running_loop()
        if not self._owns and session is not None:
            self._bound.check_lent(session.closed, loop)
            return session
        if session is None or session.closed or self._bound.moved(loop):
            # A session made under an earlier event loop was closed when that loop ended,
            # or is closed here if that loop was closed without closing it.
            if self._bound.forget() is not None and session is not None:
                _abandon(session)
            connector = aiohttp.TCPConnector(
                limit=self._pool_size or 0, limit_per_host=0
            )  # 0: none
            # No trust_env: the session would read the proxy variables and .netrc in a worker
            # thread at every request (two thread hand-offs per stream, a third of the CPU of
            # 1,000 concurrent short streams); `_route` reads them once per origin instead.
            session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)
            self._session = session
            self._routes = {}  # the environment as it is now, as httpx reads it per client
            await self._bound.adopt(session.close)
        return session

    async def send(self, url: str, content: bytes, headers: Mapping[str, str]) -> _AiohttpAnswer:
        """POST `content` to `url` and return the answer once its headers are in."""
        if "@" in url:  # (rare: a quick look before parsing the URL)
            url, headers = _userinfo_as_header(url, headers)
        try:
            http = await self._http()
            route = _LENT if not self._owns else await self._route(url, headers)
            response = await http.request(
                "POST",
                url,
                data=_Body(content),
                headers=self._prepared(headers, route),
                timeout=self.timeout,
                allow_redirects=False,  # as httpx: a redirect is an answer, not followed
                # A lent session's raise_for_status would turn a 429 or 401 into a
                # ClientResponseError, losing the typed status error and its Retry-After.
                raise_for_status=False,
                proxy=route.proxy,
                proxy_headers=route.proxy_headers,
            )
        except TimeoutError as exc:  # aiohttp's timeouts are TimeoutErrors
            raise ConnectFailed(exc, timeout=True) from exc
        except aiohttp.ClientResponseError as exc:
            # With raise_for_status off, only a response that did not parse: its first read
            # (headers and the body's start) had broken framing, or broken headers.
            raise ConnectFailed(exc, timeout=False, framing=_body_framing(exc)) from exc
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise ConnectFailed(exc, timeout=False, framing=_undecodable(exc)) from exc
        return _AiohttpAnswer(response, self._watches)

    def _prepared(self, headers: Mapping[str, str], route: _Route) -> Mapping[str, str]:
        if route.extra is not None:  # credentials from .netrc or the proxy variable
            return {**headers, **route.extra}
        # A Transport sends the same headers every time: converted once, not per request.
        made = self._headers
        if made is None or made[0] is not headers:
            made = self._headers = (headers, CIMultiDict(headers))
        return made[1]

    async def _route(self, url: str, headers: Mapping[str, str]) -> _Route:
        origin = _origin(url)
        lookup = self._routes.get(origin)
        if lookup is None:
            # In a thread, as aiohttp does it (the proxy look-up may ask the OS on macOS and
            # Windows; .netrc is a file), once: the requests that come meanwhile share it.
            authorized = any(name.lower() == "authorization" for name in headers)
            lookup = asyncio.ensure_future(
                asyncio.to_thread(_route_of, URL(url), authorized=authorized)
            )
            self._routes[origin] = lookup
        elif lookup.done() and not lookup.cancelled() and lookup.exception() is None:
            return lookup.result()
        try:
            return await asyncio.shield(lookup)
        except BaseException:
            if lookup.done() and self._routes.get(origin) is lookup:
                del self._routes[origin]  # it failed: the next request looks again
            raise

    async def aclose(self) -> None:
        """Close the session if this backend made it (the next request makes a new one)."""
        if self._owns:
            session, self._session = self._session, None
            if await self._bound.release() is not None and session is not None:
                _abandon(session)

    def __del__(self) -> None:
        # Dropped with its thread (a Transport's own client is per thread): a session whose
        # loop was closed by hand, unclosed, has its sockets closed now, as the thread's next
        # request would have done (`_http`).
        session = self._session
        if self._owns and session is not None and self._bound.forget() is not None:
            _abandon(session)


def _userinfo_as_header(url: str, headers: Mapping[str, str]) -> tuple[str, Mapping[str, str]]:
    """The URL's credentials (`user:pass@`) moved into a Basic `Authorization` header.

    As httpx sends them (the default transport before aiohttp): in place of any
    `Authorization` the client sets (an OpenAI key). aiohttp refuses a request with both,
    which failed every request of such a client as "could not reach" (and retried it).
    """
    parsed = URL(url)
    if parsed.user is None and parsed.password is None:
        return url, headers  # an "@" elsewhere (the path, the query)
    pair = f"{parsed.user or ''}:{parsed.password or ''}".encode()  # UTF-8, as httpx
    basic = "Basic " + base64.b64encode(pair).decode("ascii")
    kept = {name: value for name, value in headers.items() if name.lower() != "authorization"}
    return str(parsed.with_user(None)), {**kept, "Authorization": basic}


def _abandon(session: aiohttp.ClientSession) -> None:
    """Close a session whose event loop was closed under it: its sockets, then itself.

    `session.close()` needs its loop. The pool's transports are closed without it, then the
    connector's own close, which on a closed loop only marks it closed and forgets its
    connections (so neither aiohttp nor asyncio warns of them). aiohttp has no public view
    of the pooled connections: `_conns` and `_acquired` are read here, with care.
    """
    connector: Any = session.connector
    if connector is None:
        return
    idle = [proto for conns in getattr(connector, "_conns", {}).values() for proto, _ in conns]
    for proto in [*idle, *getattr(connector, "_acquired", ())]:
        close_dead_transport(getattr(proto, "transport", None))
    with contextlib.suppress(RuntimeError):  # a waiter's cancel scheduled on the closed loop
        connector._close()


@dataclass(slots=True, frozen=True)
class _Route:
    """How an own session reaches one origin: what `trust_env` looks up at every request.

    The proxy the environment names (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, unless
    `NO_PROXY` exempts the host) with its credentials (from its URL or `.netrc`), and the
    origin's `.netrc` credentials when the request carries no `Authorization` header and its
    URL none (the API key wins: aiohttp refuses a request with both).
    """

    proxy: URL | None = None
    proxy_headers: Mapping[str, str] | None = None
    """The proxy's credentials on the CONNECT request of an `https` origin."""
    extra: Mapping[str, str] | None = None
    """Headers added to each request: `.netrc`'s credentials, the proxy's (plain `http`)."""


_LENT: Final = _Route()
"""A lent session's route: its own settings (its `trust_env`) decide."""


def _origin(url: str) -> str:
    """`scheme://authority` of `url`: what the proxy and `.netrc` look-ups depend on."""
    end = url.find("/", url.find("//") + 2)
    return url if end < 0 else url[:end]


def _route_of(url: URL, *, authorized: bool) -> _Route:
    try:
        proxy, proxy_auth = get_env_proxy_for_url(url)
    except LookupError:  # no proxy for this URL, or NO_PROXY exempts its host
        proxy, proxy_auth = None, None
    # Headers, not aiohttp's `auth` and `proxy_auth` arguments (deprecated in aiohttp 3.14),
    # where aiohttp would put them: on a plain request, or on the tunnel's CONNECT.
    extra: dict[str, str] = {}
    proxy_headers = None
    if proxy_auth is not None:
        if url.scheme == "https":
            proxy_headers = {"proxy-authorization": proxy_auth.encode()}
        else:
            extra["proxy-authorization"] = proxy_auth.encode()
    if not authorized and url.user is None and url.host is not None:
        with contextlib.suppress(LookupError):  # no .netrc, or no entry for the host
            extra["authorization"] = basicauth_from_netrc(netrc_from_env(), url.host).encode()
    return _Route(proxy, proxy_headers, extra or None)


class _Body(aiohttp.payload.BytesPayload):
    """The request's JSON, written as the bytes it is, in slices the socket takes in turn.

    aiohttp's own bytes payload warns (a `ResourceWarning`, an error in the suite) for a
    body over 1 MB, advising a file object, which it reads in a worker thread: aimed at
    files, not at bytes already in memory. A long run's history passes 1 MB.

    It also writes the body in one write, which the event loop's transport copies whole
    into its buffer when the socket does not take it at once: a request cancelled while
    its body is sent then still uploaded all of it (closing a transport sends its buffer
    first), and to a server that stopped reading held the copy and the socket for good.
    Slices of 64 KiB (views, no copy), each after the last drained, leave at most one
    slice to send after a cancel.
    """

    def __init__(self, value: bytes) -> None:
        aiohttp.payload.Payload.__init__(self, value, content_type="application/json")
        self._size = len(value)

    async def write(self, writer: AbstractStreamWriter) -> None:
        """Write the whole body."""
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        """Write the body (its first `content_length` bytes, if given) a slice at a time."""
        value = memoryview(self._value)
        if content_length is not None:
            value = value[:content_length]
        for start in range(0, len(value), _SLICE):
            await writer.write(value[start : start + _SLICE])  # drains past 64 KiB


_SLICE: Final = 1 << 16  # aiohttp's writer waits for the socket once it holds 64 KiB


class _AiohttpAnswer:
    __slots__ = ("_response", "_watches", "headers", "status_code")

    def __init__(self, response: aiohttp.ClientResponse, watches: _Watches | None) -> None:
        self._response = response
        self._watches = watches  # the read timeout's (`None`: no timeout)
        self.status_code = response.status
        self.headers: Mapping[str, str] = response.headers

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The decoded body as it arrives: what one network read brought."""
        content = self._response.content
        watch = _SilenceWatch.start(self._response, self._watches)
        guard = _FramingGuard.start(self._response)
        try:
            if watch is None:
                while chunk := await content.readany():
                    yield chunk
            else:
                # Silence counts only while we wait for bytes: a caller slower than the timeout
                # (bytes buffered, or the whole body in) is not a silent server.
                while True:
                    watch.waiting = True
                    chunk = await content.readany()
                    watch.waiting = False
                    if not chunk:
                        break
                    yield chunk
        except TimeoutError as exc:
            raise BodyFailed(exc, timeout=True) from exc
        except HttpProcessingError as exc:  # the pure-Python parser raises it as it is
            raise BodyFailed(_telling(exc), timeout=False, framing=True) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise BodyFailed(exc, timeout=False, framing=_undecodable(exc)) from exc
        finally:
            if watch is not None:
                watch.stop()
            if guard is not None:
                guard.stop()

    async def aclose(self) -> None:
        """Release the connection: back to the pool if the body was read to its end."""
        self._response.release()


class _SilenceWatch:
    """A body's read timeout, checked on a timer instead of re-armed at every network read.

    aiohttp re-arms its read timer at each read (a cancelled timer and a new one on the
    loop's heap, about 2 µs): a large share of a paced stream's cost. This watch looks at the
    bytes received every eighth of the timeout and fails the body once none came for the
    whole timeout while the reader waited for them: after between 1 and 1.125 times the
    timeout of silence. As with httpx, time the caller spends between two reads is not
    silence (the body may be in the buffer already, or paused by backpressure). One timer
    looks at all the bodies of a backend (`_Watches`).
    """

    __slots__ = ("_content", "_last", "_seen", "_watches", "waiting")

    def __init__(self, watches: _Watches, content: aiohttp.StreamReader, now: float) -> None:
        self._watches = watches
        self._content = content
        self._seen = content.total_bytes
        self._last = now
        self.waiting = False  # set by the reader around each read

    @classmethod
    def start(
        cls, response: aiohttp.ClientResponse, watches: _Watches | None
    ) -> _SilenceWatch | None:
        """Take the read timeout over from aiohttp for this body (`None`: no timeout)."""
        connection = response.connection
        if watches is None or connection is None or connection.protocol is None:
            return None  # no timeout, or the body is already in
        if response.headers.get("content-encoding", "identity") != "identity":
            # Decoded bytes lag the received ones (a compressed block decodes at its end):
            # aiohttp's own timer, reset by every received byte, keeps the timeout.
            return None
        # aiohttp does the same for a websocket; the next request sets it again.
        connection.protocol.read_timeout = None
        return watches.add(response.content)

    def check(self, now: float, step: float, timeout: float) -> bool:
        """Whether the body went silent for `timeout` (then it fails); every `step` seconds."""
        total = self._content.total_bytes
        if total != self._seen:
            self._seen, self._last = total, now
        elif not self.waiting:
            # The reader may wait again right after this check: a step of credit keeps the
            # silence it must wait at least the whole timeout.
            self._last = now + step
        elif now - self._last >= timeout:
            self._content.set_exception(TimeoutError(f"no data from the server for {timeout:g} s"))
            return True
        return False

    def stop(self) -> None:
        """The body ended or was abandoned."""
        self._watches.discard(self)


class _Watches:
    """The read timeouts of a backend's bodies, all looked at by one timer.

    A timer per body cost each stream a timer made and cancelled (and kept one per stream in
    flight on the loop's heap: 1,000 streams, 1,000 timers); this one runs while any body
    is watched, every eighth of the timeout.
    """

    __slots__ = ("_handle", "_loop", "_members", "_step", "_timeout")

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._step = timeout / 8
        self._members: set[_SilenceWatch] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None

    def add(self, content: aiohttp.StreamReader) -> _SilenceWatch:
        """Watch one body from now on (until its `stop`)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a backend's next event loop: the last one's are gone
            self._loop, self._members, self._handle = loop, set(), None
        watch = _SilenceWatch(self, content, loop.time())
        self._members.add(watch)
        if self._handle is None:
            self._handle = loop.call_later(self._step, self._tick)
        return watch

    def discard(self, watch: _SilenceWatch) -> None:
        """Stop watching a body."""
        self._members.discard(watch)

    def _tick(self) -> None:
        loop = self._loop
        if loop is None or not self._members:
            self._handle = None  # the next body starts the timer again
            return
        now, step, timeout = loop.time(), self._step, self._timeout
        for watch in list(self._members):
            if watch.check(now, step, timeout):
                self._members.discard(watch)  # failed: its reader is woken with the error
        self._handle = loop.call_later(step, self._tick)


class _FramingGuard:
    """Fails the body at once when aiohttp's C parser refuses its framing in a later read.

    That parser's error goes to the connection, not to the body being read, and the reader
    would wait out the whole read timeout (5 minutes by default, forever without one). When
    the connection closes with the body unfinished and no error on it, the connection's
    error is put on the body: the reader fails at once, as with httpx.
    """

    __slots__ = ("_closed", "_content", "_protocol")

    def __init__(self, content: aiohttp.StreamReader, protocol: Any, closed: Any) -> None:
        self._content = content
        self._protocol = protocol
        self._closed = closed
        closed.add_done_callback(self._lost)

    @classmethod
    def start(cls, response: aiohttp.ClientResponse) -> _FramingGuard | None:
        """Watch the body's connection (`None`: the body is in already, or no connection)."""
        connection = response.connection
        protocol = None if connection is None else connection.protocol
        closed = None if protocol is None else protocol.closed
        if protocol is None or closed is None:
            return None
        if protocol not in _WATCHED:
            # The future is made by asking for it: its error, if the connection ends in one,
            # is read (once per connection, however many bodies it carries), never left to
            # asyncio's "exception was never retrieved".
            _WATCHED.add(protocol)
            closed.add_done_callback(_retrieved)
        return cls(response.content, protocol, closed)

    def _lost(self, _closed: object) -> None:
        content = self._content
        if content.is_eof() or content.exception() is not None:
            return
        error = self._protocol.exception()
        content.set_exception(
            error if error is not None else aiohttp.ServerDisconnectedError("connection lost")
        )

    def stop(self) -> None:
        """The body ended or was abandoned: a kept-alive connection forgets this body."""
        self._closed.remove_done_callback(self._lost)


_WATCHED: weakref.WeakSet[Any] = weakref.WeakSet()


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


def _body_framing(exc: BaseException) -> bool:
    """Whether aiohttp's parse error was the body's framing (not the status or headers)."""
    for _ in range(8):
        if isinstance(exc, TransferEncodingError | ContentLengthError):
            return True
        # The C parser's errors arrive as a plain parse error: its text names the chunk.
        if isinstance(exc, HttpProcessingError) and "chunk" in exc.message.lower():
            return True
        cause = exc.__cause__
        if cause is None:
            return False
        exc = cause
    return False


def _undecodable(exc: BaseException) -> bool:
    """Whether the body's content encoding (gzip, deflate, br) did not decode.

    A broken answer as broken framing is, and so reported alike (httpx: `DecodingError`).
    """
    for _ in range(8):
        if isinstance(exc, ContentEncodingError):
            return True
        cause = exc.__cause__ or exc.__context__
        if cause is None:
            return False
        exc = cause
    return False


def _telling(exc: HttpProcessingError) -> BaseException:
    """The parse error that says what was wrong (aiohttp may wrap it in a blank copy)."""
    found: BaseException = exc
    for _ in range(8):
        if not isinstance(found, HttpProcessingError) or found.message or found.__cause__ is None:
            break
        found = found.__cause__
    return found


def _timeout(timeout: object) -> aiohttp.ClientTimeout:
    # As httpx's defaults: 15 s to connect (60 more to wait for a pooled connection) and
    # 300 s of silence between two reads; no bound on a whole stream.
    if timeout is None:
        return aiohttp.ClientTimeout(total=None, connect=75.0, sock_connect=15.0, sock_read=300.0)
    if isinstance(timeout, aiohttp.ClientTimeout):
        return timeout
    if type(timeout).__module__.startswith("httpx"):
        return _from_httpx(timeout)
    if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
        # aiohttp's timers overflow on infinity (an untyped OverflowError at connect): no bound.
        seconds = float(timeout) if math.isfinite(timeout) else None
        return aiohttp.ClientTimeout(
            total=None, connect=seconds, sock_connect=seconds, sock_read=seconds
        )
    raise ConfigurationError(
        f"timeout must be a positive number of seconds, an aiohttp.ClientTimeout or an "
        f"httpx.Timeout for the aiohttp transport, not {type(timeout).__name__}"
    )


def _from_httpx(timeout: object) -> aiohttp.ClientTimeout:
    """An `httpx.Timeout`'s phases in aiohttp's terms (httpx is not imported for it)."""
    connect: float | None = getattr(timeout, "connect", None)
    pool: float | None = getattr(timeout, "pool", None)
    read: float | None = getattr(timeout, "read", None)
    # aiohttp's `connect` covers the wait for a pooled connection and the connecting.
    both = None if connect is None or pool is None else connect + pool
    return aiohttp.ClientTimeout(total=None, connect=both, sock_connect=connect, sock_read=read)
