"""A tool's images the Worker's provider refuses reach the model as an error; the run goes on."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import ImagePart, Message, PauseState, RunStatus, ToolUsePart, Worker, tool
from llm_worker.collectors import ToolCall
from llm_worker.hooks import ToolResultContext
from llm_worker.messages import Part
from llm_worker.providers._media import ANTHROPIC, GEMINI, sendable
from llm_worker.state import PendingCall
from llm_worker.testing import WIRE_PROVIDERS, ScriptedModelServer, ScriptedResponse, decode_request
from llm_worker.tools import ToolResult
from support.media import GIF, HEIC, png

pytestmark = pytest.mark.anyio

MB = 1024 * 1024
MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai_chat": "gpt-4.1",
    "openai_responses": "gpt-4.1",
    "gemini": "gemini-2.5-flash",
}
# What each provider refuses of the two: Gemini takes HEIC but no GIF, the others the reverse.
REFUSED = {"gemini": "image/gif", "anthropic": "image/heic"}
REFUSED |= dict.fromkeys(("openai_chat", "openai_responses"), "image/heic")


@tool(effect="read_only")
def photos() -> list[str | ImagePart]:
    """Two photos."""
    return ["two photos", ImagePart.from_bytes(GIF), ImagePart.from_bytes(HEIC)]


def _sent(provider: str, body: Any) -> list[Message]:
    return decode_request(provider, body, model=MODELS[provider]).messages


def _images(messages: list[Message]) -> list[str | None]:
    found = [p.media_type for m in messages for p in m.content if isinstance(p, ImagePart)]
    found += [i.media_type for m in messages for r in m.tool_results for i in r.media]
    return found


@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
async def test_the_refused_image_is_named_and_the_accepted_one_sent(provider: str) -> None:
    script = [ScriptedResponse([ToolUsePart("", "photos", {})]), ScriptedResponse.text("ok")]
    async with ScriptedModelServer(provider, script, model=MODELS[provider]) as server:
        client = server.client()
        with anyio.fail_after(10):
            result = await Worker(client, tools=[photos]).run("show")
        await client.aclose()
        body = server.requests[1].json()
    assert result.text == "ok"
    [answer] = result.messages[-2].tool_results
    refused = REFUSED[provider]
    assert answer.is_error and refused in answer.content
    assert answer.content.startswith("two photos")  # the tool's text is kept
    assert "it accepts" in answer.content  # what the provider takes, for the model to act on
    [kept] = [t for t in ("image/gif", "image/heic") if t != refused]
    assert _images(_sent(provider, body)) == [kept]


async def test_an_image_over_the_size_limit_is_refused_with_the_limit() -> None:
    big = png(2, 2) + b"\x00" * (4 * MB)  # 5.3 MB of base64: Anthropic takes 5 MB

    @tool(effect="read_only")
    def screenshot() -> ImagePart:
        """A large screenshot."""
        return ImagePart.from_bytes(big)

    script = [ScriptedResponse([ToolUsePart("", "screenshot", {})]), ScriptedResponse.text("ok")]
    async with ScriptedModelServer("anthropic", script) as server:
        client = server.client()
        with anyio.fail_after(20):
            result = await Worker(client, tools=[screenshot]).run("look")
        await client.aclose()
    [answer] = result.messages[-2].tool_results
    assert answer.is_error and "5 MB" in answer.content and answer.media == []
    assert result.text == "ok"


async def test_an_after_hook_that_converts_the_image_keeps_the_result() -> None:
    def to_png(ctx: ToolResultContext) -> None:
        ctx.result.media = [
            ImagePart.from_bytes(png()) if m.media_type == "image/gif" else m
            for m in ctx.result.media
        ]

    script = [ScriptedResponse([ToolUsePart("", "photos", {})]), ScriptedResponse.text("ok")]
    async with ScriptedModelServer("gemini", script, model=MODELS["gemini"]) as server:
        client = server.client()
        worker = Worker(client, tools=[photos])
        worker.add_after_tool_call_hook(to_png)
        with anyio.fail_after(10):
            result = await worker.run("show")
        await client.aclose()
    [answer] = result.messages[-2].tool_results
    assert not answer.is_error and answer.content == "two photos"
    assert [m.media_type for m in answer.media] == ["image/png", "image/heic"]


def _state_with(media: ImagePart) -> str:
    done = ToolResult("c1", "photos", "an old photo", media=[media])
    history = [
        Message.user("look"),
        Message("assistant", [ToolUsePart("c1", "photos", {}), ToolUsePart("c2", "photos", {})]),
    ]
    pending = [
        PendingCall(ToolCall("c1", "photos", {}), "done", done),
        PendingCall(ToolCall("c2", "photos", {}), "pending"),
    ]
    return PauseState(history, pending).to_json()


@pytest.mark.parametrize(
    ("provider", "data"), [("gemini", GIF), ("openai_responses", HEIC)], ids=["gif", "heic"]
)
async def test_a_refused_image_done_before_a_pause_is_an_error_after_the_resume(
    provider: str, data: bytes
) -> None:
    state = PauseState.from_json(_state_with(ImagePart.from_bytes(data)))
    async with ScriptedModelServer(
        provider, [ScriptedResponse.text("ok")], model=MODELS[provider]
    ) as server:
        client = server.client()
        with anyio.fail_after(10):
            result = await Worker(client, tools=[photos]).resume(state)
        await client.aclose()
    assert result.status is RunStatus.FINISHED and result.text == "ok"
    first, second = result.messages[0].tool_results
    assert first.is_error and first.content.startswith("an old photo")
    assert REFUSED[provider] in first.content and first.media == []
    assert second.is_error and REFUSED[provider] in second.content


async def test_a_cancelled_batch_keeps_no_refused_image_for_the_next_run() -> None:
    started = anyio.Event()

    @tool(effect="read_only", exclusive=True)  # runs alone, once the photos are in
    async def wait() -> str:
        """Wait for ever."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    calls: list[Part] = [ToolUsePart("", "photos", {}), ToolUsePart("", "wait", {})]
    script = [ScriptedResponse(calls), ScriptedResponse.text("again")]
    cancelled = None
    async with ScriptedModelServer("gemini", script, model=MODELS["gemini"]) as server:
        client = server.client()
        worker = Worker(client, tools=[photos, wait])
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:

                async def cancel() -> None:
                    await started.wait()
                    worker.cancel()

                group.start_soon(cancel)
                cancelled = await worker.run("show")
            after = await worker.run("and now?")
        await client.aclose()
    assert cancelled is not None and cancelled.status is RunStatus.CANCELLED
    assert after.text == "again"
    results = [r for m in worker.history for r in m.tool_results if r.name == "photos"]
    assert [r.is_error and "image/gif" in r.content for r in results] == [True]


