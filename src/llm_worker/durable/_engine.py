"""The DBOS engine of this process and the one workflow every durable run is.

DBOS is one engine per process: the first `DurableWorker` to enter launches it on its system
database, the last to leave shuts it down. Every durable run is the workflow
`llm_worker.durable.run(name, input)`; `name` picks the `DurableWorker` (its Worker: tools,
hooks, settings) registered under it in the process that runs or recovers the run.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio

from llm_worker._extras import require_extra
from llm_worker._json import as_dict
from llm_worker.durable._records import decisions_from, run_record
from llm_worker.durable._steps import PROGRESS, Attempt, current
from llm_worker.errors import ConfigurationError, PauseStateError
from llm_worker.messages import Message
from llm_worker.state import RunResult, RunStatus

if TYPE_CHECKING:
    from llm_worker.state import PauseState
    from llm_worker.worker import Worker

__all__ = ("CANCEL", "DECISION", "PAUSE", "STATUS", "Engine", "engine")

WORKFLOW = "llm_worker.durable.run"
DECISION = "llm-worker.decision"
"""The DBOS message topic that carries decisions to a paused run."""
CANCEL = "llm-worker.cancel"
"""The key of a message on the decision topic that ends a paused run (its value: the reason)."""
PAUSE = "llm-worker.pause"
"""The DBOS event holding a paused run's `PauseState` (as a dict), None when not paused."""
STATUS = "llm-worker.status"
"""The DBOS event holding a run's status: running, paused, finished, cancelled."""
_WAIT_FOR_NAME = 60.0  # seconds a recovered run waits for its DurableWorker to be entered
_STOP_TIMEOUT = 10.0  # seconds for this process's runs to stop when the engine shuts down
_DECISION_POLL = 24 * 3600.0  # one recv per day: a pause may wait for weeks


@dataclass
class Engine:
    """This process's DBOS, shared by every `DurableWorker` in it."""

    dbos: Any = None
    """The `dbos` module, once imported."""
    workflow: Any = None
    """The registered workflow function."""
    url: str | None = None
    users: int = 0
    workers: dict[str, Worker] = field(default_factory=lambda: {})
    entered: dict[str, anyio.Event] = field(default_factory=lambda: {})
    running: dict[str, Worker] = field(default_factory=lambda: {})
    """The fork running each run this process holds, by run id."""
    reasons: dict[str, str] = field(default_factory=lambda: {})
    """Why `DurableWorker.cancel` cancelled a run running here, by run id."""

    def module(self) -> Any:
        """The `dbos` module (imported on first use), its workflow registered."""
        if self.dbos is None:
            dbos = require_extra("dbos", "dbos", feature="DurableWorker")
            self.workflow = dbos.DBOS.workflow(name=WORKFLOW)(_workflow)
            self.dbos = dbos
        return self.dbos

    def launch(self, url: str, config: Mapping[str, Any]) -> None:
        """Launch DBOS on `url`, or join the running one (which must use the same database).

        Raises:
            ConfigurationError: DBOS runs in this process on another database.
        """
        dbos = self.module()
        if self.users and self.url != url:
            raise ConfigurationError(
                f"DBOS already runs in this process on {_redacted(self.url)}; one process has "
                f"one system database, so every DurableWorker in it must use it "
                f"(not {_redacted(url)})"
            )
        if not self.users:
            dbos.DBOS(config={**config, "system_database_url": url})
            dbos.DBOS.launch()  # in the running loop: DBOS runs recovered runs on it
            self.url = url
        self.users += 1

    async def shutdown(self) -> None:
        """Leave the engine; the last user shuts DBOS down."""
        self.users -= 1
        if self.users == 0:
            self.url = None
            await self._stop_runs()
            await anyio.to_thread.run_sync(self.dbos.DBOS.destroy)

    async def _stop_runs(self) -> None:
        """Cancel the runs this process holds: they stay pending, and are recovered later.

        DBOS runs them on this event loop, where its shutdown would not stop them; left
        running, they would write to a closed engine.
        """
        tasks = [t for t in self.dbos._dbos._get_dbos_instance()._workflow_tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_STOP_TIMEOUT)

    def register(self, name: str, worker: Worker) -> None:
        """Make `name`'s runs run with `worker` in this process.

        Raises:
            ConfigurationError: Another DurableWorker of this name is entered here.
        """
        if name in self.workers:
            raise ConfigurationError(
                f"a DurableWorker named {name!r} is already running in this process"
            )
        self.workers[name] = worker
        self.entered.setdefault(name, anyio.Event()).set()

    def unregister(self, name: str) -> None:
        """Forget `name` (its DurableWorker left)."""
        self.workers.pop(name, None)
        self.entered.pop(name, None)

    async def worker(self, name: str) -> Worker:
        """The Worker registered under `name`, waiting a while for it (recovery starts first).

        Raises:
            ConfigurationError: No DurableWorker of this name was entered in time.
        """
        if name not in self.workers:
            with anyio.move_on_after(_WAIT_FOR_NAME):
                await self.entered.setdefault(name, anyio.Event()).wait()
        if name not in self.workers:
            raise ConfigurationError(
                f"this process holds a durable run of {name!r} but no DurableWorker of that name"
            )
        return self.workers[name]


