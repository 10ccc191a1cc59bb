"""The template of a Gemini stream's text chunk (`ByteTemplate`): its holes and their proof.

A Gemini text chunk repeats its bytes but for the part's `text` and the running
`usageMetadata` (its counts grow in every chunk): the text is the first hole, the usage
object the second, read by the mapper as the whole chunk's parse would give it.
"""

from __future__ import annotations

from typing import Any, Final

from llm_worker.providers._template import ByteTemplate

__all__ = ["gemini_text_template"]

_TEXT: Final = b'"text":'
_USAGE: Final = b'"usageMetadata":'


def gemini_text_template(data: bytes) -> ByteTemplate | None:
    """The template of a chunk of one candidate part of text (the mapper's hot path's)."""
    return ByteTemplate.of(data, _TEXT, _USAGE, placed, dict)


def placed(chunk: Any, text: str, usage: dict[str, Any] | None) -> Any:
    """A text chunk with its text (and usage) set: `ByteTemplate.of`'s proof.

    The text is the first candidate's one part's, as the mapper's hot path reads it (a
    first candidate whose `index` is another's is no template's: the mapper looks for
    candidate 0 then).
    """
    candidate = chunk["candidates"][0]
    if candidate.get("index", 0) != 0:
        raise KeyError("index")
    (part,) = candidate["content"]["parts"]  # one part, as the hot path reads
    part["text"] = text
    if (usage is None) == ("usageMetadata" in chunk):
        # A usage the template cannot read as its hole would sit in its tail, and a matched
        # chunk would not set the mapper's usage back to it (after a chunk of another
        # shape set another): a usage is a hole, or there is none.
        raise KeyError("usageMetadata")
    if usage is not None:
        chunk["usageMetadata"] = usage
    return chunk