def test_parts_that_together_pass_the_request_limit_are_refused_from_there() -> None:
    eight = ImagePart.from_bytes(png() + b"\x00" * (8 * MB))  # 10.7 MB of base64 each
    kept, refused = sendable([eight, eight, ImagePart.from_bytes(png())], GEMINI)
    assert kept == [eight, kept[1]] and kept[1].data == png()
    [why] = refused
    assert "20 MB" in why and "per request" in why


def test_every_part_the_rules_accept_is_kept() -> None:
    parts = [ImagePart.from_bytes(GIF), ImagePart.from_bytes(png())]
    assert sendable(parts, ANTHROPIC) == (parts, [])


@pytest.mark.parametrize("order", [("anthropic", "gemini"), ("gemini", "anthropic")])
async def test_a_fallbacks_results_are_sendable_to_every_one_of_its_clients(
    order: tuple[str, str],
) -> None:
    # A FallbackClient's `provider` is its first client's, but the next request may go to
    # any of them: Gemini refuses the GIF, Anthropic the HEIC; both leave the result.
    from llm_worker.providers import FallbackClient
    from llm_worker.testing import ScriptedClient, ScriptedRequest

    def step(ask: ScriptedRequest) -> ScriptedResponse:
        if ask.index:
            return ScriptedResponse.text("ok")
        return ScriptedResponse([ToolUsePart("", "photos", {})])

    first, second = (ScriptedClient(step, provider=p) for p in order)
    inner = FallbackClient([first])  # nested: its own provider hides nothing either
    worker = Worker(FallbackClient([inner, second]), tools=[photos])
    with anyio.fail_after(10):
        result = await worker.run("show")
    [answer] = result.messages[-2].tool_results
    assert answer.is_error and answer.media == []
    assert "image/gif" in answer.content and "image/heic" in answer.content
    assert answer.content.startswith("two photos")
    # The provider of a single client sees only its own refusals, as before.
    alone = Worker(ScriptedClient(step, provider="anthropic"), tools=[photos])
    with anyio.fail_after(10):
        [one] = (await alone.run("show")).messages[-2].tool_results
    assert [m.media_type for m in one.media] == ["image/gif"] and "image/heic" in one.content
