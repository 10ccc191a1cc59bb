"""A ContextPolicy's media stage: the oldest images and documents leave a request as a note.

A provider takes at most so many megabytes of inline media per request (Anthropic 32 MB,
Gemini 20 MB: `providers._media.MediaRules.max_request_bytes`). A screenshot run passes that
long before its tokens pass the window; without this stage the newest screenshot was the one
refused (`_media_check.sendable_results`). With a policy, the media of the turns older than
`keep_recent_turns` leave the request instead, oldest first, each as a short text note naming
what it was: deterministic (the same history gives the same request, so prompt caches hold),
and the history itself keeps every image.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from llm_worker._tokens import leaf_providers, message_chars
from llm_worker.messages import DocumentPart, ImagePart, Message, Part, TextPart, ToolResultPart
from llm_worker.providers._media import inline_size, rules_for

if TYPE_CHECKING:
    from collections.abc import Sequence

    from llm_worker.messages import MediaPart
    from llm_worker.worker._context import _Plan, _View  # pyright: ignore[reportPrivateUsage]

__all__ = ("NOTE", "fit_media", "keep_from", "kept_media", "media_limit", "without_media")

NOTE = "[llm-worker: {what} left out of this request: the provider's media limit per request]"
"""The text an image or document left out stands as (`{what}`: its kind, type and size)."""


def _named(part: MediaPart) -> str:
    kind = "an image" if isinstance(part, ImagePart) else "a document"
    size = len(part.data or b"")
    shown = f"{size / 1_048_576:.1f} MB" if size >= 1_048_576 else f"{max(1, size // 1024)} KB"
    return f"{kind} ({part.media_type or 'unknown type'}, {shown})"


def media_limit(client: object) -> int | None:
    """The inline media bytes (base64) one request may carry to `client` (None: not known).

    A `FallbackClient` may send a request to any of its clients: the smallest of their
    limits (Anthropic first and Gemini behind it: Gemini's 20 MB, not Anthropic's 32 MB).
    """
    limits = [
        rules.max_request_bytes
        for name in leaf_providers(client)
        if (rules := rules_for(name)) is not None
    ]
    return min(limits, default=None)


def without_media(message: Message) -> tuple[Message, int]:
    """`message` with its inline images and documents as notes; the base64 bytes taken out."""
    if not inline_size((message,)):
        return message, 0
    parts: list[Part] = []
    for part in message.content:
        if isinstance(part, ToolResultPart) and part.media:
            kept = [m for m in part.media if m.data is None]  # a URL weighs nothing
            notes = [NOTE.format(what=_named(m)) for m in part.media if m.data is not None]
            content = "\n".join([part.content, *notes]) if part.content else "\n".join(notes)
            parts.append(dataclasses.replace(part, content=content, media=kept))
        elif isinstance(part, ImagePart | DocumentPart) and part.data is not None:
            parts.append(TextPart(NOTE.format(what=_named(part))))
        else:
            parts.append(part)
    return Message(message.role, parts), inline_size((message,))


def kept_media(history: Sequence[Message], keep_turns: int) -> int:
    """The inline media bytes the media stage cannot take out of the next request.

    `history`: the last request's messages. Kept: the opening message (or the summary that
    stands for it) and what follows the last `keep_turns - 1` answers — the answer being
    acted on now is the newest of the next request's `keep_turns` turns.
    """
    start = keep_from(history, max(keep_turns - 1, 0))
    return inline_size(history[:1]) + inline_size(history[max(start, 1) :])


def keep_from(history: Sequence[Message], turns: int) -> int:
    """Where the last `turns` turns (answers and what follows them) begin."""
    if turns == 0:
        return len(history)
    seen = 0
    for i in range(len(history) - 1, -1, -1):
        if history[i].role == "assistant":
            seen += 1
            if seen == turns:
                return i
    return 0


def fit_media(view: _View, plan: _Plan, keep: int, limit: int) -> int:
    """Take the oldest media out of messages before `keep` until the request fits `limit`.

    `limit`: base64 bytes. Returns how many messages changed.
    """
    history = view.history
    sent = [plan.sent.get(i, history[i]) for i in range(plan.cut, len(history))]
    over = inline_size([plan.lead, *sent] if plan.lead is not None else sent) - limit
    changed = 0
    for i in range(plan.cut, keep):
        if over <= 0:
            break
        message, size = without_media(plan.sent.get(i, history[i]))
        if size:
            plan.sent[i] = message
            plan.sent_chars[i] = message_chars(message, view.provider)
            over -= size
            changed += 1
    return changed
