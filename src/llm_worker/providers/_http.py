"""The one HTTP seam: POST a request, turn failures into typed errors, retry before the answer.

Every provider client sends through [`Transport`][]. It is the only place that turns the HTTP
library's failures (httpx or aiohttp, through a backend: `_http_backend`) into typed errors,
chained with `from`, reads HTTP statuses and error bodies, and applies the retry policy. A
request is retried only while nothing of the answer has reached the caller: after the first
body byte has been handed on, a failure is raised, never retried silently.
"""

from __future__ import annotations

import importlib.util
import re
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlencode

import sniffio

from llm_worker._retries import pause, retrying
from llm_worker.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    MissingExtraError,
    ProviderError,
    StreamInterruptedError,
)
from llm_worker.providers._body import encoded
from llm_worker.providers._http_backend import (
    Answer,
    Backend,
    BodyFailed,
    ConnectFailed,
    TransportName,
    admission_gate,
)
from llm_worker.providers._http_choice import (
    TransportChoice,
    check_either,
    chosen,
    loop_library,
    make_backend,
    resolved,
    seconds_only,
)
from llm_worker.providers._http_errors import (
    error_class,
    error_from_status,
    is_error_body,
    parse_error_body,
    retry_after_seconds,
)
from llm_worker.providers._secrets import (
    Scrubber,
    chain_leaks,
    header_secrets,
    install_log_filter,
    url_secrets,
)
from llm_worker.providers._settings import (
    DEFAULT_MAX_CONCURRENCY,
    checked_base_url,
    checked_concurrency,
    checked_headers,
    checked_limit,
)
from llm_worker.providers._sse import BLANK, DEFAULT_MAX_EVENT_BYTES, event_too_large

if TYPE_CHECKING:
    import aiohttp
    import anyio
    import httpx

__all__ = (
    "RetryPolicy",
    "Transport",
    "TransportChoice",
    "TransportName",
    "error_class",
    "error_from_status",
    "parse_error_body",
    "retry_after_seconds",
)

_MAX_ERROR_BODY = 64 * 1024
# 429s that no wait cures: the account's quota or billing, not the request rate.
_FINAL_TYPES: Final = frozenset({"insufficient_quota", "billing_hard_limit_reached"})


