"""`TemporalWorker`: a Worker whose runs are Temporal workflows, on the `DurableRuns` surface."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, Self, cast

import anyio
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    TerminatedError,
    WorkflowAlreadyStartedError,
)
from temporalio.service import RPCError
from temporalio.worker import Worker as TemporalSdkWorker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from llm_worker.durable._durable import _check_decisions  # pyright: ignore[reportPrivateUsage]
from llm_worker.durable._errors import DecisionConflictError, RecordError, RunFailedError
from llm_worker.durable._protocol import RunSummary
from llm_worker.durable._records import decisions_record, messages_record, run_from
from llm_worker.durable._serializer import error_from
from llm_worker.durable.temporal._activities import request_activity, tool_activity, warm_up
from llm_worker.durable.temporal._registry import Served, serve, unserve
from llm_worker.durable.temporal._runs import Found, Runs
from llm_worker.durable.temporal._steps import TemporalInterceptor
from llm_worker.durable.temporal._workflow import (
    CONFLICT,
    DECIDE,
    PROGRESS,
    WORKFLOW,
    RunWorkflow,
)
from llm_worker.errors import ConfigurationError
from llm_worker.state import Decision, OutputT, PauseState, RunResult, RunStatus
from llm_worker.worker._history import as_messages

if TYPE_CHECKING:
    from llm_worker.messages import Message
    from llm_worker.worker import Worker

__all__ = ("PASSTHROUGH", "TemporalWorker")

PASSTHROUGH = (
    "llm_worker",
    "anyio",
    "sniffio",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_inspection",
    "httpx",
    "httpcore",
    "h11",
    "certifi",
    "idna",
    "orjson",
    "regex",
    "uuid6",
    "docstring_parser",
    "typing_extensions",
)
"""Modules passed through Temporal's workflow sandbox: imported once, outside it.

