"""The Workers this process serves on Temporal, by name, and the options of their steps.

Temporal builds a workflow object per run and calls the activities by name: both find the
Worker (tools, hooks, settings) here, under the name the run was started with. The module is
passed through Temporal's sandbox (as all of `llm_worker` is), so the workflow code in the
sandbox and the activities outside it read the same dictionary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_worker.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_worker.worker import Worker

__all__ = ("Served", "serve", "served", "unserve")


@dataclass(slots=True, frozen=True)
class Served:
    """One name served by this process."""

    worker: Worker[Any]
    heartbeat: float
    """Seconds without a heartbeat after which Temporal takes a step's worker for dead."""
    request_timeout: float
    """Seconds one model request (its stream retries included) may take."""
    tool_timeout: float
    """Seconds one tool call may take."""
    payload_limit: int
    """Bytes of JSON a step's result may have (Temporal's payload limit)."""


_served: dict[str, Served] = {}


def serve(name: str, entry: Served) -> None:
    """Serve `name` in this process.

    Raises:
        ConfigurationError: Another TemporalWorker of this name is entered here.
    """
    if name in _served:
        raise ConfigurationError(
            f"a TemporalWorker named {name!r} is already serving in this process"
        )
    _served[name] = entry


def unserve(name: str) -> None:
    """Stop serving `name` here."""
    _served.pop(name, None)


def served(name: str) -> Served:
    """The entry of `name`.

    Raises:
        ConfigurationError: This process does not serve `name` (a worker on the task queue
            of a name must have entered a TemporalWorker of it).
    """
    entry = _served.get(name)
    if entry is None:
        raise ConfigurationError(
            f"no TemporalWorker named {name!r} serves in this process: every process on the "
            "task queue of a name must enter a TemporalWorker of that name"
        )
    return entry
