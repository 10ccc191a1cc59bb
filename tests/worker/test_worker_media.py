"""Images through the Worker: a user message with an image, a tool returning one, a pause."""

from __future__ import annotations

import re

import anyio
import pytest

from llm_worker import (
    HookError,
    ImagePart,
    MemoryBlobStore,
    Message,
    PauseState,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.blobs import TextContent
from llm_worker.collectors import ToolCall
from llm_worker.hooks import ToolResultContext
from llm_worker.messages import Part
from llm_worker.state import PendingCall
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.tools import ToolResult
from support.media import png

pytestmark = pytest.mark.anyio

SHOT = ImagePart.from_bytes(png(3, 3))


@tool(effect="read_only")
def screenshot() -> list[str | ImagePart]:
    """Take a screenshot of the page."""
    return ["x" * 5000, SHOT]  # text past the inline limit: the blob store takes the text


async def test_a_user_image_reaches_the_request_as_a_part() -> None:
    client = ScriptedClient([ScriptedResponse.text("A red square.")])
    worker = Worker(client)
    with anyio.fail_after(5):
        result = await worker.run(Message.user("What is this?", SHOT))
    assert result.text == "A red square."
    assert client.requests[0].messages[0].content[1] is SHOT


async def test_a_tool_image_reaches_the_next_request_and_the_blob_store_keeps_only_text() -> None:
    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "screenshot", {})]),
            ScriptedResponse.text("I see the page."),
        ]
    )
    store = MemoryBlobStore()
    worker = Worker(client, tools=[screenshot], blob_store=store)
    with anyio.fail_after(5):
        await worker.run("Look at the page")
    [result] = client.requests[1].messages[-1].tool_results
    assert result.media == [SHOT]
    # The long text was stored and summarized; the image is neither stored nor described.
    [blob_id] = re.findall(r"\[blob:([0-9a-f-]+)\]", result.content)
    assert "iVBOR" not in result.content and "PNG" not in result.content
    assert len(store) == 1
    assert await store.load(blob_id) == TextContent("x" * 5000)


async def test_a_finished_result_with_an_image_survives_a_pause_state_as_json() -> None:
    done = ToolResult("c1", "capture", "the screen", media=[SHOT])
    state = PauseState(
        [Message.user("go"), Message("assistant", [ToolUsePart("c1", "capture", {})])],
        [PendingCall(ToolCall("c1", "capture", {}), "done", done)],
    )
    [pending] = PauseState.from_json(state.to_json()).pending
    assert pending.result is not None
    assert (pending.result.content, pending.result.media) == ("the screen", [SHOT])


async def test_a_hook_may_replace_the_image_but_not_with_something_else() -> None:
    other = ImagePart.from_bytes(png(1, 1))

    async def swap(ctx: ToolResultContext) -> None:
        ctx.result = ToolResult.success(ctx.call.id, "swapped", media=[other])

    async def spoil(ctx: ToolResultContext) -> None:
        ctx.result.media = ["a screenshot"]  # type: ignore[list-item]

    script = [ScriptedResponse([ToolUsePart("c1", "screenshot", {})]), ScriptedResponse.text("ok")]
    client = ScriptedClient(list(script))
    worker = Worker(client, tools=[screenshot])
    worker.add_after_tool_call_hook(swap)
    with anyio.fail_after(5):
        await worker.run("look")
    [result] = client.requests[1].messages[-1].tool_results
    assert (result.content, result.media) == ("swapped", [other])

    spoiled = Worker(ScriptedClient(list(script)), tools=[screenshot])
    spoiled.add_after_tool_call_hook(spoil)
    with anyio.fail_after(5), pytest.raises(HookError, match=r"result\.media to something other"):
        await spoiled.run("look")


async def test_a_cancelled_batch_keeps_the_image_of_the_call_that_finished() -> None:
    started = anyio.Event()

    @tool(effect="read_only")
    async def shot() -> ImagePart:
        """Take a screenshot."""
        return SHOT

    @tool(effect="read_only")
    async def slow() -> str:
        """Never finishes."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    calls: list[Part] = [ToolUsePart("a", "shot", {}), ToolUsePart("b", "slow", {})]
    client = ScriptedClient([ScriptedResponse(calls), ScriptedResponse.text("ok")])
    worker = Worker(client, tools=[shot, slow])
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, "go")
            await started.wait()
            worker.cancel()
        await worker.run("again")
    first, second = client.requests[-1].messages[2].tool_results
    assert (first.media, second.media, second.is_error) == ([SHOT], [], True)
