"""The workflow every run on Temporal is: one Worker run, waiting out each pause.

The Worker's loop (hooks, history, output checks) runs in the workflow; its requests and tool
calls are activities (`_steps`). Nothing in it reads a clock, draws a random number or does
I/O: Temporal replays it from the recorded history and gets the same commands. `llm_worker`
is passed through Temporal's sandbox (imported once, outside it) so the workflow finds the
Worker this process registered under the run's name.

What a caller reads without a worker running: the memo (`status`, and the pause with its
wait number), kept up to date by the workflow. What needs a worker: the `progress` query
(`follow()`), the `decide` update.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from llm_worker.durable._errors import RecordError
from llm_worker.durable._records import decisions_from, run_record
from llm_worker.durable._steps import refuse_steps
from llm_worker.durable.temporal._activities import check_size, failure
from llm_worker.durable.temporal._registry import served
from llm_worker.durable.temporal._steps import TemporalRun, current
from llm_worker.errors import PauseStateError
from llm_worker.messages import Message
from llm_worker.state import RunResult, RunStatus

if TYPE_CHECKING:
    from llm_worker.state import PauseState
    from llm_worker.worker import Worker

__all__ = ("CONFLICT", "DECIDE", "NOT_WAITING", "PROGRESS", "WORKFLOW", "RunWorkflow")

WORKFLOW = "llm-worker.run"
"""The workflow type of every run."""
PROGRESS = "llm-worker.progress"
"""The query of a run's progress: entries from an index, and whether the run ended."""
DECIDE = "llm-worker.decide"
"""The update carrying decisions: `{"wait": n, "decisions": {...}}`."""
CONFLICT = "DecisionConflict"
"""The failure type of a decision whose wait another answer took."""
NOT_WAITING = "NotWaiting"
"""The failure type of a decision for a wait the run is not in."""
_CANCELLED = "cancelled by TemporalWorker.cancel()"
_NO_STEPS = (
    "llm_worker.durable.step() is DBOS's: in a run on Temporal a hook's side effect would run "
    "again, differently, on every replay; make it a tool (an activity) instead"
)


