"""The DBOS engine of this process and the one workflow every durable run is.

DBOS is one engine per process: the first serving `DurableWorker` to enter launches it on its
system database, listening only to the queue of its name (DBOS dequeues from every queue of
the database unless told); each other name entered adds its queue, and the last to leave hands
the runs it holds back to their queues and shuts DBOS down. Every durable run is the workflow
`llm_worker.durable.run(name, input)`; `name` picks the `DurableWorker` (its Worker: tools,
hooks, settings) registered under it in the process that runs or recovers the run.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio

from llm_worker._extras import require_extra
from llm_worker._json import as_dict
from llm_worker._log import logger
from llm_worker.durable._errors import ExecutorAliveError, RecordError
from llm_worker.durable._records import decisions_from, run_record
from llm_worker.durable._serializer import JsonSerializer, refuse_pickles
from llm_worker.durable._session import run_session
from llm_worker.durable._steps import PROGRESS, Attempt, current
from llm_worker.errors import ConfigurationError, PauseStateError
from llm_worker.messages import Message
from llm_worker.state import RunResult, RunStatus
from llm_worker.worker._session_run import in_session

if TYPE_CHECKING:
    from llm_worker.durable._store import Store
    from llm_worker.sessions import SessionRecord
    from llm_worker.state import PauseState
    from llm_worker.worker import Worker

__all__ = ("DECISION", "PAUSE", "STATUS", "Engine", "Lease", "check_url", "engine", "redacted")

WORKFLOW = "llm_worker.durable.run"
APP_NAME = "llm-worker"
"""The DBOS application name every process (serving or not) acts under."""
DECISION = "llm-worker.decision"
"""The DBOS message topic that carries decisions to a paused run.

A message is `{"wait": n, "decisions": {...}}` or `{"wait": n | None, "cancel": reason}`:
`n` numbers the run's waits, so an answer meant for an earlier wait is never taken for a
later one."""
PAUSE = "llm-worker.pause"
"""The DBOS event holding a paused run's wait: `{"wait": n, "state": PauseState dict}`, or None."""
STATUS = "llm-worker.status"
"""The DBOS event holding a run's status: running, paused, finished, cancelled."""
_log = logger("llm_worker.durable")
_STOP_TIMEOUT = 10.0  # seconds for this process's runs to stop when the engine shuts down
_DECISION_POLL = 24 * 3600.0  # one recv per day: a pause may wait for weeks
_SCHEMES = {"sqlite": "sqlite", "postgresql": "postgresql", "postgres": "postgresql"}


def check_url(url: str) -> str:
    """The database kind of a system database URL: `sqlite` or `postgresql`.

    Raises:
        ConfigurationError: Another scheme (`mysql://`, ...), or no scheme at all.
    """
    scheme, sep, rest = url.partition("://") if isinstance(url, str) else ("", "", "")  # pyright: ignore[reportUnnecessaryIsInstance]
    kind = _SCHEMES.get(scheme.partition("+")[0].lower()) if sep else None
    if kind is None or not rest or (kind == "sqlite" and not rest.startswith("/")):
        shown = redacted(url) if isinstance(url, str) else repr(url)  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError(
            f"a DurableWorker's database_url is `sqlite:///path/to/file` or "
            f"`postgresql://user@host/database`, not {shown}"
        )
    return kind


def redacted(url: str | None) -> str:
    """A database URL without its password (URLs reach error messages)."""
    if url is None or "@" not in url:
        return repr(url)
    scheme, _, rest = url.partition("://")
    return repr(f"{scheme}://***@{rest.rpartition('@')[2]}")


