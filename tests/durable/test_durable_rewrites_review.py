"""Review probe: a durable run paused after a hook's rewrite (issue #28 item 10, durable side).

A sanitizing hook runs before the pausing one; the pause travels through the system database
as JSON. The state read back (`paused`, what an approving person sees) holds the rewrite as
`PendingCall.arguments`, and `decide` with `Decision.approve()` runs exactly that — once —
while the model's call in the history stays as it was sent.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from llm_worker import Decision, RunStatus, ToolUsePart, Worker, tool
from llm_worker.durable import DurableWorker
from llm_worker.events import UsageEvent
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 60.0
USAGE = UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15)
RAN: list[str] = []


@tool(effect="side_effect")
def shell(cmd: str) -> str:
    """Run a command."""
    RAN.append(cmd)
    return f"ran {cmd}"


def sanitize(ctx: ToolCallContext) -> None:
    ctx.call.input["cmd"] = ctx.call.input["cmd"].replace(" --force", "") + " #audited"


def approval(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed else Pause("a person approves each command")


async def test_a_durable_approval_runs_the_rewrite_the_person_saw(tmp_path: Path) -> None:
    RAN.clear()
    script = [
        ScriptedResponse([ToolUsePart("c1", "shell", {"cmd": "rm -r x --force"})], usage=USAGE),
        ScriptedResponse.text("Cleaned.", usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        worker = Worker(c, tools=[shell])
        worker.add_before_tool_call_hook(sanitize)
        worker.add_before_tool_call_hook(approval)
        database = f"sqlite:///{tmp_path / 'runs.sqlite'}"
        durable = DurableWorker(worker, name="rw", database_url=database)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Clean up", run_id="rw-1")
                state = await durable.paused(run_id)
                assert state is not None
                (pending,) = state.pending
                assert pending.call.input == {"cmd": "rm -r x --force"}
                assert pending.arguments == {"cmd": "rm -r x #audited"}
                await durable.decide(run_id, {"c1": Decision.approve()})
                result = await durable.result(run_id)
    assert result.status is RunStatus.FINISHED
    assert RAN == ["rm -r x #audited"]
    assert result.messages[1].tool_uses[0].input == {"cmd": "rm -r x --force"}
