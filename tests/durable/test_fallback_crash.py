"""A durable run on a FallbackClient, killed after it fell over, recovered without paying twice.

The first client (Anthropic wire) answers every request with 529; the second (Gemini wire)
answers. The child process is killed while the second answer streams; a second process
recovers the run: the answer recorded before the kill is not requested again from either
client, and the side-effecting tool does not run again.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from scenario import Model, child

from llm_worker import RunStatus, ToolUsePart
from llm_worker.durable._records import run_from
from llm_worker.testing import ScriptedModelServer, WireResponse, WireServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]  # real processes, a busy CI


def _overloaded(_: object) -> WireResponse:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return WireResponse(body, status=529, content_type="application/json")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_run_killed_after_falling_over_repeats_no_paid_request(
    database_url: str, tmp_path: Path
) -> None:
    model = Model(slow_step=1)
    async with (
        WireServer(handler=_overloaded) as down,
        ScriptedModelServer("gemini", [model] * 10) as spare,
    ):
        config = {
            "url": database_url,
            "model_url": down.base_url,
            "fallback_url": spare.base_url,
            "name": "fallback-crash",
            "log": str(tmp_path / "log"),
        }
        async with child({**config, "runs": ["run-1"]}) as one:
            await one.until("ready")
            with anyio.fail_after(60):
                await model.event("run-1", 1).wait()  # the first tool ran and was recorded
            one.kill()  # while the second answer streams from the fallback client
        async with child({**config, "wait": ["run-1"]}) as two:
            done = await two.until("run", within=90)
    result = run_from(done["result"])
    assert result.status is RunStatus.FINISHED
    assert result.text == "done run-1"
    assert (tmp_path / "log").read_text() == "run-1\n"  # the side effect ran once
    # The answer recorded before the kill was never requested again; the one cut was.
    assert model.seen == [("run-1", 0), ("run-1", 1), ("run-1", 1), ("run-1", 2)]
    # Each request tried the first client once (529, no retries) before falling over.
    assert len(down.requests) == len(model.seen)
    assert result.requests == 3
    calls = [p for m in result.messages for p in m.content if isinstance(p, ToolUsePart)]
    assert [c.name for c in calls] == ["append_line", "read_log"]
