"""`instrument()`: tracing for every Worker made from then on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_worker.otel._instrument import Instrumentation

__all__ = ("default", "instrument", "uninstrument")

_default: Instrumentation | None = None


def instrument(
    *,
    capture_content: bool = False,
    tracer_provider: Any = None,
    meter_provider: Any = None,
) -> Instrumentation:
    """Trace every Worker made after this call (`Worker(instrument=False)` opts one out).

    Args:
        capture_content: Record prompts, answers, tool arguments and results on the spans
            (`gen_ai.input.messages`, `gen_ai.output.messages`, …). Off by default: they may
            hold personal data. API keys are never recorded, in any mode.
        tracer_provider: The OpenTelemetry tracer provider (the global one when None).
        meter_provider: The OpenTelemetry meter provider (the global one when None).

    Returns:
        The instrumentation every new Worker then uses.

    Raises:
        MissingExtraError: `llm-worker[otel]` (opentelemetry-api) is not installed.
    """
    from llm_worker.otel._instrument import Instrumentation

    global _default  # noqa: PLW0603 - the one process-wide switch this function is
    _default = Instrumentation(
        capture_content=capture_content,
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
