"""Review probes of ContextPolicy (issue 32 items 2-4): summarizers that misbehave, pairs of
parallel calls with errors and media on each wire, the recent turns larger than the window,
and the same history giving the same request body in a second process."""

from __future__ import annotations

import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import (
    ContextPolicy,
    MemoryBlobStore,
    OutputPolicy,
    PauseState,
    RunStatus,
    Worker,
    tool,
)
from llm_worker.errors import ConfigurationError
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.messages import (
    ImagePart,
    Message,
    Part,
    Request,
    ThinkingConfig,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)
from llm_worker.testing._script import prompt_tokens
from llm_worker.worker._context_stages import MARK
from support.long_runs import PAGE, WINDOW, pairs_valid, read

pytestmark = pytest.mark.anyio

TIMEOUT = 90
WIRES = ("anthropic", "gemini", "openai_chat", "openai_responses")
# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cf00000301010018dd8db00000000049454e44ae426082"
)


def reader(turns: int) -> Any:
    def step(ask: ScriptedRequest) -> ScriptedResponse:
        if ask.index >= turns:
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart("", "read", {"n": ask.index})])

    return step


def worker_of(client: Any, **policy: Any) -> Worker:
    return Worker(
        client,
        tools=[read],
        blob_store=MemoryBlobStore(),
        output_policy=OutputPolicy(inline_threshold=8_000),
        max_requests=500,
        context=ContextPolicy(window_tokens=WINDOW, **policy),
    )


class _Raising:
    """A client of the user's own whose stream raises something untyped."""

    provider = "custom"
    model = "custom"

    def stream(self, request: Request) -> Any:
        raise RuntimeError("the summarizer's own bug")


async def test_a_summary_longer_than_asked_is_cut_to_its_budget() -> None:
    # A summarizer that ignores max_tokens: its 200,000 characters went into every
    # request (54,000 tokens in a 16,000-token window) before the summary was bounded.
    summarizer = ScriptedClient(ScriptedResponse.text("S" * 200_000))
    client = ScriptedClient(reader(120))
    worker = worker_of(client, summarizer=summarizer)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("Read.")
    assert result.status is RunStatus.FINISHED
    assert summarizer.requests  # a summary was asked for, and used
    assert any(MARK in r.messages[0].text and "SSS" in r.messages[0].text for r in client.requests)
    assert max(prompt_tokens(r) for r in client.requests) <= WINDOW


async def test_a_summarizer_that_raises_anything_leaves_the_turns_out() -> None:
    # A RuntimeError of a hand-written client failed the whole run before.
    client = ScriptedClient(reader(120))
    worker = worker_of(client, summarizer=_Raising())
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("Read.")
    assert result.status is RunStatus.FINISHED
    assert "left out" in client.requests[-1].messages[0].text
    assert max(prompt_tokens(r) for r in client.requests) <= WINDOW


async def test_a_lone_surrogate_in_a_summary_still_goes_over_the_wire() -> None:
    # No wire can carry a lone surrogate: the request body failed to serialize and the run
    # ended in MalformedStreamError.
    summarizer = ScriptedClient(ScriptedResponse.text("pages \ud800 read"))
    async with (
        ScriptedModelServer("anthropic", reader(80)) as server,
        server.client() as client,
    ):
        worker = worker_of(client, summarizer=summarizer)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Read.")
        leads = [r.json()["messages"][0] for r in server.requests if "messages" in r.json()]
    assert result.status is RunStatus.FINISHED
    assert any(MARK in str(lead) and "pages ? read" in str(lead) for lead in leads)


@tool
async def shot(n: int) -> list[Any]:
    """Take screenshot n."""
    return [f"shot {n}", ImagePart.from_bytes(PNG)]


@tool
async def broken(n: int) -> str:
    """Fail, at length."""
    raise ValueError("no such thing " * 300)


class Parallel:
    """Three calls an answer (a page, a screenshot, a failing call), with signed thinking."""

    def __init__(self, turns: int, thinking: bool) -> None:
        self.turns, self.thinking = turns, thinking
        self.requests: list[Request] = []

    def __call__(self, ask: ScriptedRequest) -> ScriptedResponse:
        index = len(self.requests)
        self.requests.append(ask.request)
        if index >= self.turns:
            return ScriptedResponse.text("done")
        calls: list[Part] = [
            ToolUsePart("", "read", {"n": index}),
            ToolUsePart("", "shot", {"n": index}),
            ToolUsePart("", "broken", {"n": index}),
        ]
        thought: list[Part] = [ThinkingPart("thinking " * 20, signature=f"sig{index}")]
        return ScriptedResponse([*thought, *calls] if self.thinking else calls)


