"""Review probes: a durable run's session crossed with a clear, a cancel and a refusal."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from test_durable_session_replay import answer, pay

from llm_worker import RunStatus, Worker
from llm_worker.durable import DurableWorker
from llm_worker.sessions import SqliteSession
from llm_worker.testing import ScriptedModelServer

pytestmark = pytest.mark.anyio


async def test_a_paused_run_cancelled_after_its_session_was_cleared_leaves_it_cleared(
    tmp_path: Path,
) -> None:
    """The cancel's not-run results are not appended to a session that dropped the run."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with (
        SqliteSession("chat", tmp_path / "sessions.db") as session,
        ScriptedModelServer("anthropic", answer) as server,
        server.client() as client,
    ):
        worker = Worker(client, tools=[pay], session=session)
        with anyio.fail_after(60):
            async with DurableWorker(worker, name="s", database_url=url) as durable:
                await durable.start("pay 5", run_id="one")
                assert await durable.paused("one") is not None
                await session.clear()  # the user starts over while the run waits
                await durable.cancel("one", "the user left")
                cancelled = await durable.result("one")
        stored = await session.messages()
        kept = await session.pause_state()
    assert cancelled.status is RunStatus.CANCELLED
    assert stored == [] and kept is None
