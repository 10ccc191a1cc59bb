"""How a `DurableWorker` acts on runs: through this process's DBOS, or as a client only.

A serving `DurableWorker` acts through the DBOS it launched (which also runs the runs of its
name). One made with `serve=False` acts through a `DBOSClient`: it starts, reads, decides and
cancels runs, and never runs one (it launches no DBOS, dequeues nothing, recovers nothing),
so a process that only decides pauses takes no run and strands none when it leaves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import anyio

from llm_worker.durable._engine import (
    APP_NAME,
    DECISION,
    WORKFLOW,
    check_url,
    engine,
    redacted,
    unusable,
)
from llm_worker.durable._errors import RecordError
from llm_worker.durable._serializer import JsonSerializer
from llm_worker.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_worker.durable._store import Store

__all__ = ("Access", "ClientAccess", "ServedAccess")

_MISSING = (
    "the durable runs' system database {} cannot be used: it has no DBOS tables yet "
    "(a serving DurableWorker creates them; a client, serve=False, only uses them)"
)


class Access:
    """The operations on runs a `DurableWorker` needs, over DBOS or a DBOS client."""

    store: Store
    dbos: Any
    """The `dbos` module."""

    async def enqueue(
        self, queue: str, run_id: str, args: tuple[Any, ...], partition: str | None
    ) -> None:
        """Queue the workflow of a run under `run_id` (nothing when the id exists)."""
        raise NotImplementedError

    async def workflow_status(self, run_id: str) -> str | None:
        """DBOS's status of the run (PENDING, ENQUEUED, SUCCESS, ERROR, ...), None if unknown."""
        raise NotImplementedError

    async def result(self, run_id: str, poll: float) -> Any:
        """The run's recorded result, waiting for it (DBOS errors as DBOS raises them)."""
        raise NotImplementedError

    async def event(self, run_id: str, key: str, wait: float) -> Any:
        """The run's event `key`, waiting up to `wait` seconds for one."""
        raise NotImplementedError

    async def send(self, run_id: str, message: dict[str, Any], key: str | None = None) -> None:
        """Send `message` on the run's decision topic (once per `key`, when one is given)."""
        raise NotImplementedError

    async def cancel(self, run_id: str) -> None:
        """Cancel the run through DBOS."""
        raise NotImplementedError

    def stream(self, run_id: str, key: str, poll: float, idle: float) -> AsyncIterator[Any]:
        """The run's stream `key`."""
        raise NotImplementedError

    async def listed(self, queue: str, name: str, limit: int) -> list[str]:
        """Ids of the runs of `name`, the newest first (the queue's, and those recovered)."""
        found = await self._list(
            name=WORKFLOW,
            queue_name=[queue, self.dbos._utils.INTERNAL_QUEUE_NAME],
            limit=limit,
            sort_desc=True,
        )
        # A recovered run waits on DBOS's internal queue: its input says whose it is.
        return [str(w.workflow_id) for w in found if _input_name(w) == name]

    async def _list(self, **options: Any) -> list[Any]:
        raise NotImplementedError

    async def close(self) -> None:
        """Let go of the database."""


def _input_name(status: Any) -> object:
    """The name a listed run was started under: its workflow's first argument."""
    inputs = status.input
    args: object = getattr(inputs, "args", None) if inputs is not None else None
    if isinstance(inputs, dict):  # the serializer's shape of a workflow's inputs
        args = cast("dict[str, Any]", inputs).get("args")
    if isinstance(args, list | tuple) and args:
        return cast("list[object] | tuple[object, ...]", args)[0]
    return None


