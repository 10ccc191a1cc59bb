"""OpenTelemetry traces and metrics of Worker runs, by the GenAI semantic conventions.

`Worker(..., instrument=True)` (or `llm_worker.otel.instrument()` for every Worker made after
it) puts an `invoke_agent` span around each run, a `chat {model}` span around each model
request and an `execute_tool {name}` span around each tool call, and records the
`gen_ai.client.token.usage`, `gen_ai.client.operation.duration` and
`gen_ai.client.operation.time_to_first_chunk` histograms. It needs `llm-worker[otel]`
(opentelemetry-api); the application installs the SDK and its exporter. Off, nothing of it
is loaded and the Worker registers nothing.

Layer: worker (the instrumentation is a Worker interceptor). May import the model, providers,
timeline, blobs and tools layers, and `opentelemetry` only through
`llm_worker._extras.require_extra`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_worker.otel._global import instrument, uninstrument
    from llm_worker.otel._instrument import Instrumentation

__all__ = ("Instrumentation", "instrument", "uninstrument")

_LAZY = {
    "Instrumentation": "llm_worker.otel._instrument",
    "instrument": "llm_worker.otel._global",
    "uninstrument": "llm_worker.otel._global",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llm_worker.otel' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