class Lease:
    """This process's lease of its executor id, renewed by a thread while the process lives."""

    def __init__(self, store: Store, executor_id: str, duration: float) -> None:
        self.store = store
        self.executor_id = executor_id
        self.duration = duration
        self.holder = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="llm-worker-lease", daemon=True)

    def take(self) -> None:
        """Take the lease, waiting for a previous holder's to end (a restart after a crash).

        Raises:
            ExecutorAliveError: Another live process holds it (it renews it).
        """
        waited = 0.0
        step = max(self.duration / 10, 0.05)
        while not self.store.take(self.executor_id, self.holder, self.duration):
            if waited > 2 * self.duration:
                raise ExecutorAliveError(
                    f"another live process serves durable runs as executor "
                    f"{self.executor_id!r}: give each process its own executor_id",
                    executor_ids=[self.executor_id],
                )
            self._stop.wait(step)
            waited += step
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.duration / 3):
            try:
                self.store.take(self.executor_id, self.holder, self.duration)
            except Exception:  # the database is away for a moment: the next renewal retries
                continue

    def end(self) -> None:
        """Stop renewing and give the lease up."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=_STOP_TIMEOUT)
        try:
            self.store.drop(self.executor_id, self.holder)
        except Exception:  # it expires on its own
            return


@dataclass
class Engine:
    """This process's DBOS, shared by every serving `DurableWorker` in it."""

    dbos: Any = None
    """The `dbos` module, once imported."""
    workflow: Any = None
    """The registered workflow function."""
    url: str | None = None
    users: int = 0
    workers: dict[str, Worker[Any]] = field(default_factory=lambda: {})
    running: dict[str, Worker[Any]] = field(default_factory=lambda: {})
    """The fork running each run this process holds, by run id."""
    reasons: dict[str, str] = field(default_factory=lambda: {})
    """Why `DurableWorker.cancel` cancelled a run running here, by run id."""
    store: Store | None = None
    lease: Lease | None = None

    def module(self) -> Any:
        """The `dbos` module (imported on first use), its workflow registered, pickles refused."""
        if self.dbos is None:
            dbos = require_extra("dbos", "dbos", feature="DurableWorker")
            refuse_pickles(dbos)
            self.workflow = dbos.DBOS.workflow(name=WORKFLOW)(_workflow)
            self.dbos = dbos
        return self.dbos

    @property
    def instance(self) -> Any:
        """The launched DBOS instance."""
        return self.dbos._dbos._get_dbos_instance()

    @property
    def executor_id(self) -> str:
        """This process's executor id in the fleet."""
        return str(self.dbos._utils.GlobalParams.executor_id)

    def launch(self, url: str, config: Mapping[str, Any], queue: str) -> bool:
        """Launch DBOS on `url` listening to `queue`, or join the running one and add `queue`.

        Returns:
            Whether this call launched DBOS (the caller then takes the lease).

        Raises:
            ConfigurationError: DBOS runs in this process on another database, or the
                database is unusable.
        """
        dbos = self.module()
        check_url(url)
        if self.users and self.url != url:
            raise ConfigurationError(
                f"DBOS already runs in this process on {redacted(self.url)}; one process has "
                f"one system database, so every DurableWorker in it must use it "
                f"(not {redacted(url)})"
            )
        launched = not self.users
        if launched:
            self._launch(dbos, url, config, queue)
        else:
            # DBOS reads this list each second to start dequeuing a newly listed queue.
            self.instance._listening_queues.append(queue)
        self.users += 1
        return launched

    def _launch(self, dbos: Any, url: str, config: Mapping[str, Any], queue: str) -> None:
        from llm_worker.durable._store import Store

        full = {**config, "system_database_url": url, "serializer": JsonSerializer()}
        full["name"] = APP_NAME
        try:
            dbos.DBOS(config=full)
            dbos.DBOS.listen_queues([queue])
            dbos.DBOS.launch()  # in the running loop: DBOS runs recovered runs on it
            sys_db = self.instance._sys_db
            self.store = Store(sys_db.engine, sys_db.schema)
            self.store.create()
        except Exception as exc:
            dbos.DBOS.destroy()
            raise unusable(url, exc) from exc
        self.url = url

    async def take_lease(self, duration: float) -> None:
        """Take this process's executor lease (after `launch` launched DBOS)."""
        assert self.store is not None
        lease = Lease(self.store, self.executor_id, duration)
        await anyio.to_thread.run_sync(lease.take)
        self.lease = lease

    async def shutdown(self, queue: str) -> None:
        """Leave the engine; the last user hands its runs back and shuts DBOS down."""
        self.users -= 1
        if self.users:
            listening: list[str] = self.instance._listening_queues
            if queue in listening:
                listening.remove(queue)
            return
        self.url = None
        instance = self.instance
        for event in instance.background_thread_stop_events:
            event.set()  # nothing more is dequeued
        held = set(instance._active_workflows_set.activeList())
        await self._stop_runs()
        held |= set(instance._active_workflows_set.activeList())
        await anyio.to_thread.run_sync(self._hand_back, sorted(held))
        if self.lease is not None:
            await anyio.to_thread.run_sync(self.lease.end)
            self.lease = None
        self.store = None
        await anyio.to_thread.run_sync(self.dbos.DBOS.destroy)

    def _hand_back(self, run_ids: list[str]) -> None:
        """Put the runs this process held, unfinished, back on their queues."""
        sys_db = self.instance._sys_db
        internal = self.dbos._utils.INTERNAL_QUEUE_NAME
        for run_id in run_ids:
            # Bounded by time, not by tries: a busy SQLite file (other processes polling it)
            # refused a few quick tries in a row on a loaded machine.
            deadline = time.monotonic() + _STOP_TIMEOUT
            for attempt in itertools.count():
                try:
                    sys_db.reenqueue_for_recovery(run_id, [self.executor_id], internal)
                    break
                except Exception as exc:  # SQLite busy, a connection lost: try again
                    if time.monotonic() > deadline:  # left pending: restart or recover()
                        _log.warning("durable run %r not handed back: %r", run_id, exc)
                        break
                    time.sleep(min(0.05 * 2**attempt, 0.5))

    async def hand_back(self, run_id: str) -> None:
        """Put one run this process dequeued but does not serve back on its queue."""
        await anyio.to_thread.run_sync(self._hand_back, [run_id])

    async def _stop_runs(self) -> None:
        """Cancel the runs this process holds (they are handed back next).

        DBOS runs them on this event loop, where its shutdown would not stop them; left
        running, they would write to a closed engine.
        """
        tasks = [t for t in self.instance._workflow_tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_STOP_TIMEOUT)

    def register(self, name: str, worker: Worker[Any]) -> None:
        """Make `name`'s runs run with `worker` in this process.

        Raises:
            ConfigurationError: Another DurableWorker of this name is entered here.
        """
        if name in self.workers:
            raise ConfigurationError(
                f"a DurableWorker named {name!r} is already running in this process"
            )
        self.workers[name] = worker

    def unregister(self, name: str) -> None:
        """Forget `name` (its DurableWorker left)."""
        self.workers.pop(name, None)


