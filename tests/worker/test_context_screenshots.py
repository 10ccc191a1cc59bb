"""A screenshot run (computer use, browser agents) under a ContextPolicy.

Each screenshot counted as its base64 size at 4 characters a token: a 177 KB full-HD PNG
was ~59,000 "tokens" (Anthropic bills ~1,600), so a policy compacted on nearly every request
of such a run and warned it was over the window when it was far from it. Now a screenshot
counts as its provider bills it: the run compacts when its text warrants it, not before.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest

from llm_worker import (
    ContextCompacted,
    ContextPolicy,
    MemoryBlobStore,
    OutputPolicy,
    PauseState,
    RunStatus,
    Worker,
    tool,
)
from llm_worker._media_tokens import image_tokens
from llm_worker._tokens import request_chars
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.messages import (
    DocumentPart,
    ImagePart,
    Message,
    Request,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.providers._media import inline_size
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)
from llm_worker.testing._script import prompt_tokens
from llm_worker.worker._context_media import NOTE, without_media
from support.long_runs import pairs_valid
from support.media import screenshot

pytestmark = pytest.mark.anyio

TIMEOUT = 120
SHOT = screenshot()  # 1920 x 1080, ~177 KB: 1,600 tokens on Anthropic
WINDOW = 200_000  # Claude's
TURNS = 60
DENSE_FROM = 45  # from this turn on, each screen comes with 10,000 tokens of page text
DENSE = "dense page text " * 2_500


@tool
async def look(n: int) -> list[Any]:
    """Take a screenshot (with the page's text, on dense pages)."""
    text = f"screen {n}" if n < DENSE_FROM else f"screen {n}: {DENSE}"
    return [text, ImagePart.from_bytes(SHOT)]


def clicker(turns: int) -> Any:
    def step(ask: ScriptedRequest) -> ScriptedResponse:
        if ask.index >= turns:
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart("", "look", {"n": ask.index})])

    return step


def worker_on(client: Any, compactions: list[int], window: int = WINDOW) -> Worker:
    worker = Worker(
        client,
        tools=[look],
        blob_store=MemoryBlobStore(),
        output_policy=OutputPolicy(inline_threshold=100_000),  # the page text goes inline
        max_requests=200,
        context=ContextPolicy(window_tokens=window),
    )
    requests: list[Any] = getattr(client, "requests", [])
    worker.on_context_compacted(lambda event: compactions.append(len(requests)))
    return worker


async def test_a_screenshot_run_compacts_when_its_text_warrants_it_not_before() -> None:
    client = ScriptedClient(clicker(TURNS), provider="anthropic")
    compactions: list[int] = []
    with anyio.fail_after(TIMEOUT):
        result = await worker_on(client, compactions).run("Fill in the form.")
    assert result.status is RunStatus.FINISHED
    sent = [prompt_tokens(r, "anthropic") for r in client.requests]
    # 45 screenshots are ~72,000 tokens, far under the trigger (160,000): nothing compacted
    # (from their bytes' size the third request was over it). The dense pages then pass it.
    assert sent[DENSE_FROM] < 0.5 * WINDOW
    assert compactions and min(compactions) > DENSE_FROM
    assert max(sent) <= WINDOW
    assert all(pairs_valid(r.messages) for r in client.requests)
    # The screenshots of the recent turns are still sent as they are.
    images = [p for m in client.requests[-1].messages for r in m.tool_results for p in r.media]
    assert images and all(isinstance(p, ImagePart) and p.data == SHOT for p in images)


def pause_at(n: int) -> Any:
    def approval(ctx: ToolCallContext) -> Pause | None:
        return Pause("ok?") if ctx.call.input.get("n") == n and not ctx.resumed else None

    return approval


