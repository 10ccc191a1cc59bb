"""Review probes (issue 32): a ContextPolicy's compaction carried through PauseState JSON.

A fresh Worker resuming a paused run compacted from scratch: its first request differed from
the pausing Worker's (a prompt-cache miss) and, with a summarizer, asked for one more summary
per resume. States saved before the compaction was kept, or with one that does not fit their
history, still load and resume (compacting afresh).
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest

from llm_worker import ContextPolicy, MemoryBlobStore, OutputPolicy, PauseState, RunStatus, Worker
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.messages import ToolUsePart
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from llm_worker.testing._script import prompt_tokens
from llm_worker.worker._context_stages import MARK
from support.long_runs import WINDOW, pairs_valid, read

pytestmark = pytest.mark.anyio

TIMEOUT = 90


def reader(turns: int) -> Any:
    def step(ask: ScriptedRequest) -> ScriptedResponse:
        if ask.index >= turns:
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart("", "read", {"n": ask.index})])

    return step


def approval(ctx: ToolCallContext) -> Pause | None:
    return Pause("ok?") if ctx.call.input.get("n") == 70 and not ctx.resumed else None


def worker_on(client: Any, store: MemoryBlobStore, summarizer: ScriptedClient) -> Worker:
    worker = Worker(
        client,
        tools=[read],
        blob_store=store,
        output_policy=OutputPolicy(inline_threshold=8_000),
        max_requests=500,
        context=ContextPolicy(window_tokens=WINDOW, summarizer=summarizer),
    )
    worker.add_before_tool_call_hook(approval)
    return worker


async def paused_state(store: MemoryBlobStore) -> tuple[str, ScriptedClient, ScriptedClient]:
    summarizer = ScriptedClient(ScriptedResponse.text("Pages were read in order."))
    client = ScriptedClient(reader(90))
    with anyio.fail_after(TIMEOUT):
        paused = await worker_on(client, store, summarizer).run("Read every page.")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    return paused.state.to_json(), client, summarizer


async def test_a_fresh_worker_resumes_with_the_summary_and_cut_of_the_pause() -> None:
    store = MemoryBlobStore()
    saved, client, summarizer = await paused_state(store)
    assert orjson.loads(saved)["context"]["summary"] == "Pages were read in order."
    before = len(summarizer.requests)
    assert before > 0
    again = ScriptedClient(ScriptedResponse.text("Another summary."))
    fresh = ScriptedClient(ScriptedResponse.text("x"))
    with anyio.fail_after(TIMEOUT):
        result = await worker_on(fresh, store, again).resume(PauseState.from_json(saved))
    assert result.status is RunStatus.FINISHED
    assert again.requests == []  # no new summary for the resume
    sent = fresh.requests[0].messages
    assert MARK in sent[0].text and "Pages were read in order." in sent[0].text
    # What the pausing Worker sent last, then the paused call's result: the prefix holds.
    last = client.requests[-1].messages
    assert sent[: len(last)] == last
    assert pairs_valid(sent) and prompt_tokens(fresh.requests[0]) <= WINDOW


@pytest.mark.parametrize(
    "context",
    [
        None,  # saved before the compaction was kept
        {"format": 1, "boundary": 10**6, "cut": 0, "length": 5},  # forged: past the history
        {"format": 1, "boundary": 4, "cut": 2, "length": 9, "sent": {"0": "not a message"}},
        {"format": 99},
        "not an object",
    ],
)
async def test_a_state_without_a_fitting_compaction_resumes_compacting_afresh(
    context: object,
) -> None:
    store = MemoryBlobStore()
    saved, _, _ = await paused_state(store)
    data = orjson.loads(saved)
    if context is None:
        del data["context"]
    else:
        data["context"] = context
    fresh = ScriptedClient(ScriptedResponse.text("x"))
    again = ScriptedClient(ScriptedResponse.text("Pages were read."))
    with anyio.fail_after(TIMEOUT):
        result = await worker_on(fresh, store, again).resume(PauseState.from_dict(data))
    assert result.status is RunStatus.FINISHED
    sent = fresh.requests[0].messages
    assert pairs_valid(sent) and prompt_tokens(fresh.requests[0]) <= WINDOW
    assert MARK in sent[0].text  # compacted afresh
