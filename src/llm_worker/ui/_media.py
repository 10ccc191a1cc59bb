"""Images and documents in the browser's messages (Vercel `file` parts, AG-UI content parts)."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

from llm_worker._json import as_dict, as_str
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import DocumentPart, ImagePart, MediaPart

__all__ = ("agui_media", "data_url", "media_from_agui", "media_from_url", "media_hidden")


def media_from_url(
    url: str, media_type: str | None, *, name: str | None = None, detail: object = None
) -> MediaPart:
    """An image (`image/*`) or a document from a URL or a `data:` URL.

    Raises:
        MediaError: The data is not of its type (an `InvalidMessagesError`).
    """
    if (media_type or "").startswith("image/"):
        return _image(url, media_type, detail)
    return DocumentPart.from_url(url, media_type, name=name)


def data_url(part: MediaPart) -> str:
    """The part's URL, or its bytes as a `data:` URL."""
    if part.url is not None:
        return part.url
    encoded = base64.b64encode(part.data or b"").decode()
    return f"data:{part.media_type};base64,{encoded}"


def media_hidden(part: MediaPart) -> dict[str, Any]:
    """What a browser's file part does not hold: an image's detail level."""
    if isinstance(part, ImagePart) and part.detail is not None:
        return {"detail": part.detail}
    return {}


def agui_media(part: MediaPart) -> dict[str, Any]:
    """An AG-UI `image` / `document` content part."""
    if part.url is not None:
        source: dict[str, Any] = {"type": "url", "value": part.url}
        if part.media_type:
            source["mimeType"] = part.media_type
    else:
        value = base64.b64encode(part.data or b"").decode()
        source = {"type": "data", "value": value, "mimeType": part.media_type}
    out: dict[str, Any] = {"type": part.type, "source": source}
    meta = media_hidden(part)
    if isinstance(part, DocumentPart) and part.name:
        meta["name"] = part.name
    if meta:
        out["metadata"] = meta
    return out


def media_from_agui(entry: dict[str, Any]) -> MediaPart:
    """An AG-UI `image` / `document` content part as a media part.

    Raises:
        InvalidMessagesError: Another source (a provider's file handle) or a bad part.
    """
    source = as_dict(entry.get("source"))
    meta = as_dict(entry.get("metadata"))
    mime = as_str(source.get("mimeType"))
    value = as_str(source.get("value")) or ""
    if source.get("type") == "data":
        url = f"data:{mime};base64,{value}"
    elif source.get("type") == "url":
        url = value
    else:
        raise InvalidMessagesError(
            f"an AG-UI {entry.get('type')} source of type "
            f"{source.get('type')!r} is not supported (data or url)"
        )
    if entry.get("type") == "image":
        return _image(url, mime, meta.get("detail"))
    return DocumentPart.from_url(url, mime, name=as_str(meta.get("name")))


def _image(url: str, mime: str | None, detail: object) -> MediaPart:
    part = ImagePart.from_url(url, mime)
    if detail in ("low", "high", "auto"):
        return replace(part, detail=detail)  # pyright: ignore[reportArgumentType]
    return part
