"""HTTP error answers as typed errors: the status, the provider's error body, `Retry-After`.

Shared by both transports (httpx and aiohttp) and by the clients that meet an error object
inside a stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from llm_worker._json import as_dict, as_list, as_str
from llm_worker.errors import (
    APIStatusError,
    AuthenticationError,
    ContentFilterError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
)
from llm_worker.providers._secrets import scrub_error

__all__ = (
    "error_class",
    "error_from_status",
    "is_error_body",
    "parse_error_body",
    "retry_after_seconds",
)


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
    if raw.find(b"retryDelay") < 0:  # (`bytes in bytes` builds and drops a TypeError first)
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


def is_error_body(raw: bytes) -> bool:
    """Whether a JSON answer is an error object (`{"error": ...}`, also wrapped in a list)."""
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
    # Imported here: an HTTP date is rare, and the module costs ~6 ms at import.
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
