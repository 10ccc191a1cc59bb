"""Two processes decide one pause at once: exactly one decision is taken, the other is refused.

Fifty paused runs; two client processes (`serve=False`) are told at once to answer all of them,
and answer each concurrently after a seeded random delay of up to 250 ms (spread wider than the
latency of 50 decisions at once): one approves, one denies. For every run one of them wins
and the other gets `DecisionConflictError`, and the run did what the winner said.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from child import tools
from scenario import Model, child

from llm_worker import Decision, RunStatus, Worker
from llm_worker.durable import DecisionConflictError, DurableWorker
from llm_worker.testing import ScriptedModelServer

pytestmark = pytest.mark.anyio

RUNS = int(os.environ.get("LLM_WORKER_RACE_RUNS", "50"))


@pytest.mark.timeout(600)
async def test_two_simultaneous_decisions_on_one_pause_one_wins_one_is_refused(
    database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    ids = [f"pay-{i:02}" for i in range(RUNS)]
    async with (
        ScriptedModelServer("anthropic", [Model(steps=2)] * (2 * RUNS + 10)) as server,
        server.client() as c,
    ):
        worker = Worker(c, tools=tools({"log": str(log)}))
        runs = DurableWorker(worker, name="race", database_url=database_url, poll_interval=0.05)
        async with runs:
            config = {"url": database_url, "model_url": server.base_url, "name": "race"}
            config |= {"log": str(log), "client": True, "race": ids}
            async with (
                child({**config, "executor": "yes", "allow": True, "seed": 1}) as yes,
                child({**config, "executor": "no", "allow": False, "seed": 2}) as no,
            ):
                await yes.until("ready")
                await no.until("ready")
                for run_id in ids:
                    await runs.start(run_id, run_id=run_id)
                for run_id in ids:
                    assert await runs.paused(run_id) is not None
                # Every paused run gets both decisions at once; the runs race concurrently.
                await yes.tell("\n".join(ids))
                await no.tell("\n".join(ids))
                raced: dict[str, dict[str, bool]] = {"yes": {}, "no": {}}
                for name, decider in (("yes", yes), ("no", no)):
                    for _ in ids:
                        line = await decider.until("raced", within=120)
                        raced[name][line["raced"]] = line["won"]
            with anyio.fail_after(120):
                results = {run_id: await runs.result(run_id) for run_id in ids}
    assert raced["yes"].keys() == raced["no"].keys() == set(ids)
    assert all(raced["yes"][r] != raced["no"][r] for r in ids)  # exactly one winner each
    approved = {r for r in ids if raced["yes"][r]}
    assert 0 < len(approved) < RUNS or RUNS < 10  # both won some: the timings did race
    assert all(results[r].status is RunStatus.FINISHED for r in ids)
    for run_id, result in results.items():
        [outcome] = result.messages[2].tool_results
        if run_id in approved:
            assert (outcome.is_error, outcome.content) == (False, "paid 5")
        else:
            assert outcome.is_error and "no" in outcome.content  # the denier's reason
    pays = log.read_text().splitlines() if log.exists() else []
    assert len(pays) == len(approved)  # a denied payment never ran


async def test_a_decision_after_the_pause_was_answered_is_refused(
    database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    async with (
        ScriptedModelServer("anthropic", [Model(steps=2)] * 4) as server,
        server.client() as c,
    ):
        worker = Worker(c, tools=tools({"log": str(log)}))
        runs = DurableWorker(worker, name="race", database_url=database_url, poll_interval=0.05)
        async with runs:
            await runs.start("pay-1", run_id="pay-1")
            state = await runs.paused("pay-1")
            assert state is not None
            [call] = [p.call.id for p in state.pending]
            await runs.cancel("pay-1", "changed my mind")
            with pytest.raises(DecisionConflictError, match="by a cancel"):
                await runs.decide("pay-1", {call: Decision.approve()})
            with anyio.fail_after(60):
                result = await runs.result("pay-1")
    assert result.status is RunStatus.CANCELLED
    assert result.reason == "changed my mind"
    assert not log.exists()
