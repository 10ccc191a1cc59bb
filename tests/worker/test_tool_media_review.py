"""Review probes: a tool's media against the provider's limits, crossed with batches, turns,
exact sizes, hooks that rewrite a result into media, and every wire format."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import ImagePart, RunResult, RunStatus, ToolUsePart, Worker, tool
from llm_worker.hooks import ToolResultContext
from llm_worker.messages import Message, Part
from llm_worker.providers._media import ANTHROPIC, GEMINI, sendable
from llm_worker.testing import WIRE_PROVIDERS, ScriptedModelServer, ScriptedResponse
from support.media import GIF, png

pytestmark = pytest.mark.anyio

MB = 1024 * 1024
EIGHT = png() + b"\x00" * (8 * MB)  # 10.7 MB of base64: two pass Gemini's 20 MB per request


@tool(effect="read_only")
def scan(page: int) -> ImagePart:
    """One large scanned page."""
    return ImagePart.from_bytes(EIGHT)


def _media(messages: list[Message]) -> int:
    return sum(len(r.media) for m in messages for r in m.tool_results)


async def _run(provider: str, script: list[ScriptedResponse]) -> RunResult[Any]:
    async with ScriptedModelServer(provider, script) as server:
        client = server.client()
        try:
            with anyio.fail_after(30):
                return await Worker(client, tools=[scan]).run("read the pages")
        finally:
            await client.aclose()


async def test_two_results_of_one_batch_that_together_pass_the_request_limit() -> None:
    # Each image fits alone; the next request carries both: 21.3 MB for Gemini's 20 MB.
    calls: list[Part] = [ToolUsePart("", "scan", {"page": 1}), ToolUsePart("", "scan", {"page": 2})]
    script = [ScriptedResponse(calls), ScriptedResponse.text("ok")]
    result = await _run("gemini", script)
    assert result.text == "ok"
    messages = result.messages
    assert _media(messages) == 1
    refused = [r for m in messages for r in m.tool_results if r.is_error]
    assert len(refused) == 1 and "20 MB" in refused[0].content


async def test_a_result_that_with_earlier_turns_passes_the_request_limit() -> None:
    # The first page went in the turn before: the request after the second carries both.
    script = [
        ScriptedResponse([ToolUsePart("", "scan", {"page": 1})]),
        ScriptedResponse([ToolUsePart("", "scan", {"page": 2})]),
        ScriptedResponse.text("ok"),
    ]
    result = await _run("gemini", script)
    assert result.text == "ok"
    messages = result.messages
    assert _media(messages) == 1


def _exact(b64_bytes: int) -> bytes:
    raw = b64_bytes // 4 * 3
    head = png()
    return head + b"\x00" * (raw - len(head))


def test_an_image_of_exactly_the_limit_is_kept_and_one_byte_more_refused() -> None:
    at = ImagePart.from_bytes(_exact(5 * MB))
    over = ImagePart.from_bytes(_exact(5 * MB) + b"\x00")
    assert sendable([at], ANTHROPIC) == ([at], [])
    kept, refused = sendable([over], ANTHROPIC)
    assert kept == [] and len(refused) == 1 and "5 MB" in refused[0]


def test_parts_of_exactly_the_request_limit_are_kept() -> None:
    half = ImagePart.from_bytes(_exact(10 * MB))
    assert sendable([half, half], GEMINI) == ([half, half], [])
    kept, refused = sendable([half, half, ImagePart.from_bytes(png())], GEMINI)
    assert kept == [half, half] and len(refused) == 1


def test_many_small_images_stay_bounded_and_are_kept() -> None:
    parts = [ImagePart.from_bytes(png()) for _ in range(2000)]
    kept, refused = sendable(parts, GEMINI)
    assert len(kept) == 2000 and refused == []


@tool(effect="read_only")
def note() -> str:
    """A note."""
    return "a note"


@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
async def test_an_after_hook_that_turns_a_text_result_into_a_refused_image(provider: str) -> None:
    # Gemini refuses the GIF, Anthropic the 5.1 MB PNG; the OpenAI APIs take either.
    big = png() + b"\x00" * (int(5.1 * MB) if provider == "anthropic" else 0)
    media = ImagePart.from_bytes(GIF if provider == "gemini" else big)

    def to_media(ctx: ToolResultContext) -> None:
        ctx.result.media = [media]

    script = [ScriptedResponse([ToolUsePart("", "note", {})]), ScriptedResponse.text("ok")]
    async with ScriptedModelServer(provider, script) as server:
        client = server.client()
        worker = Worker(client, tools=[note])
        worker.add_after_tool_call_hook(to_media)
        with anyio.fail_after(20):
            result = await worker.run("note it")
        await client.aclose()
    assert result.status is RunStatus.FINISHED and result.text == "ok"
    [answer] = result.messages[-2].tool_results
    refused = provider in ("gemini", "anthropic")
    assert answer.is_error is refused
    assert answer.content.startswith("a note")
    assert len(answer.media) == (0 if refused else 1)