engine = Engine()
"""The engine of this process."""


def _redacted(url: str | None) -> str:
    """A database URL without its password (URLs reach error messages)."""
    if url is None or "@" not in url:
        return repr(url)
    scheme, _, rest = url.partition("://")
    return repr(f"{scheme}://***@{rest.rpartition('@')[2]}")


async def _workflow(name: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The workflow of every durable run: one Worker run, waiting out each pause."""
    dbos = engine.dbos.DBOS
    parent = await engine.worker(name)
    worker = parent.fork()
    # A tool started early runs inside the request's step, where DBOS records nothing: it
    # would run again on recovery. In a durable run every call is a step of its own.
    cfg = worker._cfg  # pyright: ignore[reportPrivateUsage]
    worker._cfg = replace(cfg, early_tool_start=False)  # pyright: ignore[reportPrivateUsage]
    run_id: str = dbos.workflow_id
    attempt = Attempt(run_id, uuid.uuid4().hex, dbos, anyio.Lock())
    token = current().set(attempt)
    followers = parent._followers  # pyright: ignore[reportPrivateUsage]
    engine.running[run_id] = worker
    followers.add(worker)  # parent.cancel() reaches this run
    try:
        await dbos.set_event_async(STATUS, "running")
        result = await worker.run([Message.from_dict(m) for m in messages])
        while result.status is RunStatus.PAUSED and result.state is not None:
            result = await _paused(dbos, worker, result.state, run_id)
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


async def _paused(dbos: Any, worker: Worker, state: PauseState, run_id: str) -> RunResult:
    """Wait for decisions on a paused run, then resume it (waiting again on refused ones)."""
    await dbos.write_stream_async(PROGRESS, {"kind": "paused", "reason": state.reason})
    while True:
        if run_id in engine.reasons:  # cancelled here while it was not waiting yet
            return await _discarded(worker, state, engine.reasons[run_id])
        await dbos.set_event_async(PAUSE, state.to_dict())
        await dbos.set_event_async(STATUS, "paused")
        message = await _decision(dbos)
        await dbos.set_event_async(PAUSE, None)
        await dbos.set_event_async(STATUS, "running")
        cancel = message.get(CANCEL)
        if isinstance(cancel, str):  # a decision is an object: a call may have this id
            return await _discarded(worker, state, cancel)
        try:
            return await worker.resume(state, decisions=decisions_from(message))
        except PauseStateError as exc:  # decisions that do not fit: the run waits for others
            await dbos.write_stream_async(PROGRESS, {"kind": "refused", "error": str(exc)})


async def _discarded(worker: Worker, state: PauseState, reason: str) -> RunResult:
    """End a paused run CANCELLED: each call that never started gets an error result."""
    await worker.discard_pause(reason, state=state)
    return RunResult(
        RunStatus.CANCELLED,
        usage=state.usage,
        requests=state.requests,
        reason=reason,
        request_usage=list(state.request_usage),
    )


async def _decision(dbos: Any) -> dict[str, Any]:
    """The next message to a paused run: decisions by call id, or a `CANCEL`."""
    while True:
        message = await dbos.recv_async(DECISION, timeout_seconds=_DECISION_POLL)
        if message is not None:
            return as_dict(message)
