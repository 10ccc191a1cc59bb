"""Review probes of ContextPolicy when what cannot be compacted (the system prompt, tools,
the newest turns) is over `target`: one compaction, reused, one warning — not a summary per
request."""

from __future__ import annotations

import itertools
import logging

import anyio
import pytest

from llm_worker import (
    ContextCompacted,
    ContextPolicy,
    MemoryBlobStore,
    OutputPolicy,
    RunStatus,
    Worker,
)
from llm_worker.messages import ToolUsePart
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from llm_worker.testing._script import prompt_tokens
from llm_worker.worker._context_stages import MARK
from support.long_runs import WINDOW, pairs_valid, read

pytestmark = pytest.mark.anyio

TIMEOUT = 90
# ~0.65 of the window in characters (about 4 a token): over target (0.6), under trigger (0.8).
SYSTEM = "You are a careful reader. " * 1_600


def reader(turns: int):
    def step(ask: ScriptedRequest) -> ScriptedResponse:
        if ask.index >= turns:
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart("", "read", {"n": ask.index})])

    return step


def worker_of(client: ScriptedClient, summarizer: ScriptedClient) -> Worker:
    return Worker(
        client,
        system=SYSTEM,
        tools=[read],
        blob_store=MemoryBlobStore(),
        output_policy=OutputPolicy(inline_threshold=8_000),
        max_requests=500,
        context=ContextPolicy(window_tokens=WINDOW, summarizer=summarizer),
    )


async def test_a_system_prompt_over_target_does_not_compact_every_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = ScriptedClient(ScriptedResponse.text("Pages were read in order."))
    client = ScriptedClient(reader(60))
    worker = worker_of(client, summarizer)
    events: list[ContextCompacted] = []
    worker.on_context_compacted(events.append)
    worker.on_context_compacted(lambda _: at.append(len(client.requests)))
    at: list[int] = []
    with anyio.fail_after(TIMEOUT), caplog.at_level(logging.WARNING, "llm_worker.context"):
        result = await worker.run("Read every page.")
    assert result.status is RunStatus.FINISHED
    # 28 summaries in 61 requests before (a compaction on every other request): now one
    # when a request would pass the window, about every fifth (each turn adds ~1,000 tokens).
    assert len(summarizer.requests) <= len(client.requests) // 4
    assert len(events) <= len(client.requests) // 4
    assert max(prompt_tokens(r) for r in client.requests) <= WINDOW
    assert all(pairs_valid(r.messages) for r in client.requests)
    assert any(MARK in r.messages[0].text for r in client.requests)
    assert all(b - a > 1 for a, b in itertools.pairwise(at))  # never on consecutive requests
    assert caplog.text.count("what cannot be compacted") == 1  # said once
