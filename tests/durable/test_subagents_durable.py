"""A durable run tree: a sub-agent's pause survives SIGKILL and a second process resumes it.

The root's tool is a sub-agent whose `pay` needs an approval. The first process runs the tree
to its pause (recorded with the tree's state on the root's tool step) and is killed; the
second recovers the workflow, which pauses again from its records (no request is sent again),
approves the sub-agent's call by its id, and the tree finishes: `pay` ran once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scenario import Model, child

from llm_worker import RunStatus
from llm_worker.durable._records import run_from
from llm_worker.testing import ScriptedModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]  # real processes, a busy CI


async def test_a_paused_tree_killed_is_resumed_by_a_second_process(
    database_url: str, tmp_path: Path
) -> None:
    model = Model()
    base = {"name": "tree", "log": str(tmp_path / "log"), "nested": True}
    async with ScriptedModelServer("anthropic", [model] * 10) as server:
        base |= {"url": database_url, "model_url": server.base_url}
        async with child(base | {"runs": ["nest-1"], "report_pause": "nest-1"}) as one:
            await one.until("paused", within=90)
            one.kill()  # after the pause: the tree's state is all that is left
        assert model.seen == [("nest-1", 0), ("paynest-1", 0)]
        async with child(base | {"decide": "nest-1", "wait": ["nest-1"]}) as two:
            done = await two.until("run", within=90)
    result = run_from(done["result"])
    assert result.status is RunStatus.FINISHED
    assert result.text == "done nest-1"
    assert (tmp_path / "log").read_text() == "pay 5\n"  # the sub-agent's side effect, once
    # nothing that finished before the kill was asked again; the rest once each
    assert model.seen == [("nest-1", 0), ("paynest-1", 0), ("paynest-1", 1), ("nest-1", 1)]
    assert [c.path for c in result.children] == [("nest-1-d",)]
    assert result.usage.input_tokens == 4 * 10