async def test_pause_json_resume_keeps_the_screenshots_estimate() -> None:
    client = ScriptedClient(clicker(TURNS), provider="anthropic")
    compactions: list[int] = []
    worker = worker_on(client, compactions)
    worker.add_before_tool_call_hook(pause_at(55))
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("Fill in the form.")
    assert paused.status is RunStatus.PAUSED and paused.state is not None and compactions
    saved = paused.state.to_json()
    assert orjson.loads(saved)["context"] is not None  # the compaction goes with the state
    state = PauseState.from_json(saved)
    # The pixels survive the JSON: the history counts the same, image for image.
    before = request_chars(Request(list(paused.state.history)), "anthropic")
    assert request_chars(Request(list(state.history)), "anthropic") == before

    fresh = ScriptedClient(ScriptedResponse.text("done"), provider="anthropic")
    again: list[int] = []
    resumed = worker_on(fresh, again)
    resumed.add_before_tool_call_hook(pause_at(55))
    with anyio.fail_after(TIMEOUT):
        result = await resumed.resume(state)
    assert result.status is RunStatus.FINISHED
    assert again == []  # the pausing Worker's compaction is reused: no new one
    last = client.requests[-1].messages
    first = fresh.requests[0].messages
    assert first[: len(last)] == last  # the same request, then the paused call's result
    assert prompt_tokens(fresh.requests[0], "anthropic") <= WINDOW


@pytest.mark.parametrize("wire", ["anthropic", "gemini"])
async def test_each_wire_counts_screenshots_by_its_provider(wire: str) -> None:
    # 8 screenshots: 12,800 tokens on Anthropic, 12,384 on Gemini; the trigger is 16,000.
    window, turns = 20_000, 8
    per_image = image_tokens((1920, 1080), wire)
    compactions: list[int] = []
    async with (
        ScriptedModelServer(wire, clicker(turns)) as server,
        server.client() as client,
    ):
        worker = worker_on(client, compactions, window)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Fill in the form.")
        reported = [r.json() for r in server.requests]
    assert result.status is RunStatus.FINISHED
    assert len(reported) == turns + 1
    assert compactions == []
    # What the server reports (its usage) is the provider's figure per screenshot.
    usage = result.usage.input_tokens or 0
    assert turns * per_image <= usage <= sum(k * per_image + 500 for k in range(turns + 1))
    # The client's calibrated estimate of the next request agrees with the server's count.
    history = Request(list(worker.history))
    estimate = client.estimator.estimate(history).input_tokens
    assert abs(estimate - prompt_tokens(history, wire)) <= 0.05 * estimate
    assert estimate >= turns * per_image


BIG = screenshot(noise=2_000_000)  # ~2 MB: ~2.7 MB as base64
LIMITS = {"gemini": 20 * 1024 * 1024, "anthropic": 32 * 1024 * 1024}  # media per request


@tool
async def capture(n: int) -> list[Any]:
    """Take a large screenshot."""
    return [f"capture {n}", ImagePart.from_bytes(BIG)]


def capturer(turns: int) -> Any:
    def step(ask: ScriptedRequest) -> ScriptedResponse:
        if ask.index >= turns:
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart("", "capture", {"n": ask.index})])

    return step


def capture_worker(client: Any, stages: list[tuple[int, tuple[str, ...]]]) -> Worker:
    worker = Worker(
        client,
        tools=[capture],
        max_requests=100,
        context=ContextPolicy(window_tokens=1_000_000, keep_recent_turns=2),
    )
    worker.on_context_compacted(lambda e: stages.append((len(client.requests), e.stages)))
    return worker


@pytest.mark.parametrize(("provider", "turns"), [("gemini", 14), ("anthropic", 20)])
async def test_old_screenshots_leave_as_notes_rather_than_the_newest_being_refused(
    provider: str, turns: int
) -> None:
    # Screenshots of ~2.7 MB (base64) pass Gemini's 20 MB per request after 7 (Anthropic's
    # 32 MB after 12): the newest was refused (an error result: the model never saw it).
    # Now the oldest, outside the 2 kept turns, leave the request as notes, down to the
    # policy's target share of the limit.
    client = ScriptedClient(capturer(turns), provider=provider)
    stages: list[tuple[int, tuple[str, ...]]] = []
    with anyio.fail_after(TIMEOUT):
        result = await capture_worker(client, stages).run("Watch the screen.")
    assert result.status is RunStatus.FINISHED
    results = [p for m in result.messages for p in m.tool_results]
    assert len(results) == turns and not any(p.is_error for p in results)
    assert all(len(p.media) == 1 for p in results)  # the history keeps every screenshot
    assert all(inline_size(r.messages) <= LIMITS[provider] for r in client.requests)
    assert stages and all(s == ("media",) for _, s in stages)
    assert len(stages) <= turns // 3  # each compaction makes room for several screenshots
    # The last request: the newest screenshots as they are, the oldest as notes.
    last = [p for m in client.requests[-1].messages for p in m.tool_results]
    assert last[-1].media and last[-1].media[0].data == BIG and last[-2].media
    assert not last[0].media and "left out of this request" in last[0].content
    # Between two compactions each request is the last one plus the new messages.
    compacted_at = {at for at, _ in stages}
    for i in range(1, len(client.requests)):
        if i not in compacted_at:
            before, now = client.requests[i - 1].messages, client.requests[i].messages
            assert now[: len(before)] == before


