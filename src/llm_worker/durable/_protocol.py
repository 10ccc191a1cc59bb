"""The surface every durable engine offers: `DurableRuns`, met by DBOS's and Temporal's.

An application written against `DurableRuns` changes engine by changing the object it makes
(`DurableWorker` on DBOS, `TemporalWorker` on Temporal), nothing else: the same calls start,
wait for, decide, cancel, follow and list runs, with the same statuses and the same errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from llm_worker.messages import Message
    from llm_worker.state import Decision, PauseState, RunResult

__all__ = ("DurableRuns", "RunStatusName", "RunSummary")

OutputT = TypeVar("OutputT")

RunStatusName = Literal["queued", "running", "paused", "finished", "cancelled", "failed"]
"""What `status()` says of a run (None: no run has the id)."""


@dataclass(slots=True, frozen=True)
class RunSummary:
    """One run of a name, as `list_runs()` gives it.

    Attributes:
        run_id: The run's id.
        status: Its status, as `status()` says it.
    """

    run_id: str
    status: str


class DurableRuns(Protocol[OutputT]):
    """Durable runs of one name on one engine, acted on from any process.

    Met by `llm_worker.durable.DurableWorker` (DBOS) and
    `llm_worker.durable.temporal.TemporalWorker` (Temporal); docs/durable.md sets them side
    by side.
    """

    name: str
    """The name runs are filed under."""

    async def start(
        self, input: str | Message | Iterable[Message], *, run_id: str | None = None
    ) -> str:
        """Start a run and return its id; an id that exists starts nothing."""
        ...

    async def run(
        self, input: str | Message | Iterable[Message], *, run_id: str | None = None
    ) -> RunResult[OutputT]:
        """Start a run and wait for its result."""
        ...

    async def result(self, run_id: str) -> RunResult[OutputT]:
        """Wait for the run and return its result (or raise what it raised)."""
        ...

    async def status(self, run_id: str) -> str | None:
        """The run's status (`RunStatusName`), None when no run has this id."""
        ...

    async def paused(self, run_id: str, *, wait: float = 60.0) -> PauseState | None:
        """The run's pause, waiting up to `wait` seconds for one."""
        ...

    async def decide(self, run_id: str, decisions: Mapping[str, Decision]) -> None:
        """Answer the run's pause: `Decision`s by call id."""
        ...

    async def cancel(self, run_id: str, reason: str = ...) -> None:
        """End the run CANCELLED; an ended run stays as it is."""
        ...

    def follow(self, run_id: str, *, idle: float = ...) -> AsyncIterator[dict[str, Any]]:
        """The run's progress entries, one per step, until it ends."""
        ...

    async def list_runs(self, *, limit: int = 100) -> list[RunSummary]:
        """The runs of this name, the newest first."""
        ...