`llm_worker` must be (the workflow finds the registered Worker in it); the others are what it
imports, side-effect free at import, and would otherwise be imported again for every run."""
_PAYLOAD_LIMIT = 2 * 1024 * 1024  # Temporal's default blob size limit (limit.blobSize.error)


class TemporalWorker(Generic[OutputT]):
    """Runs a Worker's runs as Temporal workflows: durable, recoverable, shared by a fleet.

    ```python
    client = await temporalio.client.Client.connect("localhost:7233")
    durable = TemporalWorker(worker, name="travel", client=client)
    async with durable:  # a Temporal worker on the task queue `llm-worker.travel`
        result = await durable.run("Book me a trip to Kyoto", run_id="trip-42")
    ```

    The same surface as `DurableWorker` (DBOS) — `DurableRuns` — on the engine your
    platform runs. Each run is a workflow (its id the run id) whose model requests and tool
    calls are activities: a finished request is never made again, a side-effecting tool runs
    at most once per call, a pause waits durably for `decide()` from any process (a
    workflow update), `cancel()` is a workflow cancellation. Hooks run in the workflow and
    again on replay: keep them deterministic (docs/durable.md).

    Args:
        worker: The Worker whose tools, hooks and settings every run uses (each run gets a
            fork of it). Its on_* handlers see the requests this process's activities make.
        name: The name runs are filed under; its task queue is `llm-worker.<name>` unless
            `task_queue` says otherwise. Every process serving it uses the same Worker set-up.
        client: A connected `temporalio.client.Client` (its data converter must be the
            default JSON one: llm-worker stores JSON data only).
        serve: Run this name's workflows and activities in this process (False: act on runs
            only, as a client).
        task_queue: The task queue (default `llm-worker.<name>`).
        heartbeat: Seconds after which a step whose process stopped heartbeating is handed
            to another process (a killed process's step waits this long).
        request_timeout: Seconds one model request may take, its retries included.
        tool_timeout: Seconds one tool call may take.
        payload_limit: Bytes a step's result or the run's result may have as JSON:
            Temporal's payload limit (2 MB by default). A larger tool output becomes an
            error result naming the blob store; a larger run result fails the run.
        poll_interval: Seconds between two looks at a run (`result`-less reads, `follow`).
        max_concurrent_runs: Workflow tasks at once in this process (None: the SDK's default).
    """

    def __init__(
        self,
        worker: Worker[OutputT],
        *,
        name: str,
        client: Client,
        serve: bool = True,
        task_queue: str | None = None,
        heartbeat: float = 10.0,
        request_timeout: float = 600.0,
        tool_timeout: float = 600.0,
        payload_limit: int = _PAYLOAD_LIMIT,
        poll_interval: float = 0.1,
        max_concurrent_runs: int | None = None,
    ) -> None:
        if not name:
            raise ConfigurationError("a TemporalWorker needs a non-empty name")
        if worker._cfg.session is not None:  # pyright: ignore[reportPrivateUsage]
            # Its claim, load and append are I/O inside the workflow, which Temporal's
            # sandbox cannot run: the run would wait forever. Refused, not hung.
            raise ConfigurationError(
                "a TemporalWorker does not keep runs in a session (Worker(session=...)): "
                "use a DurableWorker (DBOS) for that, or a Worker without a session"
            )
        if not heartbeat > 0:
            raise ConfigurationError(
                f"a TemporalWorker's heartbeat is seconds > 0, not {heartbeat!r}"
            )
        self.worker = worker
        self.name = name
        self.client = client
        self.serve = serve
        self.task_queue = task_queue or f"llm-worker.{name}"
        self._served = Served(worker, heartbeat, request_timeout, tool_timeout, payload_limit)
        self._poll = poll_interval
        self._concurrency = max_concurrent_runs
        self._sdk_worker: TemporalSdkWorker | None = None
        self._entered = False
        self._runs = Runs(client, self.task_queue, poll_interval)
        interceptors = worker._cfg.interceptors  # pyright: ignore[reportPrivateUsage]
        if not any(isinstance(i, TemporalInterceptor) for i in interceptors):
            interceptors.append(TemporalInterceptor())

    def __repr__(self) -> str:
        mode = "" if self.serve else ", serve=False"
        return f"TemporalWorker(name={self.name!r}{mode}, worker={self.worker!r})"

    async def __aenter__(self) -> Self:
        if self.serve:
            warm_up()
            serve(self.name, self._served)
            try:
                self._sdk_worker = self._make_sdk_worker()
                await self._sdk_worker.__aenter__()
            except BaseException:
                unserve(self.name)
                self._sdk_worker = None
                raise
        self._entered = True
        return self

    def _make_sdk_worker(self) -> TemporalSdkWorker:
        restrictions = SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
        options: dict[str, Any] = {}
        if self._concurrency is not None:
            options["max_concurrent_workflow_tasks"] = self._concurrency
        return TemporalSdkWorker(
            self.client,
            task_queue=self.task_queue,
            workflows=[RunWorkflow],
            activities=[request_activity, tool_activity],
            workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
            graceful_shutdown_timeout=timedelta(seconds=0),
            # A killed process's cached runs go to another process after this long (the
            # SDK's default is 10 s): the same patience as for its steps.
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=self._served.heartbeat),
            # The SDK sends a step's heartbeats 0.8 heartbeat apart by default: one late on a
            # busy machine and Temporal took a live process for dead and made its request
            # again beside the first. Three per heartbeat leave room for two to be late.
            max_heartbeat_throttle_interval=timedelta(seconds=self._served.heartbeat / 3),
            **options,
        )

    async def __aexit__(self, *exc_info: object) -> None:
        self._entered = False
        sdk, self._sdk_worker = self._sdk_worker, None
        if sdk is not None:
            try:
                await sdk.__aexit__(None, None, None)
            finally:
                unserve(self.name)

    def _check_entered(self) -> None:
        if not self._entered:
            raise ConfigurationError("enter the TemporalWorker first: `async with durable:`")

    async def start(
        self, input: str | Message | Iterable[Message], *, run_id: str | None = None
    ) -> str:
        """Start a run and return its id at once (a new id unless `run_id` is given).

        Starting a `run_id` again starts nothing: the id names the first run.
        """
        self._check_entered()
        run_id = run_id or uuid.uuid4().hex
        args = {"name": self.name, "messages": messages_record(as_messages(input))}
        # A run that ran and ended keeps its id: the id names that run.
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await self.client.start_workflow(
                WORKFLOW,
                args,
                id=run_id,
                task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                memo={"status": "queued", "pause": None},
            )
        return run_id

    async def run(
        self, input: str | Message | Iterable[Message], *, run_id: str | None = None
    ) -> RunResult[OutputT]:
        """Run durably and return the result (`start()` then `result()`).

        Raises:
            Whatever the run raised, as recorded.
        """
        return await self.result(await self.start(input, run_id=run_id))

    async def result(self, run_id: str) -> RunResult[OutputT]:
        """Wait for the run `run_id`, started anywhere, and return its result.

        Raises:
            ConfigurationError: No run has this id.
            RecordError: Its recorded result is not one llm-worker wrote.
        """
        self._check_entered()
        handle = self.client.get_workflow_handle(run_id)
        try:
            record = await handle.result()
        except RPCError as exc:
            raise self._runs.missing(run_id, exc) from exc
        except WorkflowFailureError as exc:
            ended = _ended_by_temporal(run_id, exc)
            if ended is None:
                raise _failed(run_id, exc) from None
            return cast("RunResult[OutputT]", ended)
        plan = self.worker._cfg.output  # pyright: ignore[reportPrivateUsage]
        try:
            result = run_from(record, plan)
        except (KeyError, TypeError, ValueError, OverflowError, IndexError, StopIteration) as exc:
            raise RecordError(f"it is malformed ({exc!r})", run_id=run_id, step="result") from None
        return cast("RunResult[OutputT]", result)

    async def status(self, run_id: str) -> str | None:
        """The run's status: queued, running, paused, finished, cancelled or failed."""
        self._check_entered()
        found = await self._runs.describe(run_id)
        return None if found is None else found.status

    async def list_runs(self, *, limit: int = 100) -> list[RunSummary]:
        """The runs of this name (its task queue), the newest first.

        Temporal's list is its visibility store's, which lags the runs by a moment: a run
        started an instant ago may not be listed yet.
        """
        self._check_entered()
        return await self._runs.listed(limit)

    async def paused(self, run_id: str, *, wait: float = 60.0) -> PauseState | None:
        """The state of the run's pause, waiting up to `wait` seconds for one.

        Raises:
            RunFailedError: The run failed: it will never pause again.
            RecordError: The recorded pause is not one llm-worker wrote.
        """
        self._check_entered()
        found = await self._runs.pause(run_id, wait)
        return None if found is None else found[1]

    async def decide(self, run_id: str, decisions: Mapping[str, Decision]) -> None:
        """Answer a paused run from any process: `Decision`s by call id, as `Worker.resume`.

        Sent as a workflow update: of two answers to one pause exactly one is taken, the
        other raises `DecisionConflictError`. Decisions that do not fit the pause are dropped
        by the run, which goes on waiting (its progress says why).

        Raises:
            ConfigurationError: The run is not waiting for a decision.
            RunFailedError: The run failed.
            DecisionConflictError: Another decision or a cancel answered this pause first.
            PauseStateError: A decision is not a `Decision`, or its `input` not an object.
        """
        self._check_entered()
        _check_decisions(decisions)
        found = await self._runs.describe(run_id)
        if found is not None:
            self._runs.refuse_failed(run_id, found)
        if found is None or found.pause is None:
            _not_waiting(run_id, found)
        assert found is not None
        assert found.pause is not None
        message = {"wait": found.pause[0], "decisions": decisions_record(decisions)}
        # By name: the SDK's typed overloads leave an update by name partially unknown.
        handle: Any = self.client.get_workflow_handle(run_id)
        try:
            await handle.execute_update(DECIDE, message)
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == CONFLICT:
                raise DecisionConflictError(
                    f"the pause of durable run {run_id!r} was already answered "
                    f"({cause.message}): this decision is dropped",
                    run_id=run_id,
                ) from None
            _not_waiting(run_id, await self._runs.describe(run_id))
        except RPCError:  # the run ended while the update was on its way
            _not_waiting(run_id, await self._runs.describe(run_id))

    async def cancel(
        self, run_id: str, reason: str = "cancelled by TemporalWorker.cancel()"
    ) -> None:
        """End the run `run_id` CANCELLED, from any process; an ended run stays as it is.

        A workflow cancellation carrying `reason`: a running run is cancelled as by
        `Worker.cancel()` (its running step cut short, its history repaired), a paused one
        drops its pause as by `Worker.discard_pause(reason)`; both record their CANCELLED
        result, messages included, which `result()` returns.

        Raises:
            ConfigurationError: No run has this id, or `reason` is not a string.
        """
        if not isinstance(reason, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError(f"a cancel's reason is a string, not {type(reason).__name__}")
        self._check_entered()
        found = await self._runs.describe(run_id)
        if found is None:
            raise ConfigurationError(f"no durable run has the id {run_id!r}")
        if found.ended:
            return
        await self.client.get_workflow_handle(run_id).cancel(reason=reason)

    async def follow(self, run_id: str, *, idle: float = 3600.0) -> AsyncIterator[dict[str, Any]]:
        """The run's progress: one entry per step, until the run ends (a workflow query).

        The same entries as `DurableWorker.follow` (`answer`, `tool_result`, `paused`,
        `refused`), read by polling the `llm-worker.progress` query: a worker of the name
        must be running to answer it.

        Args:
            run_id: The run.
            idle: Seconds to wait for each next entry.
        """
        self._check_entered()
        handle = self.client.get_workflow_handle(run_id)
        seen = 0
        while True:
            with anyio.fail_after(idle):
                page = await self._runs.next_progress(handle, seen, PROGRESS)
            for entry in page["entries"]:
                seen += 1
                yield entry
            if page["ended"]:
                return


def _not_waiting(run_id: str, found: Found | None) -> None:
    """Raise why the run takes no decision: its pause was answered, or it has none.

    A decision second to one that took the pause lost a race, whether the run still runs or
    already ended: a conflict, as on DBOS. A run that never paused, or was cancelled, is
    simply not waiting.
    """
    if found is not None and found.answered == "decision":
        ended = f" and the run ended ({found.status})" if found.ended else ""
        raise DecisionConflictError(
            f"the pause of durable run {run_id!r} was already answered (by a decision)"
            f"{ended}: this decision is dropped",
            run_id=run_id,
        )
    ended = f": it ended ({found.status})" if found is not None and found.ended else ""
    raise ConfigurationError(f"the durable run {run_id!r} is not waiting for a decision{ended}")


def _failed(run_id: str, exc: WorkflowFailureError) -> BaseException:
    """The error a failed run raised, rebuilt from its record (or Temporal's, wrapped)."""
    cause = exc.cause
    if isinstance(cause, ApplicationError) and cause.details:
        try:
            return error_from(cause.details[0])
        except RecordError as refused:
            return refused.at(run_id, "result")
    return RunFailedError(f"the durable run {run_id!r} failed: {cause}", run_id=run_id)


def _ended_by_temporal(run_id: str, exc: WorkflowFailureError) -> RunResult[Any] | None:
    """The CANCELLED result of a run Temporal cancelled or terminated before it recorded one."""
    if not isinstance(exc.cause, CancelledError | TerminatedError):
        return None
    how = "cancelled" if isinstance(exc.cause, CancelledError) else "terminated"
    return RunResult(
        RunStatus.CANCELLED,
        reason=f"the durable run {run_id!r} was {how} "
        "through Temporal before it recorded a result: its messages are not kept "
        "(follow() may have its progress)",
    )