@pytest.mark.parametrize("wire", WIRES)
async def test_parallel_calls_errors_and_media_keep_their_pairs_on_each_wire(wire: str) -> None:
    model = Parallel(40, thinking=wire != "openai_chat")
    async with ScriptedModelServer(wire, model) as server, server.client() as client:
        worker = Worker(
            client,
            tools=[read, shot, broken],
            blob_store=MemoryBlobStore(),
            output_policy=OutputPolicy(inline_threshold=8_000),
            thinking=ThinkingConfig(budget_tokens=1024),
            max_requests=200,
            context=ContextPolicy(
                window_tokens=WINDOW,
                summarizer=ScriptedClient(ScriptedResponse.text("Pages were read.")),
            ),
        )
        stages: set[str] = set()
        worker.on_context_compacted(lambda e: stages.update(e.stages))
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Read and look.")
    assert result.status is RunStatus.FINISHED
    assert {"tool_results", "summary"} <= stages
    assert max(prompt_tokens(r, wire) for r in model.requests) <= WINDOW
    assert all(pairs_valid(r.messages) for r in model.requests)
    # The failed calls' results are sent as they are wherever they are (never stored).
    last = model.requests[-1]
    errors = [p for m in last.messages for p in m.tool_results if "no such thing" in p.content]
    assert errors and all("[blob:" not in p.content for p in errors)


async def test_recent_turns_larger_than_the_window_are_stored_too() -> None:
    # keep_recent_turns larger than the whole history, each result 40 KB inline.
    @tool
    async def big(n: int) -> str:
        """Read a big page."""
        return f"big {n}: " + "lorem ipsum " * 3_500

    def step(ask: ScriptedRequest) -> ScriptedResponse:
        if ask.index >= 12:
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart("", "big", {"n": ask.index})])

    client = ScriptedClient(step)
    worker = Worker(
        client,
        tools=[big],
        blob_store=MemoryBlobStore(),
        output_policy=OutputPolicy(inline_threshold=100_000),
        context=ContextPolicy(window_tokens=16_000, keep_recent_turns=50),
    )
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("Read.")
    assert result.status is RunStatus.FINISHED
    assert max(prompt_tokens(r) for r in client.requests) <= 16_000
    assert all(pairs_valid(r.messages) for r in client.requests)


_SECOND_PROCESS = textwrap.dedent(
    """
    import sys, anyio
    sys.path.insert(0, sys.argv[3])
    from llm_worker import Message
    from worker.test_context_review import body_of

    history = [Message.from_json(line) for line in open(sys.argv[1]).read().splitlines()]
    sys.stdout.buffer.write(anyio.run(body_of, history, sys.argv[2]))
    """
)


async def body_of(history: list[Message], blobs: str) -> bytes:
    """The Anthropic body a fresh Worker sends for `history`, its blobs kept in `blobs`."""
    from llm_worker import FsBlobStore

    async with ScriptedModelServer("anthropic", ScriptedResponse.text("ok")) as server:
        async with server.client() as client:
            worker = Worker(
                client,
                tools=[read],
                blob_store=FsBlobStore(blobs),
                output_policy=OutputPolicy(inline_threshold=8_000),
                context=ContextPolicy(window_tokens=WINDOW),
                history=history,
            )
            await worker.run("Once more.")
        return server.requests[-1].body


