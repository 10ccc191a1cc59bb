"""What plugs into a Worker's configuration once it is built: tracing and the context policy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_worker.otel._attach import attach
from llm_worker.worker._context import ContextPolicy, compactor

if TYPE_CHECKING:
    from llm_worker.otel import Instrumentation
    from llm_worker.worker._config import WorkerConfig

__all__ = ("ContextPolicy", "plug")


def plug(
    cfg: WorkerConfig,
    instrument: bool | Instrumentation | None,
    name: str | None,
    context: ContextPolicy | None,
) -> None:
    """Trace the Worker as `instrument` asks and set up its `ContextPolicy`.

    Raises:
        UnknownModelError: The policy needs a window the model catalog does not know.
        ConfigurationError: A policy that cannot work with the Worker's client.
    """
    attach(cfg, instrument, name)  # tracing off: registers nothing
    cfg.context = compactor(context, cfg.client)
