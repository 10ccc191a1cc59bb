"""A paused run whose tool returned an image, resumed in a fresh Worker on each wire format."""

from __future__ import annotations

import anyio
import pytest

from llm_worker import ImagePart, Message, PauseState, ToolUsePart, Worker, tool
from llm_worker.collectors import ToolCall
from llm_worker.state import PendingCall
from llm_worker.testing import WIRE_PROVIDERS, ScriptedModelServer, ScriptedResponse, decode_request
from llm_worker.tools import ToolResult
from support.media import GIF, png

pytestmark = pytest.mark.anyio

SHOT = ImagePart.from_bytes(png(5, 3))
MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai_chat": "gpt-4.1",
    "openai_responses": "gpt-4.1",
    "gemini": "gemini-2.5-flash",  # before Gemini 3: the image follows the functionResponse
}


def _paused_json() -> str:
    done = ToolResult("c1", "capture", "the screen", media=[SHOT])
    later = ToolCall("c2", "capture", {})
    state = PauseState(
        [
            Message.user("look"),
            Message(
                "assistant", [ToolUsePart("c1", "capture", {}), ToolUsePart("c2", "capture", {})]
            ),
        ],
        [PendingCall(ToolCall("c1", "capture", {}), "done", done), PendingCall(later, "pending")],
    )
    return state.to_json()


@tool(effect="read_only")
def capture() -> list[str | ImagePart]:
    """Capture the screen."""
    return ["again", SHOT]


@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
async def test_a_resumed_run_sends_the_image_of_a_call_done_before_the_pause(provider: str) -> None:
    state = PauseState.from_json(_paused_json())
    script = [ScriptedResponse.text("Two screens.")]
    async with ScriptedModelServer(provider, script, model=MODELS[provider]) as server:
        client = server.client()
        with anyio.fail_after(10):
            result = await Worker(client, tools=[capture]).resume(state)
        await client.aclose()
        [body] = [r.json() for r in server.requests]
    assert result.text == "Two screens."
    sent = decode_request(provider, body, model=MODELS[provider]).messages
    results = [p for m in sent for p in m.tool_results]
    assert [r.content.splitlines()[0] for r in results] == ["the screen", "again"]
    images = [p for m in sent[2:] for p in m.content if isinstance(p, ImagePart)]
    images += [i for r in results for i in r.media if isinstance(i, ImagePart)]
    assert [i.data for i in images] == [SHOT.data, SHOT.data]


@tool(effect="read_only")
def animation() -> ImagePart:
    """An animated GIF: Gemini takes no GIF."""
    return ImagePart.from_bytes(GIF)


async def test_a_tool_image_the_provider_refuses_reaches_the_model_as_an_error() -> None:
    script = [ScriptedResponse([ToolUsePart("", "animation", {})]), ScriptedResponse.text("ok")]
    # `async with`: were the run to raise, a client closed by a later line would leak its socket
    async with (
        ScriptedModelServer("gemini", script, model=MODELS["gemini"]) as server,
        server.client() as client,
    ):
        with anyio.fail_after(10):
            result = await Worker(client, tools=[animation]).run("animate")
    assert result.text == "ok"
    [last] = result.messages[-2].tool_results
    assert last.is_error and "image/gif" in last.content
