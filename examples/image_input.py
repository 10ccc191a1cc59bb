"""Send a picture and a PDF to the model, and let a tool show it a screenshot.

`Message.user(...)` takes text and parts: `ImagePart.from_path("cat.png")` reads the file and
takes its media type from its content; `DocumentPart` does the same for PDFs and text. A tool
that returns an `ImagePart` (alone or in a list with text) shows the model that image: inside
the tool result on Anthropic, OpenAI Responses and Gemini, in a user message right after the
tool messages on OpenAI Chat Completions. Each client checks the parts before sending: a type
the provider does not take, or an image over its size limit, is a `MediaError` naming it.

Run: `python examples/image_input.py` (offline unless an API key is set; see _common.py).
Offline, the scripted model behind the Anthropic wire format shows what it received.
"""

from __future__ import annotations

import struct
import tempfile
import zlib
from pathlib import Path

import anyio
from _common import model

from llm_worker import DocumentPart, ImagePart, Message, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedResponse, decode_request


def red_square(size: int = 16) -> bytes:
    """A PNG of a red square, made here so the example needs no file of its own."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * size for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@tool(effect="read_only")
def screenshot() -> list[str | ImagePart]:
    """Take a screenshot of the user's screen."""
    return ["The screen, 16x16 pixels:", ImagePart.from_bytes(red_square())]


SCRIPT = [
    ScriptedResponse([ToolUsePart("", "screenshot", {})]),
    ScriptedResponse.text("Your picture and your screen both show a red square."),
]


async def main() -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "square.png").write_bytes(red_square())
    (folder / "notes.txt").write_text("The square should be red.\n")
    question = Message.user(
        "What is in this picture, and does my screen match it?",
        ImagePart.from_path(folder / "square.png"),
        DocumentPart.from_path(folder / "notes.txt"),
    )
    for part in question.content[1:]:
        print(f"attached: {part!r}")
    async with model(SCRIPT) as (client, server):
        worker = Worker(client, tools=[screenshot])
        result = await worker.run(question)
        print(f"model: {result.text}")
        if server is not None:
            show_what_the_model_received(server.provider, [r.json() for r in server.requests])


def show_what_the_model_received(provider: str, bodies: list[dict[str, object]]) -> None:
    first = decode_request(provider, bodies[0]).messages[0].content
    print("request 1:", ", ".join(type(p).__name__ for p in first))
    raw = bodies[0]["messages"][0]["content"]  # type: ignore[index]
    print("  as sent:", ", ".join(block["type"] for block in raw))  # type: ignore[index]
    [result] = decode_request(provider, bodies[1]).messages[-1].tool_results
    print(f"request 2: the screenshot's result holds {result.content!r} and {result.media}")


if __name__ == "__main__":
    anyio.run(main)
