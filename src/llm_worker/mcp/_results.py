"""An MCP tool result as what the model reads: text, structured content, resources, images."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, TypeAlias, cast

from llm_worker.errors import MediaError, ToolError
from llm_worker.messages import ImagePart, MediaPart
from llm_worker.tools._text import json_text

if TYPE_CHECKING:
    from mcp import types

__all__ = ("DEFAULT_MAX_IMAGE_BYTES", "image_text", "result_output")

Item: TypeAlias = "str | MediaPart"

DEFAULT_MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""The largest image (its base64 size) an MCP result may carry by default: 5 MB, the smallest
per-image limit of the providers (Anthropic's), so an image let through fits every one."""


def result_output(
    result: types.CallToolResult, server: str, max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES
) -> str | list[str | MediaPart]:
    """What the model reads for a result (text, or text and images); an error result raises.

    Text blocks are kept as they are; `structuredContent`, when present, replaces them (the
    spec has servers mirror it in a text block) as its JSON, which the Worker stores as
    structured content when it is large; embedded resources become text headed by their URI;
    images become image results (`ImagePart`s the model sees), or `image_text` when they are
    not an image type a model takes; audio becomes `image_text`.

    Raises:
        ToolError: The server marked the result as an error (the message is its text), or an
            image in it is over `max_image_bytes` (base64 size; the message names the limit).
    """
    if result.isError:
        text = "\n".join(_error_texts(result.content))
        raise ToolError(f"{text or 'the tool failed and gave no message'} (MCP server {server})")
    _check_images(result.content, server, max_image_bytes)
    items = [_block(block) for block in result.content]
    kept: list[Item] = [i for i, is_text in items if not is_text]
    if result.structuredContent is not None:
        kept.insert(0, json_text(result.structuredContent))
    else:
        kept = [i for i, _ in items]
    if all(isinstance(i, str) for i in kept):
        return "\n".join(cast("list[str]", kept))
    return kept


def _error_texts(blocks: list[types.ContentBlock]) -> list[str]:
    # An error result's media is not decoded: the model reads its message only.
    return [t for b in blocks if b.type != "image" and isinstance(t := _block(b)[0], str)]


def _check_images(blocks: list[types.ContentBlock], server: str, limit: int) -> None:
    """Refuse an image over `limit` before decoding it: a server's bytes are not trusted."""
    for block in blocks:
        if block.type == "image" and len(data := block.data) > limit:
            raise ToolError(
                f"MCP server {server} returned an image of {len(data)} bytes (base64), over "
                f"the limit max_image_bytes={limit}; it was not passed on. Ask for a smaller "
                "image (a lower resolution, a crop), or raise MCPServer's max_image_bytes"
            )


def _block(block: types.ContentBlock) -> tuple[Item, bool]:
    """One content block as text or an image, and whether it was a text block."""
    # cast: `type` tells the block's class (the SDK's union has no other discriminator).
    kind = block.type
    if kind == "text":
        return cast("types.TextContent", block).text, True
    if kind == "image":
        return _image(cast("types.ImageContent", block)), False
    if kind == "audio":
        audio = cast("types.AudioContent", block)
        return image_text("audio", audio.mimeType, len(_decoded(audio.data))), False
    if kind == "resource":
        return _resource_text(cast("types.EmbeddedResource", block).resource), False
    link = cast("types.ResourceLink", block)  # a reference the model may ask about
    mime = f", {link.mimeType}" if link.mimeType else ""
    return f"[resource link {link.uri}: {link.name}{mime}]", False


def _image(block: types.ImageContent) -> Item:
    data = _decoded(block.data)
    try:
        return ImagePart.from_bytes(data, block.mimeType)
    except MediaError:
        return image_text("image", block.mimeType, len(data))


def _resource_text(res: types.TextResourceContents | types.BlobResourceContents) -> str:
    text: object = getattr(res, "text", None)
    if isinstance(text, str):
        return f"[resource {res.uri}]\n{text}"
    blob: object = getattr(res, "blob", "")
    mime = res.mimeType or "application/octet-stream"
    size = len(_decoded(blob if isinstance(blob, str) else ""))
    return f"[resource {res.uri}: {mime}, {size} bytes of binary data]"


def image_text(kind: str, mime_type: str, size: int) -> str:
    """What the model reads for an image or audio it cannot be shown (a type it does not take).

    The media is named, not shown, so the model knows it exists and can tell the user.
    """
    return f"[{kind} {mime_type}, {size} bytes: not shown to the model, which takes no such media]"


def _decoded(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return b""
