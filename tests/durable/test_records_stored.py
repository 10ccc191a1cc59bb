"""What the system database holds is JSON, and a row llm-worker did not write is refused.

A run pauses (its first answer recorded), its process leaves (the run goes back to the queue),
the answer's row is tampered with in the database, and a process takes the run again: the
replay refuses the row with a `RecordError` naming the run and step. A pickle is never
unpickled (its payload would create a file). Also: what `status()` says of a failed run.
"""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from child import tools
from scenario import Model

from llm_worker import Decision, RunStatus, Worker
from llm_worker.durable import DurableWorker, RecordError, RunFailedError
from llm_worker.durable._serializer import NAME
from llm_worker.hooks import ToolResultContext
from llm_worker.testing import ScriptedModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]  # real processes, a busy CI


class Payload:
    """Unpickling it creates a file: the proof that a pickle ran."""

    def __init__(self, canary: Path) -> None:
        self.canary = canary

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.canary,))


def _engine(url: str) -> tuple[sa.Engine, str | None]:
    if url.startswith("sqlite"):
        return sa.create_engine(url), None
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://")), "dbos"


def tamper(url: str, change: Callable[[str], tuple[str, str]]) -> list[str]:
    """Rewrite the recorded answers of the run (output and its format); their step names."""
    engine, schema = _engine(url)
    table = sa.Table("operation_outputs", sa.MetaData(schema=schema), autoload_with=engine)
    with engine.begin() as c:
        rows = c.execute(
            sa.select(table.c.function_id, table.c.function_name, table.c.output).where(
                table.c.function_name.like("llm-worker request%")
            )
        ).all()
        for function_id, _, output in rows:
            text, form = change(str(output))
            c.execute(
                sa.update(table)
                .where(table.c.function_id == function_id)
                .values(output=text, serialization=form)
            )
    engine.dispose()
    return [str(r[1]) for r in rows]


def _pickled(canary: Path) -> Callable[[str], tuple[str, str]]:
    return lambda _: (base64.b64encode(pickle.dumps(Payload(canary))).decode(), "py_pickle")


def _edited(edit: Callable[[dict[str, Any]], None]) -> Callable[[str], tuple[str, str]]:
    def change(output: str) -> tuple[str, str]:
        envelope = json.loads(output)
        edit(envelope["json"])
        return json.dumps(envelope), NAME

    return change


def _no_origin(record: dict[str, Any]) -> None:
    del record["origin"]


def _huge_index(record: dict[str, Any]) -> None:
    record["stop"] = {"index": float("inf"), "type": "text", "reason": None}
    record["stop"] |= {"raw": None, "sequence": None, "message": None}


CHANGES: dict[str, tuple[Callable[[Path], Callable[[str], tuple[str, str]]], str]] = {
    "pickle": (_pickled, "pickle"),
    "not json": (lambda _: lambda _: ("{{{", NAME), "not JSON"),
    "foreign json": (lambda _: lambda _: ('{"x": 1}', NAME), "not a value llm-worker wrote"),
    "missing origin": (lambda _: _edited(_no_origin), "KeyError('origin')"),
    "overflowing index": (lambda _: _edited(_huge_index), "OverflowError"),
}


def durable(c: Any, url: str, log: Path) -> DurableWorker:
    worker = Worker(c, tools=tools({"log": str(log)}))
    return DurableWorker(worker, name="t", database_url=url, poll_interval=0.05)


@pytest.mark.parametrize("kind", list(CHANGES))
async def test_a_tampered_step_record_is_refused_naming_the_run_and_step(
    database_url: str, tmp_path: Path, kind: str
) -> None:
    canary = tmp_path / "canary"
    log = tmp_path / "log"
    make, says = CHANGES[kind]
    async with (
        ScriptedModelServer("anthropic", [Model(steps=2)] * 4) as server,
        server.client() as c,
    ):
        async with durable(c, database_url, log) as first:
            await first.start("pay-1", run_id="pay-1")
            assert await first.paused("pay-1") is not None
        steps = await anyio.to_thread.run_sync(tamper, database_url, make(canary))
        async with durable(c, database_url, log) as second:  # takes the handed-back run
            with anyio.fail_after(60), pytest.raises(RecordError) as caught:
                await second.result("pay-1")
            assert await second.status("pay-1") == "failed"
            with pytest.raises(RunFailedError, match="pay-1"):
                await second.paused("pay-1", wait=0)
            with pytest.raises(RunFailedError, match="pay-1"):
                await second.decide("pay-1", {"pay-1-p": Decision.approve()})
    assert steps == ["llm-worker request 1"]
    error = caught.value
    assert (error.run_id, error.step) == ("pay-1", "llm-worker request 1")
    assert says in str(error) and "pay-1" in str(error)
    assert not canary.exists()  # the pickle was never loaded
    assert not log.exists()  # nothing ran


