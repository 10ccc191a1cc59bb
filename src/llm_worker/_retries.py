"""Retries, told to the `llm_worker.retries` logger and to whoever listens (tracing).

Both retry loops (the HTTP one before an answer arrives, and the Worker's own after a stream
broke mid-way) report each retry here. The log record names the provider, HTTP status, error
type, attempt and wait — never the error's text, which could quote a request. Tracing adds
a listener that puts the retry on the open request span; with none, a retry costs one log
call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from llm_worker._log import logger
from llm_worker.errors import ProviderError

__all__ = ("Retry", "RetryKind", "listeners", "pause", "retrying")

_log = logger("llm_worker.retries")

RetryKind: TypeAlias = Literal["http", "stream", "fallback"]


@dataclass(slots=True, frozen=True)
class Retry:
    """One retry about to wait.

    Attributes:
        kind: `"http"` (before any of the answer arrived), `"stream"` (it broke mid-way) or
            `"fallback"` (a `FallbackClient` sends the request on to its next client).
        provider: The provider that failed.
        status: The HTTP status of the failure, if one was received.
        error_type: The error's type (`overloaded_error`, …) or its class name.
        attempt: The attempt that failed (1 for the first).
        wait: Seconds before the next attempt.
    """

    kind: RetryKind
    provider: str | None
    status: int | None
    error_type: str
    attempt: int
    wait: float


async def pause(seconds: float) -> None:
    """Wait before a retry (`anyio.sleep`, imported at the first: a client's build need not)."""
    import anyio

    await anyio.sleep(seconds)


listeners: list[Callable[[Retry], None]] = []
"""Called on every retry, in the task that retries (so inside its request's span)."""


def retrying(kind: RetryKind, exc: ProviderError, attempt: int, wait: float) -> None:
    """Report a retry: a log record on `llm_worker.retries` (INFO), then the listeners."""
    retry = Retry(
        kind, exc.provider, exc.status_code, exc.error_type or type(exc).__name__, attempt, wait
    )
    _log.info(
        "retrying %s request to %s after %s%s (attempt %d failed), waiting %.2f s",
        kind,
        retry.provider or "the provider",
        retry.error_type,
        f" (HTTP {retry.status})" if retry.status is not None else "",
        attempt,
        wait,
        extra={
            "provider": retry.provider,
            "status": retry.status,
            "attempt": attempt,
            "wait": wait,
        },
    )
    for listener in listeners:
        listener(retry)
