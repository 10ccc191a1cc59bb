"""Which failures send a request on to the next client of a `FallbackClient`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Final, Literal, TypeAlias

from llm_worker.errors import (
    APIConnectionError,
    APITimeoutError,
    ConfigurationError,
    InvalidRequestError,
    MalformedStreamError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
)

__all__ = ("DEFAULT_FALLBACK_ON", "FailureClass", "FallbackOn", "classify", "fallback_test")

FailureClass: TypeAlias = Literal[
    "overloaded",
    "rate_limit",
    "server_error",
    "timeout",
    "connection",
    "interrupted",
    "malformed",
    "context_length",
]
"""A class of failure a `FallbackClient` may fall over on.

- `overloaded`: HTTP 529 / 503, or an `overloaded_error` event mid-stream;
- `rate_limit`: HTTP 429 (a quota that no wait cures too: another provider has its own);
- `server_error`: another 5xx;
- `timeout`: no answer, or silence mid-stream, past the client's timeout;
- `connection`: refused, reset or cut before the answer began;
- `interrupted`: the stream ended early or its connection reset after it began;
- `malformed`: the stream carried data that does not parse (a broken proxy);
- `context_length`: the request is longer than the model's context window (off by default:
  useful only when a later client has a bigger window).

Never: 400 / 401 / 403 / 404, content filters, an answer over the client's
`max_answer_chars` — the next client would refuse them too, or must not be asked.
"""

FallbackOn: TypeAlias = Iterable[FailureClass] | Callable[[ProviderError], bool]
"""Classes of failure, or a function of the error that says whether to fall over."""

DEFAULT_FALLBACK_ON: Final[frozenset[FailureClass]] = frozenset(
    {"overloaded", "rate_limit", "server_error", "timeout", "connection", "interrupted"}
)
"""What falls over unless told otherwise."""

_KNOWN: Final = frozenset(
    {
        "overloaded",
        "rate_limit",
        "server_error",
        "timeout",
        "connection",
        "interrupted",
        "malformed",
        "context_length",
    }
)

# The providers' words for a prompt longer than the window: OpenAI
# `context_length_exceeded`, Anthropic "prompt is too long", Gemini "input token count …
# exceeds the maximum number of tokens".
_CONTEXT_TYPES: Final = frozenset({"context_length_exceeded", "string_above_max_length"})
_CONTEXT_WORDS: Final = re.compile(
    r"prompt is too long|maximum context length|context window|exceeds the maximum number of "
    r"tokens|too many tokens",
    re.IGNORECASE,
)


# In order: the first class an error is an instance of.
_CLASSES: Final[tuple[tuple[type[ProviderError], FailureClass], ...]] = (
    (OverloadedError, "overloaded"),
    (RateLimitError, "rate_limit"),
    (ServerError, "server_error"),
    (APITimeoutError, "timeout"),
    (APIConnectionError, "connection"),
    (StreamInterruptedError, "interrupted"),
    (MalformedStreamError, "malformed"),
)


def classify(exc: ProviderError) -> FailureClass | None:
    """The class of a failure, or None for one that never falls over."""
    for kind, name in _CLASSES:
        if isinstance(exc, kind):
            return name
    if isinstance(exc, InvalidRequestError) and _too_long(exc):
        return "context_length"
    return None


def _too_long(exc: InvalidRequestError) -> bool:
    if exc.error_type in _CONTEXT_TYPES or exc.status_code == 413:
        return True
    return _CONTEXT_WORDS.search(exc.message) is not None


def fallback_test(fallback_on: FallbackOn) -> Callable[[ProviderError], bool]:
    """The function that says whether an error falls over.

    Raises:
        ConfigurationError: A class name this library does not know.
    """
    if callable(fallback_on):
        return fallback_on
    chosen = frozenset(fallback_on)
    unknown = sorted(set(chosen) - _KNOWN)
    if unknown:
        raise ConfigurationError(
            f"unknown fallback_on class(es) {unknown}: use {', '.join(sorted(_KNOWN))}"
        )

    def falls_over(exc: ProviderError) -> bool:
        return classify(exc) in chosen

    return falls_over