@dataclass(slots=True, frozen=True)
class RetryPolicy:
    """When and how a request that failed before its answer began is sent again.

    Retried: connection errors, timeouts before the answer, 408, 409, 429, 5xx and provider
    "overloaded" errors. The wait before retry *n* (1-based) is
    `min(max_delay, initial_delay * multiplier ** (n - 1))`, randomized down by up to
    `jitter` of itself, or the provider's `Retry-After` when it asked for longer.

    Attributes:
        max_attempts: Attempts in all, the first included (1 disables retries).
        initial_delay: Seconds before the first retry.
        max_delay: Cap on one wait.
        multiplier: Growth of the wait per retry.
        jitter: Fraction of each wait that is randomized (0 to 1).
        max_elapsed: No retry starts after this many seconds since the first attempt.
        max_retry_after: A `Retry-After` longer than this is not waited for: the error is
            raised at once.
    """

    max_attempts: int = 3
    initial_delay: float = 0.5
    max_delay: float = 8.0
    multiplier: float = 2.0
    jitter: float = 0.5
    max_elapsed: float = 60.0
    max_retry_after: float = 60.0

    @classmethod
    def disabled(cls) -> RetryPolicy:
        """A policy that never retries."""
        return cls(max_attempts=1)

    def delay(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds to wait before retry number `attempt`, or `None` to give up."""
        if attempt >= self.max_attempts:
            return None
        if retry_after is not None and retry_after > self.max_retry_after:
            return None
        import random  # here, at a retry: a client's build need not load it

        base = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        wait = base * (1.0 - self.jitter * random.random())
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait


class Transport:
    """POSTs JSON to one provider and streams the answer's bytes, over httpx or aiohttp.

    Holds the API key inside its headers; neither `repr` nor any error shows it, nor a
    credential carried by `base_url` or a credential header (see `_secrets`).
    `credential_tag` is a digest of them keyed by a secret of the process (a fallback
    cooldown's breaker is per key), never the key.

    Raises:
        ConfigurationError: `base_url` is not an `http://` or `https://` URL (checked here, so
            that a typo fails at once instead of being retried as a connection error),
            `max_event_bytes` is not a positive integer, `max_concurrency` neither (nor
            `None`), or the transport, `http_client` and
            `timeout` do not fit together.
        MissingExtraError: The aiohttp transport named, and aiohttp not installed.
    """

    __slots__ = (
        "_credentials",
        "_headers",
        "_lent",
        "_local",
        "_prefix",
        "_query",
        "_scrubber",
        "_settings",
        "_tag",
        "_tagged",
        "base_url",
        "max_concurrency",
        "max_event_bytes",
        "provider",
        "retry",
        "scrub",
    )
    scrub: Callable[[str], str]
    """Mask the client's credentials in a text that may echo them (see `_secrets`).

    One method object, held by every stream's driver and mapper (not one per stream)."""

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        headers: Mapping[str, str],
        secret: str | None,
        http_client: httpx.AsyncClient | aiohttp.ClientSession | None = None,
        timeout: float | httpx.Timeout | aiohttp.ClientTimeout | None = None,
        retry: RetryPolicy | None = None,
        max_concurrency: int | None = DEFAULT_MAX_CONCURRENCY,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        transport: TransportChoice | None = None,
    ) -> None:
        self.provider = provider
        credentials = [secret, *url_secrets(base_url), *header_secrets(headers)]
        self._scrubber = Scrubber(credentials)
        self.scrub = self._scrubber.scrub
        self._credentials = tuple(c for c in credentials if c)
        self._tag: str | None = None
        self._tagged = False
        if self._scrubber:
            install_log_filter(loaded_only=True)  # else at the first request (`make_backend`)
        parts = checked_base_url(base_url, self._scrubber.scrub)
        self._prefix = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        self._query = parts.query
        self.base_url = self._prefix + (f"?{parts.query}" if parts.query else "")
        self._headers = checked_headers(headers, secret)
        self.retry = retry if retry is not None else RetryPolicy()
        self.max_concurrency = checked_concurrency(max_concurrency)
        self.max_event_bytes = checked_limit(max_event_bytes)
        self._local = _PerThread()
        name = chosen(transport, http_client, timeout)
        # No gate, no pool bound either: a pool of the default size under `None` made the
        # streams past it wait for a connection until they timed out.
        self._settings = (name, http_client, timeout, max_concurrency)
        self._lent: Backend | None = None  # the backend of a lent client, shared by all threads
        if name != "auto" and (http_client is not None or not seconds_only(timeout)):
            # Settings in the library's own types: it is imported already, check them now.
            backend = make_backend(name, http_client, timeout, self._settings[3])
            if http_client is not None:
                self._lent = backend
            else:
                self._local.backend = backend
        elif name == "auto":
            check_either(timeout)
        elif name == "aiohttp" and importlib.util.find_spec("aiohttp") is None:
            raise MissingExtraError("aiohttp", 'transport="aiohttp"', "aiohttp is not installed")

    def __repr__(self) -> str:
        return f"Transport(provider={self.provider!r}, base_url={self.scrub(self.base_url)!r})"

    @property
    def timeout(self) -> object:
        """The timeouts, in the HTTP library's type (`httpx.Timeout`, `aiohttp.ClientTimeout`).

        Under `"auto"`, the library of the running loop; outside any loop, the last request's,
        else aiohttp's (asyncio's default).
        """
        return self._library().timeout

    @property
    def transport(self) -> TransportChoice:
        """The HTTP library the requests go through: `"httpx"` or `"aiohttp"`.

        Chosen by the event loop when `transport=` was left out (`"auto"`): read inside a
        running loop, the library that loop's requests use (aiohttp on asyncio, httpx on
        trio); outside any, the last request's, or `"auto"` before the first.
        """
        choice = self._settings[0]
        if choice != "auto":
            return choice
        backend = self._backend
        last = None if backend is None else backend.name
        try:
            return loop_library()
        except sniffio.AsyncLibraryNotFoundError:
            return last or "auto"

    @property
    def _backend(self) -> Backend | None:
        """The lent client's backend, else this thread's own, if made yet."""
        return self._lent or self._local.backend

    def _library(self, library: str | None = None) -> Backend:
        # `library`: the running async library, when the caller looked it up (`sniffio`).
        # Made at the first request: a client built at start-up does not pay for importing the
        # HTTP library (100-300 ms) until it is used. Under "auto", made again when the loop
        # calls for the other library (a client used under asyncio, then under trio). An own
        # client is per thread: event loops running at once in threads (a threaded web
        # server's `run_sync`) each need their own connections; one shared client was swapped
        # from loop to loop and failed their requests ("Session is closed", "Connector is
        # closed", broken reads).
        local = self._local
        backend = self._lent or local.backend
        choice, http_client, timeout, pool_size = self._settings
        if backend is not None and choice == "httpx":
            return backend
        name = resolved(choice, None if backend is None else backend.name, library)
        if backend is None or backend.name != name:
            # The other library's own client, if any, belongs to the other loop, which closes
            # it when it ends (`LoopBound`).
            backend = local.backend = make_backend(name, http_client, timeout, pool_size)
        return backend

    async def aclose(self) -> None:
        """Close the HTTP client if this transport created it (this thread's).

        A client made in another thread belongs to the event loop there, which closes it as
        it ends.
        """
        backend = self._backend
        if backend is not None:
            await backend.aclose()

    @property
    def credential_tag(self) -> str | None:
        """A digest of the credentials keyed by a secret of the process (None: none).

        A cooldown's breaker is per key (`_cooldown.client_identity`), never the key itself.
        Made at its first use, not at the client's build: hashlib loads OpenSSL (≈ 12 M
        instructions), which an HTTP library imports at the first request anyway.
        """
        if not self._tagged:
            from llm_worker.providers._cooldown import credential_tag  # a fallback's, at first use

            self._tag, self._tagged = credential_tag(self._credentials), True
        return self._tag

    def redirected(self, base_url: str) -> Transport:
        """This transport sending to another base URL: a test server standing in for the API.

        The headers (the key), retries, limits and HTTP library stay; a passed `http_client`
        is shared, an own one is not (the copy makes its own, closed by its `aclose`). Used
        by `llm_worker.testing.Cassette` to record and replay a client's exchanges.

        Raises:
            ConfigurationError: `base_url` is not an `http://` or `https://` URL.
        """
        copy = Transport.__new__(Transport)
        for name in Transport.__slots__:
            setattr(copy, name, getattr(self, name))
        parts = checked_base_url(base_url, self._scrubber.scrub)
        copy._prefix = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        copy._query = parts.query
        copy.base_url = copy._prefix + (f"?{parts.query}" if parts.query else "")
        # A lent client is shared; an own one, and the gate, are the copy's own.
        copy._local = _PerThread()
        return copy

    def url(self, path: str, params: Mapping[str, str] | None = None) -> str:
        """The URL of `path` below `base_url`: the path joined, the base's query kept."""
        query = self._query
        if params:
            query = f"{query}&{urlencode(params)}" if query else urlencode(params)
        return f"{self._prefix}{path}?{query}" if query else self._prefix + path

    async def stream(
        self,
        path: str,
        body: Mapping[str, Any] | bytes,
        *,
        params: Mapping[str, str] | None = None,
        whole: Callable[[bytes], bytes] | None = None,
    ) -> AsyncIterator[bytes]:
        """POST `body` as JSON to `path` and yield the answer's body bytes as they arrive.

        Args:
            path: The path below `base_url`.
            body: The JSON body, or its bytes as JSON (sent as they are).
            params: Query parameters added to the base URL's.
            whole: What to hand on instead of a body that is one JSON object rather than a
                stream (a server that ignored `stream: true`), read whole up to
                `max_event_bytes`. Without it, only an `application/json` object is read
                whole (to raise an error object sent with status 200) and handed on as is.

        Raises:
            ProviderError: A typed subclass for every failure; see `llm_worker.errors`.
        """
        # (a text no wire can carry fails here: nothing is sent)
        content = body if isinstance(body, bytes) else encoded(body)
        url = self.url(path, params)
        # Not held for the whole stream: a long conversation's body is thousands of objects
        # (memory, and the garbage collector's passes over every stream in flight).
        del body, params
        library = sniffio.current_async_library()  # looked up once: the gate's and the pool's
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            received = 0  # bytes handed on: after the first, a failure is never retried
            try:
                async with self._admission(library):
                    answer, chunks, head = await self._open(url, content, whole, library)
                    # One generator between the library's reads and the caller: each layer
                    # costs a resumption per network read, the main cost of a paced stream.
                    try:
                        if head:
                            received = len(head)
                            yield head
                        async for chunk in chunks:
                            received += len(chunk)
                            yield chunk
                    except BodyFailed as failed:
                        raise self._broken(failed, received) from self._cause(failed.cause)
                    finally:
                        await chunks.aclose()
                        await answer.aclose()
                return
            except ProviderError as exc:
                if received or not exc.retryable or exc.error_type in _FINAL_TYPES:
                    raise
                wait = self.retry.delay(attempt, exc.retry_after)
                if wait is None or time.monotonic() - started + wait > self.retry.max_elapsed:
                    raise
                retrying("http", exc, attempt, wait)
            await pause(wait)

    def _admission(self, library: str) -> AbstractAsyncContextManager[object]:
        # httpcore's pool scans every queued request against every connection on each
        # change (encode/httpcore#1035): with 1,000 streams on 100 connections that scan
        # dominated the CPU. Waiting here, in an O(1) semaphore, keeps its queue empty.
        if self.max_concurrency is None:
            return nullcontext()
        # A gate is of its async library (anyio's asyncio and trio semaphores differ): a
        # client used under asyncio, then under trio, makes one for each. It is per thread,
        # as the pool: a semaphore's waiters belong to one event loop.
        local = self._local
        gate = local.gate
        if gate is None or library != local.gate_library:
            gate = local.gate = admission_gate(self.max_concurrency)
            local.gate_library = library
        return gate

    async def _open(
        self, url: str, content: bytes, whole: Callable[[bytes], bytes] | None, library: str
    ) -> tuple[Answer, AsyncGenerator[bytes, None], bytes]:
        """Send, check the status, read the body's head: `(answer, rest of the body, head)`."""
        try:
            answer = await self._library(library).send(url, content, self._headers)
        except ConnectFailed as failed:
            cause = self._cause(failed.cause)
            if failed.framing:  # the server answered: a broken body, as httpx reports it
                raise self._misframed(failed.cause, 0) from cause
            raise self._unreachable(failed.cause, timeout=failed.timeout) from cause
        chunks = answer.chunks()
        try:
            content_type = answer.headers.get("content-type", "")
            if not 200 <= answer.status_code < 300 or content_type.startswith("text/html"):
                raise await self._status_error(answer, chunks)
            return answer, chunks, await self._head(answer, chunks, content_type, whole)
        except BaseException:
            await chunks.aclose()
            await answer.aclose()
            raise

    def _unreachable(self, exc: BaseException, *, timeout: bool) -> ProviderError:
        if timeout:
            return APITimeoutError(
                self.scrub(f"no answer from {self.base_url} in time ({type(exc).__name__})"),
                provider=self.provider,
            )
        return APIConnectionError(
            self.scrub(f"could not reach {self.base_url}: {type(exc).__name__}: {exc}"),
            provider=self.provider,
        )

    async def _head(
        self,
        answer: Answer,
        chunks: AsyncIterator[bytes],
        content_type: str,
        whole: Callable[[bytes], bytes] | None,
    ) -> bytes:
        """The body up to its first byte that says what it is (blank bytes and a BOM first).

        An HTML page (a proxy's login or error page, whatever its content type and status) is
        raised as the error it is, for every client alike; a JSON object is read whole.
        """
        head = b""
        try:
            async for chunk in chunks:
                head += chunk
                first = _first_byte(head)
                if first == b"<":
                    raise await self._status_error(answer, chunks, head, "text/html")
                if first == b"{":  # no SSE stream starts so, whatever its content type says
                    return await self._whole(answer, chunks, head, content_type, whole)
                if first or len(head) >= _MAX_ERROR_BODY:
                    return head
        except BodyFailed as failed:
            # Blank bytes or a BOM are not the answer, and nothing was handed on: retryable.
            raise self._broken(failed, 0) from self._cause(failed.cause)
        return head

    async def _whole(
        self,
        answer: Answer,
        chunks: AsyncIterator[bytes],
        head: bytes,
        content_type: str,
        whole: Callable[[bytes], bytes] | None,
    ) -> bytes:
        # A JSON object instead of a stream is one whole answer (some servers ignore
        # `stream: true`) or an error object sent with status 200, which must surface with
        # its own message. (A JSON array, Gemini's array stream, is handed on as it arrives.)
        pieces = [head]
        size = len(head)
        async for chunk in chunks:
            pieces.append(chunk)
            size += len(chunk)
            if size > self.max_event_bytes:
                raise event_too_large(self.max_event_bytes, "a JSON answer", self.provider)
        raw = b"".join(pieces).lstrip(BLANK)  # orjson refuses a BOM; it starts with "{"
        # An error object sent with status 200 surfaces with its own message, also under a
        # stream's content type (the SSE decoder would pass it over as no field at all); a
        # client that reads a whole answer itself (`whole`) gets any other content type's.
        json = content_type.startswith("application/json")
        if (json or whole is None) and is_error_body(raw):
            raise error_from_status(
                answer.status_code,
                raw,
                content_type=content_type,
                headers=answer.headers,
                provider=self.provider,
                scrub=self.scrub,
            )
        return whole(raw) if whole is not None else raw

    def _cause(self, exc: BaseException) -> BaseException | None:
        """`exc` to chain as the cause, or `None` when its text holds a credential.

        A traceback prints every exception of the chain: one that quotes the key (an HTTP
        library quoting a header or the URL) must not be part of it.
        """
        return None if chain_leaks(exc, self.scrub) else exc

    def _broken(self, failed: BodyFailed, received: int) -> ProviderError:
        if failed.timeout:
            return APITimeoutError(
                f"the stream went silent for longer than the read timeout after {received} bytes",
                provider=self.provider,
                streamed=received > 0,
            )
        exc = failed.cause
        if failed.framing:
            return self._misframed(exc, received)
        detail = f"{type(exc).__name__}: {str(exc) or 'no detail'}"
        if not received:
            # Headers but no byte of the answer: nothing was handed on, so this is a
            # connection failure that a retry may cure, not a broken stream.
            return APIConnectionError(
                self.scrub(f"the connection to {self.base_url} broke before the answer began: ")
                + self.scrub(detail),
                provider=self.provider,
            )
        return StreamInterruptedError(
            f"the connection broke after {received} bytes of the answer: {self.scrub(detail)}",
            provider=self.provider,
            streamed=True,
        )

    def _misframed(self, exc: BaseException, received: int) -> ProviderError:
        """A body whose HTTP framing (or content encoding) broke: one error from both transports.

        The server answered, then sent bytes that are not HTTP: a broken answer, never retried
        here (sending again reaches the same server). `streamed` when bytes were handed on.
        """
        detail = self.scrub(f"{type(exc).__name__}: {str(exc) or 'no detail'}")
        # A content encoding (gzip…) that does not decode is a broken body of the same kind.
        what = "content encoding" if "decod" in detail.lower() else "HTTP framing"
        return StreamInterruptedError(
            f"the answer's {what} broke after {received} bytes of it: {detail}",
            provider=self.provider,
            streamed=received > 0,
        )

    async def _status_error(
        self,
        answer: Answer,
        chunks: AsyncIterator[bytes],
        raw: bytes = b"",
        content_type: str | None = None,
    ) -> APIStatusError:
        try:
            async for chunk in chunks:
                raw += chunk
                if len(raw) >= _MAX_ERROR_BODY:
                    break
        except BodyFailed:
            pass  # the status alone still says what happened
        return error_from_status(
            answer.status_code,
            raw,
            content_type=content_type or answer.headers.get("content-type", ""),
            headers=answer.headers,
            provider=self.provider,
            scrub=self.scrub,
        )


class _PerThread(threading.local):
    """A Transport's own HTTP client and admission gate in one thread (its event loop's)."""

    backend: Backend | None = None
    gate: anyio.Semaphore | None = None
    gate_library: str = ""  # the async library the gate was made under


# The first byte that is not blank: `lstrip` would copy the whole first read (a bulk answer's
# tens of kilobytes) to look at one byte.
_NOT_BLANK: Final = re.compile(b"[^" + re.escape(BLANK) + b"]")


def _first_byte(data: bytes) -> bytes:
    found = _NOT_BLANK.search(data)
    return b"" if found is None else found.group()
