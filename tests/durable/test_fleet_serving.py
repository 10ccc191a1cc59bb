"""Which process serves which runs: each its own names, a client none, a leaving one hands back.

Real child processes (child.py) on one system database, SQLite and PostgreSQL; the test process
starts runs and reads results as a client (`serve=False`), so it serves nothing itself.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import pytest
from child import tools
from scenario import Model, child

from llm_worker import Decision, RunStatus, Worker
from llm_worker.durable import DurableWorker
from llm_worker.testing import ScriptedModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]  # real processes, a busy CI


def client(c: Any, url: str, name: str, log: Path) -> DurableWorker:
    worker = Worker(c, tools=tools({"log": str(log)}))
    return DurableWorker(worker, name=name, database_url=url, serve=False, poll_interval=0.05)


async def _serving(url: str, server: ScriptedModelServer[Any], log: Path, **more: Any) -> Any:
    config = {"url": url, "model_url": server.base_url, "log": str(log), "serve": True}
    return child({**config, **more})


async def test_each_process_serves_only_the_names_it_entered(
    database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    ids = {name: [f"{name}-{i}" for i in range(4)] for name in ("alpha", "beta")}
    async with ScriptedModelServer("anthropic", [Model(steps=2)] * 40) as server:
        a_config = await _serving(database_url, server, log, name="alpha", executor="A")
        async with a_config as a:
            await a.until("ready")
            async with await _serving(database_url, server, log, name="beta", executor="B") as b:
                await b.until("ready")
                async with (
                    server.client() as c,
                    client(c, database_url, "alpha", log) as alpha,
                    client(c, database_url, "beta", log) as beta,
                ):
                    for name, durable in (("alpha", alpha), ("beta", beta)):
                        for run_id in ids[name]:
                            await durable.start(run_id, run_id=run_id)
                    with anyio.fail_after(60):
                        done = {r: await alpha.result(r) for r in ids["alpha"]}
                        done |= {r: await beta.result(r) for r in ids["beta"]}
                ran_by: dict[str, set[str]] = defaultdict(set)
                for reader in (a, b):  # the tool's lines: which process ran which run
                    for _ in range(4):
                        line = await reader.until("tool")
                        ran_by[line["executor"]].add(line["text"])
    assert {r: x.text for r, x in done.items()} == {r: f"done {r}" for v in ids.values() for r in v}
    assert ran_by == {"A": set(ids["alpha"]), "B": set(ids["beta"])}


async def test_a_client_takes_no_run(database_url: str, tmp_path: Path) -> None:
    log = tmp_path / "log"
    ids = [f"queued-{i}" for i in range(3)]
    async with ScriptedModelServer("anthropic", [Model(steps=2)] * 20) as server:
        # A serving process creates the database and leaves; the runs wait in the queue.
        async with await _serving(database_url, server, log, name="q", leave_after=[]) as s:
            await s.until("leaving")
            await s.process.wait()
        async with server.client() as c, client(c, database_url, "q", log) as here:
            for run_id in ids:
                await here.start(run_id, run_id=run_id)
            config = {"url": database_url, "model_url": server.base_url, "log": str(log)}
            async with child({**config, "name": "q", "client": True, "statuses": ids}) as d:
                seen = await d.until("statuses", within=60)
            assert seen["statuses"] == ["queued"] * 3  # the client entered, took nothing
            assert [await here.status(r) for r in ids] == ["queued"] * 3
            async with await _serving(database_url, server, log, name="q", executor="S") as s:
                await s.until("ready")
                with anyio.fail_after(60):
                    results = [await here.result(r) for r in ids]
    assert [r.text for r in results] == [f"done {r}" for r in ids]
    assert sorted(log.read_text().split()) == ids


async def test_a_serving_process_that_leaves_hands_its_runs_back(
    database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    ids = ["pay-a", "pay-b"]
    async with ScriptedModelServer("anthropic", [Model(steps=2)] * 20) as server:
        first = await _serving(database_url, server, log, name="pay", executor="A", leave_after=ids)
        async with first as a, server.client() as c:
            await a.until("ready")  # A created the database: the client can connect
            async with client(c, database_url, "pay", log) as here:
                for run_id in ids:
                    await here.start(run_id, run_id=run_id)
                # A holds both runs, paused; then it leaves cleanly, without deciding.
                await a.until("leaving", within=60)
                with anyio.fail_after(30):
                    assert await a.process.wait() == 0
                # Handed back: queued again (not pending under A's id), still waiting.
                access = here._runs  # pyright: ignore[reportPrivateUsage]
                assert [await access.workflow_status(r) for r in ids] == ["ENQUEUED"] * 2
                assert [await here.status(r) for r in ids] == ["paused"] * 2
                b_config = await _serving(database_url, server, log, name="pay", executor="B")
                async with b_config as b:
                    await b.until("ready")
                    for run_id in ids:
                        state = await here.paused(run_id)
                        assert state is not None
                        approve = {p.call.id: Decision.approve() for p in state.pending}
                        await here.decide(run_id, approve)
                    with anyio.fail_after(60):
                        results = [await here.result(r) for r in ids]
    assert [r.status for r in results] == [RunStatus.FINISHED] * 2
    assert log.read_text() == "pay 5\npay 5\n"
