"""The seeded fleet-crash campaign: two serving processes, kills at random points, both databases.

Each round starts a few runs (each: a side-effecting call, a read-only call, an answer) on a
fleet of two processes sharing one system database, kills one of them at a random request
count (seeded), restarts it with its executor id (it waits out its own lease, then recovers
its runs), and so on; then every run must have finished with its own answer, no side effect
may have run twice, and each ran once unless its process died in the middle of it (then the
run was told the call was interrupted).

CI runs one round per database. The full campaign: `LLM_WORKER_CAMPAIGN_ROUNDS=50` (and
`LLM_WORKER_CAMPAIGN_SEED` to start from another seed).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from child import tools
from scenario import Child, Model, child

from llm_worker import RunResult, RunStatus, Worker
from llm_worker.durable import DurableWorker
from llm_worker.testing import ScriptedModelServer

pytestmark = pytest.mark.anyio

ROUNDS = int(os.environ.get("LLM_WORKER_CAMPAIGN_ROUNDS", "1"))
SEED = int(os.environ.get("LLM_WORKER_CAMPAIGN_SEED", "0"))


async def _start(stack: AsyncExitStack, config: dict[str, Any], executor: str) -> Child:
    process = await stack.enter_async_context(child({**config, "executor": executor}))
    await process.until("ready")
    return process


async def _round(url: str, seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    ids = [f"s{seed}-{i}" for i in range(rng.randint(3, 6))]
    kills = rng.randint(1, 3)
    log = tmp_path / f"log-{seed}"
    model = Model(steps=3)
    async with ScriptedModelServer("anthropic", [model] * (10 * len(ids))) as server:
        config = {"url": url, "model_url": server.base_url, "name": "camp", "log": str(log)}
        config |= {"serve": True, "worker_concurrency": 2, "lease": 1.0}
        async with AsyncExitStack() as stack:
            fleet = {e: await _start(stack, config, e) for e in ("A", "B")}
            async with server.client() as c:
                worker = Worker(c, tools=tools({"log": str(log)}))
                here = DurableWorker(worker, name="camp", database_url=url, serve=False)
                async with here:
                    for run_id in ids:
                        await here.start(run_id, run_id=run_id)
                    at = 0
                    for _ in range(kills):  # each at a random count of requests received
                        at += rng.randint(1, len(ids))
                        with anyio.fail_after(120):
                            await model.received(at).wait()
                        victim = rng.choice("AB")
                        fleet[victim].kill()
                        with anyio.fail_after(30):
                            await fleet[victim].process.wait()
                        fleet[victim] = await _start(stack, config, victim)
                    with anyio.fail_after(180):
                        results = {r: await here.result(r) for r in ids}
    _check(ids, results, log)


def _check(ids: list[str], results: dict[str, RunResult], log: Path) -> None:
    assert all(r.status is RunStatus.FINISHED for r in results.values())
    assert {i: r.text for i, r in results.items()} == {i: f"done {i}" for i in ids}
    lines = Counter(log.read_text().split()) if log.exists() else Counter[str]()
    cut = {i for i, r in results.items() if r.messages[2].tool_results[0].is_error}
    assert all("interrupted" in results[i].messages[2].tool_results[0].content for i in cut)
    assert set(lines) <= set(ids)
    assert all(lines[i] == 1 for i in ids if i not in cut)  # exactly once, unless cut
    assert all(lines[i] <= 1 for i in cut)  # never twice
    assert all(r.requests == 3 for r in results.values())  # one answer per step, no more


@pytest.mark.timeout(240 + 240 * ROUNDS)
async def test_a_fleet_survives_random_kills(database_url: str, tmp_path: Path) -> None:
    for seed in range(SEED, SEED + ROUNDS):
        await _round(database_url, seed, tmp_path)
