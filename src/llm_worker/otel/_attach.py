"""Registering a Worker's tracing: its interceptor, hook observer and event sink."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from llm_worker.otel._global import default

if TYPE_CHECKING:
    from llm_worker.otel._instrument import Instrumentation
    from llm_worker.worker._config import WorkerConfig
    from llm_worker.worker._intercept import Interceptor

__all__ = ("attach",)


def attach(cfg: WorkerConfig, instrument: bool | Instrumentation | None, name: str | None) -> None:
    """Trace the Worker of `cfg` as `instrument` asks (None: as `instrument()` set, if at all)."""
    chosen: Instrumentation | None
    if instrument is None:
        chosen = default()
    elif isinstance(instrument, bool):
        from llm_worker.otel._instrument import Instrumentation

        chosen = Instrumentation() if instrument else None
    else:
        chosen = instrument
    if chosen is None:
        return  # tracing off: nothing registered, nothing to pay per event
    traced = chosen.for_worker(name)
    # Outermost: its spans cover every other interceptor (a durable run's replay included).
    cfg.interceptors.insert(0, cast("Interceptor", traced))
    cfg.sinks.append(traced.sink)
    cfg.hooks.observers.append(traced.hook)