async def test_the_same_history_gives_the_same_body_in_another_process(tmp_path: Path) -> None:
    """Compacted from scratch here and in a process of another hash seed: the same bytes."""
    history = [Message.user("Read every page.")]
    for n in range(30):
        history.append(Message("assistant", [ToolUsePart(f"c{n}", "read", {"n": n})]))
        page = ToolResultPart(f"c{n}", f"page {n}: {PAGE}", name="read")
        history.append(Message("user", [page]))
    saved, blobs = tmp_path / "history.jsonl", str(tmp_path / "blobs")
    saved.write_text("\n".join(m.to_json() for m in history))
    script = tmp_path / "again.py"
    script.write_text(_SECOND_PROCESS)
    tests = str(Path(__file__).parents[1])
    with anyio.fail_after(TIMEOUT):
        here = await body_of(history, blobs)
        done = await anyio.run_process(
            [sys.executable, str(script), str(saved), blobs, tests],
            env={**os.environ, "PYTHONHASHSEED": "7"},
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()[-2_000:]
    assert done.stdout == here
    assert b"[blob:" in here  # compacted, both times


async def test_a_resumed_run_sends_what_the_pausing_worker_would() -> None:
    store = MemoryBlobStore()

    def approval(ctx: ToolCallContext) -> Pause | None:
        return Pause("ok?") if ctx.call.input.get("n") == 70 and not ctx.resumed else None

    def paused_worker(client: Any) -> Worker:
        worker = Worker(
            client,
            tools=[read],
            blob_store=store,
            output_policy=OutputPolicy(inline_threshold=8_000),
            max_requests=500,
            context=ContextPolicy(window_tokens=WINDOW),
        )
        worker.add_before_tool_call_hook(approval)
        return worker

    first = paused_worker(ScriptedClient(reader(90)))
    with anyio.fail_after(TIMEOUT):
        paused = await first.run("Read every page.")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    saved = paused.state.to_json()
    same, fresh = (
        ScriptedClient(ScriptedResponse.text("x")),
        ScriptedClient(ScriptedResponse.text("x")),
    )
    first._cfg.client = same  # pyright: ignore[reportPrivateUsage]
    with anyio.fail_after(TIMEOUT):
        await first.resume(PauseState.from_json(saved))
        await paused_worker(fresh).resume(PauseState.from_json(saved))
    assert same.requests[0].messages == fresh.requests[0].messages


async def test_an_async_compaction_handler_is_refused_at_registration() -> None:
    # It was accepted, then called without being awaited: it never ran (a RuntimeWarning).
    worker = worker_of(ScriptedClient(reader(1)))

    async def handler(event: object) -> None:
        pass

    with pytest.raises(ConfigurationError, match="async"):
        worker.on_context_compacted(handler)


async def test_a_fallback_client_is_held_to_its_smallest_window() -> None:
    # The first model's window was used: requests compacted for 200,000 tokens went over
    # the 16,000-token window of the model they fell back to.
    from llm_worker.errors import ServerError
    from llm_worker.models import register_model, unregister_model
    from llm_worker.providers import FallbackClient

    down = ScriptedResponse.text("x", fail_with=ServerError("down", provider="scripted"))
    register_model("scripted:review-big", context_window=200_000)
    register_model("scripted:review-small", context_window=WINDOW)
    try:
        small = ScriptedClient(reader(60), model="review-small")
        fallback = FallbackClient([ScriptedClient(down, model="review-big"), small])
        worker = Worker(
            fallback,
            tools=[read],
            blob_store=MemoryBlobStore(),
            output_policy=OutputPolicy(inline_threshold=8_000),
            max_requests=200,
            context=ContextPolicy(),
        )
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Read.")
    finally:
        unregister_model("scripted:review-big")
        unregister_model("scripted:review-small")
    assert result.status is RunStatus.FINISHED
    assert len(small.requests) == 61
    assert max(prompt_tokens(r) for r in small.requests) <= WINDOW


async def test_a_model_registered_after_the_worker_was_built_is_held_to_its_window() -> None:
    # The window was looked up once, when the Worker was built: a later register_model
    # (a fine-tune's real window found out, say) went unseen and requests passed it.
    from llm_worker.models import register_model, unregister_model

    register_model("scripted:review-late", context_window=200_000)
    try:
        client = ScriptedClient(reader(60), model="review-late")
        worker = Worker(
            client,
            tools=[read],
            blob_store=MemoryBlobStore(),
            output_policy=OutputPolicy(inline_threshold=8_000),
            max_requests=200,
            context=ContextPolicy(),
        )
        register_model("scripted:review-late", context_window=WINDOW)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Read.")
    finally:
        unregister_model("scripted:review-late")
    assert result.status is RunStatus.FINISHED
    assert len(client.requests) == 61
    assert max(prompt_tokens(r) for r in client.requests) <= WINDOW


async def test_a_message_larger_than_the_window_is_sent_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Nothing can take a 100,000-character user message out: it went over the window
    # without a word (the provider's refusal was the first sign).
    client = ScriptedClient(reader(3))
    worker = worker_of(client)
    with anyio.fail_after(TIMEOUT), caplog.at_level(logging.WARNING, "llm_worker.context"):
        result = await worker.run("x" * 100_000)
    assert result.status is RunStatus.FINISHED
    assert "still over the context window after compaction" in caplog.text
    assert "of 16000" in caplog.text
