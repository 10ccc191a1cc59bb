"""The one HTTP seam: POST a request, turn failures into typed errors, retry before the answer.

Every provider client sends through [`Transport`][]. It is the only place that touches httpx
exceptions (translated here, chained with `from`), HTTP statuses and error bodies, and the
retry policy. A request is retried only while nothing of the answer has reached the caller:
after the first body byte has been handed on, a failure is raised, never retried silently.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, nullcontext
from dataclasses import dataclass
from typing import Any, Final

import anyio
import httpx
import orjson

from llm_worker._json import as_dict, as_list, as_str
from llm_worker.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    ContentFilterError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
)
from llm_worker.providers._secrets import (
    Scrubber,
    chain_leaks,
    header_secrets,
    install_log_filter,
    scrub_error,
    url_secrets,
)
from llm_worker.providers._settings import checked_base_url, checked_headers, checked_limit
from llm_worker.providers._sse import BLANK, DEFAULT_MAX_EVENT_BYTES, event_too_large

__all__ = ("DEFAULT_TIMEOUT", "RetryPolicy", "Transport", "error_from_status")

DEFAULT_TIMEOUT: Final = httpx.Timeout(connect=15.0, read=300.0, write=60.0, pool=60.0)
"""Connect in 15 s; the read timeout bounds the silence between two chunks of a stream."""

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
        base = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        wait = base * (1.0 - self.jitter * random.random())
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait


class Transport:
    """POSTs JSON to one provider and streams the answer's bytes.

    Holds the API key inside its headers; neither `repr` nor any error shows it, nor a
    credential carried by `base_url` or a credential header (see `_secrets`).

    Raises:
        ConfigurationError: `base_url` is not an `http://` or `https://` URL (checked here, so
            that a typo fails at once instead of being retried as a connection error), or
            `max_event_bytes` is not a positive integer.
    """

    __slots__ = (
        "_base",
        "_client",
        "_gate",
        "_headers",
        "_owns_client",
        "_scrubber",
        "base_url",
        "max_concurrency",
        "max_event_bytes",
        "provider",
        "retry",
        "timeout",
    )

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        headers: Mapping[str, str],
        secret: str | None,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        retry: RetryPolicy | None = None,
        max_concurrency: int | None = 100,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self.provider = provider
        self._scrubber = Scrubber([secret, *url_secrets(base_url), *header_secrets(headers)])
        if self._scrubber:
            install_log_filter()
        self._base = checked_base_url(base_url, self._scrubber.scrub)
        self.base_url = base_url.split("?", 1)[0].rstrip("/") + (
            "?" + self._base.query.decode("ascii") if self._base.query else ""
        )
        self._headers = checked_headers(headers, secret)
        self._client = http_client
        self._owns_client = http_client is None
        self.timeout = _timeout(timeout)
        self.retry = retry if retry is not None else RetryPolicy()
        self.max_concurrency = max_concurrency
        self.max_event_bytes = checked_limit(max_event_bytes)
        self._gate: anyio.Semaphore | None = None

    def __repr__(self) -> str:
        return f"Transport(provider={self.provider!r}, base_url={self.scrub(self.base_url)!r})"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            size = self.max_concurrency or 100
            limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
            self._client = httpx.AsyncClient(timeout=self.timeout, limits=limits)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this transport created it."""
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    def scrub(self, text: str) -> str:
        """Mask the client's credentials in a text that may echo them (see `_secrets`)."""
        return self._scrubber.scrub(text)

    def url(self, path: str, params: Mapping[str, str] | None = None) -> httpx.URL:
        """The URL of `path` below `base_url`: the path joined, the base's query kept."""
        base = self._base
        raw = base.raw_path.split(b"?", 1)[0].rstrip(b"/") + path.encode("ascii")
        if base.query:
            raw += b"?" + base.query
        url = base.copy_with(raw_path=raw, fragment=None)  # a fragment is never sent
        return url.copy_merge_params(params) if params else url

    async def stream(
        self,
        path: str,
        body: Mapping[str, Any],
        *,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[bytes]:
        """POST `body` as JSON to `path` and yield the answer's body bytes as they arrive.

        Raises:
            ProviderError: A typed subclass for every failure; see `llm_worker.errors`.
        """
        content = orjson.dumps(body)
        url = self.url(path, params)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            handed_on = False
            try:
                # aclosing: a consumer that stops early releases the response now, not at GC.
                async with (
                    self._admission(),
                    aclosing(self._attempt(url, content)) as chunks,
                ):
                    async for chunk in chunks:
                        handed_on = True
                        yield chunk
                return
            except ProviderError as exc:
                if handed_on or not exc.retryable or exc.error_type in _FINAL_TYPES:
                    raise
                wait = self.retry.delay(attempt, exc.retry_after)
                if wait is None or time.monotonic() - started + wait > self.retry.max_elapsed:
                    raise
            await anyio.sleep(wait)

    def _admission(self) -> AbstractAsyncContextManager[object]:
        # httpcore's pool scans every queued request against every connection on each
        # change (encode/httpcore#1035): with 1,000 streams on 100 connections that scan
        # dominated the CPU. Waiting here, in an O(1) semaphore, keeps its queue empty.
        if self.max_concurrency is None:
            return nullcontext()
        if self._gate is None:
            self._gate = anyio.Semaphore(self.max_concurrency)
        return self._gate

    async def _attempt(self, url: httpx.URL, content: bytes) -> AsyncGenerator[bytes, None]:
        request = self._http().build_request(
            "POST", url, content=content, headers=self._headers, timeout=self.timeout
        )
        try:
            response = await self._http().send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise APITimeoutError(
                self.scrub(f"no answer from {self.base_url} in time ({type(exc).__name__})"),
                provider=self.provider,
            ) from self._cause(exc)
        except httpx.HTTPError as exc:
            raise APIConnectionError(
                self.scrub(f"could not reach {self.base_url}: {type(exc).__name__}: {exc}"),
                provider=self.provider,
            ) from self._cause(exc)
        try:
            if not response.is_success:
                raise await self._status_error(response, response.aiter_bytes())
            content_type = response.headers.get("content-type", "")
            if content_type.startswith("text/html"):
                raise await self._status_error(response, response.aiter_bytes())
            body = self._body(response)
            if content_type.startswith("application/json"):
                body = self._json_body(response, body, content_type)
            async for chunk in body:
                yield chunk
        finally:
            await response.aclose()

    async def _json_body(
        self, response: httpx.Response, body: AsyncIterator[bytes], content_type: str
    ) -> AsyncIterator[bytes]:
        # A JSON object instead of a stream is one whole answer (some servers ignore
        # `stream: true`) or an error object sent with status 200, which must surface with
        # its own message. A JSON array (Gemini's array stream) is passed on as it arrives.
        pieces: list[bytes] = []
        size = 0
        async for chunk in body:
            if not pieces and chunk.lstrip()[:1] not in (b"{", b""):
                yield chunk
                async for rest in body:
                    yield rest
                return
            pieces.append(chunk)
            size += len(chunk)
            if size > self.max_event_bytes:
                raise event_too_large(self.max_event_bytes, "a JSON answer", self.provider)
        raw = b"".join(pieces)
        if _is_error_body(raw):
            raise error_from_status(
                response.status_code,
                raw,
                content_type=content_type,
                headers=response.headers,
                provider=self.provider,
                scrub=self.scrub,
            )
        if raw:
            yield raw

    async def _body(self, response: httpx.Response) -> AsyncIterator[bytes]:
        received = 0
        # The leading blank bytes, held until the first byte that says what the body is: an
        # HTML page (a proxy's login or error page, whatever its content type and status) is
        # raised as the error it is, for every client alike.
        head: bytes | None = b""
        chunks = response.aiter_bytes()
        try:
            async for chunk in chunks:
                received += len(chunk)
                if head is None:
                    yield chunk
                    continue
                head += chunk
                first = head.lstrip(BLANK)[:1]
                if first == b"<":
                    raise await self._status_error(response, chunks, head, "text/html")
                if first or len(head) >= _MAX_ERROR_BODY:
                    yield head
                    head = None
            if head:
                yield head
        except httpx.TimeoutException as exc:
            raise APITimeoutError(
                f"the stream went silent for longer than the read timeout after {received} bytes",
                provider=self.provider,
                streamed=received > 0,
            ) from exc
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise self._broken(exc, received) from self._cause(exc)

    def _cause(self, exc: BaseException) -> BaseException | None:
        """`exc` to chain as the cause, or `None` when its text holds a credential.

        A traceback prints every exception of the chain: one that quotes the key (an HTTP
        library quoting a header or the URL) must not be part of it.
        """
        return None if chain_leaks(exc, self.scrub) else exc

    def _broken(self, exc: httpx.HTTPError, received: int) -> ProviderError:
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

    async def _status_error(
        self,
        response: httpx.Response,
        chunks: AsyncIterator[bytes],
        raw: bytes = b"",
        content_type: str | None = None,
    ) -> APIStatusError:
        try:
            async for chunk in chunks:
                raw += chunk
                if len(raw) >= _MAX_ERROR_BODY:
                    break
        except httpx.HTTPError:
            pass  # the status alone still says what happened
        return error_from_status(
            response.status_code,
            raw,
            content_type=content_type or response.headers.get("content-type", ""),
            headers=response.headers,
            provider=self.provider,
            scrub=self.scrub,
        )


def _timeout(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout)


_BY_TYPE: Final[dict[str, type[APIStatusError]]] = {
    "overloaded_error": OverloadedError,
    "rate_limit_error": RateLimitError,
    "rate_limit_exceeded": RateLimitError,
    "RESOURCE_EXHAUSTED": RateLimitError,
    "UNAVAILABLE": OverloadedError,
    "authentication_error": AuthenticationError,
    "invalid_api_key": AuthenticationError,
    "UNAUTHENTICATED": AuthenticationError,
    "permission_error": PermissionDeniedError,
    "PERMISSION_DENIED": PermissionDeniedError,
    "not_found_error": NotFoundError,
    "model_not_found": NotFoundError,
    "NOT_FOUND": NotFoundError,
    "invalid_request_error": InvalidRequestError,
    "INVALID_ARGUMENT": InvalidRequestError,
    "FAILED_PRECONDITION": InvalidRequestError,
    "api_error": ServerError,
    "server_error": ServerError,
    "INTERNAL": ServerError,
    "content_filter": ContentFilterError,
}

_BY_STATUS: Final[dict[int, type[APIStatusError]]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    408: ServerError,
    409: ServerError,
    413: InvalidRequestError,
    422: InvalidRequestError,
    429: RateLimitError,
    503: OverloadedError,
    529: OverloadedError,
}


def error_class(status_code: int | None, error_type: str | None) -> type[APIStatusError]:
    """The exception class for an HTTP status and a provider error type."""
    if status_code is not None and status_code in _BY_STATUS and status_code != 400:
        by_status = _BY_STATUS[status_code]
        # An explicit overload beats the status (Anthropic sends overloaded_error with 529/500).
        if error_type is not None and _BY_TYPE.get(error_type) is OverloadedError:
            return OverloadedError
        return by_status
    if error_type is not None and error_type in _BY_TYPE:
        return _BY_TYPE[error_type]
    if status_code is None:
        return APIStatusError
    if status_code in _BY_STATUS:
        return _BY_STATUS[status_code]
    return ServerError if status_code >= 500 else APIStatusError


def error_from_status(
    status_code: int,
    raw: bytes,
    *,
    content_type: str,
    headers: Mapping[str, str] | None = None,
    provider: str | None = None,
    scrub: Callable[[str], str] | None = None,
) -> APIStatusError:
    """Build the typed error for an HTTP error answer (status, body, headers).

    `scrub` is applied to every text copied from the answer (message, error type, request id).
    """
    error_type, message, request_id = parse_error_body(raw, content_type)
    if not message:
        message = f"HTTP {status_code} with no error message"
    hdrs = headers or {}
    cls = error_class(status_code, error_type)
    error = cls(
        message,
        provider=provider,
        status_code=status_code,
        error_type=error_type,
        request_id=request_id or hdrs.get("request-id") or hdrs.get("x-request-id"),
        retry_after=_pick_wait(retry_after_seconds(hdrs), _retry_info(raw)),
    )
    if scrub is not None:
        scrub_error(error, scrub)
    return error


def _pick_wait(header: float | None, body: float | None) -> float | None:
    return body if header is None else header


def _retry_info(raw: bytes) -> float | None:
    """The wait a Google error body names in its `google.rpc.RetryInfo` detail, if any.

    Gemini sends no `Retry-After` header; its 429 carries `"retryDelay": "21.5s"` instead.
    """
    if b"retryDelay" not in raw:
        return None
    try:
        data: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    items = as_list(data)
    error = as_dict(as_dict(items[0] if items else data).get("error"))
    for detail in as_list(error.get("details")):
        delay = as_str(as_dict(detail).get("retryDelay"))
        if delay is not None and delay.endswith("s"):
            try:
                return max(0.0, float(delay[:-1]))
            except ValueError:
                return None
    return None


def _is_error_body(raw: bytes) -> bool:
    try:
        data: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    items = as_list(data)
    body = as_dict(items[0] if items else data)
    return isinstance(body.get("error"), dict | str)


def parse_error_body(raw: bytes, content_type: str) -> tuple[str | None, str, str | None]:
    """Read `(error_type, message, request_id)` from any provider's error body.

    Knows OpenAI `{"error": {"message", "type", "code"}}`, Anthropic
    `{"type": "error", "error": {"type", "message"}, "request_id"}`, Gemini
    `{"error": {"code", "message", "status"}}` (also wrapped in a list), and falls back to the
    text (the `<title>` of an HTML page).
    """
    text = raw.decode("utf-8", "replace").strip()
    try:
        data: Any = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        data = None
    items = as_list(data)
    if items:
        data = items[0]  # Gemini wraps its error object in an array on some endpoints
    body = as_dict(data)
    error = as_dict(body.get("error"))
    if error:
        kind = error.get("type") or error.get("status") or error.get("code")
        request_id = as_str(body.get("request_id"))
        return (
            str(kind) if kind is not None else None,
            str(error.get("message") or ""),
            request_id,
        )
    if isinstance(body.get("error"), str):
        return None, str(body["error"]), None
    if "html" in content_type or text.lower().startswith(("<!doctype", "<html")):
        return None, _html_summary(text), None
    return None, text[:500], None


def _html_summary(text: str) -> str:
    lower = text.lower()
    start = lower.find("<title>")
    end = lower.find("</title>")
    title = text[start + 7 : end].strip() if 0 <= start < end else ""
    return f"an HTML page instead of an API answer{': ' + title if title else ''}"


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms` / `retry-after` (seconds or an HTTP date), if present."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
