"""`instrument()`: tracing for every Worker made from then on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_worker.otel._names import CONTENT_MAX_CHARS

if TYPE_CHECKING:
    from llm_worker.otel._instrument import Instrumentation

__all__ = ("default", "instrument", "uninstrument")

_default: Instrumentation | None = None


def instrument(
    *,
    capture_content: bool = False,
    content_max_chars: int = CONTENT_MAX_CHARS,
    tracer_provider: Any = None,
    meter_provider: Any = None,
) -> Instrumentation:
    """Trace every Worker made after this call (`Worker(instrument=False)` opts one out).

    Args:
        capture_content: Record prompts, answers, tool arguments and results on the spans
            (`gen_ai.input.messages`, `gen_ai.output.messages`, …). Off by default: they may
            hold personal data. API keys are never recorded, in any mode.
        content_max_chars: With `capture_content`, the most characters each such attribute
            holds (16,384 by default): a longer one is cut, ends with
            `…[truncated: N chars]`, and `llm_worker.truncated.<attribute>` gives its length N.
        tracer_provider: The OpenTelemetry tracer provider (the global one when None).
        meter_provider: The OpenTelemetry meter provider (the global one when None).

    Returns:
        The instrumentation every new Worker then uses.

    Raises:
        MissingExtraError: `llm-worker[otel]` (opentelemetry-api) is not installed.
        ConfigurationError: `content_max_chars` is not an int >= 64.
    """
    from llm_worker.otel._instrument import Instrumentation

    global _default  # noqa: PLW0603 - the one process-wide switch this function is
    _default = Instrumentation(
        capture_content=capture_content,
        content_max_chars=content_max_chars,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    return _default


def uninstrument() -> None:
    """Stop tracing Workers made from now on (those made before keep their setting)."""
    global _default  # noqa: PLW0603
    _default = None


def default() -> Instrumentation | None:
    """The instrumentation `instrument()` set, if any."""
    return _default
