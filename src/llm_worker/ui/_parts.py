"""A part's opaque provider data (signatures, item ids, origins) as JSON a browser carries back.

Both protocols let a message part carry data the front end keeps without showing it (Vercel
`providerMetadata`, AG-UI `encryptedValue`); this module turns a neutral part's non-visible
fields into such a JSON object, and rebuilds the part from the visible fields and that object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_worker.messages import MediaPart, Message, Part, ToolResultPart

__all__ = ("KEY", "media_json", "opaque", "rebuild")

KEY = "llmWorker"
"""The key under which llm-worker's data travels in `providerMetadata` and custom fields."""

_VISIBLE = frozenset({"type", "text", "id", "name", "input", "data"})


def opaque(part: Part) -> dict[str, Any]:
    """The part's fields a front end does not show (empty ones left out)."""
    content: list[Any] = Message("assistant", [part]).to_dict()["content"]
    fields: dict[str, Any] = content[0]
    return {k: v for k, v in fields.items() if k not in _VISIBLE and v not in (None, [], {})}


def rebuild(kind: str, visible: dict[str, Any], hidden: object) -> Part:
    """A part of type `kind` from its visible fields and the `opaque` data sent back.

    Raises:
        InvalidMessagesError: The fields do not make a valid part.
    """
    fields: dict[str, Any] = {}
    if isinstance(hidden, dict):
        fields.update({str(k): v for k, v in hidden.items() if k not in _VISIBLE})  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    fields.update(visible)
    fields["type"] = kind
    return Message.from_dict({"role": "assistant", "content": [fields]}).content[0]


def media_json(media: Sequence[MediaPart]) -> list[Any]:
    """Images and documents as JSON (bytes in base64), as a tool result's `media` saves them."""
    part = ToolResultPart("", "", media=list(media))
    content: list[Any] = Message("user", [part]).to_dict()["content"]
    return content[0]["media"]
