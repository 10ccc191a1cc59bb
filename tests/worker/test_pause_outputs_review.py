"""Review probes for stored outputs through the pause state (issue #28 item 13).

Two resumes of one state racing on one Worker while its stored outputs load (a hostile second
client), and a run of 1,000 turns whose every turn stores an output, paused at the end: the
state's JSON holds references, not contents, and resumes at a bounded cost.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from llm_worker import (
    ConfigurationError,
    FsBlobStore,
    PauseState,
    PauseStateError,
    RunStatus,
    ToolUsePart,
    Worker,
)
from llm_worker.hooks import ToolResultContext
from llm_worker.testing import ScriptedClient, ScriptedResponse
from worker.test_pause_outputs import LOG, approval, paused, read, send, worker

pytestmark = pytest.mark.anyio

TIMEOUT = 10.0


@pytest.mark.parametrize("second", ["resume", "discard"])
async def test_a_second_resume_racing_on_one_worker_is_refused(tmp_path: Path, second: str) -> None:
    # Each awaits its stored outputs from the blob store before it starts: the second,
    # ready after the first began, must find the Worker busy, not run the batch again.
    state = PauseState.from_json((await paused(tmp_path, "log")).to_json())
    sent: list[str] = []

    def count_send(ctx: ToolResultContext) -> None:
        if ctx.call.name == "send":
            sent.append(ctx.call.id)

    fresh = worker(ScriptedClient([ScriptedResponse.text("done")] * 2), FsBlobStore(tmp_path))
    fresh.add_after_tool_call_hook(count_send)
    outcomes: list[object] = []

    async def resume() -> None:
        try:
            outcomes.append((await fresh.resume(state)).status)
        except (ConfigurationError, PauseStateError) as exc:  # busy, or resumed already
            outcomes.append(exc)

    async def discard() -> None:
        try:
            await fresh.discard_pause("moved on", state=state)
            outcomes.append("discarded")
        except (ConfigurationError, PauseStateError) as exc:
            outcomes.append(exc)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            group.start_soon(resume)
            group.start_soon(resume if second == "resume" else discard)
    # Whichever read its outputs first goes on (the discard may win: s1 then reads "not run");
    # the other is refused. Either way s1 has one result, never two.
    assert sent == ["s1"], outcomes
    assert RunStatus.FINISHED in outcomes or "discarded" in outcomes, outcomes
    refused = (ConfigurationError, PauseStateError)
    assert len([o for o in outcomes if isinstance(o, refused)]) == 1, outcomes


@pytest.mark.slow  # ~40 s: every request walks the whole history (inherent to a chat)
async def test_a_thousand_turns_of_stored_outputs_pause_small_and_resume_fast(
    tmp_path: Path,
) -> None:
    turns = [ScriptedResponse([ToolUsePart(f"r{n}", "read", {"what": "log"})]) for n in range(1000)]
    last = ScriptedResponse(
        [ToolUsePart("r-last", "read", {"what": "log"}), ToolUsePart("s1", "send", {"to": "ana"})]
    )
    store = FsBlobStore(tmp_path)
    long = Worker(
        ScriptedClient([*turns, last]),
        tools=[read, send],
        blob_store=store,
        early_tool_start=True,
        max_requests=2000,
    )
    long.add_before_tool_call_hook(approval)
    with anyio.fail_after(120):
        result = await long.run("go")
    assert result.status is RunStatus.PAUSED, result
    assert result.state is not None
    saved = result.state.to_json()
    # 1,001 stored outputs of 18 kB each: references only (the content would be 18 MB).
    assert "line 00150" in LOG and "line 00150" not in saved
    assert len(saved) < 1001 * 1500, len(saved)
    fresh = Worker(
        ScriptedClient([ScriptedResponse.text("done")]),
        tools=[read, send],
        blob_store=store,
        max_requests=2000,
    )
    started = time.perf_counter()
    with anyio.fail_after(60):
        done = await fresh.resume(PauseState.from_json(saved))
    assert done.status is RunStatus.FINISHED
    assert time.perf_counter() - started < 10


async def test_discarding_a_state_this_worker_resumed_is_refused(tmp_path: Path) -> None:
    # Its calls ran: a discard would roll the history back and tell the model they never did.
    state = await paused(tmp_path, "log")
    fresh = worker(ScriptedClient([ScriptedResponse.text("done")]), FsBlobStore(tmp_path))
    with anyio.fail_after(TIMEOUT):
        assert (await fresh.resume(state)).status is RunStatus.FINISHED
    history = list(fresh.history)
    with anyio.fail_after(TIMEOUT), pytest.raises(PauseStateError, match="already resumed"):
        await fresh.discard_pause("moved on", state=state)
    assert fresh.history == history
