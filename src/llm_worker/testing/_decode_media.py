"""Images and documents in request bodies, read back into `ImagePart` / `DocumentPart`.

The inverse of each client's media encoding (`providers._<provider>_media`), so a test can
assert what a scripted server received: the bytes, the media type, the URL, the name.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from llm_worker._json import as_dict, as_list, as_str
from llm_worker._sniff import decode_data_url
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import DocumentPart, ImagePart, MediaPart, Part, TextPart

__all__ = (
    "anthropic_media",
    "chat_content",
    "gemini_media",
    "media_of",
    "responses_content",
)


def _bytes(text: object) -> bytes:
    try:
        return base64.b64decode(as_str(text) or "", validate=True)
    except binascii.Error as exc:
        raise InvalidMessagesError(f"media data that is not base64: {exc}") from exc


def _part(data: bytes | None, media_type: str | None, url: str | None) -> MediaPart:
    if media_type is not None and not media_type.startswith("image/"):
        return DocumentPart(data, media_type, url=url)
    return ImagePart(data, media_type, url=url)


def _from_url(url: str, media_type: str | None = None) -> MediaPart:
    inline = decode_data_url(url)
    if inline is None:
        return _part(None, media_type, url)
    return _part(inline[0], inline[1], None)


def anthropic_media(block: dict[str, Any]) -> MediaPart | None:
    """An Anthropic `image` / `document` block as a part; `None` for any other block."""
    kind = block.get("type")
    if kind not in ("image", "document"):
        return None
    source = as_dict(block.get("source"))
    media_type = as_str(source.get("media_type"))
    match source.get("type"):
        case "url":
            url = as_str(source.get("url"))
            part = ImagePart(url=url) if kind == "image" else DocumentPart(url=url)
        case "text":
            part = DocumentPart((as_str(source.get("data")) or "").encode(), "text/plain")
        case _:
            data = _bytes(source.get("data"))
            part = (
                ImagePart(data, media_type) if kind == "image" else DocumentPart(data, media_type)
            )
    if isinstance(part, DocumentPart):
        part.name = as_str(block.get("title"))
    return part


def chat_content(content: object) -> list[Part]:
    """A Chat user message's content as parts: text, `image_url` and `file` parts."""
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[Part] = []
    for item in (as_dict(c) for c in as_list(content)):
        match item.get("type"):
            case "image_url":
                image = as_dict(item.get("image_url"))
                part = _from_url(as_str(image.get("url")) or "")
                if isinstance(part, ImagePart):
                    part.detail = _detail(image.get("detail"))
                parts.append(part)
            case "file":
                file = as_dict(item.get("file"))
                part = _from_url(as_str(file.get("file_data")) or "")
                if isinstance(part, DocumentPart):
                    part.name = as_str(file.get("filename"))
                parts.append(part)
            case _:
                parts.append(TextPart(as_str(item.get("text")) or ""))
    return parts


def responses_content(content: object) -> list[Part]:
    """A Responses input content list as parts: `input_text`, `input_image`, `input_file`."""
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[Part] = []
    for item in (as_dict(c) for c in as_list(content)):
        match item.get("type"):
            case "input_image":
                image = _from_url(as_str(item.get("image_url")) or "")
                if isinstance(image, ImagePart) and item.get("detail") != "auto":
                    image.detail = _detail(item.get("detail"))  # "auto" is sent for no detail
                parts.append(image)
            case "input_file":
                url = as_str(item.get("file_url"))
                file = _from_url(url or as_str(item.get("file_data")) or "", _pdf(url))
                if isinstance(file, DocumentPart):
                    file.name = as_str(item.get("filename"))
                parts.append(file)
            case _:
                parts.append(TextPart(as_str(item.get("text")) or ""))
    return parts


def _pdf(url: str | None) -> str | None:
    return "application/pdf" if url is not None else None


def gemini_media(part: dict[str, Any]) -> MediaPart | None:
    """A Gemini `inlineData` / `fileData` part as a part; `None` for any other part."""
    if "inlineData" in part:
        inline = as_dict(part["inlineData"])
        return _part(_bytes(inline.get("data")), as_str(inline.get("mimeType")), None)
    if "fileData" in part:
        file = as_dict(part["fileData"])
        return _part(None, as_str(file.get("mimeType")), as_str(file.get("fileUri")))
    return None


def _detail(value: object) -> Any:
    return value if value in ("low", "high", "auto") else None


def media_of(parts: list[Part]) -> tuple[str, list[MediaPart]]:
    """The text (joined) and the images and documents of decoded content parts."""
    text = "".join(p.text for p in parts if isinstance(p, TextPart))
    return text, [p for p in parts if isinstance(p, ImagePart | DocumentPart)]
