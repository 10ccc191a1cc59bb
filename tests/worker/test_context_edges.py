"""ContextPolicy at its edges: hooks, tracing, server-side compaction, counting, failures, edits."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from llm_worker import ContextPolicy, MemoryBlobStore, OutputPolicy, RunStatus, Worker
from llm_worker.errors import ServerError
from llm_worker.hooks import MessageSendContext
from llm_worker.messages import Message, ToolResultPart, ToolUsePart
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)
from llm_worker.testing._script import prompt_tokens
from llm_worker.worker._context_stages import MARK
from support.long_runs import PAGE, WINDOW, pairs_valid, read
from support.telemetry import Telemetry

pytestmark = pytest.mark.anyio

TIMEOUT = 30


def reader(turns: int) -> Any:
    def step(ask: ScriptedRequest) -> ScriptedResponse:
        if ask.index >= turns:
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart("", "read", {"n": ask.index})])

    return step


def worker_of(client: Any, **options: Any) -> Worker:
    policy = options.pop("policy", {})
    return Worker(
        client,
        tools=[read],
        blob_store=MemoryBlobStore(),
        output_policy=OutputPolicy(inline_threshold=8_000),
        max_requests=500,
        context=ContextPolicy(window_tokens=WINDOW, **policy),
        **options,
    )


async def test_on_message_send_hooks_see_the_compacted_request() -> None:
    seen: list[int] = []

    def hook(ctx: MessageSendContext) -> None:
        seen.append(prompt_tokens(ctx.request))

    client = ScriptedClient(reader(40))
    worker = worker_of(client)
    worker.add_on_message_send_hook(hook)
    with anyio.fail_after(TIMEOUT):
        await worker.run("Read.")
    assert max(seen) <= WINDOW
    assert seen == [prompt_tokens(r) for r in client.requests]


async def test_a_compaction_is_an_event_on_the_runs_span() -> None:
    telemetry = Telemetry()
    client = ScriptedClient(reader(30))
    worker = worker_of(client, instrument=telemetry.instrumentation(), name="reader")
    with anyio.fail_after(TIMEOUT):
        await worker.run("Read.")
    run = telemetry.one("invoke_agent reader")
    compacted = [e for e in run.events if e.name == "llm_worker.context.compacted"]
    assert compacted
    attributes = dict(compacted[0].attributes or {})
    assert attributes["llm_worker.context.window_tokens"] == WINDOW
    assert attributes["llm_worker.context.stages"] == ("tool_results",)
    before, after = (attributes[f"llm_worker.context.tokens_{k}"] for k in ("before", "after"))
    assert isinstance(before, int) and isinstance(after, int) and before > after


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        (
            "anthropic",
            {
                "edits": [
                    {
                        "type": "compact_20260112",
                        "trigger": {"type": "input_tokens", "value": 12_800},
                    }
                ]
            },
        ),
        ("openai_responses", [{"type": "compaction", "compact_threshold": 12_800}]),
    ],
)
async def test_server_compaction_asks_the_provider_at_the_trigger(wire: str, expected: Any) -> None:
    async with ScriptedModelServer(wire, reader(20)) as server, server.client() as client:
        worker = worker_of(client, policy={"server": True})
        with anyio.fail_after(TIMEOUT):
            await worker.run("Read.")
        bodies = [r.json() for r in server.requests]
    assert all(b["context_management"] == expected for b in bodies)
    # The library compacts nothing itself: the history goes whole.
    assert len(bodies[-1].get("messages", bodies[-1].get("input", []))) >= 40


async def test_a_large_first_request_is_counted_by_the_provider_once() -> None:
    history = [Message.user("Read.")]
    for n in range(12):
        history.append(Message("assistant", [ToolUsePart(f"c{n}", "read", {"n": n})]))
        page = ToolResultPart(f"c{n}", f"page {n}: {PAGE}", name="read")
        history.append(Message("user", [page]))
    async with ScriptedModelServer("anthropic", reader(0)) as server, server.client() as client:
        worker = worker_of(client, history=history)
        with anyio.fail_after(TIMEOUT):
            await worker.run("Go on.")
        paths = [r.path for r in server.requests]
    assert paths == ["/v1/messages/count_tokens", "/v1/messages"]


async def test_a_failing_summarizer_leaves_the_oldest_turns_out_instead(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(ask: ScriptedRequest) -> ScriptedResponse:
        raise ServerError("summarizer down")

    client = ScriptedClient(reader(120))
    worker = worker_of(client, policy={"summarizer": ScriptedClient(broken)})
    with anyio.fail_after(TIMEOUT), caplog.at_level(logging.WARNING, "llm_worker.context"):
        result = await worker.run("Read.")
    assert result.status is RunStatus.FINISHED
    assert "summarizer failed" in caplog.text
    assert max(prompt_tokens(r) for r in client.requests) <= WINDOW
    assert "left out" in client.requests[-1].messages[0].text


async def test_an_edited_history_is_compacted_afresh() -> None:
    client = ScriptedClient(reader(60))
    worker = worker_of(client)
    with anyio.fail_after(TIMEOUT):
        await worker.run("Read.")
    del worker.history[1:41]  # the application drops the oldest turns itself
    again = ScriptedClient(ScriptedResponse.text("ok"))
    worker._cfg.client = again  # pyright: ignore[reportPrivateUsage]
    with anyio.fail_after(TIMEOUT):
        await worker.run("Summarize.")
    sent = again.requests[0]
    assert pairs_valid(sent.messages)
    assert prompt_tokens(sent) <= WINDOW
    assert sent.messages[-1].text == "Summarize."


async def test_forks_share_the_policy_and_keep_their_own_views() -> None:
    client = ScriptedClient(reader(50))
    worker = worker_of(client)
    fork = worker.fork([Message.user("Other conversation.")])
    with anyio.fail_after(TIMEOUT):
        await worker.run("Read.")
        fork_client = ScriptedClient(ScriptedResponse.text("hello"))
        fork._cfg.client = fork_client  # pyright: ignore[reportPrivateUsage]
        await fork.run("Hi.")
    sent = fork_client.requests[0].messages
    assert [m.text for m in sent] == ["Other conversation.", "Hi."]
    assert not any(MARK in m.text for m in sent)


async def test_nothing_to_compact_is_no_event_and_the_request_goes_whole() -> None:
    # Four huge recent turns and nothing older: no stage can take anything out.
    client = ScriptedClient(reader(4))
    policy = ContextPolicy(window_tokens=3_000, keep_recent_turns=8)
    worker = Worker(client, tools=[read], context=policy)  # no blob store to keep results in
    events: list[Any] = []
    worker.on_context_compacted(events.append)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("Read.")
    assert result.status is RunStatus.FINISHED
    assert events == []
    assert len(client.requests[-1].messages) == 9  # the whole history, as it is
