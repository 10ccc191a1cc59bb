"""ContextPolicy over a scripted model in process: a 1,000-turn run inside a 16,000-token window.

The requests are what the scripted model received (`ScriptedClient.requests`); its usage is
its rough count of each (`prompt_tokens`), the count the window is held to.
"""

from __future__ import annotations

from typing import Any

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
from llm_worker.errors import ConfigurationError, UnknownModelError
from llm_worker.messages import Message, Request, TextPart, ToolResultPart, ToolUsePart
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from llm_worker.testing._script import prompt_tokens
from llm_worker.worker._context_stages import MARK
from support.long_runs import WINDOW, pairs_valid, prefix_shared_between, read, stored_page

pytestmark = pytest.mark.anyio

TIMEOUT = 60


class Model:
    """Calls `read` each turn; at `inspect_at`, inspects a compacted page; ends at `turns`.

    It counts its own answers, so a resumed run's fresh client goes on where it stopped.
    """

    def __init__(self, turns: int, inspect_at: int = -1) -> None:
        self.turns, self.inspect_at = turns, inspect_at
        self.inspected: tuple[str, int] | None = None
        self.read_back: str | None = None
        self.answers = 0

    def __call__(self, ask: ScriptedRequest) -> ScriptedResponse:
        index, self.answers = self.answers, self.answers + 1
        last = ask.request.messages[-1]
        if self.inspected is not None and self.read_back is None:
            self.read_back = last.tool_results[0].content
        if index == self.inspect_at:
            self.inspected = stored_page(ask.request)
            assert self.inspected is not None, "no compacted result to inspect"
            call = ToolUsePart(
                "", "inspect", {"blob_id": self.inspected[0], "selector": "lines:1-3"}
            )
            return ScriptedResponse([call])
        if index >= self.turns:
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart("", "read", {"n": index})])


def long_worker(client: Any, store: MemoryBlobStore | None = None, **policy: Any) -> Worker:
    return Worker(
        client,
        tools=[read],
        blob_store=store if store is not None else MemoryBlobStore(),
        output_policy=OutputPolicy(inline_threshold=8_000),  # 4 KB results stay inline
        max_requests=2_000,
        context=ContextPolicy(window_tokens=WINDOW, **policy),
    )


async def test_a_thousand_turns_stay_inside_the_window_and_lose_nothing() -> None:
    model = Model(turns=1_000, inspect_at=600)
    client = ScriptedClient(model)
    summarizer = ScriptedClient(ScriptedResponse.text("Summary: pages were read in order."))
    worker = long_worker(client, summarizer=summarizer)
    compactions: list[tuple[int, ContextCompacted]] = []  # (the request it applies to, event)
    worker.on_context_compacted(lambda e: compactions.append((len(client.requests), e)))
    streamed: list[ContextCompacted] = []
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("Read every page.") as events:
            async for event in events:
                if isinstance(event, ContextCompacted):
                    streamed.append(event)
            result = events.result
    assert streamed == [e for _, e in compactions] and len(streamed) > 10
    assert result.status is RunStatus.FINISHED
    assert len(client.requests) == 1_001
    counted = [prompt_tokens(r) for r in client.requests]
    assert max(counted) <= WINDOW
    assert max(counted) > 0.7 * WINDOW  # the window was used, not avoided
    assert all(pairs_valid(r.messages) for r in client.requests)
    # The model read a compacted result back by its id: the original text.
    assert model.inspected is not None and model.read_back is not None
    assert f"page {model.inspected[1]}: lorem ipsum" in model.read_back
    stages = {s for _, e in compactions for s in e.stages}
    assert {"tool_results", "summary"} <= stages
    assert all(e.tokens_after < e.tokens_before for _, e in compactions)
    assert summarizer.requests and all(prompt_tokens(r) < WINDOW for r in summarizer.requests)
    prefix_shared_between(client.requests, {at for at, _ in compactions})
    assert not any(MARK in m.text for m in worker.history)  # the history is never rewritten
    assert sum(len(m.tool_results) for m in worker.history) == 1_000


async def test_without_a_summarizer_the_oldest_turns_are_left_out_with_a_note() -> None:
    client = ScriptedClient(Model(turns=120))
    worker = long_worker(client)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("Read every page.")
    assert result.status is RunStatus.FINISHED
    assert max(prompt_tokens(r) for r in client.requests) <= WINDOW
    last = client.requests[-1].messages
    assert MARK in last[0].text and "left out" in last[0].text
    assert last[0].content[0] == TextPart("Read every page.")  # the task is kept
    assert all(pairs_valid(r.messages) for r in client.requests)


async def test_the_same_history_gives_the_same_request() -> None:
    store = MemoryBlobStore()  # its ids are keyed per store: the same store, the same ids
    client = ScriptedClient(Model(turns=60))
    worker = long_worker(client, store)
    with anyio.fail_after(TIMEOUT):
        await worker.run("Read every page.")
    sent: list[Request] = []
    for _ in range(2):
        again = ScriptedClient(ScriptedResponse.text("again"))
        twin = long_worker(again, store)
        twin.history = list(worker.history)
        with anyio.fail_after(TIMEOUT):
            await twin.run("Once more.")
        sent.append(again.requests[0])
    assert sent[0].messages == sent[1].messages
    assert prompt_tokens(sent[0]) < prompt_tokens(Request(worker.history))  # compacted


