"""Review probe (issue 34): a session used by a DurableWorker, on SQLite."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from llm_worker import Decision, RunStatus, ToolUsePart, Worker, tool
from llm_worker.durable import DurableWorker
from llm_worker.sessions import SqliteSession
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse

pytestmark = pytest.mark.anyio


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


async def test_a_durable_run_loads_its_session_before_appends_after_and_keeps_the_pause(
    tmp_path: Path,
) -> None:
    seen: list[ScriptedRequest] = []

    def answer(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(call)
        if call.index == 0:
            return ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 5})])
        return ScriptedResponse.text(f"answer {call.index}")

    async with (
        SqliteSession("chat", tmp_path / "sessions.db") as session,
        ScriptedModelServer("anthropic", answer) as server,
        server.client() as client,
    ):
        worker = Worker(client, tools=[pay], session=session)
        durable = DurableWorker(worker, name="s", database_url=f"sqlite:///{tmp_path / 'r.db'}")
        with anyio.fail_after(60):
            async with durable:
                run_id = await durable.start("pay 5", run_id="one")
                state = await durable.paused(run_id)
                assert state is not None
                kept = await session.pause_state()  # the pause is in the session too
                assert kept is not None and [p.call.id for p in kept.pending] == ["p1"]
                await durable.decide(run_id, {"p1": Decision.approve()})
                first = await durable.result(run_id)
                second = await durable.result(await durable.start("again", run_id="two"))
        stored = await session.messages()
        assert await session.pause_state() is None  # resumed: the session's pause is gone
    assert first.status is second.status is RunStatus.FINISHED
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"] * 1 + [
        "user",
        "assistant",
    ]
    assert stored[-2].text == "again" and stored[-1].text == "answer 2"
    assert stored[2].tool_results[0].content == "paid 5"
    # The second run went on from the session's history, not from nothing.
    assert [m.role for m in seen[-1].request.messages][:4] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
