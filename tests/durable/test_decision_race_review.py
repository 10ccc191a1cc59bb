"""Review probes: an answer whose process died between its claim and its send is not lost.

A decision is claimed (its row inserted) and then sent; a decider killed in between left the
pause answered but the run never told. The next answer to that pause (a second decider, a
cancel) sends the kept answer again, keyed by the wait (DBOS delivers it once), and is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from child import tools
from scenario import Model

from llm_worker import Decision, RunStatus, Worker
from llm_worker.durable import DecisionConflictError, DurableWorker
from llm_worker.durable._records import decisions_record
from llm_worker.testing import ScriptedModelServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.mark.parametrize("then", ["decide", "cancel"])
async def test_a_claimed_but_unsent_decision_is_applied_once_by_the_next_answer(
    database_url: str, tmp_path: Path, then: str
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
            # What a decider killed right after its claim left: the row, no message.
            store = runs._runs.store  # pyright: ignore[reportPrivateUsage]
            message = {"wait": 0, "decisions": decisions_record({call: Decision.approve()})}
            assert store.claim("pay-1", 0, "decision", json.dumps(message))
            if then == "decide":
                with pytest.raises(DecisionConflictError, match="by a decision"):
                    await runs.decide("pay-1", {call: Decision.deny("too late")})
                with pytest.raises(DecisionConflictError):  # again: still delivered once
                    await runs.decide("pay-1", {call: Decision.deny("again")})
            else:  # from a client process: lost to the kept decision, which it delivers
                other = DurableWorker(worker, name="race", database_url=database_url, serve=False)
                async with other:
                    await other.cancel("pay-1", "never mind")
            with anyio.fail_after(60):
                result = await runs.result("pay-1")
    assert result.status is RunStatus.FINISHED
    [outcome] = result.messages[2].tool_results
    assert (outcome.is_error, outcome.content) == (False, "paid 5")
    assert log.read_text() == "pay 5\n"  # applied once
