"""StreamRetry: when the Worker sends a request again after its stream broke mid-way."""

from __future__ import annotations

from dataclasses import dataclass

from llm_worker.errors import OverloadedError, ProviderError, StreamInterruptedError

__all__ = ("StreamRetry",)


@dataclass(slots=True, frozen=True)
class StreamRetry:
    """When the Worker sends a request again after its stream broke mid-way.

    Such a failure comes after HTTP 200, where no HTTP-level retry sees it.

    A request is retried only while no side-effecting tool of it has started (tools started
    early must be read-only or idempotent). Handlers see the abort of the open block, then the
    new attempt; usage counts both attempts.

    Attributes:
        on_overloaded: Retry an `overloaded_error` that arrives mid-stream.
        on_interrupted: Retry a stream that ended early or whose connection reset.
        max_retries: Retries per request.
        delay: Seconds before a retry (doubled each time).
    """

    on_overloaded: bool = True
    on_interrupted: bool = False
    max_retries: int = 2
    delay: float = 1.0

    def allows(self, exc: ProviderError, attempt: int) -> bool:
        """Whether this failure may be retried at this attempt (1-based)."""
        if attempt > self.max_retries:
            return False
        if isinstance(exc, OverloadedError):
            return self.on_overloaded
        return isinstance(exc, StreamInterruptedError) and self.on_interrupted
