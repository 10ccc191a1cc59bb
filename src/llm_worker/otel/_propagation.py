"""The W3C trace-context propagator that carries a paused run's span into its resume."""

from __future__ import annotations

from typing import Any

from llm_worker._extras import require_extra

__all__ = ("propagator",)


def propagator() -> Any:
    """A `traceparent` / `tracestate` propagator.

    Not the global one: a pause state must hold the same keys whatever propagators the
    application configured.
    """
    module: Any = require_extra(
        "opentelemetry.trace.propagation.tracecontext", "otel", feature="tracing"
    )
    return module.TraceContextTextMapPropagator()