@workflow.defn(name=WORKFLOW)
class RunWorkflow:
    """One durable run (`args`: `{"name": ..., "messages": [...]}`)."""

    def __init__(self) -> None:
        self._run: TemporalRun | None = None
        self._worker: Worker[Any] | None = None
        self._wait = -1
        self._paused = False
        self._answers: dict[int, str] = {}  # wait -> what answered it (decision, cancel)
        self._answer: dict[str, Any] | None = None
        self._reason: str | None = None
        self._ended = False

    @workflow.run
    async def run(self, args: dict[str, Any]) -> dict[str, Any]:
        """Run the Worker; a Temporal cancellation ends it CANCELLED, its result recorded."""
        name = str(args["name"])
        entry = served(name)  # a worker of another name: the task fails, another takes it
        worker = entry.worker.fork()
        cfg = worker._cfg  # pyright: ignore[reportPrivateUsage]
        worker._cfg = replace(cfg, early_tool_start=False)  # pyright: ignore[reportPrivateUsage]
        self._worker = worker
        self._run = TemporalRun(name, entry)
        current().set(self._run)  # the task below copies it
        refuse_steps(_NO_STEPS)
        followers = entry.worker._followers  # pyright: ignore[reportPrivateUsage]
        followers.add(worker)  # the registered Worker's cancel() reaches this run
        task = asyncio.create_task(self._drive(worker, args["messages"]))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._cancel(workflow.cancellation_reason() or _CANCELLED)
            return await task
        finally:
            followers.discard(worker)

    def _cancel(self, reason: str) -> None:
        if self._reason is None:
            self._reason = reason  # the first cancel says why
        if self._paused:
            self._answers.setdefault(self._wait, "cancel")
        elif self._worker is not None:
            self._worker._cancel_run()  # pyright: ignore[reportPrivateUsage]

    async def _drive(self, worker: Worker[Any], messages: list[Any]) -> dict[str, Any]:
        try:
            self._status("running")
            result = await worker.run([_message(m) for m in messages])
            while result.status is RunStatus.PAUSED and result.state is not None:
                result = await self._paused_run(worker, result.state)
            result.messages = list(worker.history)  # the whole run, its pauses included
            if result.status is RunStatus.CANCELLED and self._reason is not None:
                result.reason = self._reason
            record = run_record(result, worker._cfg.output)  # pyright: ignore[reportPrivateUsage]
            check_size(record, "the run's result", self._limit)
        except Exception as exc:
            self._ended = True
            if type(exc).__module__.startswith("temporalio"):
                raise  # the SDK's own (a sandbox refusal, nondeterminism): the task retries
            raise failure(exc) from exc
        self._ended = True
        self._status(result.status.value)
        return record

    @property
    def _limit(self) -> int:
        assert self._run is not None
        return self._run.served.payload_limit

    def _status(self, status: str, pause: dict[str, Any] | None = None) -> None:
        answered = self._answers.get(self._wait)  # what took the last pause, if any
        workflow.upsert_memo({"status": status, "pause": pause, "answered": answered})

    async def _paused_run(self, worker: Worker[Any], state: PauseState) -> RunResult[Any]:
        """Wait for decisions on a paused run, then resume it (waiting again on refused ones)."""
        assert self._run is not None
        self._run.progress.append({"kind": "paused", "reason": state.reason})
        refused: str | None = None
        while True:
            if self._reason is not None:  # cancelled before the run waited
                return await _discarded(worker, state, self._reason)
            self._wait += 1
            self._answer, self._paused = None, True
            pause = {"wait": self._wait, "state": state.to_dict()}
            check_size(pause, "the run's pause (its memo)", self._limit)
            self._status("paused", pause)
            if refused is not None:
                self._run.progress.append({"kind": "refused", "error": refused})
            await workflow.wait_condition(lambda: self._wait in self._answers)
            self._paused = False
            self._status("running")
            if self._answers[self._wait] == "cancel":
                return await _discarded(worker, state, self._reason or _CANCELLED)
            assert self._answer is not None
            try:
                decisions = decisions_from(self._answer.get("decisions"))
            except (KeyError, TypeError, ValueError) as exc:
                raise RecordError(f"its decision is malformed ({exc!r})", step="decision") from None
            try:
                return await worker.resume(state, decisions=decisions)
            except PauseStateError as exc:  # decisions that do not fit: wait for others
                refused = str(exc)

    @workflow.update(name=DECIDE)
    def decide(self, message: dict[str, Any]) -> None:
        """Take decisions for the pause numbered `message["wait"]`, unless it was answered.

        The check and the claim run in one go, between two steps of the workflow: of two
        answers to one wait, exactly one is taken.
        """
        wait = message.get("wait")
        by = self._answers.get(wait) if isinstance(wait, int) else None
        if by is not None:
            raise ApplicationError(f"the pause was already answered (by a {by})", type=CONFLICT)
        if not isinstance(wait, int) or not self._paused or wait != self._wait:
            raise ApplicationError("the run is not waiting for this decision", type=NOT_WAITING)
        self._answer = message
        self._answers[wait] = "decision"

    @decide.validator
    def _decide_shape(self, message: dict[str, Any]) -> None:
        """Refuse, before it enters the history, an update that is not decisions.

        `decide()` sends only well-formed ones; another client of the server could send
        anything, which would otherwise fail the run when it resumes.
        """
        try:
            given = cast("object", message.get("decisions"))
            if not isinstance(given, dict):
                raise TypeError("the decisions are not an object")
            decisions = cast("dict[str, object]", given)  # JSON from the update
            if not all(isinstance(d, dict) for d in decisions.values()):
                raise TypeError("a decision is not an object")
            decisions_from(decisions)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ApplicationError(f"malformed decisions ({exc!r})", type=NOT_WAITING) from None

    @workflow.query(name=PROGRESS)
    def progress(self, start: int) -> dict[str, Any]:
        """The progress entries from index `start`, and whether the run ended."""
        entries = [] if self._run is None else self._run.progress[start:]
        return {"entries": entries, "ended": self._ended}


def _message(data: object) -> Message:
    try:
        return Message.from_dict(data)
    except Exception as exc:
        raise RecordError(f"its input message is malformed ({exc!r})", step="input") from None


async def _discarded(worker: Worker[Any], state: PauseState, reason: str) -> RunResult[Any]:
    """End a paused run CANCELLED: each call that never started gets an error result."""
    await worker.discard_pause(reason, state=state)
    return RunResult(
        RunStatus.CANCELLED,
        usage=state.usage,
        requests=state.requests,
        reason=reason,
        request_usage=list(state.request_usage),
    )