async def test_compaction_survives_pause_json_resume_in_a_fresh_worker() -> None:
    from llm_worker import PauseState
    from llm_worker.hooks import Pause, ToolCallContext

    def approval(ctx: ToolCallContext) -> Pause | None:
        return Pause("approve?") if ctx.call.input.get("n") == 70 and not ctx.resumed else None

    model = Model(turns=90)
    worker = long_worker(ScriptedClient(model))
    worker.add_before_tool_call_hook(approval)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("Read every page.")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    saved = paused.state.to_json()
    # The history is never rewritten; the compaction travels beside it (PauseState.context).
    assert not any(MARK in m.text for m in paused.state.history)
    assert paused.state.context is not None
    fresh_client = ScriptedClient(model)  # the model goes on where it stopped
    fresh = long_worker(fresh_client)
    with anyio.fail_after(TIMEOUT):
        resumed = await fresh.resume(PauseState.from_json(saved))
    assert resumed.status is RunStatus.FINISHED
    assert max(prompt_tokens(r) for r in fresh_client.requests) <= WINDOW
    assert all(pairs_valid(r.messages) for r in fresh_client.requests)
    assert any(MARK in r.messages[0].text for r in fresh_client.requests)


async def test_cancel_during_the_summary_keeps_no_half_summary() -> None:
    asked = anyio.Event()

    def slow(ask: ScriptedRequest) -> ScriptedResponse:
        asked.set()
        return ScriptedResponse([TextPart("half a summ"), TextPart("ary")], delay=30)

    client = ScriptedClient(Model(turns=200))
    worker = long_worker(client, summarizer=ScriptedClient(slow))
    outcome: list[Any] = []
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:

            async def run() -> None:
                outcome.append(await worker.run("Read every page."))

            group.start_soon(run)
            await asked.wait()
            worker.cancel()
    assert outcome[0].status is RunStatus.CANCELLED
    assert pairs_valid(worker.history)
    assert not any("half a summ" in m.text for m in worker.history)
    # The next request compacts again from scratch, with a summarizer that answers.
    done = ScriptedClient(ScriptedResponse.text("done"))
    worker._cfg.client = done  # pyright: ignore[reportPrivateUsage]
    compactor = worker._cfg.context  # pyright: ignore[reportPrivateUsage]
    assert compactor is not None
    object.__setattr__(
        compactor.policy, "summarizer", ScriptedClient(ScriptedResponse.text("A whole summary."))
    )
    with anyio.fail_after(TIMEOUT):
        await worker.run("Go on.")
    lead = done.requests[0].messages[0].text
    assert "A whole summary." in lead and "half a summ" not in lead


async def test_structured_output_with_compaction() -> None:
    def model(ask: ScriptedRequest) -> ScriptedResponse:
        if ask.index >= 80:
            return ScriptedResponse.text('{"pages": 80}')
        return ScriptedResponse([ToolUsePart("", "read", {"n": ask.index})])

    client = ScriptedClient(model)
    worker = Worker(
        client,
        tools=[read],
        blob_store=MemoryBlobStore(),
        output_policy=OutputPolicy(inline_threshold=8_000),
        max_requests=200,
        output_type={"type": "object", "properties": {"pages": {"type": "integer"}}},
        context=ContextPolicy(window_tokens=WINDOW),
    )
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("Count the pages.")
    assert result.output == {"pages": 80}
    assert all(r.output_schema is not None for r in client.requests)
    assert max(prompt_tokens(r) for r in client.requests) <= WINDOW


async def test_an_unknown_model_names_register_model_and_window_tokens() -> None:
    with pytest.raises(UnknownModelError, match=r"register_model.*window_tokens"):
        Worker(ScriptedClient(ScriptedResponse.text("x")), context=ContextPolicy())


@pytest.mark.parametrize(
    "bad",
    [
        {"trigger": 0.5, "target": 0.6},
        {"trigger": 1.5},
        {"keep_recent_turns": -1},
        {"window_tokens": 0},
        {"summary_max_tokens": 0},
        {"summarizer": 42},
        {"summarizer": "claude-haiku-4-5"},
        {"window_tokens": True},
        {"trigger": float("nan")},
    ],
)
async def test_a_policy_out_of_range_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        ContextPolicy(**bad)


async def test_server_compaction_needs_a_provider_that_has_it() -> None:
    with pytest.raises(ConfigurationError, match="server-side compaction"):
        Worker(
            ScriptedClient(ScriptedResponse.text("x"), provider="gemini"),
            context=ContextPolicy(server=True, window_tokens=WINDOW),
        )


async def test_results_already_stored_and_errors_are_not_stored_again() -> None:
    from llm_worker.blobs import OutputPolicy as Policy
    from llm_worker.worker._context_stages import stored_results

    store = MemoryBlobStore()
    message = Message(
        "user",
        [
            ToolResultPart("a", "[blob:1234] summary", name="read"),
            ToolResultPart("b", "x" * 5_000, name="read", is_error=True),
            ToolResultPart("c", "short", name="read"),
        ],
    )
    same, changed = await stored_results(message, store, Policy(), "inspect")
    assert (same, changed) == (message, 0)
