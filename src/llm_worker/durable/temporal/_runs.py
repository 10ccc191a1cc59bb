"""Reading runs on Temporal from any process: their status, their pause, their progress.

Status and pause come from the workflow's memo (`describe`), which the server answers with
no worker running; progress from the `llm-worker.progress` query, which needs one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from llm_worker.durable._errors import RecordError, RunFailedError
from llm_worker.durable._protocol import RunSummary
from llm_worker.errors import ConfigurationError, PauseStateError
from llm_worker.state import PauseState

if TYPE_CHECKING:
    from temporalio.client import WorkflowExecution

__all__ = ("Found", "Runs")

_FAILED = frozenset(
    {
        WorkflowExecutionStatus.FAILED,
        WorkflowExecutionStatus.TIMED_OUT,
    }
)
_CANCELLED = frozenset({WorkflowExecutionStatus.CANCELED, WorkflowExecutionStatus.TERMINATED})


@dataclass(slots=True, frozen=True)
class Found:
    """A run as the server describes it."""

    status: str
    """queued, running, paused, finished, cancelled or failed."""
    pause: tuple[int, PauseState] | None
    """Its wait number and pause, when it is paused."""
    answered: str | None = None
    """What answered its last pause (`decision`, `cancel`), once one did."""

    @property
    def ended(self) -> bool:
        """Whether it ended (finished, cancelled or failed)."""
        return self.status in {"finished", "cancelled", "failed"}


class Runs:
    """The runs of one task queue, read through a Temporal client."""

    def __init__(self, client: Client, task_queue: str, poll: float) -> None:
        self.client = client
        self.task_queue = task_queue
        self.poll = poll

    @staticmethod
    def missing(run_id: str, exc: RPCError) -> Exception:
        """A NOT_FOUND as the ConfigurationError "no run", any other RPC error as it is."""
        if exc.status == RPCStatusCode.NOT_FOUND:
            return ConfigurationError(f"no durable run has the id {run_id!r}")
        return exc

    async def describe(self, run_id: str) -> Found | None:
        """The run's status and pause, None when no run has this id."""
        try:
            described = await self.client.get_workflow_handle(run_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return await _found(run_id, described)

    @staticmethod
    def refuse_failed(run_id: str, found: Found) -> None:
        """Raise `RunFailedError` for a failed run."""
        if found.status == "failed":
            raise RunFailedError(
                f"the durable run {run_id!r} failed: it has no pause and takes no decision "
                "(result() raises its error)",
                run_id=run_id,
            )

    async def pause(self, run_id: str, wait: float) -> tuple[int, PauseState] | None:
        """The run's wait number and pause, waiting up to `wait` seconds for one."""
        deadline = anyio.current_time() + wait
        while True:
            found = await self.describe(run_id)
            if found is not None:
                self.refuse_failed(run_id, found)
                if found.pause is not None or found.ended:
                    return found.pause
            if anyio.current_time() >= deadline:
                return None
            await anyio.sleep(self.poll)  # the server has no "wait for a memo change"

    async def listed(self, limit: int) -> list[RunSummary]:
        """The runs of the task queue, the newest first."""
        query = f"WorkflowType = 'llm-worker.run' AND TaskQueue = '{self.task_queue}'"
        runs: list[RunSummary] = []
        async for execution in self.client.list_workflows(query, limit=limit):
            found = await _found(execution.id, execution)
            runs.append(RunSummary(execution.id, found.status))
        return runs

    async def next_progress(
        self, handle: WorkflowHandle[Any, Any], start: int, query: str
    ) -> dict[str, Any]:
        """The progress after entry `start`, waiting for at least one or the run's end."""
        while True:
            page = cast("dict[str, Any]", await handle.query(query, start))
            if page["entries"] or page["ended"]:
                return page
            await anyio.sleep(self.poll)


async def _found(run_id: str, execution: WorkflowExecution) -> Found:
    status = execution.status
    if status in _FAILED:
        return Found("failed", None)
    if status in _CANCELLED:
        return Found("cancelled", None)
    memo = await execution.memo()
    said = memo.get("status")
    answered = memo.get("answered")
    by = answered if isinstance(answered, str) else None
    if status == WorkflowExecutionStatus.COMPLETED:
        return Found("cancelled" if said == "cancelled" else "finished", None, by)
    if said == "paused":
        return Found("paused", _pause(run_id, memo.get("pause")))
    return Found("running" if said == "running" else "queued", None, by)


def _pause(run_id: str, value: object) -> tuple[int, PauseState] | None:
    if value is None:
        return None
    try:
        record = cast("dict[str, Any]", value)
        number = record["wait"]
        if not isinstance(number, int):
            raise TypeError("its wait number is not an integer")
        return number, PauseState.from_dict(record["state"])
    except (KeyError, TypeError, ValueError, PauseStateError) as exc:
        raise RecordError(f"it is malformed ({exc!r})", run_id=run_id, step="pause") from None
