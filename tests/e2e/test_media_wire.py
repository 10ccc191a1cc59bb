"""Images end to end over the four wire formats: a user's picture and a tool's screenshot.

A Worker over the real client of each provider, against `ScriptedModelServer`: the user
message holds an image and a PDF, a tool returns a screenshot, and the server decodes each
request body back — the bytes it received are the bytes sent, where each API wants them.
"""

from __future__ import annotations

import anyio
import pytest

from llm_worker import DocumentPart, ImagePart, Message, ToolUsePart, Worker, tool
from llm_worker.testing import WIRE_PROVIDERS, ScriptedModelServer, ScriptedResponse, decode_request
from support.media import PDF, png

pytestmark = pytest.mark.anyio

PHOTO = ImagePart.from_bytes(png(4, 4))
SHOT = ImagePart.from_bytes(png(8, 2))
PAPER = DocumentPart.from_bytes(PDF, name="paper.pdf")
MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai_chat": "gpt-4.1",
    "openai_responses": "gpt-4.1",
    "gemini": "gemini-3-pro-preview",
}


@tool(effect="read_only")
def screenshot() -> list[str | ImagePart]:
    """Take a screenshot of the screen."""
    return ["the screen", SHOT]


@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
async def test_a_user_image_and_a_tool_screenshot_reach_the_server(provider: str) -> None:
    script = [
        ScriptedResponse([ToolUsePart("", "screenshot", {})]),
        ScriptedResponse.text("A red square and your screen."),
    ]
    async with ScriptedModelServer(provider, script, model=MODELS[provider]) as server:
        client = server.client()
        worker = Worker(client, tools=[screenshot])
        with anyio.fail_after(10):
            result = await worker.run(Message.user("What do you see?", PHOTO, PAPER))
        await client.aclose()
        bodies = [r.json() for r in server.requests]
    assert result.text == "A red square and your screen."
    first = decode_request(provider, bodies[0], model=MODELS[provider])
    sent = first.messages[0].content
    assert [type(p).__name__ for p in sent] == ["TextPart", "ImagePart", "DocumentPart"]
    assert (sent[1].data, sent[1].media_type) == (PHOTO.data, "image/png")  # type: ignore[union-attr]
    assert (sent[2].data, sent[2].media_type) == (PDF, "application/pdf")  # type: ignore[union-attr]
    second = decode_request(provider, bodies[1], model=MODELS[provider])
    assert _screenshots(second.messages) == [SHOT.data]


def _screenshots(messages: list[Message]) -> list[bytes | None]:
    """The images a tool result carried: inside it, or (Chat) in the user message after it."""
    found: list[bytes | None] = []
    for message in messages[2:]:
        for part in message.content:
            media = part.media if part.type == "tool_result" else [part]  # type: ignore[union-attr]
            found += [m.data for m in media if isinstance(m, ImagePart)]
    return found