class ServedAccess(Access):
    """Through this process's launched DBOS."""

    def __init__(self, queue: Any) -> None:
        self.dbos = engine.dbos
        assert engine.store is not None
        self.store = engine.store
        self._queue = queue

    async def enqueue(
        self, queue: str, run_id: str, args: tuple[Any, ...], partition: str | None
    ) -> None:
        options: dict[str, Any] = {}
        if partition is not None:
            options["queue_partition_key"] = partition
        with self.dbos.SetWorkflowID(run_id), self.dbos.SetEnqueueOptions(**options):
            await self._queue.enqueue_async(engine.workflow, *args)

    async def workflow_status(self, run_id: str) -> str | None:
        found = await self.dbos.DBOS.get_workflow_status_async(run_id)
        return None if found is None else str(found.status)

    async def result(self, run_id: str, poll: float) -> Any:
        handle = await self.dbos.DBOS.retrieve_workflow_async(run_id)
        return await handle.get_result(polling_interval_sec=poll)

    async def event(self, run_id: str, key: str, wait: float) -> Any:
        return await self.dbos.DBOS.get_event_async(run_id, key, timeout_seconds=wait)

    async def send(self, run_id: str, message: dict[str, Any], key: str | None = None) -> None:
        await self.dbos.DBOS.send_async(run_id, message, DECISION, idempotency_key=key)

    async def cancel(self, run_id: str) -> None:
        await self.dbos.DBOS.cancel_workflow_async(run_id)

    async def _list(self, **options: Any) -> list[Any]:
        return await self.dbos.DBOS.list_workflows_async(**options)

    async def stream(self, run_id: str, key: str, poll: float, idle: float) -> AsyncIterator[Any]:
        async for entry in self.dbos.DBOS.read_stream_async(
            run_id, key, polling_interval_sec=poll, timeout_seconds=idle
        ):
            yield entry


class ClientAccess(Access):
    """Through a `DBOSClient`: no workflow runs in this process."""

    def __init__(self, url: str, app_version: str | None) -> None:
        self.dbos = engine.module()
        self._app_version = app_version
        self._url = url
        self._client: Any = None

    async def open(self) -> None:
        """Connect (the system database must exist: a serving process creates it).

        Raises:
            ConfigurationError: The database cannot be used.
        """
        import sqlalchemy as sa

        from llm_worker.durable._store import Store

        url = self._url

        def connect() -> Any:
            return self.dbos.DBOSClient(
                system_database_url=url,
                serializer=JsonSerializer(),
                application_name=APP_NAME,
                retry_connection_errors=False,
            )

        try:
            if (
                check_url(url) == "sqlite"
                and not await anyio.Path(url.partition(":///")[2]).is_file()
            ):
                raise ConfigurationError(_MISSING.format(redacted(url)))
            self._client = await anyio.to_thread.run_sync(connect)
            sys_db = self._client._sys_db
            inspector = sa.inspect(sys_db.engine)
            if not inspector.has_table("workflow_status", schema=sys_db.schema):
                raise ConfigurationError(_MISSING.format(redacted(url)))
            self.store = Store(sys_db.engine, sys_db.schema)
            await anyio.to_thread.run_sync(self.store.create)
        except Exception as exc:
            await self.close()
            raise unusable(url, exc) from exc

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await anyio.to_thread.run_sync(client.destroy)

    async def enqueue(
        self, queue: str, run_id: str, args: tuple[Any, ...], partition: str | None
    ) -> None:
        options: dict[str, Any] = {
            "queue_name": queue,
            "workflow_name": WORKFLOW,
            "workflow_id": run_id,
        }
        if partition is not None:
            options["queue_partition_key"] = partition
        if self._app_version is not None:
            options["app_version"] = self._app_version
        await self._client.enqueue_async(options, *args)

    async def workflow_status(self, run_id: str) -> str | None:
        try:
            handle = await self._client.retrieve_workflow_async(run_id)
        except self.dbos.error.DBOSNonExistentWorkflowError:
            return None
        return str((await handle.get_status()).status)

    async def result(self, run_id: str, poll: float) -> Any:
        handle = await self._client.retrieve_workflow_async(run_id)
        return await handle.get_result(polling_interval_sec=poll)

    async def event(self, run_id: str, key: str, wait: float) -> Any:
        return await self._client.get_event_async(run_id, key, timeout_seconds=wait)

    async def send(self, run_id: str, message: dict[str, Any], key: str | None = None) -> None:
        await self._client.send_async(run_id, message, DECISION, idempotency_key=key)

    async def cancel(self, run_id: str) -> None:
        await self._client.cancel_workflow_async(run_id)

    async def _list(self, **options: Any) -> list[Any]:
        return await self._client.list_workflows_async(**options)

    async def stream(self, run_id: str, key: str, poll: float, idle: float) -> AsyncIterator[Any]:
        async for entry in self._client.read_stream_async(
            run_id, key, polling_interval_sec=poll, timeout_seconds=idle
        ):
            yield entry


async def read(run_id: str, step: str, value: Any) -> Any:
    """`await value`, a refused record naming the run and `step`."""
    try:
        return await value
    except RecordError as exc:
        raise exc.at(run_id, step) from None
