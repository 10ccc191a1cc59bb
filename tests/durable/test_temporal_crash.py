"""A run on Temporal survives SIGKILL: mid-stream, mid-tool, after a pause; two processes.

The child processes (temporal_child.py) run the Worker against a ScriptedModelServer in this
process, which counts the requests; the test kills a child at a known point (synchronised on
the model server receiving a request, on the tool writing to the child's stdout, or on the
child saying the run paused), and another process completes the run. Heartbeats of 1 s: a
killed process's step goes to another within about a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from scenario import Model, child

from llm_worker import Decision, RunStatus, Worker
from llm_worker.durable._records import run_from
from llm_worker.durable.temporal import TemporalWorker
from llm_worker.testing import ScriptedModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]  # real processes, a busy CI

CHILD = Path(__file__).with_name("temporal_child.py")


def config(
    client: Any, server: ScriptedModelServer[Any], tmp_path: Path, **more: Any
) -> dict[str, Any]:
    return {
        "target": client.service_client.config.target_host,
        "namespace": client.namespace,
        "model_url": server.base_url,
        "name": "crash",
        "log": str(tmp_path / "log"),
        **more,
    }


async def uninterrupted(tmp_path: Path) -> Any:
    """The same run in a plain Worker, never killed: what the recovered one must equal."""
    from child import tools

    log = tmp_path / "plain-log"
    async with ScriptedModelServer("anthropic", [Model()] * 3) as server, server.client() as c:
        worker = Worker(c, tools=tools({"log": str(log)}))
        with anyio.fail_after(30):
            return await worker.run("run-1")


async def test_a_run_killed_mid_stream_completes_after_a_restart_without_resending_a_step(
    temporal_client: Any, tmp_path: Path
) -> None:
    plain = await uninterrupted(tmp_path)
    model = Model(slow_step=1)
    async with ScriptedModelServer("anthropic", [model] * 10) as server:
        async with child(config(temporal_client, server, tmp_path, runs=["run-1"]), CHILD) as one:
            await one.until("ready")
            with anyio.fail_after(60):
                await model.event("run-1", 1).wait()  # the first tool's result was recorded
            one.kill()  # while the second answer streams
        async with child(config(temporal_client, server, tmp_path, wait=["run-1"]), CHILD) as two:
            done = await two.until("run", within=90)
    result = run_from(done["result"])
    assert result.status is RunStatus.FINISHED
    assert (result.text, result.requests) == (plain.text, plain.requests)
    assert [m.to_dict() for m in result.messages] == [m.to_dict() for m in plain.messages]
    assert (tmp_path / "log").read_text() == "run-1\n"  # the side effect ran once
    # finished requests were never sent again; the one cut mid-stream was
    assert model.seen == [("run-1", 0), ("run-1", 1), ("run-1", 1), ("run-1", 2)]


@pytest.mark.parametrize(
    ("effect", "lines", "interrupted"), [("side_effect", 1, True), ("idempotent", 2, False)]
)
async def test_two_processes_on_one_queue_a_call_whose_process_died_runs_again_only_if_safe(
    temporal_client: Any, tmp_path: Path, effect: str, lines: int, interrupted: bool
) -> None:
    model = Model()
    async with ScriptedModelServer("anthropic", [model] * 10) as server:
        common = config(temporal_client, server, tmp_path, effect=effect, hang="first")
        async with (
            child({**common, "executor": "a"}, CHILD) as a,
            child({**common, "executor": "b"}, CHILD) as b,
        ):
            await a.until("ready")
            await b.until("ready")
            async with server.client() as c:
                durable = TemporalWorker(
                    Worker(c), name="crash", client=temporal_client, serve=False
                )
            async with durable:
                await durable.start("run-1", run_id="run-1")
                holder = await _first_tool(a, b)
                (a if holder == "a" else b).kill()  # the call never returns there
                with anyio.fail_after(90):
                    result = await durable.result("run-1")
    assert result.status is RunStatus.FINISHED
    assert (tmp_path / "log").read_text() == "run-1\n" * lines
    outcome = result.messages[2].tool_results[0]
    assert outcome.is_error is interrupted
    if interrupted:
        assert "may or may not have taken effect" in outcome.content
    assert model.seen.count(("run-1", 0)) == 1  # the answer that made the call was recorded


async def _first_tool(a: Any, b: Any) -> str:
    """Which child's tool wrote first (the one that holds the call)."""
    found: list[str] = []
    async with anyio.create_task_group() as group:

        async def watch(c: Any) -> None:
            said = await c.until("tool", within=60)
            found.append(said["executor"])
            group.cancel_scope.cancel()

        group.start_soon(watch, a)
        group.start_soon(watch, b)
    return found[0]


async def test_a_paused_run_whose_process_died_takes_a_decision_from_a_third_process(
    temporal_client: Any, tmp_path: Path
) -> None:
    model = Model()
    async with ScriptedModelServer("anthropic", [model] * 10) as server:
        async with child(config(temporal_client, server, tmp_path, paused="pay-1"), CHILD) as one:
            await one.until("paused")
            one.kill()
        async with child(config(temporal_client, server, tmp_path, wait=["pay-1"]), CHILD) as two:
            await two.until("ready")
            # this test's process is the third: it serves nothing and decides
            async with server.client() as c:
                durable = TemporalWorker(
                    Worker(c), name="crash", client=temporal_client, serve=False
                )
            async with durable:
                state = await durable.paused("pay-1")
                assert state is not None
                await durable.decide(
                    "pay-1", {p.call.id: Decision.approve() for p in state.pending}
                )
            done = await two.until("run", within=90)
    result = run_from(done["result"])
    assert result.text == "done pay-1"
    assert (tmp_path / "log").read_text() == "pay 5\n"
    assert model.seen == [("pay-1", 0), ("pay-1", 1)]  # the paused answer was not asked again