engine = Engine()
"""The engine of this process."""


def unusable(url: str, exc: BaseException) -> ConfigurationError:
    """The error for a system database that cannot be used (unreachable, not a database...)."""
    if isinstance(exc, ConfigurationError):
        return exc
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ConfigurationError(
        f"the durable runs' system database {redacted(url)} cannot be used: "
        f"{type(exc).__name__}: {detail}"
    )


async def _workflow(name: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The workflow of every durable run: one Worker run, waiting out each pause."""
    dbos = engine.dbos.DBOS
    run_id: str = dbos.workflow_id
    parent = engine.workers.get(name)
    if parent is None:  # its name left this process after DBOS dequeued it: not ours to run
        await engine.hand_back(run_id)
        raise asyncio.CancelledError
    worker = parent.fork()
    attempt = Attempt(run_id, uuid.uuid4().hex, dbos, anyio.Lock())
    # A tool started early runs inside the request's step, where DBOS records nothing: it
    # would run again on recovery. In a durable run every call is a step of its own.
    cfg = worker._cfg  # pyright: ignore[reportPrivateUsage]
    session = run_session(cfg.session, attempt)
    worker._cfg = replace(cfg, early_tool_start=False, session=session)  # pyright: ignore[reportPrivateUsage]
    token = current().set(attempt)
    followers = parent._followers  # pyright: ignore[reportPrivateUsage]
    engine.running[run_id] = worker
    followers.add(worker)  # parent.cancel() reaches this run
    try:
        await dbos.set_event_async(STATUS, "running")
        result = await worker.run([_message(m, run_id) for m in messages])
        waits = itertools.count()
        while result.status is RunStatus.PAUSED and result.state is not None:
            result = await _paused(dbos, worker, result.state, run_id, waits)
        result.messages = list(worker.history)  # the whole run, its pauses included
        if result.status is RunStatus.CANCELLED and run_id in engine.reasons:
            result.reason = engine.reasons[run_id]
        await dbos.set_event_async(STATUS, result.status.value)
        await dbos.close_stream_async(PROGRESS)
        return run_record(result, cfg.output)
    finally:
        followers.discard(worker)
        engine.running.pop(run_id, None)
        engine.reasons.pop(run_id, None)
        current().reset(token)


def _message(data: object, run_id: str) -> Message:
    try:
        return Message.from_dict(data)
    except Exception as exc:
        raise RecordError(
            f"its input message is malformed ({exc!r})", run_id=run_id, step="input"
        ) from None


async def _paused(
    dbos: Any, worker: Worker[Any], state: PauseState, run_id: str, waits: Iterator[int]
) -> RunResult[Any]:
    """Wait for decisions on a paused run, then resume it (waiting again on refused ones)."""
    await dbos.write_stream_async(PROGRESS, {"kind": "paused", "reason": state.reason})
    refused: str | None = None
    while True:
        if run_id in engine.reasons:  # cancelled here while it was not waiting yet
            return await _discarded(worker, state, engine.reasons[run_id])
        wait = next(waits)
        await dbos.set_event_async(PAUSE, {"wait": wait, "state": state.to_dict()})
        await dbos.set_event_async(STATUS, "paused")
        if refused is not None:  # said once the run waits again: paused() then finds it
            await dbos.write_stream_async(PROGRESS, {"kind": "refused", "error": refused})
        message = await _decision(dbos, wait, run_id)
        await dbos.set_event_async(PAUSE, None)
        await dbos.set_event_async(STATUS, "running")
        cancel = message.get("cancel")
        if isinstance(cancel, str):
            return await _discarded(worker, state, cancel)
        try:
            return await worker.resume(state, decisions=_decisions(message, run_id))
        except PauseStateError as exc:  # decisions that do not fit: the run waits for others
            refused = str(exc)


def _decisions(message: dict[str, Any], run_id: str) -> Any:
    try:
        return decisions_from(message.get("decisions"))
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(
            f"its decision is malformed ({exc!r})", run_id=run_id, step="decision"
        ) from None


async def _discarded(worker: Worker[Any], state: PauseState, reason: str) -> RunResult[Any]:
    """End a paused run CANCELLED: each call that never started gets an error result.

    In a session, as a turn of its own: the results are appended and the session's pause
    (this run's) cleared, so the next run on the session is not refused as paused. A
    session that no longer holds the run's pause (cleared meanwhile) is left as it is: the
    run's whole history would otherwise be appended to it.
    """

    async def discard(record: SessionRecord | None = None) -> RunResult[Any]:
        if record is not None and (
            record.pause is None or len(record.messages) != len(state.history)
        ):
            raise _Dropped  # before the history is touched: in_session appends nothing
        await worker.discard_pause(reason, state=state)
        return RunResult(
            RunStatus.CANCELLED,
            usage=state.usage,
            requests=state.requests,
            reason=reason,
            request_usage=list(state.request_usage),
        )

    session = worker._cfg.session  # pyright: ignore[reportPrivateUsage]
    if session is None:
        return await discard()
    try:
        return await in_session(session, worker.history, discard)
    except _Dropped:
        return await discard()


class _Dropped(Exception):
    """The session no longer holds a cancelled run's pause (it was cleared)."""


async def _decision(dbos: Any, wait: int, run_id: str) -> dict[str, Any]:
    """The answer to the run's wait `wait`: decisions, or a cancel (meant for it or any wait).

    An answer for an earlier wait (a cancel sent while a decision was being taken) is passed
    over.
    """
    while True:
        try:
            message = await dbos.recv_async(DECISION, timeout_seconds=_DECISION_POLL)
        except RecordError as exc:
            raise exc.at(run_id, "decision") from None
        if message is None:
            continue
        answer = as_dict(message)
        meant = answer.get("wait")
        if not answer or ("cancel" not in answer and "decisions" not in answer):
            raise RecordError("its decision message is malformed", run_id=run_id, step="decision")
        if (meant is None and "cancel" in answer) or meant == wait:
            return answer
