"""A durable run survives SIGKILL: a second process recovers it, on SQLite and PostgreSQL.

The child processes run the Worker against a ScriptedModelServer in this process; the test
kills the first one at a known point (synchronised on the model server receiving a request,
or on the tool writing to the child's stdout) and a second one recovers the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from scenario import Model, child

from llm_worker import RunStatus, Worker
from llm_worker.durable._records import run_from
from llm_worker.testing import ScriptedModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]  # real processes, a busy CI


def config(
    url: str, server: ScriptedModelServer[Any], tmp_path: Path, **more: Any
) -> dict[str, Any]:
    return {
        "url": url,
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


async def test_a_run_killed_after_its_first_tool_is_recovered_without_repeating_a_step(
    database_url: str, tmp_path: Path
) -> None:
    plain = await uninterrupted(tmp_path)
    model = Model(slow_step=1)
    async with ScriptedModelServer("anthropic", [model] * 10) as server:
        first = config(database_url, server, tmp_path, runs=["run-1"])
        async with child(first) as one:
            await one.until("ready")
            with anyio.fail_after(60):
                await model.event("run-1", 1).wait()  # the first tool finished and was recorded
            one.kill()  # while the second answer streams
        async with child(config(database_url, server, tmp_path, wait=["run-1"])) as two:
            done = await two.until("run", within=90)
    result = run_from(done["result"])
    assert result.status is RunStatus.FINISHED
    assert (result.text, result.usage, result.requests) == (plain.text, plain.usage, plain.requests)
    assert [m.to_dict() for m in result.messages] == [m.to_dict() for m in plain.messages]
    assert (tmp_path / "log").read_text() == "run-1\n"  # the side effect ran once
    # finished steps were never requested again; the one cut mid-stream was
    assert model.seen == [("run-1", 0), ("run-1", 1), ("run-1", 1), ("run-1", 2)]


@pytest.mark.parametrize(
    ("effect", "lines", "interrupted"), [("side_effect", 1, True), ("idempotent", 2, False)]
)
async def test_a_call_running_when_the_process_died_runs_again_only_if_replay_safe(
    database_url: str, tmp_path: Path, effect: str, lines: int, interrupted: bool
) -> None:
    model = Model()
    async with ScriptedModelServer("anthropic", [model] * 10) as server:
        first = config(database_url, server, tmp_path, runs=["run-1"], effect=effect, hang=True)
        async with child(first) as one:
            await one.until("tool")  # the line is written; the call never returns
            one.kill()
        second = config(database_url, server, tmp_path, wait=["run-1"], effect=effect)
        async with child(second) as two:
            done = await two.until("run", within=90)
    result = run_from(done["result"])
    assert result.status is RunStatus.FINISHED
    assert (tmp_path / "log").read_text() == "run-1\n" * lines
    outcome = result.messages[2].tool_results[0]
    assert outcome.is_error is interrupted
    if interrupted:
        assert "interrupted" in outcome.content
        assert "may or may not have taken effect" in outcome.content
    assert model.seen.count(("run-1", 0)) == 1  # the answer that made the call was recorded
