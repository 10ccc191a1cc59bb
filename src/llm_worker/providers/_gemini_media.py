"""Images and documents as Gemini parts: `inlineData` for bytes, `fileData` for a URL.

A tool result's images and documents go inside its `functionResponse` as `parts` on Gemini 3
and later (multimodal function responses); earlier models do not take them there, so they
follow the `functionResponse` as parts of the same user turn. Every part is checked against
`_media.GEMINI` first.
"""

from __future__ import annotations

from typing import Any

from llm_worker.messages import MediaPart, ToolResultPart
from llm_worker.providers._media import GEMINI, b64, check

__all__ = ("media_part", "with_media")


def media_part(part: MediaPart) -> dict[str, Any]:
    """The Gemini part of an image or document.

    Raises:
        MediaError: Gemini does not accept it, or a URL's media type is not known (Gemini
            requires `mimeType`).
    """
    check(part, GEMINI)
    if part.data is None:
        return {"fileData": {"mimeType": part.media_type, "fileUri": part.url}}
    return {"inlineData": {"mimeType": part.media_type, "data": b64(part.data)}}


def with_media(
    response: dict[str, Any], result: ToolResultPart, *, nested: bool
) -> list[dict[str, Any]]:
    """A `functionResponse` part with the result's media: inside it, or after it."""
    if not result.media:
        return [response]
    parts = [media_part(m) for m in result.media]
    if nested:
        response["functionResponse"]["parts"] = parts
        return [response]
    return [response, *parts]
