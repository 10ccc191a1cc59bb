"""`DurableWorker`: a Worker whose runs are DBOS workflows, surviving crashes and processes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Self, cast

import anyio

from llm_worker.durable._engine import CANCEL, DECISION, PAUSE, STATUS, engine
from llm_worker.durable._records import decisions_record, messages_record, run_from
from llm_worker.durable._steps import PROGRESS, DurableInterceptor
from llm_worker.errors import ConfigurationError, PauseStateError
from llm_worker.state import Decision, PauseState, RunResult, RunStatus
from llm_worker.worker._history import as_messages

if TYPE_CHECKING:
    from llm_worker.messages import Message
    from llm_worker.worker import Worker

__all__ = ("DEFAULT_DATABASE_URL", "DurableWorker")

DEFAULT_DATABASE_URL = "sqlite:///llm_worker.sqlite"
"""Where runs are kept unless told: a SQLite file in the working directory."""


class DurableWorker:
    """Runs a Worker's runs as DBOS workflows: durable, recoverable, shared by a fleet.

    ```python
    durable = DurableWorker(worker, name="travel", database_url="sqlite:///runs.sqlite")
    async with durable:  # launches DBOS, recovers this process's unfinished runs
        result = await durable.run("Book me a trip to Kyoto", run_id="trip-42")
    ```

    Each run is a DBOS workflow on a queue: every model request is a step (its assembled
    answer and usage recorded, so a recovered run never pays for it twice), every tool call is
    a step (a finished call never runs again; one that was running when its process died runs
    again only if its tool is read-only or idempotent, else it gets an error result saying it
    was interrupted). Hooks run inside the workflow, again on recovery: keep them
    deterministic, and put side effects in `llm_worker.durable.step`. A `Pause` makes the run
    wait, durably, for `decide()` from any process. On SQLite the runs are durable on one
    machine; on PostgreSQL (`database_url="postgresql://..."`) every process sharing the
    database takes runs from the queue, and `recover()` takes over a dead process's runs.

    Args:
        worker: The Worker whose tools, hooks, handlers and settings every run uses (each run
            gets a fork of it: its own history). Its on_* handlers see the steps this process
            runs (not the answers a recovered run replays).
        name: The name runs are filed under; every process serving them uses the same one.
        database_url: The DBOS system database: `sqlite:///file` (created on first use) or a
            PostgreSQL URL for many processes.
        concurrency: Runs at once across every process (None: no limit).
        worker_concurrency: Runs at once in this process (None: no limit).
        provider_concurrency: Runs at once per provider across every process, so a fleet
            stays under the provider's rate limits (None: no limit). The runs are queued by
            provider (this Worker's client's), and one queue per name serves them.
        rate_limit: At most `(runs, seconds)` runs started per rolling window (None: none).
        executor_id: This process's id in the fleet (default: DBOS's, `local` or the
            `DBOS__VMID` environment variable); a process restarted with the same id recovers
            its own unfinished runs, `recover()` takes over another id's.
        app_version: The code version runs are recorded under: only a process of the same
            version recovers them (default: DBOS's hash of the registered workflows).
        poll_interval: Seconds between two looks at the queue and, on SQLite, at messages
            and events.
        dbos_config: More DBOS configuration (`DBOSConfig` keys), laid over these.
    """

    def __init__(
        self,
        worker: Worker[Any],
        *,
        name: str,
        database_url: str = DEFAULT_DATABASE_URL,
        concurrency: int | None = None,
        worker_concurrency: int | None = None,
        provider_concurrency: int | None = None,
        rate_limit: tuple[int, float] | None = None,
        executor_id: str | None = None,
        app_version: str | None = None,
        poll_interval: float = 0.1,
        dbos_config: Mapping[str, Any] | None = None,
    ) -> None:
        engine.module()  # a missing extra fails here, before anything starts
        if not name:
            raise ConfigurationError("a DurableWorker needs a non-empty name")
        self.worker = worker
        self.name = name
        self.database_url = database_url
        self.queue_name = f"llm-worker.{name}"
        self._partition = worker.client.provider if provider_concurrency else None
        self._limits = _limits(concurrency, worker_concurrency, provider_concurrency, rate_limit)
        self._poll = poll_interval
        self._config = _config(executor_id, app_version, poll_interval, dbos_config)
        self._queue: Any = None
        interceptors = worker._cfg.interceptors  # pyright: ignore[reportPrivateUsage]
        if not any(isinstance(i, DurableInterceptor) for i in interceptors):
            interceptors.append(DurableInterceptor())

    def __repr__(self) -> str:
        return f"DurableWorker(name={self.name!r}, worker={self.worker!r})"

    async def __aenter__(self) -> Self:
        engine.register(self.name, self.worker)
        try:
            engine.launch(self.database_url, self._config)
        except BaseException:
            engine.unregister(self.name)
            raise
        try:
            self._queue = await engine.dbos.DBOS.register_queue_async(
                self.queue_name, polling_interval_sec=self._poll, **self._limits
            )
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        engine.unregister(self.name)
        self._queue = None
        await engine.shutdown()

    @property
    def _dbos(self) -> Any:
        if self._queue is None:
            raise ConfigurationError("enter the DurableWorker first: `async with durable:`")
        return engine.dbos

    async def start(
        self, input: str | Message | Iterable[Message], *, run_id: str | None = None
    ) -> str:
        """Queue a run and return its id at once (a new id unless `run_id` is given).

        Starting a `run_id` again starts nothing: the id names the first run, whose result
        `result()` returns.
        """
        dbos = self._dbos
        run_id = run_id or uuid.uuid4().hex
        options: dict[str, Any] = {}
        if self._partition is not None:
            options["queue_partition_key"] = self._partition
        with dbos.SetWorkflowID(run_id), dbos.SetEnqueueOptions(**options):
            await self._queue.enqueue_async(engine.workflow, self.name, _input(input))
        return run_id

    async def run(
        self, input: str | Message | Iterable[Message], *, run_id: str | None = None
    ) -> RunResult:
        """Run durably and return the result (`start()` then `result()`).

        Raises:
            Whatever the run raised (`Aborted`, `HookError`, `LimitExceededError`, a provider
            error), as recorded: a run that failed fails the same way for every caller.
        """
        return await self.result(await self.start(input, run_id=run_id))

    async def result(self, run_id: str) -> RunResult:
        """Wait for the run `run_id`, started anywhere, and return its result.

        Raises:
            ConfigurationError: No run has this id.
        """
        dbos = self._dbos
        try:
            handle = await dbos.DBOS.retrieve_workflow_async(run_id)
        except dbos.error.DBOSNonExistentWorkflowError as exc:
            raise ConfigurationError(f"no durable run has the id {run_id!r}") from exc
        try:
            record = await handle.get_result(polling_interval_sec=self._poll)
        except dbos.error.DBOSAwaitedWorkflowCancelledError:
            return _cancelled_unrecorded(run_id)
        return run_from(record, self.worker._cfg.output)  # pyright: ignore[reportPrivateUsage]

    async def status(self, run_id: str) -> str | None:
        """The run's status: running, paused, finished, cancelled (None: not started yet)."""
        dbos = self._dbos.DBOS
        if await _dbos_cancelled(dbos, run_id):
            return "cancelled"
        value = await dbos.get_event_async(run_id, STATUS, timeout_seconds=0)
        return None if value is None else str(value)

    async def cancel(
        self, run_id: str, reason: str = "cancelled by DurableWorker.cancel()"
    ) -> None:
        """End the run `run_id` CANCELLED, from any process; a finished run stays as it is.

        A run this process is running is cancelled as by `Worker.cancel()` (its tool calls
        cut short, its history repaired); a paused one, wherever it waits, drops its pause
        as by `Worker.discard_pause(reason)`. Both record their CANCELLED result: `result()`
        returns it, messages included. A run still queued, or running in another process, is
        cancelled through DBOS (`DBOS.cancel_workflow`, which stops it at its next step):
        nothing more of it is recorded, and `result()` returns a CANCELLED `RunResult` with
        no messages (`follow()` has its progress). The same holds for a run cancelled with
        `DBOS.cancel_workflow` directly.

        Raises:
            ConfigurationError: No run has this id, or `reason` is not a string.
        """
        # The reason travels as the cancel message: anything but a string would read as decisions.
        if not isinstance(reason, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError(f"a cancel's reason is a string, not {type(reason).__name__}")
        dbos = self._dbos.DBOS
        found = await dbos.get_workflow_status_async(run_id)
        if found is None:
            raise ConfigurationError(f"no durable run has the id {run_id!r}")
        if found.status in ("SUCCESS", "ERROR", "CANCELLED"):
            return
        fork = engine.running.get(run_id)
        if fork is not None:  # this process holds it
            engine.reasons.setdefault(run_id, reason)  # the first cancel says why
            fork._cancel_run()  # pyright: ignore[reportPrivateUsage]
            if fork._done is not None:  # pyright: ignore[reportPrivateUsage]
                return
        elif await dbos.get_event_async(run_id, PAUSE, timeout_seconds=0) is None:
            await dbos.cancel_workflow_async(run_id)  # queued, or running in another process
            return
        await dbos.send_async(run_id, {CANCEL: reason}, DECISION)  # it waits for a decision

    async def paused(self, run_id: str, *, wait: float = 60.0) -> PauseState | None:
        """The state of the run's pause, waiting up to `wait` seconds for one.

        None when the run is not paused: it was resumed, or it has not paused within `wait`
        (it runs, or it finished without pausing).
        """
        value = await self._dbos.DBOS.get_event_async(run_id, PAUSE, timeout_seconds=wait)
        return None if value is None else PauseState.from_dict(value)

    async def decide(self, run_id: str, decisions: Mapping[str, Decision]) -> None:
        """Answer a paused run from any process: `Decision`s by call id, as `Worker.resume`.

        The run resumes in whichever process holds it. Decisions that do not fit its pause
        (unknown call ids, edited arguments the tool refuses) are dropped by the run, which
        goes on waiting (its progress stream says why).

        Raises:
            ConfigurationError: The run is not waiting for a decision.
            PauseStateError: A decision is not a `Decision`, or its `input` not an object.
        """
        _check_decisions(decisions)
        dbos = self._dbos.DBOS
        if await dbos.get_event_async(run_id, PAUSE, timeout_seconds=0) is None:
            raise ConfigurationError(f"the durable run {run_id!r} is not waiting for a decision")
        await dbos.send_async(run_id, decisions_record(decisions), DECISION)

    async def follow(self, run_id: str, *, idle: float = 3600.0) -> AsyncIterator[dict[str, Any]]:
        """The run's progress, from any process: one entry per step, until the run ends.

        Entries (JSON objects, by `kind`): `answer` (the request number, its text, its tool
        calls), `tool_result` (call id, name, content, error), `paused` (reason), `refused`
        (decisions that did not fit). Text arrives per answer, never per delta.

        Args:
            run_id: The run.
            idle: Seconds to wait for each next entry.
        """
        dbos = self._dbos.DBOS
        async for entry in dbos.read_stream_async(
            run_id, PROGRESS, polling_interval_sec=self._poll, timeout_seconds=idle
        ):
            yield entry

    async def recover(self, executor_ids: Iterable[str]) -> list[str]:
        """Take over the unfinished runs of other processes (dead ones: ids from the fleet).

        Returns:
            The ids of the runs taken over; they run again in whichever process takes them
            from the queue, from their last recorded step.
        """
        dbos = self._dbos.DBOS
        ids = list(executor_ids)
        # DBOS's own recovery call (Conductor's): it re-queues the runs, whoever dequeues
        # one runs it, once.
        recover = dbos._recover_pending_workflows  # pyright: ignore[reportPrivateUsage]
        handles = await anyio.to_thread.run_sync(lambda: recover(ids))
        return [str(h.get_workflow_id()) for h in handles]


def _cancelled_unrecorded(run_id: str) -> RunResult:
    return RunResult(
        RunStatus.CANCELLED,
        reason=f"the durable run {run_id!r} was cancelled through DBOS (DBOS.cancel_workflow) "
        "before it recorded a result: its messages are not kept (follow() has its progress)",
    )


async def _dbos_cancelled(dbos: Any, run_id: str) -> bool:
    found = await dbos.get_workflow_status_async(run_id)
    return found is not None and found.status == "CANCELLED"


def _check_decisions(decisions: Mapping[str, Decision]) -> None:
    # The run reads decisions back as JSON: a wrong shape would turn into another decision
    # there (edited arguments that are not an object merge as none: the model's, approved).
    for call_id, decision in decisions.items():
        given = cast("object", decision)  # a caller without a type checker sends anything
        edited: object = getattr(given, "input", None)
        if not isinstance(given, Decision) or not isinstance(edited, dict | None):
            raise PauseStateError(
                f"the decision for call {call_id!r} must be a Decision whose input is a dict "
                f"or None, not {given!r}"
            )


def _input(input: str | Message | Iterable[Message]) -> list[dict[str, Any]]:
    return messages_record(as_messages(input))


def _limits(
    concurrency: int | None,
    worker_concurrency: int | None,
    provider_concurrency: int | None,
    rate_limit: tuple[int, float] | None,
) -> dict[str, Any]:
    limits: dict[str, Any] = {
        "global_concurrency": concurrency,
        "worker_concurrency": worker_concurrency,
    }
    if provider_concurrency is not None:
        limits["partition_concurrency"] = provider_concurrency
    if rate_limit is not None:
        limits["limiter"] = {"limit": rate_limit[0], "period": rate_limit[1]}
    return limits


def _config(
    executor_id: str | None,
    app_version: str | None,
    poll_interval: float,
    extra: Mapping[str, Any] | None,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": "llm-worker",
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": poll_interval,
    }
    if executor_id is not None:
        config["executor_id"] = executor_id
    if app_version is not None:
        config["application_version"] = app_version
    return {**config, **(extra or {})}
