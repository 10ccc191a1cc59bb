"""Many processes on one database: a shared queue, a dead process's runs taken over, approvals
sent from another process."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import pytest
from child import tools
from scenario import Model, child

from llm_worker import RunResult, RunStatus, Worker
from llm_worker.durable import DurableWorker, ExecutorAliveError
from llm_worker.durable._records import run_from
from llm_worker.testing import ScriptedModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]  # real processes, a busy CI

RUNS = 20


async def test_two_processes_share_a_queue_and_one_takes_over_the_others_runs(
    postgres_server: str, tmp_path: Path
) -> None:
    url = f"{postgres_server}/fleet"
    log = tmp_path / "log"
    model = Model(steps=2)
    ids = [f"run-{i:02}" for i in range(RUNS)]
    async with (
        ScriptedModelServer("anthropic", [model] * (4 * RUNS)) as server,
        server.client() as c,
    ):
        other = {
            "url": url,
            "model_url": server.base_url,
            "name": "fleet",
            "log": str(log),
            "executor": "B",
            "serve": True,
            "worker_concurrency": 2,
        }
        async with child(other) as b:
            await b.until("ready")
            here = DurableWorker(
                Worker(c, tools=tools({"log": str(log)})),
                name="fleet",
                database_url=url,
                executor_id="A",
                app_version="test",
                worker_concurrency=2,
                poll_interval=0.05,
            )
            async with here:
                for run_id in ids:
                    await here.start(run_id, run_id=run_id)
                await b.until("tool")  # B is running runs: kill it mid-way
                with pytest.raises(ExecutorAliveError, match="'B'"):
                    await here.recover(["B"])  # alive: its runs are its own
                b.kill()
                with anyio.fail_after(30):
                    await b.process.wait()
                taken = await here.recover(["B"], wait=10)  # its lease ends within 2 s
                with anyio.fail_after(120):
                    results = {run_id: await here.result(run_id) for run_id in ids}
    assert taken  # B held runs when it died; A finished them
    assert all(r.status is RunStatus.FINISHED for r in results.values())
    assert {run_id: r.text for run_id, r in results.items()} == {i: f"done {i}" for i in ids}
    lines = Counter(log.read_text().split())
    cut = {i for i, r in results.items() if r.messages[2].tool_results[0].is_error}
    assert all("interrupted" in results[i].messages[2].tool_results[0].content for i in cut)
    # A side effect never ran twice; it ran exactly once unless B died in the middle of it
    # (then the run was told it was interrupted, and it may or may not have taken effect).
    assert set(lines) <= set(ids)
    assert all(lines[i] == 1 for i in ids if i not in cut)
    assert all(lines[i] <= 1 for i in cut)


async def _pay_run(database_url: str, log: Path, model: Model, other: dict[str, str]) -> RunResult:
    """Run `pay-1` in one process while another (its `other` settings) acts on its pause."""
    async with ScriptedModelServer("anthropic", [model] * 4) as server:
        config = {"url": database_url, "model_url": server.base_url, "name": "approve"}
        config["log"] = str(log)
        async with child({**config, "runs": ["pay-1"], "executor": "A"}) as a:
            await a.until("ready")
            async with child({**config, **other, "executor": "B"}) as b:
                await b.until("decided" if "decide" in other else "cancelled", within=90)
            done = await a.until("run", within=90)
    return run_from(done["result"])


async def test_a_pause_in_one_process_is_decided_from_another(
    database_url: str, tmp_path: Path
) -> None:
    model = Model(steps=2)
    result = await _pay_run(database_url, tmp_path / "log", model, {"decide": "pay-1"})
    assert result.status is RunStatus.FINISHED
    assert result.text == "done pay-1"
    assert (tmp_path / "log").read_text() == "pay 5\n"
    assert model.seen == [("pay-1", 0), ("pay-1", 1)]


async def test_a_pause_in_one_process_is_cancelled_from_another(
    database_url: str, tmp_path: Path
) -> None:
    model = Model(steps=2)
    result = await _pay_run(database_url, tmp_path / "log", model, {"cancel": "pay-1"})
    assert result.status is RunStatus.CANCELLED
    assert result.reason == "cancelled from another process"
    [never] = result.messages[-1].tool_results
    assert never.is_error and "cancelled from another process" in never.content
    assert not (tmp_path / "log").exists()  # the payment never ran
    assert model.seen == [("pay-1", 0)]
