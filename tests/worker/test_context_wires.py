"""ContextPolicy over the four real wire formats (ScriptedModelServer on 127.0.0.1).

The window is held by the scripted server's own count of each request it decoded (the usage it
reports). The runs are shorter than the 1,000-turn run in process (test_context_policy.py):
long enough for every stage (stored results, dropped thinking, summaries) to happen several
times, short enough for the suite's time budget.
"""

from __future__ import annotations

import anyio
import pytest

from llm_worker import ContextCompacted, MemoryBlobStore
from llm_worker.messages import ThinkingPart
from llm_worker.state import RunStatus
from llm_worker.testing import (
    ScriptedModelServer,
)
from llm_worker.worker._context_stages import MARK
from support.long_runs import (
    WINDOW,
    WireModel,
    pairs_valid,
    prefix_shared_between,
    worker_on,
)

pytestmark = pytest.mark.anyio

TIMEOUT = 90
TURNS = 100
WIRES = ("anthropic", "gemini", "openai_chat", "openai_responses")


@pytest.mark.parametrize("wire", WIRES)
async def test_a_long_run_on_each_wire_stays_inside_the_window(wire: str) -> None:
    model = WireModel(TURNS, inspect_at=80, thinking=wire != "openai_chat")
    events: list[ContextCompacted] = []
    compacted_at: set[int] = set()  # the requests a compaction came before
    async with ScriptedModelServer(wire, model) as server, server.client() as client:
        worker = worker_on(client, MemoryBlobStore())
        worker.on_context_compacted(events.append)
        worker.on_context_compacted(lambda _: compacted_at.add(len(model.requests)))
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Read every page.")
    assert result.status is RunStatus.FINISHED
    assert max(model.counted) <= WINDOW  # by the server's own count of what it received
    assert all(pairs_valid(r.messages) for r in model.requests)
    stages = {s for e in events for s in e.stages}
    assert {"tool_results", "summary"} <= stages
    if wire != "openai_chat":
        assert "thinking" in stages
    assert model.inspected is not None and model.read_back is not None
    assert f"page {model.inspected[1]}: lorem" in model.read_back
    assert any(MARK in r.messages[0].text for r in model.requests)
    prefix_shared_between(model.requests, compacted_at)  # as the server decoded them


async def test_a_history_moved_from_anthropic_to_gemini_mid_run_with_thinking() -> None:
    store = MemoryBlobStore()
    first = WireModel(60)
    async with ScriptedModelServer("anthropic", first) as server, server.client() as client:
        before = worker_on(client, store)
        with anyio.fail_after(TIMEOUT):
            done = await before.run("Read every page.")
    assert done.status is RunStatus.FINISHED
    second = WireModel(60)
    async with ScriptedModelServer("gemini", second) as server, server.client() as client:
        moved = worker_on(client, store, history=before.history)
        with anyio.fail_after(TIMEOUT):
            result = await moved.run("Read sixty more.")
    assert result.status is RunStatus.FINISHED
    assert max(first.counted + second.counted) <= WINDOW
    assert all(pairs_valid(r.messages) for r in first.requests + second.requests)
    # Gemini got its own thinking back (signed), never Anthropic's.
    gemini_thoughts = [
        p
        for r in second.requests
        for m in r.messages
        for p in m.content
        if isinstance(p, ThinkingPart)
    ]
    assert gemini_thoughts and all(
        p.origin and p.origin.provider == "gemini" for p in gemini_thoughts
    )
