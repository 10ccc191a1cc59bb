"""The Transport's settings, checked when a client is built (so a typo fails at once).

A rejected value may hold a key, so its error shows no more of it than its scheme and host.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final
from urllib.parse import SplitResult, urlsplit

from llm_worker.errors import ConfigurationError

__all__ = (
    "DEFAULT_MAX_ANSWER_CHARS",
    "DEFAULT_MAX_CONCURRENCY",
    "checked_answer_chars",
    "checked_base_url",
    "checked_headers",
    "checked_limit",
)


def checked_base_url(base_url: str, scrub: Callable[[str], str]) -> SplitResult:
    """`base_url` parsed, or a `ConfigurationError` that shows no more of it than is safe."""
    try:
        url = urlsplit(base_url)
        url.port  # noqa: B018  (a port out of range or not a number raises here)
        host = url.hostname
    except ValueError as exc:
        raise ConfigurationError(
            scrub(f"base_url {_described(base_url)} is not a valid URL: {exc}")
        ) from None  # the cause's text may hold the URL, key included
    if url.scheme not in ("http", "https") or not host or _has_space(base_url):
        raise ConfigurationError(
            scrub(
                f"base_url {_described(base_url)} must be an http:// or https:// URL with a "
                "host and no whitespace (e.g. 'http://localhost:8000/v1')"
            )
        )
    return url


def _has_space(text: str) -> bool:
    return any(c.isspace() for c in text)


def _described(url: str) -> str:
    # A rejected value is named by its scheme and host only: the rest may hold a key (one
    # pasted into the wrong variable, or in a path) that no scrubber knows of.
    try:
        parts = urlsplit(url)
        scheme, host = parts.scheme, parts.hostname
    except ValueError:
        scheme, host = "", None
    if scheme in ("http", "https") and host:
        return repr(f"{scheme}://{host}/…")
    return f"of {len(url)} characters (not shown: it may hold a key)"


def checked_limit(limit: int) -> int:
    """`max_event_bytes` checked: a positive whole number of bytes."""
    if type(limit) is not int or limit < 1:
        raise ConfigurationError(
            f"max_event_bytes must be a positive number of bytes, not {limit!r}"
        )
    return limit


DEFAULT_MAX_ANSWER_CHARS: Final = 64 * 1024 * 1024
"""Characters one answer may hold by default (64 Mi): text, thinking, tool arguments and
signatures together. Generous for any model's answer; it bounds the memory a runaway or
hostile server can make a client hold."""


def checked_answer_chars(limit: int) -> int:
    """`max_answer_chars` checked: a positive whole number of characters."""
    if type(limit) is not int or limit < 1:
        raise ConfigurationError(
            f"max_answer_chars must be a positive number of characters, not {limit!r}"
        )
    return limit


DEFAULT_MAX_CONCURRENCY: Final = 1000
"""Requests in flight at once through one client by default, and its own pool's size.

As the official SDKs' pools (openai, anthropic: 1,000 connections): an LLM stream holds its
connection for seconds to minutes, so a smaller cap makes the streams past it wait for whole
answers to end (with 100, the 1,000th of 1,000 concurrent streams waited for nine answers
before its first event). A connection is opened only when a request needs one.
"""


def checked_concurrency(limit: int | None) -> int | None:
    """`max_concurrency` checked: `None` (no bound) or a positive whole number of requests."""
    # 0 would make every request wait forever; a negative or fractional one failed only at
    # the first request, as an error about the stream.
    if limit is not None and (type(limit) is not int or limit < 1):
        raise ConfigurationError(
            f"max_concurrency must be a positive number of requests or None, not {limit!r}"
        )
    return limit


# What h11 accepts as a header value, in the ASCII that httpx encodes headers with: visible
# characters, with spaces or tabs only between them.
_HEADER_VALUE: Final = re.compile(r"(?:[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?")


def checked_headers(headers: Mapping[str, str], secret: str | None) -> dict[str, str]:
    """The headers, once the key and every value are known to fit in an HTTP header."""
    # A key read from a file with its newline, or pasted with a space or a non-ASCII
    # character, would fail each attempt as a connection error (retried), and the HTTP
    # library's message would hold the raw key: refuse it here, naming only where it is.
    values = [("api_key", secret or "")]
    values.extend((f"the value of the {name!r} header", value) for name, value in headers.items())
    for what, value in values:
        if not _HEADER_VALUE.fullmatch(value):
            raise ConfigurationError(
                f"{what} is not a valid HTTP header value: it has a line break, a control or "
                "non-ASCII character, or leading or trailing whitespace (a key read from a "
                "file with its newline?)"
            )
    return dict(headers)
