"""Images and documents as OpenAI content parts, for Chat Completions and Responses.

Chat: an image is an `image_url` part (a `data:` URL for bytes), a PDF a `file` part with
`file_data`; a Chat tool message holds text only, so a tool result's images and documents go
in a user message right after the tool messages, introduced by a line naming the call.
Responses: `input_image` and `input_file` parts (`file_url` for a PDF by URL), and a
`function_call_output` whose `output` is a list of parts when the result has media.
Plain-text documents are sent as text on both (`_media.document_text`): OpenAI's file
inputs are meant for PDFs. Every part is checked against its API's `MediaRules` first.
"""

from __future__ import annotations

from typing import Any

from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import DocumentPart, ImagePart, MediaPart, ToolResultPart
from llm_worker.providers._media import (
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    check,
    data_url,
    document_text,
)

__all__ = (
    "chat_part",
    "chat_result_media",
    "chat_tool_text",
    "misplaced",
    "responses_output",
    "responses_part",
)

_DEFAULT_NAME = "document.pdf"


def misplaced(part: MediaPart) -> InvalidMessagesError:
    """The error for an image or document in an assistant message."""
    return InvalidMessagesError(
        f"an assistant message holds an {part.type} part: images and documents go in user "
        "messages (or in tool results)"
    )


def chat_part(part: MediaPart) -> dict[str, Any]:
    """A Chat Completions content part for an image or document.

    Raises:
        MediaError: Chat does not accept it (a type, a size, a document by URL).
    """
    check(part, OPENAI_CHAT)
    if isinstance(part, ImagePart):
        image: dict[str, Any] = {"url": data_url(part)}
        if part.detail is not None:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    text = document_text(part)
    if text is not None:
        return {"type": "text", "text": text}
    file = {"filename": part.name or _DEFAULT_NAME, "file_data": data_url(part)}
    return {"type": "file", "file": file}


def chat_tool_text(part: ToolResultPart) -> str:
    """A tool message's text: the result's, plus where its images and documents went."""
    if not part.media:
        return part.content
    note = f"[{_count(part.media)} in the next user message]"
    return f"{part.content}\n{note}" if part.content else note


def chat_result_media(part: ToolResultPart) -> list[dict[str, Any]]:
    """The user-message parts that carry a tool result's images and documents on Chat."""
    if not part.media:
        return []
    who = f"{part.name} " if part.name else ""
    intro = f"The {_count(part.media)} returned by the {who}tool call {part.tool_use_id}:"
    return [{"type": "text", "text": intro}, *(chat_part(m) for m in part.media)]


def responses_part(part: MediaPart) -> dict[str, Any]:
    """A Responses input content part for an image or document.

    Raises:
        MediaError: Responses does not accept it (a type, a size).
    """
    check(part, OPENAI_RESPONSES)
    if isinstance(part, ImagePart):
        url = data_url(part)
        return {"type": "input_image", "image_url": url, "detail": part.detail or "auto"}
    text = document_text(part)
    if text is not None:
        return {"type": "input_text", "text": text}
    if part.data is None:
        return {"type": "input_file", "file_url": part.url}
    name = part.name or _DEFAULT_NAME
    return {"type": "input_file", "filename": name, "file_data": data_url(part)}


def responses_output(part: ToolResultPart) -> str | list[dict[str, Any]]:
    """A `function_call_output`'s `output`: the text, or text and media as input parts."""
    if not part.media:
        return part.content
    items = [{"type": "input_text", "text": part.content}] if part.content else []
    items.extend(responses_part(m) for m in part.media)
    return items


def _count(media: list[MediaPart]) -> str:
    images = sum(isinstance(m, ImagePart) for m in media)
    documents = sum(isinstance(m, DocumentPart) for m in media)
    counted = [
        f"{n} {word}{'s' if n > 1 else ''}"
        for n, word in ((images, "image"), (documents, "document"))
        if n
    ]
    return " and ".join(counted)