async def test_the_media_notes_survive_pause_json_and_resume() -> None:
    client = ScriptedClient(capturer(12), provider="gemini")
    stages: list[tuple[int, tuple[str, ...]]] = []
    worker = capture_worker(client, stages)
    worker.add_before_tool_call_hook(pause_at(10))
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("Watch the screen.")
    assert paused.status is RunStatus.PAUSED and paused.state is not None and stages
    fresh = ScriptedClient(ScriptedResponse.text("done"), provider="gemini")
    again: list[tuple[int, tuple[str, ...]]] = []
    resumed = capture_worker(fresh, again)
    resumed.add_before_tool_call_hook(pause_at(10))
    with anyio.fail_after(TIMEOUT):
        result = await resumed.resume(PauseState.from_json(paused.state.to_json()))
    assert result.status is RunStatus.FINISHED
    last = client.requests[-1].messages
    assert fresh.requests[0].messages[: len(last)] == last  # the same notes, the same request
    assert inline_size(fresh.requests[0].messages) <= LIMITS["gemini"]


@tool
async def capture_page(n: int) -> list[Any]:
    """Take a large screenshot, with the page's text."""
    return [f"capture {n}: " + "word " * 1_400, ImagePart.from_bytes(BIG)]


async def test_a_compaction_for_media_alone_leaves_the_turns_and_the_summary_be() -> None:
    # 8 screenshots with their pages' text: ~21.5 MB of media (over Gemini's 20) and ~32,000
    # tokens, under the trigger (32,000 of 40,000); once 4 screenshots are notes, ~25,800:
    # still over the target (24,000). Only media leave: no summary, every turn sent.
    summarizer = ScriptedClient(ScriptedResponse.text("Screens were watched."))
    client = ScriptedClient(
        lambda ask: (
            ScriptedResponse.text("done")
            if ask.index >= 8
            else ScriptedResponse([ToolUsePart("", "capture_page", {"n": ask.index})])
        ),
        provider="gemini",
    )
    compactions: list[ContextCompacted] = []
    worker = Worker(
        client,
        tools=[capture_page],
        output_policy=OutputPolicy(inline_threshold=100_000),
        context=ContextPolicy(window_tokens=40_000, keep_recent_turns=2, summarizer=summarizer),
    )
    worker.on_context_compacted(compactions.append)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("Watch the screen. " + "context " * 2_300)
    assert result.status is RunStatus.FINISHED
    assert [e.stages for e in compactions] == [("media",)]
    assert compactions[0].tokens_before < 32_000 < compactions[0].tokens_after + 8_000
    assert compactions[0].tokens_after > 24_000  # over the target: a token compaction would cut
    assert summarizer.requests == []
    sent = client.requests[-1].messages
    assert len(sent) == len(result.messages) - 1  # every turn sent: none replaced


def test_a_message_without_its_media_names_each_and_keeps_urls() -> None:
    url = ImagePart.from_url("https://example.com/a.png")
    pdf = DocumentPart.from_bytes(b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n")
    result = ToolResultPart("c1", "two shots", name="look", media=[ImagePart.from_bytes(SHOT), url])
    message = Message("user", [result, TextPart("and"), pdf])
    stripped, size = without_media(message)
    assert size == inline_size([message]) > 0 and inline_size([stripped]) == 0
    part = stripped.content[0]
    assert isinstance(part, ToolResultPart) and part.media == [url]
    assert part.content == "two shots\n" + NOTE.format(what="an image (image/png, 172 KB)")
    assert stripped.content[2] == TextPart(NOTE.format(what="a document (application/pdf, 1 KB)"))
    assert without_media(message) == (stripped, size)  # the same notes each time
    assert without_media(stripped) == (stripped, 0)
