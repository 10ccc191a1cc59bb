"""Review probe (issue 32): a window that shrinks (`register_model` again) after a compaction
that could not get under target.

Such a compaction waits for "the window" before compacting again; it waited for the window it
was made under, so once the model's window was registered smaller, requests passed it.
"""

from __future__ import annotations

import anyio
import pytest

from llm_worker import ContextPolicy, MemoryBlobStore, OutputPolicy, RunStatus, Worker
from llm_worker.messages import ToolUsePart
from llm_worker.models import register_model, unregister_model
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from llm_worker.testing._script import prompt_tokens
from support.long_runs import WINDOW, pairs_valid, read

pytestmark = pytest.mark.anyio

SYSTEM = "You are a careful reader. " * 1_600  # ~0.65 of WINDOW: over target, under trigger
SMALLER = WINDOW * 9 // 10
MODEL = "scripted:review-shrinking"


def reader(turns: int):
    def step(ask: ScriptedRequest) -> ScriptedResponse:
        if ask.index in (turns, 2 * turns + 1):
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart("", "read", {"n": ask.index})])

    return step


async def test_a_window_registered_smaller_after_a_compaction_at_its_floor_is_kept() -> None:
    register_model(MODEL, context_window=WINDOW)
    try:
        client = ScriptedClient(reader(30), model="review-shrinking")
        worker = Worker(
            client,
            system=SYSTEM,
            tools=[read],
            blob_store=MemoryBlobStore(),
            output_policy=OutputPolicy(inline_threshold=8_000),
            max_requests=200,
            context=ContextPolicy(summarizer=ScriptedClient(ScriptedResponse.text("Read."))),
        )
        with anyio.fail_after(60):
            first = await worker.run("Read every page.")
        assert first.status is RunStatus.FINISHED
        assert max(prompt_tokens(r) for r in client.requests) <= WINDOW
        sent = len(client.requests)
        register_model(MODEL, context_window=SMALLER)
        with anyio.fail_after(60):
            second = await worker.run("Read on.")
    finally:
        unregister_model(MODEL)
    assert second.status is RunStatus.FINISHED
    later = client.requests[sent:]
    assert len(later) == 31
    assert max(prompt_tokens(r) for r in later) <= SMALLER
    assert all(pairs_valid(r.messages) for r in later)
