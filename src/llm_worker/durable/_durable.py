"""`DurableWorker`: a Worker whose runs are DBOS workflows, surviving crashes and processes."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Self, cast

import anyio

from llm_worker.durable._access import Access, ClientAccess, ServedAccess, read
from llm_worker.durable._engine import PAUSE, STATUS, check_url, engine, unusable
from llm_worker.durable._errors import (
    DecisionConflictError,
    ExecutorAliveError,
    RecordError,
    RunFailedError,
)
from llm_worker.durable._protocol import RunSummary
from llm_worker.durable._records import decisions_record, messages_record, run_from
from llm_worker.durable._session import replay_safe
from llm_worker.durable._steps import PROGRESS, DurableInterceptor
from llm_worker.errors import ConfigurationError, PauseStateError
from llm_worker.state import Decision, OutputT, PauseState, RunResult, RunStatus
from llm_worker.worker._history import as_messages

if TYPE_CHECKING:
    from llm_worker.messages import Message
    from llm_worker.worker import Worker

__all__ = ("DEFAULT_DATABASE_URL", "DurableWorker")

DEFAULT_DATABASE_URL = "sqlite:///llm_worker.sqlite"
"""Where runs are kept unless told: a SQLite file in the working directory."""
_FAILED = frozenset({"ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
_ENDED = frozenset({"SUCCESS", "CANCELLED"}) | _FAILED


class DurableWorker(Generic[OutputT]):
    """Runs a Worker's runs as DBOS workflows: durable, recoverable, shared by a fleet.

    ```python
    durable = DurableWorker(worker, name="travel", database_url="sqlite:///runs.sqlite")
    async with durable:  # launches DBOS, serves the runs named "travel"
        result = await durable.run("Book me a trip to Kyoto", run_id="trip-42")
    ```

    Each run is a DBOS workflow on the queue of its name: every model request is a step (its
    assembled answer and usage recorded, so a recovered run never pays for it twice), every
    tool call is a step (a finished call never runs again; one that was running when its
    process died runs again only if its tool is read-only or idempotent, else it gets an
    error result saying it was interrupted). Hooks run inside the workflow, again on
    recovery: keep them deterministic, and put side effects in `llm_worker.durable.step`. A
    `Pause` makes the run wait, durably, for `decide()` from any process. A Worker's session
    (`Worker(session=...)`, a `ReplaySafeSession`) is loaded once per run and its turn
    appended once, however often the run is recovered (docs/durable.md).

    A serving process (the default) runs the runs of the names it entered, and only those;
    when its last `DurableWorker` leaves, the runs it holds go back to their queues for
    another process. A `DurableWorker(..., serve=False)` only acts on runs (start, result,
    status, follow, paused, decide, cancel): it runs none, so a process that only decides
    pauses takes no run.

    Args:
        worker: The Worker whose tools, hooks, handlers and settings every run uses (each run
            gets a fork of it: its own history). Its on_* handlers see the steps this process
            runs (not the answers a recovered run replays). Its `output_type` types
            `result()`.
        name: The name runs are filed under; every process serving them uses the same one.
        database_url: The DBOS system database: `sqlite:///file` (created on first use) or a
            `postgresql://` URL for a fleet on several machines.
        serve: Run this name's runs in this process (False: act on runs only, as a client;
            the database must have been created by a serving process).
        concurrency: Runs at once across every process (None: no limit).
        worker_concurrency: Runs at once in this process (None: no limit).
        provider_concurrency: Runs at once per provider across every process, so a fleet
            stays under the provider's rate limits (None: no limit). The runs are queued by
            provider (this Worker's client's), and one queue per name serves them.
        rate_limit: At most `(runs, seconds)` runs started per rolling window (None: none).
        executor_id: This process's id in the fleet (default: DBOS's, `local` or the
            `DBOS__VMID` environment variable); a process restarted with the same id recovers
            its own unfinished runs, `recover()` takes over another id's. Two live processes
            never share one: the second waits for the first's lease, then fails.
        app_version: The code version runs are recorded under: only a process of the same
            version recovers them (default: DBOS's hash of the registered workflows).
        poll_interval: Seconds between two looks at the queue and, on SQLite, at messages
            and events.
        lease: Seconds a serving process's liveness lease lasts without renewal (renewed
            every third of it): `recover()` refuses an executor whose lease is current.
        dbos_config: More DBOS configuration (`DBOSConfig` keys), laid over these.
    """

    def __init__(
        self,
        worker: Worker[OutputT],
        *,
        name: str,
        database_url: str = DEFAULT_DATABASE_URL,
        serve: bool = True,
        concurrency: int | None = None,
        worker_concurrency: int | None = None,
        provider_concurrency: int | None = None,
        rate_limit: tuple[int, float] | None = None,
        executor_id: str | None = None,
        app_version: str | None = None,
        poll_interval: float = 0.1,
        lease: float = 15.0,
        dbos_config: Mapping[str, Any] | None = None,
    ) -> None:
        engine.module()  # a missing extra fails here, before anything starts
        if not name:
            raise ConfigurationError("a DurableWorker needs a non-empty name")
        check_url(database_url)
        replay_safe(worker._cfg.session)  # pyright: ignore[reportPrivateUsage]
        if not lease > 0:
            raise ConfigurationError(f"a DurableWorker's lease is seconds > 0, not {lease!r}")
        self.worker = worker
        self.name = name
        self.database_url = database_url
        self.serve = serve
        self.queue_name = f"llm-worker.{name}"
        self._partition = worker.client.provider if provider_concurrency else None
        self._limits = _limits(concurrency, worker_concurrency, provider_concurrency, rate_limit)
        self._poll = poll_interval
        self._lease = lease
        self._app_version = app_version
        self._config = _config(executor_id, app_version, poll_interval, dbos_config)
        self._access: Access | None = None
        interceptors = worker._cfg.interceptors  # pyright: ignore[reportPrivateUsage]
        if not any(isinstance(i, DurableInterceptor) for i in interceptors):
            interceptors.append(DurableInterceptor())

    def __repr__(self) -> str:
        mode = "" if self.serve else ", serve=False"
        return f"DurableWorker(name={self.name!r}{mode}, worker={self.worker!r})"

    async def __aenter__(self) -> Self:
        if not self.serve:
            client = ClientAccess(self.database_url, self._app_version)
            await client.open()
            self._access = client
            return self
        engine.register(self.name, self.worker)
        try:
            launched = engine.launch(self.database_url, self._config, self.queue_name)
        except BaseException:
            engine.unregister(self.name)
            raise
        try:
            if launched:
                await engine.take_lease(self._lease)
            queue = await engine.dbos.DBOS.register_queue_async(
                self.queue_name, polling_interval_sec=self._poll, **self._limits
            )
        except BaseException as exc:
            await self._leave()
            if isinstance(exc, Exception) and not isinstance(exc, ConfigurationError):
                raise unusable(self.database_url, exc) from exc
            raise
        self._access = ServedAccess(queue)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._leave()

    async def _leave(self) -> None:
        access, self._access = self._access, None
        if not self.serve:
            if access is not None:
                await access.close()
            return
        engine.unregister(self.name)
        await engine.shutdown(self.queue_name)

    @property
    def _runs(self) -> Access:
        if self._access is None:
            raise ConfigurationError("enter the DurableWorker first: `async with durable:`")
        return self._access

    async def start(
        self, input: str | Message | Iterable[Message], *, run_id: str | None = None
    ) -> str:
        """Queue a run and return its id at once (a new id unless `run_id` is given).

        Starting a `run_id` again starts nothing: the id names the first run, whose result
        `result()` returns.
        """
        access = self._runs
        run_id = run_id or uuid.uuid4().hex
        await access.enqueue(self.queue_name, run_id, (self.name, _input(input)), self._partition)
        return run_id

    async def run(
        self, input: str | Message | Iterable[Message], *, run_id: str | None = None
    ) -> RunResult[OutputT]:
        """Run durably and return the result (`start()` then `result()`).

        Raises:
            Whatever the run raised (`Aborted`, `HookError`, `LimitExceededError`, a provider
            error), as recorded: a run that failed fails the same way for every caller.
        """
        return await self.result(await self.start(input, run_id=run_id))

    async def result(self, run_id: str) -> RunResult[OutputT]:
        """Wait for the run `run_id`, started anywhere, and return its result.

        Raises:
            ConfigurationError: No run has this id.
            RecordError: Its recorded result is not one llm-worker wrote (tampered, corrupt).
        """
        access = self._runs
        error = access.dbos.error
        try:
            record = await read(run_id, "result", access.result(run_id, self._poll))
        except error.DBOSNonExistentWorkflowError as exc:
            raise ConfigurationError(f"no durable run has the id {run_id!r}") from exc
        except error.DBOSAwaitedWorkflowCancelledError:
            return cast("RunResult[OutputT]", _cancelled_unrecorded(run_id))
        plan = self.worker._cfg.output  # pyright: ignore[reportPrivateUsage]
        try:
            result = run_from(record, plan)
        except (KeyError, TypeError, ValueError, OverflowError, IndexError, StopIteration) as exc:
            raise RecordError(f"it is malformed ({exc!r})", run_id=run_id, step="result") from None
        return cast("RunResult[OutputT]", result)

    async def status(self, run_id: str) -> str | None:
        """The run's status: queued, running, paused, finished, cancelled or failed.

        `failed` means the run raised (`result()` raises it) or DBOS gave up recovering it;
        None means no run has this id.
        """
        access = self._runs
        found = await access.workflow_status(run_id)
        if found is None:
            return None
        if found in _FAILED:
            return "failed"
        if found == "CANCELLED":
            return "cancelled"
        value = await read(run_id, "status", access.event(run_id, STATUS, 0))
        if value is None:
            return "queued" if found == "ENQUEUED" else "running"
        return str(value)

    async def cancel(
        self, run_id: str, reason: str = "cancelled by DurableWorker.cancel()"
    ) -> None:
        """End the run `run_id` CANCELLED, from any process; an ended run stays as it is.

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
        # The reason travels in the cancel message, which must stay JSON text.
        if not isinstance(reason, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError(f"a cancel's reason is a string, not {type(reason).__name__}")
        access = self._runs
        found = await access.workflow_status(run_id)
        if found is None:
            raise ConfigurationError(f"no durable run has the id {run_id!r}")
        if found in _ENDED:
            return
        fork = engine.running.get(run_id) if self.serve else None
        if fork is not None:  # this process holds it
            engine.reasons.setdefault(run_id, reason)  # the first cancel says why
            fork._cancel_run()  # pyright: ignore[reportPrivateUsage]
            if fork._done is not None:  # pyright: ignore[reportPrivateUsage]
                return
        try:
            pause = await self._pause(run_id, 0)
        except RecordError:  # a pause no one can read: DBOS cancels the run all the same
            pause = None
        if pause is None:
            if fork is None:
                await access.cancel(run_id)  # queued, or running in another process
                return
            await access.send(run_id, {"wait": None, "cancel": reason})
            return
        wait, _ = pause
        if not await _answer(access, run_id, wait, "cancel", {"wait": wait, "cancel": reason}):
            # Lost to a decision: the cancel waits for the run's next pause (docs/durable.md).
            await access.send(run_id, {"wait": None, "cancel": reason})

    async def paused(self, run_id: str, *, wait: float = 60.0) -> PauseState | None:
        """The state of the run's pause, waiting up to `wait` seconds for one.

        None when the run is not paused: it was resumed, it ended, or it has not paused
        within `wait` (it runs, or it finished without pausing).

        Raises:
            RunFailedError: The run failed: it will never pause again.
            RecordError: The recorded pause is not one llm-worker wrote.
        """
        await self._refuse_failed(run_id)
        pause = await self._pause(run_id, wait)
        if pause is None:
            await self._refuse_failed(run_id)
            return None
        return pause[1]

    async def _pause(self, run_id: str, wait: float) -> tuple[int, PauseState] | None:
        value = await read(run_id, "pause", self._runs.event(run_id, PAUSE, wait))
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

    async def _refuse_failed(self, run_id: str) -> str | None:
        """DBOS's status of the run, a failed run refused."""
        found = await self._runs.workflow_status(run_id)
        if found in _FAILED:
            raise RunFailedError(
                f"the durable run {run_id!r} failed: it has no pause and takes no decision "
                "(result() raises its error)",
                run_id=run_id,
            )
        return found

    async def decide(self, run_id: str, decisions: Mapping[str, Decision]) -> None:
        """Answer a paused run from any process: `Decision`s by call id, as `Worker.resume`.

        The run resumes in whichever process holds it. Of two answers to one pause (two
        deciders, or a decision and a cancel) exactly one is taken; the other raises
        `DecisionConflictError`. Decisions that do not fit the pause (unknown call ids, edited
        arguments the tool refuses) are dropped by the run, which goes on waiting (its
        progress stream says why) for another decision.

        Raises:
            ConfigurationError: The run is not waiting for a decision.
            RunFailedError: The run failed.
            DecisionConflictError: Another decision or a cancel answered this pause first
                (also when that decision has since ended the run).
            PauseStateError: A decision is not a `Decision`, or its `input` not an object.
        """
        _check_decisions(decisions)
        access = self._runs
        found = await self._refuse_failed(run_id)
        if found is None or found in _ENDED:
            await self._ended(access, run_id, found)
        pause = await self._pause(run_id, 0)
        if pause is None:
            await self._not_waiting(access, run_id)
        assert pause is not None
        message = {"wait": pause[0], "decisions": decisions_record(decisions)}
        if not await _answer(access, run_id, pause[0], "decision", message):
            await self._not_waiting(access, run_id)

    async def _ended(self, access: Access, run_id: str, found: str | None) -> None:
        """Raise why an ended (or unknown) run takes no decision.

        A run that ended after a decision answered its last pause lost nothing to this one:
        the decision came second, as when two deciders race and the winner's run finishes
        before the loser reads its status — a conflict, as if it had arrived a moment sooner.
        A run cancelled, or ended without a decision, is simply not waiting.
        """
        if found is not None:
            by = await anyio.to_thread.run_sync(access.store.last_answer, run_id)
            if by == "decision":
                raise DecisionConflictError(
                    f"the pause of durable run {run_id!r} was already answered (by a decision) "
                    f"and the run ended ({found.lower()}): this decision is dropped",
                    run_id=run_id,
                )
        ended = "" if found is None else f": it ended ({found.lower()})"
        raise ConfigurationError(f"the durable run {run_id!r} is not waiting for a decision{ended}")

    async def _not_waiting(self, access: Access, run_id: str) -> None:
        """Raise why the run takes no decision now: its pause was answered, or it has none."""
        by = await anyio.to_thread.run_sync(access.store.last_answer, run_id)
        if by is not None:
            raise DecisionConflictError(
                f"the pause of durable run {run_id!r} was already answered (by a {by}): "
                "this decision is dropped",
                run_id=run_id,
            )
        raise ConfigurationError(f"the durable run {run_id!r} is not waiting for a decision")

    async def follow(self, run_id: str, *, idle: float = 3600.0) -> AsyncIterator[dict[str, Any]]:
        """The run's progress, from any process: one entry per step, until the run ends.

        Entries (JSON objects, by `kind`): `answer` (the request number, its text, its tool
        calls), `tool_result` (call id, name, content, error), `paused` (reason), `refused`
        (decisions that did not fit). Text arrives per answer, never per delta.

        Args:
            run_id: The run.
            idle: Seconds to wait for each next entry.
        """
        stream = self._runs.stream(run_id, PROGRESS, self._poll, idle)
        while True:
            try:
                entry = await read(run_id, "progress", anext(stream))
            except StopAsyncIteration:
                return
            yield entry

    async def list_runs(self, *, limit: int = 100) -> list[RunSummary]:
        """The runs of this name (up to `limit`), the newest first, with their status."""
        access = self._runs
        ids = await access.listed(self.queue_name, self.name, limit)
        return [RunSummary(run_id, await self.status(run_id) or "queued") for run_id in ids]

    async def recover(self, executor_ids: Iterable[str], *, wait: float = 0.0) -> list[str]:
        """Take over the unfinished runs of dead processes (their executor ids).

        A process is dead when its lease has ended (`lease` seconds after its last renewal):
        the runs of a live one are never taken over, so no run runs in two processes.

        Args:
            executor_ids: The processes to take over.
            wait: Seconds to wait for their leases to end (a process just killed).

        Returns:
            The ids of the runs taken over; they run again in whichever process serving
            their name takes them from the queue, from their last recorded step.

        Raises:
            ExecutorAliveError: One of them is alive (its lease did not end within `wait`).
            ConfigurationError: This DurableWorker does not serve (`serve=False`).
        """
        access = self._runs
        if not self.serve:
            raise ConfigurationError("recover() needs a serving DurableWorker (serve=True)")
        ids = list(executor_ids)
        alive = await self._alive(access, ids, wait)
        if alive:
            raise ExecutorAliveError(
                f"executors {alive!r} are alive (their leases are current): their runs "
                "are theirs; recover() takes over dead processes only",
                executor_ids=alive,
            )
        # DBOS's own recovery call (Conductor's): it re-queues the runs, whoever dequeues
        # one runs it, once.
        recover = access.dbos.DBOS._recover_pending_workflows
        handles = await anyio.to_thread.run_sync(lambda: recover(ids))
        return [str(h.get_workflow_id()) for h in handles]

    async def _alive(self, access: Access, ids: list[str], wait: float) -> list[str]:
        """The live executors among `ids`, after waiting up to `wait` s for their leases."""
        deadline = anyio.current_time() + wait
        while True:
            alive = await anyio.to_thread.run_sync(access.store.live, ids)
            if not alive or anyio.current_time() >= deadline:
                return alive
            await anyio.sleep(min(0.1, self._lease / 10))  # a lease ends by the clock


def _cancelled_unrecorded(run_id: str) -> RunResult:
    return RunResult(
        RunStatus.CANCELLED,
        reason=f"the durable run {run_id!r} was cancelled through DBOS (DBOS.cancel_workflow) "
        "before it recorded a result: its messages are not kept (follow() has its progress)",
    )


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
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": poll_interval,
    }
    if executor_id is not None:
        config["executor_id"] = executor_id
    if app_version is not None:
        config["application_version"] = app_version
    return {**config, **(extra or {})}


async def _answer(
    access: Access, run_id: str, wait: int, kind: str, message: dict[str, Any]
) -> bool:
    """Answer the run's pause `wait` with `message`, unless another answer has it (False).

    The answer is claimed (kept with its message) before it is sent, and sent keyed by the
    wait, so DBOS delivers it once however often it is sent. A losing answer sends the
    winner's again: a winner whose process died between its claim and its send is delivered
    all the same, never lost with its pause answered.
    """
    text = json.dumps(message)
    store = access.store
    key = f"llm-worker.answer.{wait}"
    if await anyio.to_thread.run_sync(store.claim, run_id, wait, kind, text):
        await access.send(run_id, message, key)
        return True
    kept = await anyio.to_thread.run_sync(store.answer, run_id, wait)
    if kept is not None:
        await access.send(run_id, json.loads(kept), key)
    return False
