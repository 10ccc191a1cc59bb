"""What plugs into a Worker's configuration once built: tracing, context policy, guardrails."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_worker.otel._attach import attach
from llm_worker.worker._context import ContextPolicy, compactor
from llm_worker.worker._guard import checked_guardrails

if TYPE_CHECKING:
    from collections.abc import Iterable

    from llm_worker.guardrails import Guardrail
    from llm_worker.otel import Instrumentation
    from llm_worker.worker._config import WorkerConfig

__all__ = ("ContextPolicy", "plug")


def plug(
    cfg: WorkerConfig,
    instrument: bool | Instrumentation | None,
    name: str | None,
    context: ContextPolicy | None,
    guardrails: Iterable[Guardrail] = (),
) -> None:
    """Trace the Worker as `instrument` asks, set up its `ContextPolicy` and its guardrails.

    Raises:
        UnknownModelError: The policy needs a window the model catalog does not know.
        ConfigurationError: A policy that cannot work with the Worker's client.
    """
    attach(cfg, instrument, name)  # tracing off: registers nothing
    cfg.context = compactor(context, cfg.client)
    cfg.guardrails = checked_guardrails(guardrails)