async def test_a_run_that_fails_after_a_pause_says_failed_and_takes_no_decision(
    database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"

    async def explode(ctx: ToolResultContext) -> None:
        raise RuntimeError("the ledger is closed")

    async with (
        ScriptedModelServer("anthropic", [Model(steps=2)] * 4) as server,
        server.client() as c,
    ):
        worker = Worker(c, tools=tools({"log": str(log)}))
        worker.add_after_tool_call_hook(explode)
        runs = DurableWorker(worker, name="t", database_url=database_url, poll_interval=0.05)
        async with runs:
            await runs.start("pay-1", run_id="pay-1")
            state = await runs.paused("pay-1")
            assert state is not None and await runs.status("pay-1") == "paused"
            await runs.decide("pay-1", {p.call.id: Decision.approve() for p in state.pending})
            with anyio.fail_after(60), pytest.raises(Exception, match="the ledger is closed"):
                await runs.result("pay-1")
            assert await runs.status("pay-1") == "failed"
            with pytest.raises(RunFailedError):
                await runs.paused("pay-1", wait=0)
            with pytest.raises(RunFailedError):
                await runs.decide("pay-1", {state.pending[0].call.id: Decision.deny("no")})
    assert log.read_text() == "pay 5\n"


async def test_what_a_run_stores_is_json(database_url: str, tmp_path: Path) -> None:
    async with (
        ScriptedModelServer("anthropic", [Model(steps=2)] * 4) as server,
        server.client() as c,
        durable(c, database_url, tmp_path / "log") as runs,
    ):
        result = await runs.run("run-1", run_id="run-1")
    assert result.status is RunStatus.FINISHED
    engine, schema = _engine(database_url)
    meta = sa.MetaData(schema=schema)
    columns = {
        "workflow_status": ("inputs", "output"),
        "operation_outputs": ("output",),
        "workflow_events": ("value",),
        "streams": ("value",),
    }
    forms: set[str | None] = set()
    values: list[str] = []
    with engine.connect() as c:
        for name, kept in columns.items():
            table = sa.Table(name, meta, autoload_with=engine)
            query = sa.select(table.c.serialization, *(table.c[k] for k in kept))
            for form, *texts in c.execute(query):
                forms.add(form)
                values += [t for t in texts if t is not None]
    engine.dispose()
    assert "py_pickle" not in forms and NAME in forms
    assert len(values) >= 8  # input, result, answers, tool results, events, progress
    assert all(json.loads(v) is not None for v in values)  # every value is JSON text


def tamper_event(url: str, canary: Path) -> int:
    """Replace the run's pause event with a pickle; the rows changed."""
    engine, schema = _engine(url)
    table = sa.Table("workflow_events", sa.MetaData(schema=schema), autoload_with=engine)
    payload = base64.b64encode(pickle.dumps(Payload(canary))).decode()
    with engine.begin() as c:
        changed = c.execute(
            sa.update(table)
            .where(table.c.key == "llm-worker.pause")
            .values(value=payload, serialization="py_pickle")
        ).rowcount
    engine.dispose()
    return changed


async def test_a_tampered_pause_is_refused_by_any_reader(database_url: str, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    async with (
        ScriptedModelServer("anthropic", [Model(steps=2)] * 4) as server,
        server.client() as c,
        durable(c, database_url, tmp_path / "log") as runs,
    ):
        await runs.start("pay-1", run_id="pay-1")
        assert await runs.paused("pay-1") is not None
        assert await anyio.to_thread.run_sync(tamper_event, database_url, canary) == 1
        with pytest.raises(RecordError, match="pickle") as caught:
            await runs.paused("pay-1", wait=0)
        with pytest.raises(RecordError, match="pickle"):
            await runs.decide("pay-1", {"pay-1-p": Decision.approve()})
        await runs.cancel("pay-1")  # DBOS cancels it: nothing reads the pause
    assert (caught.value.run_id, caught.value.step) == ("pay-1", "pause")
    assert not canary.exists()
