"""The template of a Chat stream's text chunk (`ByteTemplate`): its holes and their proof.

A plain text chunk's holes are its `content` string and OpenAI's `obfuscation` padding
(which changes in every chunk and which nothing reads); other servers' chunks (vLLM, Groq,
OpenRouter, …) repeat every other byte, and theirs is a template of one hole.
"""

from __future__ import annotations

from typing import Any, Final

from llm_worker.providers._template import ByteTemplate

__all__ = ["chat_text_template"]

_CONTENT: Final = b'"content":'
_OBFUSCATION: Final = b'"obfuscation":'


def chat_text_template(data: bytes) -> ByteTemplate | None:
    """The template of a plain text chunk's bytes.

    One choice, whose delta holds its content and, at most, keys the general path reads as
    absent (`openai_chat._only_text`: a role, a null `reasoning_content`, …).
    """
    return ByteTemplate.of(data, _CONTENT, _OBFUSCATION, placed)


def placed(chunk: Any, text: str, ignored: str | None) -> Any:
    """A plain text chunk with its content (and padding) set: `ByteTemplate.of`'s proof."""
    (choice,) = chunk["choices"]
    choice["delta"]["content"] = text
    if ignored is not None:
        if "obfuscation" not in chunk:
            raise KeyError("obfuscation")
        chunk["obfuscation"] = ignored
    return chunk
