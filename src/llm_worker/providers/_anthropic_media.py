"""Images and documents as Anthropic Messages content blocks.

An `ImagePart` is an `image` block, a `DocumentPart` a `document` block (titled with its
name), each with a `base64` source for bytes (a `text` source for plain text) or a `url`
source; a tool result with images or documents has a list of blocks as its `content`: its
text first, then each part. Every part is checked against `_media.ANTHROPIC` first.
"""

from __future__ import annotations

from typing import Any

from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import DocumentPart, ImagePart, MediaPart, ToolResultPart
from llm_worker.providers._media import ANTHROPIC, b64, check

__all__ = ("media_block", "result_content")


def media_block(part: MediaPart, role: str) -> dict[str, Any]:
    """The content block of an image or document in a message of `role`.

    Raises:
        InvalidMessagesError: The part is in an assistant message (only users send images).
        MediaError: Anthropic does not accept the part (see `_media`).
    """
    if role != "user":
        raise InvalidMessagesError(
            f"an assistant message holds an {part.type} part: images and documents go in "
            "user messages (or in tool results)"
        )
    check(part, ANTHROPIC)
    if isinstance(part, ImagePart):
        return {"type": "image", "source": _source(part)}
    block: dict[str, Any] = {"type": "document", "source": _source(part)}
    if part.name:
        block["title"] = part.name
    return block


def _source(part: MediaPart) -> dict[str, Any]:
    if part.data is None:
        return {"type": "url", "url": part.url}
    if isinstance(part, DocumentPart) and part.media_type == "text/plain":
        return {"type": "text", "media_type": "text/plain", "data": part.text}
    return {"type": "base64", "media_type": part.media_type, "data": b64(part.data)}


def result_content(part: ToolResultPart) -> str | list[dict[str, Any]]:
    """A tool result's `content`: its text, or its text and media as a list of blocks."""
    if not part.media:
        return part.content
    blocks: list[dict[str, Any]] = []
    if part.content:
        blocks.append({"type": "text", "text": part.content})
    blocks.extend(media_block(media, "user") for media in part.media)
    return blocks
